"""One store behind both protocols: what a remoting producer sends is pulled over gRPC (PullMessage and
BulkPull) and popped by the official Python SimpleConsumer, what a gRPC producer sends is pulled over
remoting, and consumer offsets written over either protocol are the same offsets (and the same lag)."""

from __future__ import annotations

import time

import pytest
from rocketmq import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer

from rocketmq_protocol.grpc_v2 import definition_pb2 as d
from rocketmq_protocol.grpc_v2 import service_pb2 as s
from rocketmq_protocol.remoting.codes import RequestCode as Q
from rocketmq_protocol.remoting.codes import ResponseCode as R
from rocketmq_protocol.remoting.message_codec import encode_batch
from rocketmq_protocol.remoting.properties import encode_properties
from tests.support.helpers import (
    CLIENT_MD,
    make_message,
    queue_ref,
    read_queue_bulk,
    read_queue_v2,
    send,
    unique_name,
)
from tests.support.remoting import RemotingClient, messages

N = 20


@pytest.fixture
def remoting(rocketmq_emulator):
    with RemotingClient(f"127.0.0.1:{rocketmq_emulator.cluster.broker('broker-a').remoting_port}") as c:
        yield c


def _expected(i: int) -> dict:
    return {"id": f"{i:032X}", "body": f"r-{i}".encode(), "tag": "TagA" if i % 2 else "TagB",
            "keys": [f"k{i}", "common"], "props": {"seq": str(i)}}  # fmt: skip


def _send_over_remoting(remoting: RemotingClient, topic: str) -> None:
    for i in range(N // 2):  # singles, with the properties a Java producer adds (WAIT, PGROUP is not sent)
        e = _expected(i)
        props = {
            "UNIQ_KEY": e["id"],
            "WAIT": "true",
            "TAGS": e["tag"],
            "KEYS": " ".join(e["keys"]),
            **e["props"],
        }
        assert remoting.send_message(topic, e["body"], queue_id=0, properties=props).code == R.SUCCESS
    batch = [_expected(i) for i in range(N // 2, N)]
    body = encode_batch(
        [e["body"] for e in batch],
        [encode_properties({"UNIQ_KEY": e["id"], "TAGS": e["tag"], "KEYS": " ".join(e["keys"]), **e["props"]})
         for e in batch],
    )  # fmt: skip
    r = remoting.send_message(topic, body, queue_id=0, code=Q.SEND_BATCH_MESSAGE, properties={"WAIT": "true"})
    assert r.code == R.SUCCESS, r.remark


def test_remoting_sends_are_read_over_grpc_pull_bulk_and_pop(rocketmq_emulator, remoting, v2_stub, ext_stub):
    topic = unique_name("x")
    rocketmq_emulator.create_topic(topic, 2)
    _send_over_remoting(remoting, topic)
    endpoint = rocketmq_emulator.broker("broker-a").endpoint

    v2 = read_queue_v2(v2_stub(endpoint), topic, 0, N)
    assert [m.system_properties.message_id for m in v2] == [_expected(i)["id"] for i in range(N)]
    for i, m in enumerate(v2):
        e = _expected(i)
        assert (m.body, m.system_properties.tag, list(m.system_properties.keys)) == (
            e["body"],
            e["tag"],
            e["keys"],
        )
        assert (
            dict(m.user_properties) == e["props"]
        )  # no WAIT / UNIQ_KEY / CLUSTER leaks into user properties
        assert m.system_properties.queue_offset == i

    bulk = read_queue_bulk(ext_stub(endpoint), topic, 0, N)
    assert [(r["message_id"], r["body"], r["tag"], r["keys"], dict(r["properties"])) for r in bulk] == [
        (e["id"], e["body"], e["tag"], e["keys"], e["props"]) for e in map(_expected, range(N))
    ]

    consumer = SimpleConsumer(
        ClientConfiguration(endpoint, Credentials(), request_timeout=10),
        unique_name("pop"),
        {topic: FilterExpression()},
        await_duration=3,
    )
    consumer.startup()
    try:
        got = {}
        deadline = time.monotonic() + 60
        while len(got) < N and time.monotonic() < deadline:
            for m in consumer.receive(32, 15):
                got[m.message_id] = (m.body, m.tag, sorted(m.keys), dict(m.properties))
                consumer.ack(m)
    finally:
        consumer.shutdown()
    assert got == {
        e["id"]: (e["body"], e["tag"], sorted(e["keys"]), e["props"]) for e in map(_expected, range(N))
    }


def test_grpc_sends_are_pulled_over_remoting(rocketmq_emulator, remoting, v2_stub):
    topic = unique_name("x")
    rocketmq_emulator.create_topic(topic, 2)
    stub = v2_stub(rocketmq_emulator.broker("broker-a").endpoint)
    msgs = [
        make_message(topic, f"g-{i}".encode(), tag="TagG", keys=[f"k{i}"], properties={"n": str(i)}, queue_id=1,
                     message_id=f"{i + 100:032X}")
        for i in range(5)
    ]  # fmt: skip
    resp = send(stub, msgs, explicit=True)
    assert resp.status.code == d.OK
    rows = messages(remoting.pull(topic, 1, 0)).to_pylist()
    assert [
        (r["message_id"], r["body"], r["tags"], r["keys"], r["properties"], r["queue_offset"]) for r in rows
    ] == [(f"{i + 100:032X}", f"g-{i}".encode(), "TagG", [f"k{i}"], [("n", str(i))], i) for i in range(5)]
    assert {r["born_host"] for r in rows} == {
        "127.0.0.1:0"
    }  # v2 gives no port: the record's host still parses


def test_offsets_and_lag_are_shared(rocketmq_emulator, remoting, v2_stub):
    topic, group = unique_name("x"), unique_name("g")
    rocketmq_emulator.create_topic(topic, 2)
    for _ in range(3):
        remoting.send_message(topic, b"x", queue_id=0)
    stub = v2_stub(rocketmq_emulator.broker("broker-a").endpoint)
    q = {"consumerGroup": group, "topic": topic, "queueId": 0}
    assert remoting.call(Q.UPDATE_CONSUMER_OFFSET, {**q, "commitOffset": 2}).code == R.SUCCESS
    got = stub.GetOffset(
        s.GetOffsetRequest(group=d.Resource(name=group), message_queue=queue_ref(topic, 0)),
        metadata=CLIENT_MD,
    )
    assert (got.status.code, got.offset) == (d.OK, 2)
    stub.UpdateOffset(
        s.UpdateOffsetRequest(group=d.Resource(name=group), message_queue=queue_ref(topic, 0), offset=1),
        metadata=CLIENT_MD,
    )
    assert remoting.call(Q.QUERY_CONSUMER_OFFSET, q).ext_fields["offset"] == "1"
    lag = [r for r in _lag(rocketmq_emulator, group) if r["queue"] == 0]
    assert [(r["committed"], r["max_offset"], r["lag"]) for r in lag] == [(1, 3, 2)]


def _lag(emu, group):
    from broker_emulator.core.admin import ClusterAdmin

    return emu._call(lambda: ClusterAdmin(emu.cluster).lag(group=group))
