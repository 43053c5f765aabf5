"""Garbage input to SendMessage/PullMessage gets the proxy's in-band code (docs/protocols.md, 'SendMessage checks'), stores nothing, and the emulator keeps serving (docs/protocols.md, 'SendMessage checks')."""

from __future__ import annotations

import time
from collections.abc import Callable

import grpc
import pytest

from rocketmq_protocol.grpc_v2 import definition_pb2 as d
from rocketmq_protocol.grpc_v2 import service_pb2 as s
from tests.support.helpers import (
    CLIENT_MD,
    RPC_TIMEOUT_S,
    endpoints_by_broker,
    make_message,
    max_offsets,
    pull_v2,
    send,
    unique_name,
)

BROKER = "broker-a"
QUEUES = 4
MAX_BODY = 4 * 1024 * 1024
DAY_MS = 24 * 3600 * 1000


def _msg(topic: str, **kw) -> d.Message:
    return make_message(topic, kw.pop("body", b"payload"), **kw)


def _with(topic: str, mutate: Callable[[d.Message], None], **kw) -> d.Message:
    m = _msg(topic, **kw)
    mutate(m)
    return m


def _blank_message_id(m: d.Message) -> None:
    m.system_properties.message_id = "  "


def _blank_key(m: d.Message) -> None:
    m.system_properties.keys.append("  ")


def _many_properties(m: d.Message) -> None:
    m.user_properties.update({f"p{i}": "v" for i in range(129)})


def _large_properties(m: d.Message) -> None:
    m.user_properties.update({"big": "v" * (17 * 1024)})


# (case id, builder of the request's messages from the topic, expected code, explicit-queue header)
CASES: list[tuple[str, Callable[[str], list[d.Message]], int, bool]] = [
    ("no-messages", lambda t: [], d.MESSAGE_CORRUPTED, False),
    ("empty-body", lambda t: [_msg(t, body=b"")], d.MESSAGE_BODY_EMPTY, False),
    ("body-too-large", lambda t: [_msg(t, body=b"x" * (MAX_BODY + 1))], d.MESSAGE_BODY_TOO_LARGE, False),
    ("tag-with-bar", lambda t: [_msg(t, tag="TagA|TagB")], d.ILLEGAL_MESSAGE_TAG, False),
    ("tag-blank", lambda t: [_msg(t, tag="   ")], d.ILLEGAL_MESSAGE_TAG, False),
    ("tag-empty", lambda t: [_msg(t, tag="")], d.ILLEGAL_MESSAGE_TAG, False),
    ("tag-control-char", lambda t: [_msg(t, tag="Tag\x01A")], d.ILLEGAL_MESSAGE_TAG, False),
    ("key-blank", lambda t: [_with(t, _blank_key, keys=["ok"])], d.ILLEGAL_MESSAGE_KEY, False),
    ("message-id-blank", lambda t: [_with(t, _blank_message_id)], d.ILLEGAL_MESSAGE_ID, False),
    (
        "property-reserved",
        lambda t: [_msg(t, properties={"UNIQ_KEY": "x"})],
        d.ILLEGAL_MESSAGE_PROPERTY_KEY,
        False,
    ),
    (
        "property-reserved-tags",
        lambda t: [_msg(t, properties={"TAGS": "x"})],
        d.ILLEGAL_MESSAGE_PROPERTY_KEY,
        False,
    ),
    ("too-many-properties", lambda t: [_with(t, _many_properties)], d.MESSAGE_PROPERTIES_TOO_LARGE, False),
    ("properties-too-large", lambda t: [_with(t, _large_properties)], d.MESSAGE_PROPERTIES_TOO_LARGE, False),
    # tag + keys count towards the 16 KiB too, with or without user properties (docs/protocols.md, 'SendMessage checks')
    (
        "keys-too-large",
        lambda t: [_msg(t, keys=["k" * 9000, "j" * 9000])],
        d.MESSAGE_PROPERTIES_TOO_LARGE,
        False,
    ),
    (
        "keys-too-large-with-property",
        lambda t: [_msg(t, keys=["k" * 9000, "j" * 9000], properties={"a": "b"})],
        d.MESSAGE_PROPERTIES_TOO_LARGE,
        False,
    ),
    ("topic-illegal", lambda t: [_msg("a b")], d.ILLEGAL_TOPIC, False),
    ("topic-system", lambda t: [_msg("TBW102")], d.ILLEGAL_TOPIC, False),
    ("topic-unknown", lambda t: [_msg(unique_name("nosuch"))], d.TOPIC_NOT_FOUND, False),
    ("topics-mixed", lambda t: [_msg(t), _msg(t + "x")], d.MESSAGE_CORRUPTED, False),
    ("queue-id-negative", lambda t: [_msg(t, queue_id=-1)], d.BAD_REQUEST, False),
    ("queue-id-out-of-range", lambda t: [_msg(t, queue_id=QUEUES)], d.BAD_REQUEST, False),
    ("queue-id-out-of-range-explicit", lambda t: [_msg(t, queue_id=QUEUES + 5)], d.BAD_REQUEST, True),
    ("message-group-64-bytes", lambda t: [_msg(t, message_group="g" * 64)], d.ILLEGAL_MESSAGE_GROUP, False),
    ("message-group-blank", lambda t: [_msg(t, message_group="  ")], d.ILLEGAL_MESSAGE_GROUP, False),
    (
        "delivery-time-2-days",
        lambda t: [_msg(t, delivery_ms=int(time.time() * 1000) + 2 * DAY_MS)],
        d.ILLEGAL_DELIVERY_TIME,
        False,
    ),
    # A RocketMQ proxy forwards a request as one remoting batch (each record the body and ~150 bytes of
    # properties); the broker refuses one over 4 MiB (tests/real/conformance.py, send_batch_limit).
    (
        "batch-over-the-brokers-limit",
        lambda t: [_msg(t, body=b"x" * 1000) for _ in range(4200)],
        d.INTERNAL_SERVER_ERROR,
        False,
    ),
    # A request is all or nothing: a valid first message is not stored when a later one is rejected.
    ("second-message-empty-body", lambda t: [_msg(t), _msg(t, body=b"")], d.MESSAGE_BODY_EMPTY, False),
    ("second-message-bad-tag", lambda t: [_msg(t), _msg(t, tag="a|b")], d.ILLEGAL_MESSAGE_TAG, True),
]


@pytest.fixture
def stub(rocketmq_emulator, v2_stub):
    return v2_stub(endpoints_by_broker(rocketmq_emulator)[BROKER])


def _assert_still_serving(stub, topic: str) -> None:
    resp = send(stub, [_msg(topic, tag="TagOK", keys=["k"], properties={"a": "b"})])
    assert resp.status.code == d.OK, resp.status
    assert len(resp.entries) == 1 and resp.entries[0].status.code == d.OK


@pytest.mark.parametrize(("build", "code", "explicit"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rejected_send_has_code_and_stores_nothing(topic, stub, build, code, explicit):
    before = max_offsets(stub, topic, QUEUES)
    resp = send(stub, build(topic), explicit=explicit)
    assert resp.status.code == code, f"{d.Code.Name(resp.status.code)}: {resp.status.message}"
    assert resp.status.message, "a rejection should say why"
    assert not any(e.status.code == d.OK for e in resp.entries), "a rejected request reported an OK entry"
    assert max_offsets(stub, topic, QUEUES) == before, "a rejected request stored messages"
    _assert_still_serving(stub, topic)
    after = max_offsets(stub, topic, QUEUES)
    assert sum(after) == sum(before) + 1


def test_boundary_values_accepted(topic, stub):
    """Just inside the limits: 4 MiB body, 128 properties, 63-byte message group, delivery in 23 h."""
    now = int(time.time() * 1000)
    many = _msg(topic)
    many.user_properties.update({f"p{i}": "v" for i in range(128)})
    for m in (
        _msg(topic, body=b"y" * MAX_BODY),
        many,
        _msg(topic, message_group="g" * 63),
        _msg(topic, delivery_ms=now + 23 * 3600 * 1000),
    ):
        resp = send(stub, [m])
        assert resp.status.code == d.OK, f"{d.Code.Name(resp.status.code)}: {resp.status.message}"


def test_pull_with_negative_queue_id_is_bad_request(topic, stub):
    r = pull_v2(stub, topic, -1, 0)
    assert r.code == d.BAD_REQUEST
    r = pull_v2(stub, topic, QUEUES, 0)
    assert r.code == d.BAD_REQUEST
    _assert_still_serving(stub, topic)


def test_pull_with_illegal_group_or_filter(topic, stub):
    r = pull_v2(stub, topic, 0, 0, group="bad group")
    assert r.code != d.OK
    r = pull_v2(stub, topic, 0, 0, expression="   ||  ")
    assert r.code == d.ILLEGAL_FILTER_EXPRESSION
    _assert_still_serving(stub, topic)


SEND_PATH = "/apache.rocketmq.v2.MessagingService/SendMessage"
CORRUPT_PAYLOADS = {
    "truncated-varint": b"\x0a\xff\xff\xff\xff\x0f",
    "bad-tags": b"\xff\xff\xff\xff",
    "length-past-end": b"\x0a\x05\x08\x01",
    "group-start-tag": b"\x0b",
    # messages[0].topic.name holds invalid UTF-8 in a proto3 string
    "invalid-utf8-string": b"\x0a\x05\x0a\x03\x0a\x01\xff",
}


@pytest.mark.parametrize("payload", list(CORRUPT_PAYLOADS.values()), ids=list(CORRUPT_PAYLOADS))
def test_garbage_bytes_get_grpc_error_and_server_keeps_serving(
    rocketmq_emulator, topic, stub, grpc_channel, payload
):
    before = max_offsets(stub, topic, QUEUES)
    channel = grpc_channel(endpoints_by_broker(rocketmq_emulator)[BROKER])
    raw = channel.unary_unary(SEND_PATH, request_serializer=lambda b: b, response_deserializer=lambda b: b)
    with pytest.raises(grpc.RpcError) as info:
        raw(payload, metadata=CLIENT_MD, timeout=RPC_TIMEOUT_S)
    assert info.value.code() not in (grpc.StatusCode.OK, grpc.StatusCode.DEADLINE_EXCEEDED)
    assert max_offsets(stub, topic, QUEUES) == before
    _assert_still_serving(stub, topic)
    # the same channel keeps working too
    ok = s.SendMessageResponse.FromString(
        raw(s.SendMessageRequest(messages=[_msg(topic)]).SerializeToString(), metadata=CLIENT_MD, timeout=10)
    )
    assert ok.status.code == d.OK


def test_wrong_wire_type_parsed_as_unknown_field_is_rejected_in_band(
    rocketmq_emulator, topic, stub, grpc_channel
):
    """Field 1 (messages) sent as a varint: protobuf keeps it as an unknown field, so the request has no
    message → MESSAGE_CORRUPTED in band (not a crash)."""
    channel = grpc_channel(endpoints_by_broker(rocketmq_emulator)[BROKER])
    raw = channel.unary_unary(SEND_PATH, request_serializer=lambda b: b, response_deserializer=lambda b: b)
    resp = s.SendMessageResponse.FromString(raw(b"\x08\x01", metadata=CLIENT_MD, timeout=RPC_TIMEOUT_S))
    assert resp.status.code == d.MESSAGE_CORRUPTED
    _assert_still_serving(stub, topic)


@pytest.mark.parametrize("rpc", ["SendMessage", "QueryRoute", "PullMessage"])
def test_missing_client_id_is_client_id_required(topic, stub, rpc):
    """The proxy (`GrpcMessagingApplication`) answers a blank x-mq-client-id with the RPC's own response carrying
    CLIENT_ID_REQUIRED (40017), before any other check; nothing is stored."""
    before = max_offsets(stub, topic, QUEUES)
    if rpc == "SendMessage":
        code = stub.SendMessage(
            s.SendMessageRequest(messages=[_msg(topic)]), timeout=RPC_TIMEOUT_S
        ).status.code
    elif rpc == "QueryRoute":
        code = stub.QueryRoute(
            s.QueryRouteRequest(topic=d.Resource(name=topic)), timeout=RPC_TIMEOUT_S
        ).status.code
    else:
        frames = list(
            stub.PullMessage(
                s.PullMessageRequest(
                    group=d.Resource(name="g"),
                    message_queue=d.MessageQueue(topic=d.Resource(name=topic), id=0),
                ),
                timeout=RPC_TIMEOUT_S,
            )
        )
        codes = [f.status.code for f in frames if f.HasField("status")]
        assert len(codes) == 1
        code = codes[0]
    assert code == d.CLIENT_ID_REQUIRED, d.Code.Name(code)
    assert max_offsets(stub, topic, QUEUES) == before
    _assert_still_serving(stub, topic)


@pytest.mark.parametrize(
    ("ids", "present"),
    [
        (["A1", "B2"], True),
        ([" x", "y"], True),
        (["é", "y"], True),
        (["a", None], True),  # nulls are not blank: only the given ids are checked
        (["A1", " "], False),
        (["A1", ""], False),
        (["\u3000", "y"], False),
        (["\t\n", "y"], False),
    ],
)
def test_blank_message_ids_are_found_by_the_columnar_check(ids, present) -> None:
    import pyarrow as pa

    from broker_emulator.core.send_columns import all_present

    assert all_present(pa.array(ids, pa.string())) is present
    assert all_present(pa.array(ids * 50, pa.string()).slice(3)) is present
