"""`Emulator`: the cluster running in a background thread of the calling process (tests, examples)."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable
from typing import Any

from .core.cluster import Broker, ClusterConfig
from .remoting.record_cache import DEFAULT_BUDGET_BYTES
from .server import EmulatorServer

log = logging.getLogger(__name__)


class BrokerHandle:
    """Fault injection on one running broker (docs/design.md, 'Faults')."""

    def __init__(self, emulator: Emulator, broker: Broker) -> None:
        self._emulator = emulator
        self._broker = broker

    @property
    def name(self) -> str:
        return self._broker.name

    @property
    def endpoint(self) -> str:
        return self._broker.endpoint

    @property
    def store(self):
        return self._broker.store

    def set_fault(
        self,
        down: bool | None = None,
        latency_ms: int | None = None,
        error_rate: float | None = None,
        read_only: bool | None = None,
    ) -> dict:
        return self._broker.set_fault(
            down=down, latency_ms=latency_ms, error_rate=error_rate, read_only=read_only
        )

    def clear_faults(self) -> dict:
        return self._broker.clear_faults()


class Emulator:
    """An embedded RocketMQ cluster: `with Emulator(brokers=2, queues=8) as emu: emu.endpoints`.

    `acl`: an ACL file path (re-read when it changes) or its JSON value as a dict (docs/design.md, 'Security');
    `tls_cert`/`tls_key`: PEM bytes to serve TLS; `remoting_cache_mb`: memory for kept remoting pull answers
    (`serve --remoting-cache-mb`)."""

    def __init__(
        self,
        brokers: int = 2,
        queues: int = 8,
        data_dir: str | None = None,
        port: int = 0,
        host: str = "127.0.0.1",
        *,
        auto_create_topics: bool = False,
        tls_cert: bytes | None = None,
        tls_key: bytes | None = None,
        acl: str | os.PathLike | dict | None = None,
        namesrv_port: int = 0,
        remoting_port: int = 0,
        remoting_cache_mb: int = DEFAULT_BUDGET_BYTES >> 20,
        **options: Any,
    ) -> None:
        if brokers < 1:
            raise ValueError(f"brokers must be >= 1, got {brokers}")
        self.config = ClusterConfig(
            brokers=brokers,
            default_queues=queues,
            data_dir=data_dir,
            host=host,
            auto_create_topics=auto_create_topics,
            acl=os.fspath(acl) if isinstance(acl, os.PathLike) else acl,
            **options,
        )
        self.port = port
        self.namesrv_port = namesrv_port
        self.remoting_port = remoting_port
        self.remoting_cache_mb = remoting_cache_mb
        self._tls = (tls_cert, tls_key)
        self.server: EmulatorServer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    # --------------------------------------------------------------- lifecycle
    def start(self, timeout: float = 30.0) -> Emulator:
        if self._thread is not None:
            return self
        ready = threading.Event()
        error: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                self.server = EmulatorServer(
                    self.config,
                    self.port,
                    *self._tls,
                    namesrv_port=self.namesrv_port,
                    remoting_port=self.remoting_port,
                    record_cache_bytes=self.remoting_cache_mb << 20,  # RecordCache reads < 0 as 0
                )
                loop.run_until_complete(self.server.start())
            except BaseException as e:  # reported to the starting thread
                error.append(e)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name="rocketmq-emulator", daemon=True)
        self._thread.start()
        if not ready.wait(timeout):
            raise TimeoutError(f"emulator did not start within {timeout} s")
        if error:
            self._thread.join(5)
            self._thread = None
            raise error[0]
        log.info("emulator started: %s", self.endpoints)
        return self

    def stop(self, timeout: float = 30.0) -> None:
        if self._thread is None or self._loop is None:
            return
        assert self.server is not None
        fut = asyncio.run_coroutine_threadsafe(self.server.stop(), self._loop)
        try:
            fut.result(timeout)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout)
            self._thread = None

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --------------------------------------------------------------- API
    def _call(self, fn: Callable[[], Any], timeout: float = 30.0) -> Any:
        """Runs fn on the emulator's loop thread (so it never races a request handler)."""
        if self._loop is None:
            raise RuntimeError("the emulator is not started")

        async def wrapper() -> Any:
            return fn()

        return asyncio.run_coroutine_threadsafe(wrapper(), self._loop).result(timeout)

    @property
    def endpoints(self) -> str:
        if self.server is None:
            raise RuntimeError("the emulator is not started")
        return self.server.endpoints

    @property
    def name_server(self) -> str:
        """The remoting name server, "127.0.0.1:p" (a remoting client's `-n`, the connector's `nameServer`)."""
        if self.server is None:
            raise RuntimeError("the emulator is not started")
        return self.server.name_server

    @property
    def cluster(self):
        assert self.server is not None
        return self.server.cluster

    def create_topic(self, name: str, queues: int | None = None, message_type: str = "MIXED") -> None:
        self._call(lambda: self.cluster.create_topic(name, queues, message_type))

    def update_group(self, group: str, max_retries: int | None = None, fifo: bool | None = None) -> None:
        """Sets a consumer group's retries before its DLQ and its FIFO (orderly) mode."""
        self._call(lambda: self.cluster.update_group(group, max_retries, fifo))

    def broker(self, name: str) -> BrokerHandle:
        return BrokerHandle(self, self.cluster.broker(name))

    @property
    def brokers(self) -> list[BrokerHandle]:
        return [BrokerHandle(self, b) for b in self.cluster.brokers]

    def add_broker(self) -> BrokerHandle:
        """Adds a broker to the running cluster; it serves every existing topic from offset 0."""
        assert self._loop is not None and self.server is not None
        b = asyncio.run_coroutine_threadsafe(self.server.add_broker(), self._loop).result(30)
        return BrokerHandle(self, b)

    def min_max(self, topic: str, broker: str, queue_id: int) -> tuple[int, int]:
        return self._call(lambda: self.cluster.broker(broker).store.min_max(topic, queue_id))
