"""The executor side of a read without Spark: Arrow conversion to the exact schema Spark checks, and
`read_partition` against the emulator (exact ends, bounded chunks, filtered gaps, both pull protocols,
data loss below the queue's min offset and a queue shorter than planned)."""

from __future__ import annotations

import pickle
import threading
from collections.abc import Iterator

import grpc
import pyarrow as pa
import pytest
from pyspark.sql.datasource import InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StringType, StructField, StructType

from broker_emulator import Emulator
from connector import read_task
from connector.clients import get_client
from connector.config import ClientConfig, FilterSpec
from connector.errors import DataLossError, OptionError
from connector.queues import MessageQueue, OffsetRange, RouteEntry
from connector.read_task import RangePartition, read_partition
from connector.schema import ARROW_SCHEMA, SCHEMA, check_user_schema, to_record_batches
from rocketmq_protocol.grpc_v2 import service_pb2_grpc as sg
from rocketmq_protocol.message_schema import MESSAGE_SCHEMA
from tests.support.helpers import endpoints_by_broker, send_to_queue, unique_name
from tests.support.targets import client_config, target_of

BROKER = "broker-a"


# ------------------------------------------------------------------------------------------ schema
def test_arrow_schema_is_what_spark_expects() -> None:
    assert ARROW_SCHEMA.equals(to_arrow_schema(SCHEMA, timezone="UTC"))
    assert ARROW_SCHEMA.field("bornTimestamp").type == pa.timestamp("us", tz="UTC")
    entries = ARROW_SCHEMA.field("properties").type
    assert not entries.key_field.nullable


def test_each_batch_names_its_own_queue_when_one_worker_reads_several() -> None:
    """The topic, brokerName and queueId columns are made once per queue and sliced for smaller batches:
    every batch, full or not, names its own queue, also after the IPC stream Spark's serializer writes."""
    for topic, broker, qid, rows in [("t", "b", 0, 10000), ("t2", "broker-c", 5, 300), ("t", "b", 0, 20)]:
        batches = to_record_batches(_stored_rows(0, rows), topic, broker, qid)
        assert [b.num_rows for b in batches] == ([8192, rows - 8192] if rows > 8192 else [rows])
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, ARROW_SCHEMA) as w:
            for b in batches:
                w.write_batch(b)
        for b in [*batches, *pa.ipc.open_stream(sink.getvalue())]:
            names = b.select(["topic", "brokerName", "queueId"]).to_pylist()
            assert {tuple(r.values()) for r in names} == {(topic, broker, qid)}


def test_conversion_fills_absent_lists_and_maps_and_keeps_null_timestamps() -> None:
    wire = pa.table(
        {
            "queue_offset": pa.array([7, 8], pa.int64()),
            "message_id": ["a", "b"],
            "tag": ["T", None],
            "keys": pa.array([["k"], None], pa.list_(pa.string())),
            "body": [b"x", b"y"],
            "properties": pa.array([[("p", "1")], None], pa.map_(pa.string(), pa.string())),
            "born_timestamp": pa.array([1_700_000_000_123, None], pa.timestamp("ms")),
            "store_timestamp": pa.array([1_700_000_000_456, 1_700_000_000_789], pa.timestamp("ms")),
            "born_host": ["h", None],
            "reconsume_times": pa.array([0, None], pa.int32()),
            "message_group": [None, "g"],
            "delivery_timestamp": pa.array([None, 1_700_000_001_000], pa.timestamp("ms")),
            "message_type": pa.array([1, 2], pa.int8()),
            "tag_code": pa.array([84, 0], pa.int32()),
        },
        schema=MESSAGE_SCHEMA,
    )
    (batch,) = to_record_batches(wire, "t", "broker-b", 3)
    assert batch.schema.equals(ARROW_SCHEMA)
    rows = batch.to_pylist()
    assert [r["queueOffset"] for r in rows] == [7, 8]
    assert {(r["topic"], r["brokerName"], r["queueId"]) for r in rows} == {("t", "broker-b", 3)}
    assert rows[1]["keys"] == [] and rows[1]["properties"] == [] and rows[1]["reconsumeTimes"] == 0
    assert rows[0]["properties"] == [("p", "1")]
    assert rows[0]["deliveryTimestamp"] is None and rows[1]["bornTimestamp"] is None
    assert rows[0]["bornTimestamp"].timestamp() == 1_700_000_000.123
    assert to_record_batches(MESSAGE_SCHEMA.empty_table(), "t", "b", 0) == []


def test_conversion_relabels_keys_and_properties_and_types_whole_null_columns() -> None:
    """keys and properties reach Spark in the pulled buffers (relabelled, not copied); a null inside either
    still converts; a column of nulls only is typed without a cast."""
    n = 3
    keys = pa.array([["k1", "k2"], [], ["k3"]], pa.list_(pa.string()))
    props = pa.array([[("p", "1")], [("q", "2")], []], pa.map_(pa.string(), pa.string()))
    wire = pa.table(
        {
            "queue_offset": pa.array(range(n), pa.int64()),
            "message_id": pa.nulls(n, pa.string()),
            "tag": pa.nulls(n, pa.string()),
            "keys": keys,
            "body": [b"x"] * n,
            "properties": props,
            "born_timestamp": pa.array([1_000, 2_000, 3_000], pa.timestamp("ms")),
            "store_timestamp": pa.nulls(n, pa.timestamp("ms")),
            "born_host": pa.nulls(n, pa.string()),
            "reconsume_times": pa.array([1, 2, 3], pa.int32()),
            "message_group": pa.nulls(n, pa.string()),
            "delivery_timestamp": pa.nulls(n, pa.timestamp("ms")),
            "message_type": pa.array([1] * n, pa.int8()),
            "tag_code": pa.array([0] * n, pa.int32()),
        },
        schema=MESSAGE_SCHEMA,
    )
    (batch,) = to_record_batches(wire, "t", "b", 0)
    assert batch.schema.equals(ARROW_SCHEMA)
    for name, pulled in (("keys", keys), ("properties", props)):
        out = batch.column(name)
        assert [b.address for b in out.buffers() if b] == [b.address for b in pulled.buffers() if b]
    assert batch.column("bornTimestamp").to_pylist()[2].timestamp() == 3.0
    assert batch.column("storeTimestamp").null_count == n == batch.column("deliveryTimestamp").null_count
    assert batch.column("reconsumeTimes").to_pylist() == [1, 2, 3]

    with_null = wire.set_column(
        wire.schema.get_field_index("keys"), "keys", pa.array([["a", None], [], None], pa.list_(pa.string()))
    )
    (batch,) = to_record_batches(with_null, "t", "b", 0)
    assert batch.column("keys").to_pylist() == [["a", None], [], []]


def test_user_schema_check() -> None:
    check_user_schema(SCHEMA)
    check_user_schema(None)
    with pytest.raises(OptionError, match="fixed schema"):
        check_user_schema(StructType([StructField("body", StringType())]))


# ------------------------------------------------------------------------------------------ read
def _config(rocketmq_emulator, pull_protocol: str) -> ClientConfig:
    """gRPC with a pull protocol (`auto`, `bulk`, `standard`), or `remoting` (the emulator's name server)."""
    if pull_protocol == "remoting":
        return client_config(target_of(rocketmq_emulator, "remoting"))
    return ClientConfig(rocketmq_emulator.endpoints, pull_protocol=pull_protocol)


def _queue(
    rocketmq_emulator, topic: str, queue_id: int = 0, broker: str = BROKER, pull_protocol: str = "auto"
) -> RouteEntry:
    if pull_protocol == "remoting":
        route = get_client(_config(rocketmq_emulator, pull_protocol)).route(topic)
        return next(e for e in route if e.broker == broker and e.queue_id == queue_id)
    return RouteEntry(MessageQueue(topic, broker, queue_id), endpoints_by_broker(rocketmq_emulator)[broker])


def _partition(rocketmq_emulator, ranges: list[tuple[RouteEntry, int, int]], **kw) -> RangePartition:
    """A partition of `(route entry, start, end)` ranges; `pull_protocol` (or `remoting`) picks the client."""
    args = {
        "config": _config(rocketmq_emulator, kw.pop("pull_protocol", "auto")),
        "group": "reader-task-test",
        "filter": FilterSpec(),
        "ranges": tuple(OffsetRange(e.queue, start, end) for e, start, end in ranges),
        "routes": tuple(dict.fromkeys(e for e, _, _ in ranges)),
        "pull_batch_size": 3,
        "pull_timeout_ms": 5000,
        "fail_on_data_loss": True,
    }
    args.update(kw)
    return RangePartition(**args)


def _offsets(batches: Iterator[pa.RecordBatch]) -> list[int]:
    out = []
    for b in batches:
        assert b.schema.equals(ARROW_SCHEMA)
        out.extend(b.column("queueOffset").to_pylist())
    return out


@pytest.fixture
def filled(rocketmq_emulator, topic) -> str:
    with grpc.insecure_channel(endpoints_by_broker(rocketmq_emulator)[BROKER]) as ch:
        tags = ["TagA" if i % 4 == 0 else "TagB" for i in range(20)]
        send_to_queue(sg.MessagingServiceStub(ch), topic, 0, 20, tags=tags)
    return topic


PULLS = ["bulk", "standard", "remoting"]


@pytest.mark.parametrize("protocol", PULLS)
def test_reads_exactly_the_range_in_bounded_chunks(rocketmq_emulator, filled: str, protocol: str) -> None:
    q = _queue(rocketmq_emulator, filled, pull_protocol=protocol)
    p = _partition(rocketmq_emulator, [(q, 2, 13)], pull_protocol=protocol)
    batches = list(read_partition(p))
    assert all(b.num_rows <= 3 for b in batches)
    assert _offsets(iter(batches)) == list(range(2, 13))


@pytest.mark.parametrize("protocol", ["auto", "remoting"])
def test_filtered_gaps_are_not_data_loss_and_the_end_is_exact(
    rocketmq_emulator, filled: str, protocol: str
) -> None:
    q = _queue(rocketmq_emulator, filled, pull_protocol=protocol)
    tag_a = FilterSpec("tag", "TagA")
    p = _partition(rocketmq_emulator, [(q, 1, 17)], filter=tag_a, pull_batch_size=2, pull_protocol=protocol)
    assert _offsets(read_partition(p)) == [4, 8, 12, 16]
    p = _partition(rocketmq_emulator, [(q, 1, 16)], filter=tag_a, pull_batch_size=50, pull_protocol=protocol)
    assert _offsets(read_partition(p)) == [4, 8, 12]


@pytest.mark.parametrize("protocol", ["auto", "remoting"])
def test_several_ranges_in_order_and_empty_partitions(rocketmq_emulator, filled: str, protocol: str) -> None:
    q = _queue(rocketmq_emulator, filled, pull_protocol=protocol)
    p = _partition(rocketmq_emulator, [(q, 15, 18), (q, 0, 2)], pull_protocol=protocol)
    assert _offsets(read_partition(p)) == [15, 16, 17, 0, 1]
    assert list(read_partition(InputPartition(None))) == []
    assert pickle.loads(pickle.dumps(p)) == p


@pytest.mark.parametrize("protocol", ["auto", "remoting"])
def test_the_next_ranges_first_pull_is_in_flight_while_a_range_ends(
    rocketmq_emulator, filled: str, protocol: str, monkeypatch
) -> None:
    """A partition of several queues does not wait a round trip at each: once a range's last pull is in,
    the next range's first pull goes out before the caller has taken that range's rows."""
    q = _queue(rocketmq_emulator, filled, pull_protocol=protocol)
    p = _partition(rocketmq_emulator, [(q, 0, 3), (q, 10, 13)], pull_protocol=protocol)
    client = get_client(p.config)
    pulled: list[int] = []
    done = threading.Event()

    class Recording:
        def __getattr__(self, name: str):
            return getattr(client, name)

        def pull(self, entry, offset, *args, **kw):
            res = client.pull(entry, offset, *args, **kw)
            pulled.append(offset)
            if len(pulled) == 2:
                done.set()
            return res

    monkeypatch.setattr(read_task, "get_client", lambda config: Recording())
    batches = read_partition(p)
    first = next(batches)  # the first range's only pull, converted: the caller holds its rows
    assert done.wait(10), f"pulls made while the caller held the first range's rows: {pulled}"
    assert pulled == [0, 10]
    assert first.column("queueOffset").to_pylist() == [0, 1, 2]
    assert _offsets(batches) == [10, 11, 12]


@pytest.mark.parametrize("protocol", ["auto", "remoting"])
def test_a_queue_shorter_than_planned_is_data_loss(rocketmq_emulator, filled: str, protocol: str) -> None:
    q = _queue(rocketmq_emulator, filled, pull_protocol=protocol)
    with pytest.raises(DataLossError, match=r"ends at offset 20 but the planned range is \[18, 25\)"):
        list(read_partition(_partition(rocketmq_emulator, [(q, 18, 25)], pull_protocol=protocol)))
    p = _partition(rocketmq_emulator, [(q, 18, 25)], fail_on_data_loss=False, pull_protocol=protocol)
    assert _offsets(read_partition(p)) == [18, 19]


@pytest.mark.parametrize("protocol", ["auto", "remoting"])
def test_retention_gap_fails_or_skips_to_the_earliest_available(protocol: str) -> None:
    with Emulator(brokers=1, queues=1, retention_messages=10) as emu:
        topic = unique_name("ret")
        emu.create_topic(topic)
        with grpc.insecure_channel(_queue(emu, topic).endpoint) as ch:
            send_to_queue(sg.MessagingServiceStub(ch), topic, 0, 25)
        q = _queue(emu, topic, pull_protocol=protocol)
        assert emu.min_max(topic, BROKER, 0) == (15, 25)
        rng = (q, 5, 20)
        with pytest.raises(DataLossError, match=f"queue {topic}/{BROKER}/0: offsets 5..14"):
            list(read_partition(_partition(emu, [rng], pull_protocol=protocol)))
        p = _partition(emu, [rng], fail_on_data_loss=False, pull_protocol=protocol)
        assert _offsets(read_partition(p)) == list(range(15, 20))


def _stored_rows(start: int, n: int) -> pa.RecordBatch:
    """n stored rows with offsets start..start+n-1 and nothing else set."""
    cols = {f.name: pa.nulls(n, f.type) for f in MESSAGE_SCHEMA}
    cols["queue_offset"] = pa.array(range(start, start + n), pa.int64())
    cols["message_id"] = pa.array(["m"] * n)
    cols["body"] = pa.array([b"b"] * n)
    cols["store_timestamp"] = pa.array([1] * n, pa.timestamp("ms"))
    return pa.record_batch(list(cols.values()), schema=MESSAGE_SCHEMA)


@pytest.mark.parametrize(
    ("chunk_rows", "batch_rows"),
    [
        ([100] * 50, [5000]),  # small chunks are joined
        ([3000, 3000, 3000, 1000], [8192, 1808]),  # averaging under half a batch: joined, then cut
        ([4096] * 3, [4096] * 3),  # chunks of half a batch or more are kept as they are
        ([20000], [8192, 8192, 3616]),  # a long chunk is cut
        ([5000, 12000], [5000, 8192, 3808]),
    ],
)
def test_pulled_chunks_reach_spark_in_batches_of_at_most_8192_rows(
    chunk_rows: list[int], batch_rows: list[int]
) -> None:
    starts = [sum(chunk_rows[:i]) for i in range(len(chunk_rows))]
    table = pa.Table.from_batches([_stored_rows(s, n) for s, n in zip(starts, chunk_rows, strict=True)])
    batches = to_record_batches(table, "t", "b", 0)
    assert [b.num_rows for b in batches] == batch_rows
    offsets = [o for b in batches for o in b.column("queueOffset").to_pylist()]
    assert offsets == list(range(sum(chunk_rows)))
