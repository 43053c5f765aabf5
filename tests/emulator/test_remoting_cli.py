"""`python -m broker_emulator serve` serves remoting: `--namesrv-port`, `--remoting-port` (broker i on
remoting-port+i, 0 = free ports), the printed `name server: HOST:PORT` line."""

from __future__ import annotations

import socket

from rocketmq_protocol.remoting.codes import ResponseCode as R
from tests.support.emulator_proc import EmulatorProcess
from tests.support.remoting import RemotingClient


def _free_ports(n: int) -> list[int]:
    """n consecutive free ports (probed by binding them)."""
    for base in range(30000, 60000, 7):
        socks = []
        try:
            for p in range(base, base + n):
                s = socket.socket()
                s.bind(("127.0.0.1", p))
                socks.append(s)
            return list(range(base, base + n))
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free ports")


def test_serve_prints_the_name_server_and_uses_consecutive_remoting_ports():
    ns_port, *remoting = _free_ports(3)
    emu = EmulatorProcess(
        "--brokers",
        "2",
        "--topic",
        "orders:2",
        "--namesrv-port",
        str(ns_port),
        "--remoting-port",
        str(remoting[0]),
    )
    try:
        assert emu.name_server == f"127.0.0.1:{ns_port}"
        assert (
            f"broker-b listening on {emu.endpoints.split(';')[1]} (remoting 127.0.0.1:{remoting[1]})"
            in emu.output
        )
        with RemotingClient(emu.name_server) as c:
            route = c.route("orders")
        assert [route.broker_addr(b) for b in ("broker-a", "broker-b")] == [
            f"127.0.0.1:{p}" for p in remoting
        ]
        with RemotingClient(f"127.0.0.1:{remoting[1]}") as b:
            assert b.send_message("orders", b"x", queue_id=1).code == R.SUCCESS
    finally:
        assert emu.stop() == 0


def test_serve_reports_a_busy_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        busy = s.getsockname()[1]
        try:
            EmulatorProcess("--namesrv-port", str(busy), timeout=20)
        except RuntimeError as e:
            assert "cannot listen" in str(e)
        else:
            raise AssertionError("the emulator started on a busy port")
