"""Unit tests of the writer's Spark-free pieces: input schema checks, row checks and the hand-written
SendMessageRequest encoding (parsed back with the generated classes), request chunking, the FIFO hash and
the driver-side writer hooks. No emulator, no Spark session."""

from __future__ import annotations

import logging
import time

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from connector.clients.grpc_v2_send import (
    QUEUE_FIELD_SIZE,
    GrpcEncodedRows,
    GrpcSendEncoder,
    PlainEncodedRows,
    encode_request,
    proxy_batch_sizes,
    queue_id_field,
    timestamp_bytes,
    varint,
    varint_size,
)
from connector.errors import OptionError, SinkInputError
from connector.options import parse_writer_options
from connector.producer import Producer, TopicRoute, _Request, describe_rows
from connector.queue_selector import LatencyFaultTolerance, QueueSelector, TopicPublishInfo
from connector.queues import MessageQueue
from connector.send_stats import SendStats
from connector.sink_rows import RowChecker
from connector.sink_schema import check_arrow_schema, check_spark_schema
from connector.writer import RocketMQBatchWriter, RocketMQCommitMessage, RocketMQStreamWriter, coalesced
from rocketmq_protocol.grpc_v2 import definition_pb2 as d
from rocketmq_protocol.grpc_v2 import service_pb2 as s
from rocketmq_protocol.hashing import guava_consistent_hash, java_string_hash
from rocketmq_protocol.remoting.properties import encode_properties
from rocketmq_protocol.send_rules import (
    MAX_PROPERTIES_BYTES,
    group_problem,
    key_problem,
    properties_size,
    tag_problem,
)

NOW_MS = 1_800_000_000_000
MAP = pa.map_(pa.string(), pa.string())
TS = pa.timestamp("us", tz="UTC")


class Encoder:
    """The writer's per-row work: RowChecker's checks, then the gRPC client's encoding."""

    def __init__(self, checker: RowChecker, grpc: GrpcSendEncoder) -> None:
        self.checker, self.grpc = checker, grpc

    def encode(self, batch: pa.RecordBatch, row_base: int) -> list[GrpcEncodedRows]:
        return [self.grpc.encode(c) for c in self.checker.check(batch, row_base)]


def encoder(layout: dict[str, str] | None = None, topic: str | None = "T", **kw: object) -> Encoder:
    checker = RowChecker(
        layout or {"body": "body"},
        topic,
        kw.pop("max_message_size", 4 * 1024 * 1024),  # type: ignore[arg-type]
        label="partition 7",
        clock_ms=lambda: NOW_MS,
    )
    return Encoder(checker, GrpcSendEncoder(kw.pop("namespace", ""), born_host="10.0.0.9"))  # type: ignore[arg-type]


def batch(**columns: pa.Array) -> pa.RecordBatch:
    return pa.record_batch(list(columns.values()), names=list(columns))


def layout_of(b: pa.RecordBatch, topic: str | None = "T") -> dict[str, str]:
    return check_arrow_schema(b.schema, topic)


def parse(rows: GrpcEncodedRows, queue_id: int = 3) -> list[d.Message]:
    qf = queue_id_field(queue_id)
    assert len(qf) == QUEUE_FIELD_SIZE
    data = encode_request(
        rows.topic_field, rows.headers, rows.sp_headers, rows.cores, qf, rows.tails, rows.bodies
    )
    assert len(data) == int(rows.sizes.sum())
    assert rows.payload(slice(0, len(rows)), MessageQueue(rows.topic, "b", queue_id)) == data
    return list(s.SendMessageRequest.FromString(data).messages)


# ------------------------------------------------------------------------------------------ wire primitives
@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 16383, 16384, 2**31 - 1, 2**40, -1, -(2**40)])
def test_varint_matches_protobuf(value: int) -> None:
    ts = d.SystemProperties(queue_offset=value).SerializeToString()  # int64 field 14: key 0x70
    assert ts == b"\x70" + varint(value)
    assert varint_size(value) == len(varint(value))


@pytest.mark.parametrize("ms", [0, 1, 999, 1000, NOW_MS, NOW_MS + 7, -1, -1500])
def test_timestamp_bytes_matches_protobuf(ms: int) -> None:
    from google.protobuf import timestamp_pb2

    ts = timestamp_pb2.Timestamp()
    ts.FromMilliseconds(ms)
    assert timestamp_bytes(ms) == ts.SerializeToString()
    assert (
        timestamp_bytes(ms * 1000 + 5, "us")
        == timestamp_pb2.Timestamp(seconds=ts.seconds, nanos=ts.nanos + 5000).SerializeToString()
    )


# ------------------------------------------------------------------------------------------ encoding
def test_every_column_encodes_like_the_generated_classes() -> None:
    b = batch(
        body=pa.array([b"a", b"bb", b"\x00\xff" * 100], pa.binary()),
        tags=pa.array(["TagA", None, "TagC"]),
        keys=pa.array([["k1", "k2"], None, []], pa.list_(pa.string())),
        properties=pa.array([[("p", "1"), ("q", "")], [], None], MAP),
        messageGroup=pa.array([None, "g1", None]),
        deliveryTimestamp=pa.array([None, None, (NOW_MS + 5000) * 1000], TS),
    )
    enc = encoder(layout_of(b), namespace="ns")
    [rows] = enc.encode(b, 40)
    assert rows.rows.tolist() == [40, 41, 42]
    assert rows.groups == [None, "g1", None]
    msgs = parse(rows, queue_id=0)
    assert [m.body for m in msgs] == [b"a", b"bb", b"\x00\xff" * 100]
    for m in msgs:
        assert (m.topic.name, m.topic.resource_namespace) == ("T", "ns")
        sp = m.system_properties
        assert sp.queue_id == 0 and sp.body_encoding == d.IDENTITY and sp.born_host == "10.0.0.9"
        assert sp.born_timestamp.ToMilliseconds() == NOW_MS
        assert len(sp.message_id) == 32 and int(sp.message_id, 16) >= 0
    a, g, dl = (m.system_properties for m in msgs)
    assert (
        a.tag == "TagA"
        and list(a.keys) == ["k1", "k2"]
        and dict(msgs[0].user_properties) == {"p": "1", "q": ""}
    )
    assert (
        a.message_type == d.NORMAL
        and not a.HasField("message_group")
        and not a.HasField("delivery_timestamp")
    )
    assert (
        not g.HasField("tag") and list(g.keys) == [] and g.message_group == "g1" and g.message_type == d.FIFO
    )
    assert dl.message_type == d.DELAY and dl.delivery_timestamp.ToMilliseconds() == NOW_MS + 5000
    assert len({m.system_properties.message_id for m in msgs}) == 3


def proxy_record_size(m: d.Message, stored_topic: str) -> int:
    """The record of a parsed v2 message in the remoting batch Apache's 5.5.0 proxy forwards (20 bytes of
    fixed fields, the body, 2 bytes of properties length, the properties it writes; the client's address
    as long as an IPv6 address can be)."""
    sp = m.system_properties
    props = {
        "RECONSUME_TIME": "0",
        "BORN_TIMESTAMP": str(sp.born_timestamp.ToMilliseconds()),
        "__BORNHOST": "f" * 47,
        "UNIQ_KEY": sp.message_id,
        "PGROUP": stored_topic,
        "TAGS": sp.tag,
        "KEYS": " ".join(sp.keys) if len(sp.keys) else None,
        **dict(m.user_properties),
        "__SHARDINGKEY": sp.message_group if sp.HasField("message_group") else None,
        "TIMER_DELIVER_MS": (
            str(sp.delivery_timestamp.ToMilliseconds()) if sp.HasField("delivery_timestamp") else None
        ),
    }
    return 22 + len(m.body) + len(encode_properties(props).encode())


@pytest.mark.parametrize("namespace", ["", "ns"])
def test_batch_bytes_count_each_message_as_the_proxys_batch_record(namespace: str) -> None:
    """A proxy forwards the request as a remoting batch whose records are larger than the v2 messages, and
    the broker refuses a batch body over 4 MiB: `batch_sizes` is the larger of the two per message (every
    column, and the plain path's bodies of one size and of several)."""
    stored = f"{namespace}%T" if namespace else "T"
    full = batch(
        body=pa.array([b"a", b"bb", b"\x00\xff" * 100, "é".encode() * 900], pa.binary()),
        tags=pa.array(["TagA", None, "TagC", "é"]),
        keys=pa.array([["k1", "k2"], None, [], ["k"]], pa.list_(pa.string())),
        properties=pa.array([[("p", "1"), ("q", "")], [], None, [("é", "ü")]], MAP),
        messageGroup=pa.array([None, "g1", None, None]),
        deliveryTimestamp=pa.array([None, None, (NOW_MS + 5000) * 1000, None], TS),
    )
    string_keys = batch(body=pa.array([b"x" * 10, b"y"]), keys=pa.array(["order-1", None]))
    one_size = batch(body=pa.array([b"z" * 300] * 3))
    several = batch(body=pa.array([b"z" * 30, b"z" * 3000]))
    for b in (full, string_keys, one_size, several):
        [rows] = encoder(layout_of(b), namespace=namespace).encode(b, 0)
        data = rows.payload(slice(0, len(rows)), MessageQueue("T", "b", 3))
        msgs = s.SendMessageRequest.FromString(data).messages
        expected = [proxy_record_size(m, stored) for m in msgs]
        assert proxy_batch_sizes(rows.checked, stored).tolist() == expected
        assert rows.batch_sizes.tolist() == np.maximum(rows.sizes, expected).tolist()
        assert (rows.batch_sizes > rows.sizes).any()


def test_requests_are_cut_at_batch_bytes_of_batch_sizes() -> None:
    """The producer cuts requests by `batch_sizes` (here larger than the v2 encoding), not by `sizes`."""
    b = batch(body=pa.array([b"%08d" % i for i in range(100)]))
    [rows] = encoder(layout_of(b)).encode(b, 0)
    per = int(rows.batch_sizes[0])
    assert (rows.batch_sizes == per).all() and per > int(rows.sizes.max())
    p = _producer(batchBytes=str(10 * per))
    queue = MessageQueue("T", "b", 0)
    selector = QueueSelector(TopicPublishInfo((queue,)), False, tolerance=LatencyFaultTolerance())
    route = TopicRoute("T", (queue,), {"b": "127.0.0.1:1"}, selector, 0.0)
    requests = list(p._requests(rows, route))
    assert [(r.idx.start, r.idx.stop) for r in requests] == [(i, i + 10) for i in range(0, 100, 10)]
    assert [r.nbytes for r in requests] == [int(rows.sizes[i : i + 10].sum()) for i in range(0, 100, 10)]


def test_string_body_and_string_keys() -> None:
    b = batch(body=pa.array(["héllo", "x"]), keys=pa.array(["order-1", None]))
    [rows] = encoder(layout_of(b)).encode(b, 0)
    msgs = parse(rows)
    assert [m.body for m in msgs] == ["héllo".encode(), b"x"]
    assert [list(m.system_properties.keys) for m in msgs] == [["order-1"], []]


def test_message_ids_are_unique_across_batches() -> None:
    enc = encoder()
    b = batch(body=pa.array([b"x"] * 1000, pa.binary()))
    ids = [m.system_properties.message_id for _ in range(3) for m in parse(enc.encode(b, 0)[0])]
    assert len(set(ids)) == 3000 and all(i == i.upper() for i in ids)
    other = [m.system_properties.message_id for m in parse(encoder().encode(b, 0)[0])]
    assert not set(other) & set(ids)


def test_large_queue_ids_and_bodies_reencode_their_headers() -> None:
    route = type("R", (), {})()
    big = b"y" * 20_000  # length varints of 3 bytes
    b = batch(body=pa.array([b"x", big], pa.binary()))
    [rows] = encoder().encode(b, 0)
    req = _Request(route, rows, slice(0, 2), int(rows.sizes.sum()))  # type: ignore[arg-type]
    for qid in (0, 127, 128, 5000):
        msgs = s.SendMessageRequest.FromString(req.payload(MessageQueue("T", "b", qid))).messages
        assert [m.system_properties.queue_id for m in msgs] == [qid, qid]
        assert [m.body for m in msgs] == [b"x", big]
    sub = req.subset([1])
    assert [
        m.body for m in s.SendMessageRequest.FromString(sub.payload(MessageQueue("T", "b", 200))).messages
    ] == [big]


@pytest.mark.parametrize("size", [1, 100, 200, 20_000])
@pytest.mark.parametrize("typ", [pa.binary(), pa.string(), pa.large_binary()])
def test_bodies_of_one_size_encode_like_the_fragments(size: int, typ: pa.DataType) -> None:
    """Bodies of one size take the 2-D path; its bytes are the per-message fragments' joined, for a
    slice of an input batch (non-zero Arrow offsets), every queue id and any subset of rows."""
    route = type("R", (), {})()
    bodies = pa.array([(b"%07d" % i + b"z" * size)[-size:] for i in range(50)], pa.binary()).cast(typ)
    assert isinstance(encoder().encode(batch(body=bodies), 0)[0], PlainEncodedRows)
    b = batch(body=bodies).slice(7, 30)
    [rows] = encoder().encode(b, 0)
    msgs = parse(rows)  # asserts the payload equals the fragments' bytes
    assert [m.body for m in msgs] == [x.as_py().encode() if typ == pa.string() else x.as_py() for x in b[0]]
    req = _Request(route, rows, slice(3, 20), int(rows.sizes[3:20].sum()))  # type: ignore[arg-type]
    for qid in (5, 0, 127, 128, 0):  # retries on other queues, queue 0 among them
        q = MessageQueue("T", "b", qid)
        picked = req.subset([2, 9])  # encoded while the rows still hold the previous attempt's queue id
        got = s.SendMessageRequest.FromString(picked.payload(q)).messages
        assert [m.body for m in got] == [msgs[5].body, msgs[12].body]
        assert {m.system_properties.queue_id for m in got} == {qid}
        assert req.payload(q) == rows.fragments.payload(slice(3, 20), q)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.binary(min_size=1, max_size=300),
            st.one_of(
                st.none(),
                st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zs")), min_size=1).filter(
                    lambda t: "|" not in t
                ),
            ),
            st.dictionaries(
                st.text("abcXYZ_", min_size=1, max_size=8),
                st.text(max_size=20).map(lambda v: "".join(c for c in v if c.isprintable())),
                max_size=3,
            ),
        ),
        min_size=1,
        max_size=30,
    )
)
def test_random_rows_round_trip(data: list[tuple[bytes, str | None, dict[str, str]]]) -> None:
    b = batch(
        body=pa.array([x[0] for x in data], pa.binary()),
        tags=pa.array([x[1] for x in data], pa.string()),
        properties=pa.array([list(x[2].items()) for x in data], MAP),
    )
    [rows] = encoder(layout_of(b)).encode(b, 0)
    msgs = parse(rows, queue_id=5)
    for m, (body, tag, props) in zip(msgs, data, strict=True):
        assert m.body == body
        assert (m.system_properties.tag if m.system_properties.HasField("tag") else None) == tag
        assert dict(m.user_properties) == props
        assert m.system_properties.queue_id == 5


def test_topic_column_splits_rows_by_topic() -> None:
    b = batch(body=pa.array([b"1", b"2", b"3", b"4"], pa.binary()), topic=pa.array(["A", "B", "A", "B"]))
    parts = encoder(layout_of(b, None), topic=None).encode(b, 10)
    assert {p.topic: p.rows.tolist() for p in parts} == {"A": [10, 12], "B": [11, 13]}
    for p in parts:
        assert {m.topic.name for m in parse(p)} == {p.topic}
    # the topic option overrides the column
    [only] = encoder(layout_of(b, "C"), topic="C").encode(b, 0)
    assert only.topic == "C" and len(only) == 4


# ------------------------------------------------------------------------------------------ bad rows
def _bad(b: pa.RecordBatch, topic: str | None = "T", **kw: object) -> str:
    with pytest.raises(SinkInputError) as e:
        encoder(layout_of(b, topic), topic=topic, **kw).encode(b, 100)
    return str(e.value)


BIN = pa.binary()


@pytest.mark.parametrize(
    ("columns", "row", "problem"),
    [
        ({"body": pa.array([b"a", None], BIN)}, 101, "body is null"),
        ({"body": pa.array([b"a", b"b", b""], BIN)}, 102, "body is empty"),
        ({"tags": pa.array(["ok", "a|b"])}, 101, "tag 'a|b' contains '|'"),
        ({"tags": pa.array(["  ", "ok"])}, 100, "tag '  ' is blank"),
        ({"tags": pa.array(["ok", "a\nb"])}, 101, "contains control characters"),
        ({"keys": pa.array(["k", " "])}, 101, "key ' ' is blank"),
        ({"keys": pa.array([["k"], ["a", None]], pa.list_(pa.string()))}, 101, "keys[1] is null"),
        (
            {"keys": pa.array([["k"], ["a", "\x01"]], pa.list_(pa.string()))},
            101,
            "key '\\x01' contains control",
        ),
        ({"properties": pa.array([[("TAGS", "x")], []], MAP)}, 100, "property name 'TAGS' is a reserved"),
        ({"properties": pa.array([[], [("a", None)]], MAP)}, 101, "property 'a' has a null value"),
        ({"properties": pa.array([[], [("", "v")]], MAP)}, 101, "property name '' is empty"),
        (
            {"properties": pa.array([[], [(f"k{i}", "v") for i in range(129)]], MAP)},
            101,
            "129 properties exceed",
        ),
        ({"properties": pa.array([[("big", "v" * 17000)], []], MAP)}, 100, "exceed the limit of 16384"),
        # the 16 KiB rule counts tag and keys also in rows without properties, and without the column
        (
            {"tags": pa.array(["ok", "t" * 9000]), "keys": pa.array([None, "k" * 8000])},
            101,
            "tag, keys and properties of 17000 characters exceed the limit of 16384",
        ),
        ({"tags": pa.array(["t" * 16385, "ok"])}, 100, "of 16385 characters exceed the limit of 16384"),
        (
            {
                "keys": pa.array([["a"], ["k" * 9000, "k" * 7400]], pa.list_(pa.string())),
                "properties": pa.array([[("p", "1")], []], MAP),
            },
            101,
            "of 16400 characters",
        ),
        ({"messageGroup": pa.array(["g", "x" * 64])}, 101, "is 64 bytes long (the limit is 63)"),
        (
            {"messageGroup": pa.array(["g", None]), "deliveryTimestamp": pa.array([NOW_MS * 1000, None], TS)},
            100,
            "a FIFO message cannot be delayed",
        ),
        (
            {"deliveryTimestamp": pa.array([None, (NOW_MS + 2 * 86_400_000) * 1000], TS)},
            101,
            "more than 1 day ahead",
        ),
    ],
)
def test_bad_rows_name_the_row_and_the_problem(columns: dict[str, pa.Array], row: int, problem: str) -> None:
    n = len(next(iter(columns.values())))
    cols = {"body": pa.array([b"x"] * n, BIN), **columns}
    msg = _bad(batch(**cols))
    assert f"bad row {row} (0-based) of partition 7" in msg and problem in msg, msg


@pytest.mark.parametrize(
    ("tags", "keys", "props"),
    [
        ("t" * 16384, None, None),
        ("t" * 8000, ["k" * 8000, "é" * 384], None),
        (None, None, [("a", "b" * 16383)]),
    ],
)
def test_the_16_kib_rule_accepts_up_to_the_limit(tags, keys, props) -> None:
    b = batch(
        body=pa.array([b"x"], BIN),
        tags=pa.array([tags], pa.string()),
        keys=pa.array([keys], pa.list_(pa.string())),
        properties=pa.array([props], MAP),
    )
    assert properties_size(tags, keys or [], props or []) == MAX_PROPERTIES_BYTES
    [rows] = encoder(layout_of(b)).encode(b, 0)
    assert len(parse(rows)) == 1


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.integers(1, 9000)),
            st.lists(st.integers(1, 6000), max_size=3),
            st.lists(st.integers(0, 6000), max_size=2),
        ),
        min_size=1,
        max_size=6,
    ),
    st.booleans(),
)
def test_the_16_kib_rule_is_send_rules_properties_size(rows: list, with_props_column: bool) -> None:
    """Column-wise, the writer refuses exactly the rows `send_rules.properties_size` puts over the limit."""
    tags = [None if t is None else "t" * t for t, _, _ in rows]
    keys = [[f"{i}" + "k" * (n - 1) for i, n in enumerate(ks)] for _, ks, _ in rows]
    props = [[(f"p{i}", "v" * n) for i, n in enumerate(ps)] if with_props_column else [] for _, _, ps in rows]
    cols = {
        "body": pa.array([b"x"] * len(rows), BIN),
        "tags": pa.array(tags, pa.string()),
        "keys": pa.array(keys, pa.list_(pa.string())),
    }
    if with_props_column:
        cols["properties"] = pa.array(props, MAP)
    b = batch(**cols)
    over = [
        i
        for i, r in enumerate(zip(tags, keys, props, strict=True))
        if properties_size(*r) > MAX_PROPERTIES_BYTES
    ]
    if not over:
        encoder(layout_of(b)).encode(b, 0)
        return
    with pytest.raises(SinkInputError, match=rf"bad row {over[0]} \(0-based\).* characters exceed the limit"):
        encoder(layout_of(b)).encode(b, 0)


@pytest.mark.parametrize(
    ("column", "value", "rule"),
    [
        ("tags", "a|b", tag_problem),
        ("tags", " ", tag_problem),
        ("tags", "a\x85b", tag_problem),
        ("keys", "\t", key_problem),
        ("messageGroup", "g" * 70, group_problem),
        ("messageGroup", "\u3000", group_problem),
    ],
)
def test_row_problems_are_the_send_rules_phrases(column: str, value: str, rule) -> None:
    b = batch(body=pa.array([b"x"], BIN), **{column: pa.array([value])})
    what = {"tags": "tag", "keys": "key", "messageGroup": "messageGroup"}[column]
    assert f"{what} {value!r} {rule(value)}" in _bad(b)


def test_body_larger_than_max_message_size() -> None:
    big = b"z" * (4 * 1024 * 1024 + 1)
    msg = _bad(batch(body=pa.array([b"a", big], BIN)))
    assert "bad row 101" in msg and "body of 4194305 bytes exceeds maxMessageSize=4194304" in msg
    msg = _bad(batch(body=pa.array([b"abc"], BIN)), max_message_size=2)
    assert "body of 3 bytes exceeds maxMessageSize=2" in msg


def test_bad_topic_values() -> None:
    b = batch(body=pa.array([b"a", b"b"], BIN), topic=pa.array(["ok", None]))
    assert "bad row 101" in (m := _bad(b, None)) and "topic is null" in m
    b = batch(body=pa.array([b"a", b"b"], BIN), topic=pa.array(["ok", "no spaces"]))
    assert "bad row 101" in (m := _bad(b, None)) and "'no spaces' is not a valid topic name" in m


# ------------------------------------------------------------------------------------------ schema
def spark_schema(*fields: tuple[str, object]) -> StructType:
    return StructType([StructField(n, t) for n, t in fields])  # type: ignore[arg-type]


def test_spark_schema_accepts_every_column() -> None:
    schema = spark_schema(
        ("BODY", BinaryType()),
        ("topic", StringType()),
        ("tags", StringType()),
        ("keys", ArrayType(StringType())),
        ("properties", MapType(StringType(), StringType())),
        ("messagegroup", StringType()),
        ("deliveryTimestamp", TimestampType()),
    )
    layout = check_spark_schema(schema, None)
    assert layout["body"] == "BODY" and layout["messageGroup"] == "messagegroup" and len(layout) == 7
    assert (
        check_spark_schema(spark_schema(("body", StringType()), ("keys", StringType())), "T")["keys"]
        == "keys"
    )


@pytest.mark.parametrize(
    ("fields", "topic", "expected"),
    [
        (
            (("body", BinaryType()), ("value", StringType()), ("extra", IntegerType())),
            "T",
            "unknown columns 'value', 'extra'",
        ),
        ((("body", IntegerType()),), "T", "column 'body' has type int; expected binary or string"),
        (
            (("body", BinaryType()), ("tags", IntegerType())),
            "T",
            "column 'tags' has type int; expected string",
        ),
        ((("body", BinaryType()), ("keys", ArrayType(IntegerType()))), "T", "'keys' has type array<int>"),
        (
            (("body", BinaryType()), ("properties", MapType(StringType(), IntegerType()))),
            "T",
            "expected map<string,string>",
        ),
        ((("body", BinaryType()), ("deliveryTimestamp", StringType())), "T", "expected timestamp"),
        ((("tags", StringType()),), "T", "required column 'body'"),
        ((("body", BinaryType()),), None, "set option 'topic' or give the DataFrame a string column 'topic'"),
        ((("body", BinaryType()), ("Body", BinaryType())), "T", "both map to 'body'"),
    ],
)
def test_spark_schema_errors_name_the_column(fields: tuple, topic: str | None, expected: str) -> None:
    with pytest.raises(SinkInputError, match="rocketmq sink") as e:
        check_spark_schema(spark_schema(*fields), topic)
    assert expected in str(e.value)


def test_arrow_schema_check() -> None:
    with pytest.raises(SinkInputError, match="column 'tags' has type int64"):
        check_arrow_schema(pa.schema([("body", pa.binary()), ("tags", pa.int64())]), "T")
    ok = pa.schema([("body", pa.large_binary()), ("keys", pa.list_(pa.string())), ("deliveryTimestamp", TS)])
    assert check_arrow_schema(ok, "T") == {
        "body": "body",
        "keys": "keys",
        "deliveryTimestamp": "deliveryTimestamp",
    }


# ------------------------------------------------------------------------------------------ requests
def _producer(**opts: str) -> Producer:
    options = parse_writer_options({"endpoints": "127.0.0.1:1", "topic": "T", **opts})
    return Producer(options, client=object())  # type: ignore[arg-type]


def test_chunks_respect_batch_size_and_bytes() -> None:
    p = _producer(batchSize="3", batchBytes="100")
    sizes = np.array([10, 10, 10, 10, 60, 60, 200, 5])
    assert list(p._chunks(sizes)) == [(0, 3), (3, 5), (5, 6), (6, 7), (7, 8)]
    assert list(_producer()._chunks(np.full(17000, 100))) == [(0, 8192), (8192, 16384), (16384, 17000)]


def test_describe_rows() -> None:
    assert describe_rows(np.array([7])) == "row 7"
    assert describe_rows(np.arange(3, 9)) == "rows 3..8"
    assert describe_rows(np.array([3, 9, 4])) == "3 rows from 3 to 9"


@pytest.mark.parametrize(
    ("group", "java_hash", "queues"),
    [
        # vectors checked in Java (Java String.hashCode; Guava consistentHash over 4/8/16 buckets)
        ("order-1", -1207111310, (3, 3, 3)),
        ("order-2", None, (2, 2, 11)),
        ("user42", None, (1, 1, 1)),
        ("TagA", 2598919, None),
        ("", 0, None),
    ],
)
def test_fifo_hash_matches_the_proxy(group: str, java_hash: int | None, queues) -> None:
    if java_hash is not None:
        assert java_string_hash(group) == java_hash
    if queues is not None:
        assert tuple(guava_consistent_hash(java_string_hash(group), b) for b in (4, 8, 16)) == queues


def test_stats_merge() -> None:
    a = SendStats(messages=3, per_queue={"T/a/0": 3}, isolations={"a": 1})
    a.merge(SendStats(messages=2, retries=1, per_queue={"T/a/0": 1, "T/b/1": 1}))
    assert (a.messages, a.retries, a.per_queue, a.isolations) == (5, 1, {"T/a/0": 4, "T/b/1": 1}, {"a": 1})


# ------------------------------------------------------------------------------------------ driver hooks
SCHEMA = spark_schema(("body", BinaryType()))


def test_writer_checks_options_and_schema_on_the_driver() -> None:
    with pytest.raises(OptionError, match="options 'nameServer' and 'endpoints'"):
        RocketMQBatchWriter({"topic": "T"}, SCHEMA, False)
    with pytest.raises(OptionError, match="batchSize"):
        RocketMQBatchWriter({"endpoints": "h:1", "topic": "T", "batchsize": "0"}, SCHEMA, False)
    with pytest.raises(SinkInputError, match="unknown column 'x'"):
        RocketMQStreamWriter(
            {"endpoints": "h:1", "topic": "T"},
            spark_schema(("body", BinaryType()), ("x", StringType())),
            False,
        )
    with pytest.raises(SinkInputError, match="mode 'overwrite' is not supported"):
        RocketMQBatchWriter({"endpoints": "h:1", "topic": "T"}, SCHEMA, True)
    assert RocketMQStreamWriter(
        {"endpoints": "h:1", "topic": "T"}, SCHEMA, True
    ).overwrite  # complete mode appends


def test_commit_and_abort_log_the_counts(caplog: pytest.LogCaptureFixture) -> None:
    w = RocketMQStreamWriter({"endpoints": "h:1", "topic": "T"}, SCHEMA, False)
    m1 = RocketMQCommitMessage(
        0,
        3,
        0.1,
        SendStats(messages=3, requests=1, per_broker={"broker-a": 3}, per_queue={"T/broker-a/1": 3}),
    )
    m2 = RocketMQCommitMessage(
        1,
        2,
        0.1,
        SendStats(
            messages=2,
            requests=1,
            retries=1,
            isolations={"broker-b": 1},
            per_broker={"broker-a": 2},
            per_queue={"T/broker-a/2": 2},
        ),
    )
    with caplog.at_level(logging.INFO, logger="connector.writer"):
        w.commit([m1, m2], 17)
        w.abort([m1, None], 18)
        RocketMQBatchWriter({"endpoints": "h:1", "topic": "T"}, SCHEMA, False).abort([None, m2])
    text = caplog.text
    assert "micro-batch 17 committed, 2 tasks: 5 messages" in text and "1 retries" in text
    assert "{'broker-b': 1}" in text and "T/broker-a/1=3, T/broker-a/2=2" in text
    assert (
        "micro-batch 18 aborted, 1 of 2 tasks failed; the 1 tasks that succeeded had sent 3 messages" in text
    )
    assert "write aborted, 1 of 2 tasks failed" in text


def test_commit_message_pickles() -> None:
    import pickle

    m = RocketMQCommitMessage(4, 10, 0.5, SendStats(messages=10, per_queue={"T/a/0": 10}))
    assert pickle.loads(pickle.dumps(m)) == m


def test_clock_is_wall_time_by_default() -> None:
    b = batch(body=pa.array([b"x"], BIN))
    [checked] = RowChecker({"body": "body"}, "T", 100).check(b, 0)
    [m] = parse(GrpcSendEncoder().encode(checked))
    assert abs(m.system_properties.born_timestamp.ToMilliseconds() - time.time() * 1000) < 60_000


def test_input_batches_are_joined_into_larger_ones_in_order() -> None:
    batches = [
        pa.record_batch([pa.array([b"%d-%d" % (i, j) for j in range(n)])], names=["body"])
        for i, n in enumerate([3, 4, 2, 9, 1, 1])
    ]
    out = list(coalesced(iter(batches), max_rows=6, max_bytes=1 << 30))
    assert [b.num_rows for b in out] == [7, 11, 2]  # 3+4, 2+9, then the rest
    assert out[1].schema == batches[0].schema
    joined = [v for b in out for v in b.column(0).to_pylist()]
    assert joined == [v for b in batches for v in b.column(0).to_pylist()]
    big = pa.record_batch([pa.array([b"x"] * 10)], names=["body"])
    assert next(coalesced(iter([big]), max_rows=6, max_bytes=1 << 30)) is big  # passes through uncopied
    by_bytes = list(coalesced(iter(batches), max_rows=1000, max_bytes=batches[0].nbytes + 1))
    assert [b.num_rows for b in by_bytes] == [7, 11, 2]
    assert list(coalesced(iter([]), max_rows=6, max_bytes=1)) == []
