"""`python -m broker_emulator serve` serves remoting: `--namesrv-port`, `--remoting-port` (broker i on
remoting-port+i, 0 = free ports), the printed `name server: HOST:PORT` line, `--max-transfer-count`."""

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


def test_serve_caps_pull_answers_at_max_transfer_count_and_refuses_a_bad_one():
    emu = EmulatorProcess("--brokers", "1", "--topic", "capped:1", "--max-transfer-count", "32")
    try:
        with RemotingClient(emu.name_server) as ns:
            broker = ns.route("capped").broker_addr("broker-a")
        with RemotingClient(broker) as b:
            for i in range(40):
                assert b.send_message("capped", b"m%d" % i, queue_id=0).code == R.SUCCESS
            r = b.pull("capped", 0, 0, max_nums=100)
            assert r.code == R.SUCCESS and r.ext_fields["nextBeginOffset"] == "32"  # as a real broker's 32
    finally:
        assert emu.stop() == 0
    try:
        EmulatorProcess("--max-transfer-count", "0", timeout=20)
    except RuntimeError as e:
        assert "--max-transfer-count: 0 is not a count of messages (>= 1)" in str(e)
    else:
        raise AssertionError("the emulator started with --max-transfer-count 0")


def test_admin_cli_shows_remoting_listeners_clients_and_lag():
    import json

    from rocketmq_protocol.remoting.codes import RequestCode as Q
    from tests.support.emulator_proc import run_admin

    emu = EmulatorProcess("--brokers", "1", "--topic", "orders:2")
    try:
        stats = json.loads(run_admin(emu.endpoints, "--json", "stats").stdout)
        remoting = stats["brokers"][0]["remoting"]
        assert remoting.startswith("127.0.0.1:")
        with RemotingClient(remoting) as c:
            c.heartbeat("java@1", consumer_group="g-remote", topic="orders")
            c.send_message("orders", b"x", queue_id=0)
            q = {"consumerGroup": "g-remote", "topic": "orders", "queueId": 0, "commitOffset": 0}
            assert c.call(Q.UPDATE_CONSUMER_OFFSET, q).code == R.SUCCESS
            groups = json.loads(run_admin(emu.endpoints, "--json", "groups").stdout)
            assert {"group": "g-remote", "clients": 1, "topics": ["orders"]} in groups["groups"]
            lag = json.loads(run_admin(emu.endpoints, "--json", "lag", "--group", "g-remote").stdout)
            assert [(r["queue"], r["committed"], r["lag"]) for r in lag] == [(0, 0, 1)]
    finally:
        assert emu.stop() == 0
