"""`uniform_send` (messages of one layout read as columns of a byte array) reads a SendMessageRequest exactly as
`send_columns` does, declines every other request, and stores and answers like the general path."""

from __future__ import annotations

import asyncio
import gzip
import random
from collections.abc import Callable

import pyarrow as pa
import pytest

from broker_emulator.core.cluster import Cluster, ClusterConfig
from broker_emulator.core.long_polling import LongPollingService
from broker_emulator.core.send_columns import SendColumns
from broker_emulator.grpc_v2.messages import send_columns
from broker_emulator.grpc_v2.messaging import MessagingService, ReceivedSend
from broker_emulator.grpc_v2.uniform_send import uniform_send
from rocketmq_protocol.grpc_v2 import definition_pb2 as d
from rocketmq_protocol.grpc_v2 import service_pb2 as s
from tests.support.v2_context import V2Context

NOW_MS = 1_700_000_000_000


def _template(rng: random.Random) -> d.Message:
    """A message with a random set of the fields a batching producer writes once for all its messages."""
    m = d.Message(topic=d.Resource(name="mixed", resource_namespace=rng.choice(["", "ns"])))
    sp = m.system_properties
    if rng.random() < 0.5:
        sp.tag = rng.choice(["TagA", "日本"])
    if rng.random() < 0.3:
        sp.keys.extend(rng.sample(["k1", "k2", "k3"], 2))
    if rng.random() < 0.3:
        m.user_properties.update({"a": "1", "b": "two"})
    if rng.random() < 0.7:
        sp.born_timestamp.FromMilliseconds(NOW_MS + rng.choice([0, 1, 999]))
    if rng.random() < 0.5:
        sp.born_host = "10.0.0.2"
    if rng.random() < 0.5:
        sp.body_encoding = d.IDENTITY
    if rng.random() < 0.5:
        sp.message_type = d.NORMAL
    if rng.random() < 0.5:
        sp.queue_id = rng.choice([0, 3, 200])
    return m


def _request(rng: random.Random, n: int, body_size: int, template: d.Message | None = None) -> bytes:
    """n messages of `template` (random by default), each with its own 32-character id and random body."""
    template = template or _template(rng)
    msgs = []
    for i in range(n):
        m = d.Message()
        m.CopyFrom(template)
        m.system_properties.message_id = f"{rng.getrandbits(64):016X}{i:016X}"
        m.body = rng.randbytes(body_size)
        msgs.append(m)
    return s.SendMessageRequest(messages=msgs).SerializeToString()


def _as_lists(cols: SendColumns) -> dict:
    out = dict(vars(cols))
    for name in ("body", "message_id"):
        if isinstance(out[name], pa.Array):
            out[name] = out[name].to_pylist()
    return out


@pytest.mark.parametrize("seed", range(30))
def test_uniform_requests_read_like_the_general_path(seed: int) -> None:
    rng = random.Random(seed)
    raw = _request(rng, rng.choice([2, 3, 40, 300]), rng.choice([1, 100, 200]))
    found = uniform_send(raw)
    assert found is not None
    first, cols = found
    parsed = s.SendMessageRequest.FromString(raw)
    assert list(first.messages) == [parsed.messages[0]]
    assert isinstance(cols.body, pa.Array) and isinstance(cols.message_id, pa.Array)
    assert _as_lists(cols) == _as_lists(send_columns(parsed, raw))


def _differing(change: Callable[[d.Message, int], None]) -> bytes:
    """Three messages of one template, each then changed by `change(message, index)`."""
    rng = random.Random(1)
    template = _template(rng)
    msgs = []
    for i in range(3):
        m = d.Message()
        m.CopyFrom(template)
        m.system_properties.message_id = f"{i:032X}"
        m.body = b"%05d" % i
        change(m, i)
        msgs.append(m)
    return s.SendMessageRequest(messages=msgs).SerializeToString()


def _set_tag(m: d.Message, i: int) -> None:
    m.system_properties.tag = "ABC"[i]


def _set_born(m: d.Message, i: int) -> None:
    m.system_properties.born_timestamp.FromMilliseconds(NOW_MS + i)


def _set_body(m: d.Message, i: int) -> None:
    m.body = b"x" * (i + 1)


def _set_id(m: d.Message, i: int) -> None:
    m.system_properties.message_id = ("é" if i == 1 else "e") + "0" * 30


def _set_queue(m: d.Message, i: int) -> None:
    m.system_properties.queue_id = i + 1


def _set_topic(m: d.Message, i: int) -> None:
    m.topic.name = "tA"[i % 2] if i else "t"


def _same_size_other_topic(m: d.Message, i: int) -> None:
    m.topic.name = "mixed" if i != 2 else "mixes"


def _no_id(m: d.Message, i: int) -> None:
    m.system_properties.ClearField("message_id")


def _no_body(m: d.Message, i: int) -> None:
    m.ClearField("body")


@pytest.mark.parametrize(
    "change",
    [
        _set_tag,
        _set_born,
        _set_body,
        _set_id,
        _set_queue,
        _set_topic,
        _same_size_other_topic,
        _no_id,
        _no_body,
    ],
)
def test_requests_whose_messages_differ_elsewhere_are_declined(
    change: Callable[[d.Message, int], None],
) -> None:
    raw = _differing(change)
    assert uniform_send(raw) is None
    assert uniform_send(_differing(lambda m, i: None)) is not None  # the same messages, unchanged


def _with_duplicate_body(raw: bytes) -> bytes:
    """Each message with a second body field appended (legal protobuf: the last one wins)."""
    msgs = s.SendMessageRequest.FromString(raw).messages
    out = b""
    for m in msgs:
        data = m.SerializeToString() + b"\x22\x01z"
        out += b"\x0a" + bytes([len(data)]) + data
    return out


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"\x0a",
        b"\x0a\x05abc",  # cut off
        b"\x12\x00\x12\x00",  # not field 1
        b"\x0a\x00\x0a\x00",  # empty messages
        b"\x0a\x02\xff\xff\x0a\x02\xff\xff",  # a malformed field
        b"\x0a\x02\x1b\x00\x0a\x02\x1b\x00",  # a group (wire type 3)
    ],
)
def test_malformed_or_degenerate_bytes_are_declined(raw: bytes) -> None:
    assert uniform_send(raw) is None


def test_single_messages_and_duplicated_fields_are_declined() -> None:
    rng = random.Random(3)
    assert uniform_send(_request(rng, 1, 10)) is None
    raw = _request(rng, 4, 10)
    assert uniform_send(raw) is not None
    assert uniform_send(_with_duplicate_body(raw)) is None


# ------------------------------------------------------------------------------- through the service


def _service(loop: asyncio.AbstractEventLoop) -> MessagingService:
    cluster = Cluster(ClusterConfig(brokers=1, max_body_size=300))
    cluster.create_topic("mixed", 4, "MIXED")
    cluster.create_topic("ns%mixed", 4, "MIXED")
    return MessagingService(cluster, cluster.brokers[0], LongPollingService(loop))


def _answer(svc: MessagingService, raw: bytes, uniform: bool) -> s.SendMessageResponse:
    if uniform:
        received: ReceivedSend | s.SendMessageRequest = ReceivedSend(raw)
        assert received.columns is not None
    else:
        received = s.SendMessageRequest.FromString(raw)  # the parsed request, as generated handlers pass it
    reply = svc.polling.loop.run_until_complete(svc.send_message_bytes(received, V2Context()))
    return s.SendMessageResponse.FromString(reply)


def _stored(svc: MessagingService) -> dict:
    return {
        key: cq.read(cq.min_offset, cq.max_offset).drop_columns(["store_timestamp"]).to_pylist()
        for key, cq in svc.store.queues.items()
    }


def _gzip_template(m: d.Message, i: int) -> None:
    m.system_properties.body_encoding = d.GZIP
    m.body = gzip.compress(bytes([65 + i]) * 5, mtime=0)


@pytest.mark.parametrize("seed", range(6))
def test_the_service_stores_and_answers_uniform_requests_like_parsed_ones(
    seed: int, loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("time.time", lambda: NOW_MS / 1000)
    rng = random.Random(seed)
    fast, general = _service(loop), _service(loop)
    requests = [_request(rng, rng.choice([2, 50]), rng.choice([10, 100])) for _ in range(5)]
    requests.append(_request(rng, 5, 400))  # bodies over the limit: refused alike
    requests.append(_differing(_gzip_template))  # compressed bodies, stored decompressed
    for raw in requests:
        assert _answer(fast, raw, uniform=True) == _answer(general, raw, uniform=False)
    assert _stored(fast) == _stored(general)
    assert any(rows for rows in _stored(fast).values())


def test_blank_message_ids_are_refused_like_the_general_path(loop: asyncio.AbstractEventLoop) -> None:
    template = d.Message(topic=d.Resource(name="mixed"), body=b"x")
    template.system_properties.message_id = " " * 32
    raw = s.SendMessageRequest(messages=[template] * 3).SerializeToString()
    a = _answer(_service(loop), raw, uniform=True)
    b = _answer(_service(loop), raw, uniform=False)
    assert a == b
    assert a.status.code == d.ILLEGAL_MESSAGE_ID and a.status.message.startswith("message #0:")
