"""The official rocketmq-python-client Producer against the emulator: everything it sends is stored once,
with its tag, keys, properties and message id, at the offsets its SendReceipts report (docs/protocols.md, 'POP')."""

from __future__ import annotations

from collections import deque

import pytest
from rocketmq import ClientConfiguration, Credentials, Message, Producer

from rocketmq_protocol.grpc_v2 import definition_pb2 as d
from tests.support.helpers import (
    endpoints_by_broker,
    max_offsets,
    read_queue_bulk,
    read_queue_v2,
    unique_name,
)

N_MESSAGES = 1000
TAGS = ("TagA", "TagB", "TagC")
SEND_TIMEOUT_S = 30
SEND_WINDOW = 16


def expected_message(i: int) -> dict:
    return {
        "body": f"official-{i:04d}-".encode() + bytes([i % 256]) * (i % 7),
        "tag": TAGS[i % len(TAGS)],
        "keys": {f"key-{i}", f"order-{i // 10}"},
        "properties": {"index": str(i), "kind": "official", "parity": "even" if i % 2 == 0 else "odd"},
    }


@pytest.fixture(scope="module")
def official_topic(rocketmq_emulator):
    name = unique_name("official")
    rocketmq_emulator.create_topic(name)
    return name


@pytest.fixture(scope="module")
def sent(rocketmq_emulator, official_topic):
    """Sends N_MESSAGES with the official Producer; returns {message_id: (index, broker, queue, offset)}."""
    topic = official_topic
    producer = Producer(ClientConfiguration(rocketmq_emulator.endpoints, Credentials()), (topic,))
    producer.startup()
    try:
        receipts = {}

        def collect(i: int, msg: Message, fut) -> None:
            receipt = fut.result(timeout=SEND_TIMEOUT_S)
            assert receipt.message_id == msg.message_id
            mq = receipt.message_queue.message_queue0()
            assert receipt.message_id not in receipts, "duplicate message id"
            receipts[receipt.message_id] = (i, mq.broker.name, mq.id, receipt.offset)

        # A bounded window of async sends: all 1,000 at once would outlive the client's 3 s request
        # timeout while queued, and its retries would then (legitimately, at-least-once) duplicate messages.
        window: deque = deque()
        for i in range(N_MESSAGES):
            exp = expected_message(i)
            msg = Message()
            msg.topic = topic
            msg.body = exp["body"]
            msg.tag = exp["tag"]
            for k in sorted(exp["keys"]):
                msg.keys = k  # the client's setter adds one key per assignment
            for k, v in exp["properties"].items():
                msg.add_property(k, v)
            window.append((i, msg, producer.send_async(msg)))
            if len(window) >= SEND_WINDOW:
                collect(*window.popleft())
        while window:
            collect(*window.popleft())
    finally:
        producer.shutdown()
    assert len(receipts) == N_MESSAGES
    return receipts


def _check_against_receipts(got: dict[str, tuple[int, str, int, int]], receipts: dict) -> None:
    """Each stored message sits on the broker the producer sent it to, at the offset its receipt names.

    The receipt's queue is the client's pick; like the proxy, the emulator chooses the queue itself when
    the request names none (round robin), so only the broker and the offset are compared.
    """
    assert set(got) == set(receipts), "messages missing or unexpected"
    for mid, (_i, broker, _qid, offset) in got.items():
        _ri, r_broker, _r_qid, r_offset = receipts[mid]
        assert (broker, offset) == (r_broker, r_offset), mid


def test_official_producer_messages_read_back_by_both_pull_protocols(
    rocketmq_emulator, official_topic, sent, v2_stub, ext_stub
):
    topic = official_topic
    receipts = sent
    assert {v[1] for v in receipts.values()} == {"broker-a", "broker-b"}, (
        "the producer should use both brokers"
    )
    total = 0

    v2_seen: dict[str, tuple[int, str, int, int]] = {}
    bulk_seen: dict[str, tuple[int, str, int, int]] = {}
    for broker, endpoint in endpoints_by_broker(rocketmq_emulator).items():
        stub, ext = v2_stub(endpoint), ext_stub(endpoint)
        ends = max_offsets(stub, topic, 4)
        assert sum(ends) == sum(1 for v in receipts.values() if v[1] == broker)
        total += sum(ends)
        for qid, end in enumerate(ends):
            assert rocketmq_emulator.min_max(topic, broker, qid) == (0, end)

            # --- PullMessage (v2 streaming)
            msgs = read_queue_v2(stub, topic, qid, end, batch_size=32)
            assert [m.system_properties.queue_offset for m in msgs] == list(range(end))
            for m in msgs:
                sp = m.system_properties
                mid = sp.message_id
                assert mid in receipts, f"unknown message id {mid}"
                i = receipts[mid][0]
                exp = expected_message(i)
                assert m.topic.name == topic
                assert m.body == exp["body"]
                assert sp.tag == exp["tag"]
                assert set(sp.keys) == exp["keys"]
                assert dict(m.user_properties) == exp["properties"]
                assert sp.queue_id == qid
                assert sp.body_encoding == d.IDENTITY
                assert sp.message_type == d.NORMAL
                assert sp.HasField("store_timestamp") and sp.HasField("born_timestamp")
                assert mid not in v2_seen, f"message {mid} read twice"
                v2_seen[mid] = (i, broker, qid, sp.queue_offset)

            # --- BulkPull (Arrow IPC)
            rows = read_queue_bulk(ext, topic, qid, end, max_messages=100)
            assert [r["queue_offset"] for r in rows] == list(range(end))
            for r in rows:
                mid = r["message_id"]
                assert mid in receipts, f"unknown message id {mid}"
                i = receipts[mid][0]
                exp = expected_message(i)
                assert r["body"] == exp["body"]
                assert r["tag"] == exp["tag"]
                assert set(r["keys"]) == exp["keys"]
                assert dict(r["properties"]) == exp["properties"]
                assert mid not in bulk_seen, f"message {mid} read twice"
                bulk_seen[mid] = (i, broker, qid, r["queue_offset"])

    assert total == N_MESSAGES
    assert len(v2_seen) == N_MESSAGES
    assert len(bulk_seen) == N_MESSAGES
    _check_against_receipts(v2_seen, receipts)
    _check_against_receipts(bulk_seen, receipts)
    assert sorted(v[0] for v in v2_seen.values()) == list(range(N_MESSAGES))


def test_pulled_messages_parse_with_the_official_client(rocketmq_emulator, official_topic, sent, v2_stub):
    """What PullMessage returns is acceptable to the official client's own message decoder."""
    topic = official_topic
    endpoint = endpoints_by_broker(rocketmq_emulator)["broker-a"]
    stub = v2_stub(endpoint)
    end = max_offsets(stub, topic, 4)[0]
    assert end > 0
    for pm in read_queue_v2(stub, topic, 0, end):
        msg = Message().fromProtobuf(pm)
        assert not msg.corrupted
        exp = expected_message(sent[msg.message_id][0])
        assert msg.body == exp["body"]
        assert msg.tag == exp["tag"]
        assert set(msg.keys) == exp["keys"]
        assert dict(msg.properties) == exp["properties"]
