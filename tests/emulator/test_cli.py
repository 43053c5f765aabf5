"""`python -m broker_emulator serve` and every `admin` verb against a real subprocess."""

from __future__ import annotations

import json
import subprocess
import time

import pytest
from rocketmq import ClientConfiguration, Credentials, Producer

from tests.support.emulator_proc import EmulatorProcess, run_admin, serve_command, wait_for


@pytest.fixture(scope="module")
def served():
    emu = EmulatorProcess("--brokers", "2", "--in-memory", "--topic", "orders:4", "--queues", "4")
    try:
        yield emu
    finally:
        emu.stop()


def admin_ok(endpoints: str, *args: str) -> str:
    r = run_admin(endpoints, *args)
    assert r.returncode == 0, r.stderr + r.stdout
    return r.stdout


def test_serve_prints_one_endpoint_per_broker(served):
    eps = served.endpoints.split(";")
    assert len(eps) == 2
    assert any(line.startswith("broker-a listening on " + eps[0]) for line in served.lines)
    assert any(line.startswith("broker-b listening on " + eps[1]) for line in served.lines)


def test_create_topic_and_topics(served):
    out = admin_ok(served.endpoints, "create-topic", "payments", "--queues", "3")
    assert "payments: 3 queues on broker-a, broker-b" in out
    rows = json.loads(admin_ok(served.endpoints, "--json", "topics", "--topic", "payments"))
    assert sorted((r["broker"], r["queue"]) for r in rows) == [
        (b, q) for b in ("broker-a", "broker-b") for q in range(3)
    ]
    assert all(r["min_offset"] == 0 and r["max_offset"] == 0 for r in rows)
    table = admin_ok(served.endpoints, "topics")
    assert "orders" in table and "min_offset" in table and "max_offset" in table


def test_produce_consume_lag(served):
    r = run_admin(
        served.endpoints, "produce", "--topic", "orders", "--count", "800", "--batch", "50", "--tag", "T1"
    )
    assert r.returncode == 0, r.stderr
    assert "sent 800 messages to orders" in r.stdout
    assert "800/800" in r.stderr  # the progress bar ends full
    rows = json.loads(admin_ok(served.endpoints, "--json", "topics", "--topic", "orders"))
    assert sum(x["max_offset"] for x in rows) == 800
    msgs = json.loads(
        admin_ok(
            served.endpoints,
            "--json",
            "consume",
            "--topic",
            "orders",
            "--count",
            "5",
            "--group",
            "cli-g",
            "--commit",
        )
    )
    assert len(msgs) == 5 and all(m["tag"] == "T1" and len(m["body"]) == 100 for m in msgs)
    text = admin_ok(served.endpoints, "consume", "--topic", "orders", "--count", "2")
    assert text.count("tag=T1") == 2
    lag = json.loads(admin_ok(served.endpoints, "--json", "lag", "--group", "cli-g"))
    first = next(x for x in lag if x["committed"] == 5)
    assert first["lag"] == first["max_offset"] - 5
    assert "committed" in admin_ok(served.endpoints, "lag")


def test_groups_shows_registered_clients(served):
    config = ClientConfiguration(served.endpoints.split(";")[0], Credentials())
    producer = Producer(config, ("orders",))
    producer.startup()
    try:

        def seen():
            data = json.loads(admin_ok(served.endpoints, "--json", "groups"))
            return any(c["client_type"] == "PRODUCER" for c in data["clients"])

        wait_for(seen, 15, 0.2, "the producer to register")
        out = admin_ok(served.endpoints, "groups")
        assert "PRODUCER" in out and "last_heartbeat" in out
    finally:
        producer.shutdown()


def test_fault_and_stats(served):
    out = admin_ok(served.endpoints, "fault", "--broker", "broker-b", "--latency-ms", "50", "--read-only")
    assert "latency_ms=50" in out and "read_only=True" in out
    stats = json.loads(admin_ok(served.endpoints, "--json", "stats"))
    b = next(x for x in stats["brokers"] if x["broker"] == "broker-b")
    assert b["faults"]["latency_ms"] == 50 and b["faults"]["read_only"] is True
    text = admin_ok(served.endpoints, "stats")
    assert "read_only" in text and "broker-a" in text
    t0 = time.time()
    admin_ok(served.endpoints.split(";")[1], "topics")  # admin calls are not delayed; route is
    assert time.time() - t0 < 10
    out = admin_ok(served.endpoints, "fault", "--broker", "broker-b", "--clear")
    assert "latency_ms=0" in out and "read_only=False" in out


def test_admin_errors_are_clear(served):
    r = run_admin(served.endpoints, "fault", "--broker", "broker-z", "--down")
    assert r.returncode == 1 and "broker-z" in r.stderr
    r = run_admin("127.0.0.1:1", "topics", timeout=60)
    assert r.returncode == 1 and "no endpoint" in r.stderr


def test_sigterm_stops_cleanly(tmp_path):
    emu = EmulatorProcess("--data-dir", str(tmp_path / "data"), "--topic", "t:2")
    assert emu.stop() == 0
    assert "stopped" in emu.output


@pytest.mark.parametrize("value", ["-1", "20001"])
def test_serve_refuses_a_min_long_polling_outside_the_proxy_range(value):
    r = subprocess.run(
        serve_command("--min-long-polling-ms", value), capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 2
    assert f"--min-long-polling-ms {value}: expected 0 to 20000" in r.stderr
