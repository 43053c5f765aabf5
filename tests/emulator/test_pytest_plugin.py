"""The `pytest11` plugin's fixtures work as a user's test would use them (no conftest involved)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from connector.clients import get_client
from connector.config import ClientConfig


def test_fixtures_give_a_running_emulator_and_fresh_topics(rocketmq_emulator, rocketmq_topic):
    a, b = rocketmq_topic(), rocketmq_topic("orders", queues=2)
    assert a != b and b.startswith("orders-")
    client = get_client(ClientConfig(endpoints=rocketmq_emulator.endpoints))
    queues = client.route(b)
    assert sorted((q.broker, q.queue_id) for q in queues) == [
        ("broker-a", 0),
        ("broker-a", 1),
        ("broker-b", 0),
        ("broker-b", 1),
    ]


def test_the_emulator_fixture_serves_remoting(rocketmq_emulator, rocketmq_topic):
    """`.name_server` is the remoting name server: a Java client's `-n`, the connector's `nameServer`."""
    from rocketmq_protocol.remoting.codes import RequestCode
    from tests.support.remoting import RemotingClient

    topic = rocketmq_topic(queues=2)
    host, port = rocketmq_emulator.name_server.rsplit(":", 1)
    assert host == "127.0.0.1" and int(port) > 0
    with RemotingClient(rocketmq_emulator.name_server) as ns:
        route = ns.route(topic)
        assert ns.call(RequestCode.GET_BROKER_CLUSTER_INFO).code == 0
    assert sorted(q.broker_name for q in route.queue_datas) == ["broker-a", "broker-b"]


def test_plugin_is_registered_by_the_entry_point(tmp_path):
    """A test file in an unrelated directory sees the fixtures without any conftest."""
    (tmp_path / "test_user.py").write_text(
        textwrap.dedent("""
        def test_user(rocketmq_emulator, rocketmq_topic):
            assert rocketmq_emulator.endpoints.count(";") == 1
            assert rocketmq_topic()
    """)
    )
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 passed" in r.stdout
