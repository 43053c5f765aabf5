"""The emulator as a `realcluster.Cluster`: the same Java drivers and `mqadmin` (RocketMQ 5.x client and
tools jars) run against the emulator's remoting name server and brokers instead of a real cluster.

The emulator runs embedded in the test process with the real clusters' test settings (short delay levels,
transaction check-back after 3 s, `brokers` brokers (broker-a, ...), auto-created topics)."""

from __future__ import annotations

from dataclasses import dataclass

from broker_emulator import Emulator
from tests.real import realcluster as rc

# The real clusters' broker.conf values (realcluster.Cluster.broker_properties).
DELAY_LEVELS = "1s 1s 2s 2s 3s 3s 4s 4s 5s 5s 6s 6s 7s 7s 8s 8s 9s 9s"


@dataclass
class EmulatorCluster(rc.Cluster):
    emulator: Emulator | None = None
    acl: dict | None = None  # an ACL for the emulator (docs/design.md, 'Security')

    def start(self, timeout: float = 60.0) -> EmulatorCluster:
        self._tools = rc.require_tools()
        self.with_proxy = False
        self.work_dir.mkdir(parents=True, exist_ok=True)
        (self.home / "conf").mkdir(parents=True, exist_ok=True)
        self.emulator = Emulator(
            brokers=self.brokers,
            queues=8,
            auto_create_topics=True,
            delay_levels=DELAY_LEVELS,
            transaction_check_ms=3000,
            acl=self.acl,
        ).start(timeout)
        self.namesrv_port = int(self.emulator.name_server.rsplit(":", 1)[1])
        self.broker_ports = [b.remoting_port for b in self.emulator.cluster.brokers]
        return self

    def stop(self, grace: float = 3.0) -> None:
        if self.emulator is not None:
            self.emulator.stop()
            self.emulator = None
