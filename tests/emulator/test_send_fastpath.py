"""The column-wise SendMessage path equals the per-message one: same codes and messages, same stored rows,
same offsets and queue choice (in-process, no gRPC)."""

from __future__ import annotations

import asyncio
import gzip
import random
import uuid
from typing import Any

import grpc
import numpy as np
import pyarrow as pa
import pytest

from broker_emulator.core.cluster import Cluster, ClusterConfig
from broker_emulator.core.long_polling import LongPollingService
from broker_emulator.core.send_columns import SendColumns
from broker_emulator.core.store.consume_queue import MERGE_BELOW, MERGE_LIMIT, ConsumeQueue
from broker_emulator.core.store.records import MESSAGE_SCHEMA, MessageColumns, repeated
from broker_emulator.grpc_v2.messages import send_columns, send_response_bytes, timestamp_ms
from broker_emulator.grpc_v2.messaging import MessagingService, ReceivedSend
from rocketmq_protocol.grpc_v2 import definition_pb2 as d
from rocketmq_protocol.grpc_v2 import service_pb2 as s
from rocketmq_protocol.grpc_v2 import service_pb2_grpc
from rocketmq_protocol.hashing import java_string_hash
from tests.support.helpers import plain_columns
from tests.support.v2_context import V2Context

QUEUES = 5
NOW_MS = 1_700_000_000_000
TOPICS = {"mixed": "MIXED", "normal": "NORMAL", "fifo": "FIFO", "delay": "DELAY"}


def _service(loop: asyncio.AbstractEventLoop) -> MessagingService:
    """A one-broker in-memory service."""
    cluster = Cluster(ClusterConfig(brokers=1, max_body_size=1000))
    for name, mtype in TOPICS.items():
        cluster.create_topic(name, QUEUES, mtype)
    return MessagingService(cluster, cluster.brokers[0], LongPollingService(loop))


# ------------------------------------------------------------------------------------ random messages
_GOOD_TAGS = ["TagA", "TagB", "日本", "x" * 40]
_BAD_TAGS = ["", "  ", "a|b", "bad\x01"]
_GOOD_GROUPS = ["g1", "g2", "group-ü"]
_BAD_GROUPS = ["", " ", "g" * 64, "g\x7f"]


def _message(rng: random.Random, topic: str, bad: bool) -> d.Message:
    """A message with a random subset of fields set, mostly of the topic's type; `bad` spoils one check."""
    m = d.Message(topic=d.Resource(name=topic), body=rng.choice([b"x", b"body" * 20]))
    sp = m.system_properties
    sp.message_id = uuid.uuid4().hex
    if rng.random() < 0.7:
        sp.born_timestamp.FromMilliseconds(NOW_MS + rng.choice([0, 0, 1, 999, 1000]))
    if rng.random() < 0.3:
        sp.born_timestamp.seconds = NOW_MS  # the official Python client's ms-in-seconds quirk
    if rng.random() < 0.5:
        sp.born_host = rng.choice(["127.0.0.1", "10.0.0.2"])
    if rng.random() < 0.6:
        sp.tag = rng.choice(_GOOD_TAGS)
    if rng.random() < 0.2:
        sp.keys.extend(rng.sample(["k1", "k2", "键"], rng.randint(1, 2)))
    if rng.random() < 0.2:
        m.user_properties.update({f"p{i}": rng.choice(["v", "ü", ""]) for i in range(rng.randint(1, 3))})
    if rng.random() < 0.3:
        sp.queue_id = rng.randrange(QUEUES)
    mtype = TOPICS[topic]
    if mtype == "FIFO" or (mtype == "MIXED" and rng.random() < 0.2):
        sp.message_group = rng.choice(_GOOD_GROUPS)
    elif mtype == "DELAY" or (mtype == "MIXED" and rng.random() < 0.15):
        sp.delivery_timestamp.FromMilliseconds(rng.choice([0, NOW_MS - 5000, NOW_MS + 60_000]))
    if rng.random() < 0.2:
        sp.message_type = {"NORMAL": d.NORMAL, "FIFO": d.FIFO, "DELAY": d.DELAY}.get(mtype, d.TRANSACTION)
    if rng.random() < 0.3:
        sp.body_encoding = d.IDENTITY
    if rng.random() < 0.1:
        sp.body_encoding = d.GZIP
        m.body = gzip.compress(m.body)
    if bad:
        _spoil(rng, m)
    return m


def _spoil(rng: random.Random, m: d.Message) -> None:
    sp = m.system_properties
    kind = rng.randrange(14)
    if kind == 0:
        m.body = b""
    elif kind == 1:
        m.body = b"y" * 1001
    elif kind == 2:
        sp.tag = rng.choice(_BAD_TAGS)
    elif kind == 3:
        sp.keys.append(rng.choice(["", " ", "k\x02"]))
    elif kind == 4:
        sp.message_id = rng.choice(["", "   "])
    elif kind == 5:
        sp.message_group = rng.choice(_BAD_GROUPS)
    elif kind == 6:
        sp.delivery_timestamp.FromMilliseconds(NOW_MS * 2)
    elif kind == 7:
        m.user_properties[rng.choice(["KEYS", "", "a\x03"])] = "v"
    elif kind == 8:
        m.user_properties.update({f"q{i}": "v" for i in range(129)})
    elif kind == 9:
        m.user_properties["big"] = "v" * 17_000
    elif kind == 10:
        sp.queue_id = rng.choice([-1, QUEUES, 99])
    elif kind == 11:
        sp.body_encoding = d.GZIP
        m.body = b"not gzip"
    elif kind == 12:
        sp.message_type = rng.choice([d.NORMAL, d.FIFO, d.DELAY, d.TRANSACTION])
    else:
        m.topic.name = "other"


def _request(rng: random.Random, topic: str, n: int, spoil_rate: float) -> s.SendMessageRequest:
    msgs = [_message(rng, topic, rng.random() < spoil_rate) for _ in range(n)]
    return s.SendMessageRequest.FromString(s.SendMessageRequest(messages=msgs).SerializeToString())


def _outcome(
    svc: MessagingService, request: s.SendMessageRequest, explicit: bool, per_message: bool = False
) -> s.SendMessageResponse:
    """The service's answer; `per_message`: with the request's columns read message by message (the
    reference for `send_columns`) instead of column by column."""
    received: Any = request
    if per_message:
        received = ReceivedSend.__new__(ReceivedSend)
        received.raw, received.request = None, request
        received.columns = _per_message_columns(request)
    reply = svc.polling.loop.run_until_complete(svc.send_message_bytes(received, V2Context(explicit)))
    return s.SendMessageResponse.FromString(reply)


def _per_message_columns(request: s.SendMessageRequest) -> SendColumns:
    """SendColumns read message by message with HasField semantics (every column a full list)."""
    ref = _reference_columns(request)
    msgs = request.messages
    first = msgs[0].topic
    return SendColumns(
        n=len(msgs),
        topics_match=all(m.topic == first for m in msgs),
        body=ref["body"],
        body_size=[len(b) for b in ref["body"]],
        message_id=ref["message_id"],
        tag=ref["tag"],
        keys=ref["keys"],
        properties=[list(m.user_properties.items()) for m in msgs],
        born_timestamp=ref["born_timestamp"],
        born_host=ref["born_host"],
        message_group=ref["message_group"],
        delivery_timestamp=ref["delivery_timestamp"],
        message_type=ref["message_type"],
        compressed=ref["compressed"],
        queue_id=ref["queue_id"],
    )


def _stored(svc: MessagingService) -> dict:
    out = {}
    for (topic, qid), cq in svc.store.queues.items():
        table = cq.read(cq.min_offset, cq.max_offset - cq.min_offset).drop_columns(["store_timestamp"])
        out[(topic, qid)] = table.to_pylist()
    return out


@pytest.mark.parametrize("seed", range(16))
def test_column_path_equals_per_message_path(
    seed: int, loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("time.time", lambda: NOW_MS / 1000)
    rng = random.Random(seed)
    fast, slow = _service(loop), _service(loop)
    for _ in range(30):
        topic = rng.choice(["mixed", "mixed", *TOPICS])
        n = rng.choice([1, 2, 7, 40])
        request = _request(rng, topic, n, rng.choice([0.0, 0.0, 0.05, 0.3]))
        explicit = rng.random() < 0.5
        a, b = _outcome(fast, request, explicit), _outcome(slow, request, explicit, per_message=True)
        assert a == b
        assert fast.broker._rr == slow.broker._rr
    assert _stored(fast) == _stored(slow)


def test_rejected_request_stores_nothing_and_names_first_failure(loop: asyncio.AbstractEventLoop) -> None:
    svc = _service(loop)
    rng = random.Random(7)
    msgs = [_message(rng, "mixed", False) for _ in range(5)]
    msgs[3].system_properties.tag = "a|b"
    msgs[4].body = b""
    resp = _outcome(svc, s.SendMessageRequest(messages=msgs), True)
    assert resp.status.code == d.ILLEGAL_MESSAGE_TAG
    assert resp.status.message.startswith("message #3:")
    assert not any(cq.max_offset for cq in svc.store.queues.values())


def test_uniform_batch_goes_to_one_queue_with_consecutive_offsets(loop: asyncio.AbstractEventLoop) -> None:
    svc = _service(loop)
    msgs = [d.Message(topic=d.Resource(name="mixed"), body=b"x" * 100) for _ in range(300)]
    for i, m in enumerate(msgs):
        m.system_properties.message_id = f"id-{i}"
        m.system_properties.tag = "bench"
        m.system_properties.queue_id = 3
    for round_ in range(2):
        resp = _outcome(svc, s.SendMessageRequest(messages=msgs), True)
        assert resp.status.code == d.OK
        assert [e.offset for e in resp.entries] == list(range(300 * round_, 300 * (round_ + 1)))
        assert [e.message_id for e in resp.entries] == [f"id-{i}" for i in range(300)]
        assert all(e.status.code == d.OK and e.status.message == "OK" for e in resp.entries)
    table = svc.store.queues[("mixed", 3)].read(0, 1000)
    assert table.num_rows == 600
    assert set(table.column("tag").to_pylist()) == {"bench"}
    assert set(table.column("tag_code").to_pylist()) == {java_string_hash("bench")}
    assert table.column("keys").to_pylist()[:2] == [[], []]
    assert table.column("properties").to_pylist()[:2] == [[], []]
    assert table.column("message_type").to_pylist()[0] == d.NORMAL


def _reference_columns(request: s.SendMessageRequest) -> dict:
    """What `send_columns` must read, message by message with HasField semantics."""
    msgs = request.messages
    sps = [m.system_properties for m in msgs]

    def opt(sp: Any, name: str) -> Any:
        return getattr(sp, name) if sp.HasField(name) else None

    return {
        "body": [m.body for m in msgs],
        "message_id": [sp.message_id for sp in sps],
        "tag": [opt(sp, "tag") for sp in sps],
        "keys": [list(sp.keys) for sp in sps],
        "properties": [sorted(m.user_properties.items()) for m in msgs],
        "born_timestamp": [timestamp_ms(sp.born_timestamp) for sp in sps],
        "born_host": [sp.born_host for sp in sps],
        "message_group": [opt(sp, "message_group") for sp in sps],
        "delivery_timestamp": [
            timestamp_ms(sp.delivery_timestamp) if sp.HasField("delivery_timestamp") else None for sp in sps
        ],
        "message_type": [sp.message_type for sp in sps],
        "compressed": [sp.body_encoding == d.GZIP for sp in sps],
        "queue_id": [sp.queue_id for sp in sps],
    }


@pytest.mark.parametrize("seed", range(20))
def test_send_columns_read_every_field_like_per_message_access(seed: int) -> None:
    rng = random.Random(seed)
    request = _request(rng, "mixed", rng.choice([1, 3, 30]), 0.2)
    cols = send_columns(request)
    n = len(request.messages)
    defaults = {
        "tag": None,
        "keys": [],
        "properties": [],
        "born_timestamp": 0,
        "born_host": "",
        "message_group": None,
        "delivery_timestamp": None,
        "message_type": 0,
        "compressed": False,
        "queue_id": 0,
    }
    for name, expected in _reference_columns(request).items():
        got = getattr(cols, name)
        if got is None:
            got = [defaults[name]] * n
        if name == "properties":
            got = [sorted(items) for items in got]
        assert got == expected, name
    first = request.messages[0].topic
    assert cols.topics_match == all(m.topic == first for m in request.messages)


def _duplicated_field(request: s.SendMessageRequest) -> bytes:
    """The request's bytes with message 0's system_properties written twice (legal protobuf: the parts merge,
    the last value of a singular field wins) and message 1's queue_id written as an explicit 0."""
    parts = []
    for i, m in enumerate(request.messages):
        data = m.SerializeToString()
        if i == 0:
            sp = d.SystemProperties(message_id="dup", queue_id=1)
            data += d.Message(system_properties=sp).SerializeToString()
        if i == 1:
            data += b"\x1a\x02\x68\x00"  # SystemProperties{queue_id: 0}, the default written out
        parts.append(b"\x0a" + _varint(len(data)) + data)
    return b"".join(parts)


def _varint(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


@pytest.mark.parametrize("seed", range(20))
def test_send_columns_from_the_received_bytes_read_like_the_parsed_request(seed: int) -> None:
    rng = random.Random(seed)
    request = _request(rng, "mixed", rng.choice([1, 3, 30]), 0.2)
    for raw in (
        request.SerializeToString(),
        *([_duplicated_field(request)] if len(request.messages) > 1 else []),
    ):
        parsed = s.SendMessageRequest.FromString(raw)
        assert send_columns(parsed, raw) == send_columns(parsed)


def test_explicit_empty_optionals_are_seen_as_set() -> None:
    msgs = [d.Message(topic=d.Resource(name="t"), body=b"x") for _ in range(3)]
    for m in msgs:
        m.system_properties.message_id = "id"
    msgs[1].system_properties.tag = ""
    msgs[2].system_properties.message_group = ""
    msgs[2].system_properties.delivery_timestamp.SetInParent()
    cols = send_columns(s.SendMessageRequest(messages=msgs))
    assert cols.tag == [None, "", None]
    assert cols.message_group == [None, None, ""]
    assert cols.delivery_timestamp == [None, None, 0]


def test_send_response_bytes_parse_like_protobuf() -> None:
    rng = random.Random(3)
    ok = d.Status(code=d.OK, message="OK")
    for n in (1, 2, 50):
        ids = ["".join(rng.choice("aé日😀") for _ in range(rng.choice([1, 32, 200]))) for _ in range(n)]
        offsets = [rng.choice([0, 127, 128, 2**14, 2**40, 2**62]) for _ in range(n)]
        sliced = pa.array(["skipped", *ids], pa.string()).slice(1)
        got = s.SendMessageResponse.FromString(send_response_bytes(sliced, np.array(offsets)))
        expected = s.SendMessageResponse(
            status=ok,
            entries=[
                s.SendResultEntry(status=ok, message_id=i, offset=o)
                for i, o in zip(ids, offsets, strict=True)
            ],
        )
        assert got == expected


def test_message_columns_from_rows_and_from_arrays_agree() -> None:
    rows = MessageColumns()
    for i in range(4):
        rows.append(
            message_id=f"m{i}",
            tag="t" if i % 2 else None,
            keys=[],
            body=b"b",
            properties=[],
            born_timestamp=5,
            born_host="",
            reconsume_times=0,
            message_group=None,
            delivery_timestamp=None,
            message_type=d.NORMAL,
            tag_code=java_string_hash("t") if i % 2 else 0,
        )

    def typ(name: str) -> pa.DataType:
        return MESSAGE_SCHEMA.field(name).type

    arrays = MessageColumns(
        message_id=pa.array([f"m{i}" for i in range(4)]),
        tag=[None, "t", None, "t"],
        keys=repeated([], 4, typ("keys")),
        body=[b"b"] * 4,
        properties=repeated([], 4, typ("properties")),
        born_timestamp=repeated(5, 4, typ("born_timestamp")),
        born_host=repeated("", 4, typ("born_host")),
        reconsume_times=np.zeros(4, np.int32),
        message_group=repeated(None, 4, typ("message_group")),
        delivery_timestamp=repeated(None, 4, typ("delivery_timestamp")),
        message_type=repeated(d.NORMAL, 4, typ("message_type")),
        tag_code=np.array([0, java_string_hash("t")] * 2, np.int32),
    )
    assert rows.to_batch(10, 99).equals(arrays.to_batch(10, 99))
    assert rows.take([3, 0]).to_batch(0, 1).equals(arrays.take(np.array([3, 0])).to_batch(0, 1))


def test_consume_queue_merges_small_appends_and_keeps_large_ones() -> None:
    cq = ConsumeQueue("t", 0)
    offset = 0

    def append(n: int) -> None:
        nonlocal offset
        cols = plain_columns([f"{offset + i}" for i in range(n)])
        cq.append(cols.to_batch(offset, 1), 0, n)
        offset += n

    for n in (1, 1, 3, 500, MERGE_BELOW, 1, 2, MERGE_BELOW - 2, MERGE_BELOW - 1, 7, 3):
        append(n)
    # below MERGE_BELOW rows joins the last segment while it stays within MERGE_LIMIT rows
    third = 2 * MERGE_BELOW - 3
    assert third <= MERGE_LIMIT < third + 7
    assert [seg.count for seg in cq.segments] == [505, MERGE_BELOW + 3, third, 10]
    table = cq.read(0, 100_000)
    assert table.column("message_id").to_pylist() == [str(i) for i in range(offset)]
    # closed segments are read as one joined batch each, the growing tail as slices of its appends
    assert [len(c) for c in table.column(0).chunks] == [505, MERGE_BELOW + 3, third, 7, 3]
    assert [len(seg.parts) for seg in cq.segments] == [1, 1, 1, 2]
    assert cq.read(4, 3).column("queue_offset").to_pylist() == [4, 5, 6]
    tail = cq.segments[-1].base
    assert cq.read(tail + 5, 4).column("queue_offset").to_pylist() == list(range(tail + 5, tail + 9))


def test_a_whole_segments_read_ends_where_the_segment_it_would_cut_starts() -> None:
    """What BulkPull reads: a limit inside a segment ends the read at that segment's start, unless that
    would leave nothing (a read from inside the segment) or the read reaches the queue's end."""
    cq = ConsumeQueue("t", 0)
    offset = 0
    for _ in range(4):
        cq.append(plain_columns([f"{offset + i}" for i in range(MERGE_BELOW)]).to_batch(offset, 1), 0, 1)
        offset += MERGE_BELOW
    assert [seg.base for seg in cq.segments] == [0, MERGE_BELOW, 2 * MERGE_BELOW, 3 * MERGE_BELOW]

    def offsets(start: int, limit: int) -> tuple[int, int]:
        column = cq.read(start, limit, whole_segments=True).column("queue_offset")
        return column[0].as_py(), column[-1].as_py() + 1

    assert offsets(0, 10_000) == (0, 2 * MERGE_BELOW)  # would cut the third segment: ends at its start
    assert offsets(0, 2 * MERGE_BELOW) == (0, 2 * MERGE_BELOW)  # ends on a boundary already
    assert offsets(100, 10_000) == (100, 2 * MERGE_BELOW)
    assert offsets(100, 1_000) == (100, 1_100)  # inside the first segment: as asked
    assert offsets(2 * MERGE_BELOW, 100_000) == (2 * MERGE_BELOW, offset)  # to the queue's end
    assert offsets(3 * MERGE_BELOW - 5, 10) == (3 * MERGE_BELOW - 5, 3 * MERGE_BELOW)
    assert cq.read(0, 10_000).num_rows == 10_000  # without it, the limit as asked


def test_add_to_server_answers_send_message_with_raw_bytes(loop: asyncio.AbstractEventLoop) -> None:
    """`add_to_server` serves every MessagingService RPC, SendMessage without re-encoding its response."""
    svc = _service(loop)

    async def run() -> tuple[s.SendMessageResponse, s.SendMessageResponse, s.QueryRouteResponse]:
        server = grpc.aio.server()
        svc.add_to_server(server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                stub = service_pb2_grpc.MessagingServiceStub(channel)
                md = V2Context(True).md
                msgs = [d.Message(topic=d.Resource(name="mixed"), body=b"x") for _ in range(3)]
                for i, m in enumerate(msgs):
                    m.system_properties.message_id = f"id-{i}"
                ok = await stub.SendMessage(s.SendMessageRequest(messages=msgs), metadata=md)
                msgs[1].body = b""
                bad = await stub.SendMessage(s.SendMessageRequest(messages=msgs), metadata=md)
                route = await stub.QueryRoute(
                    s.QueryRouteRequest(topic=d.Resource(name="mixed")), metadata=md
                )
                return ok, bad, route
        finally:
            await server.stop(None)

    ok, bad, route = loop.run_until_complete(run())
    assert ok.status.code == d.OK
    assert [(e.message_id, e.offset) for e in ok.entries] == [("id-0", 0), ("id-1", 1), ("id-2", 2)]
    assert bad.status.code == d.MESSAGE_BODY_EMPTY and not bad.entries
    assert route.status.code == d.OK and len(route.message_queues) == QUEUES


@pytest.mark.parametrize(
    ("topics", "match"),
    [
        ([("", "t")] * 3, True),
        ([("ns", "t")] * 3, True),
        ([("ns", "t"), ("ns", "t"), ("", "t")], False),
        ([("", "t"), ("", "t"), ("ns", "t")], False),
        ([("ns", "t"), ("ns", "u")], False),
        ([("", "t"), ("", "")], False),
        ([("", "é"), ("", "é")], True),
    ],
)
def test_topics_match(topics: list[tuple[str, str]], match: bool) -> None:
    msgs = [d.Message(topic=d.Resource(resource_namespace=ns, name=name), body=b"x") for ns, name in topics]
    assert send_columns(s.SendMessageRequest(messages=msgs)).topics_match is match
