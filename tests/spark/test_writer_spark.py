"""`df.write` / `df.writeStream` `.format("rocketmq")` with the real Spark session against real emulators:
every row lands once, evenly over 2 brokers × 4 queues; broker faults mid-write; fault-latency selection;
bad input fails with a clear message; FIFO groups, delayed delivery and every optional column."""

from __future__ import annotations

import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from broker_emulator import Emulator
from tests.support.helpers import unique_name
from tests.support.targets import connect_options, target_of
from tests.support.writing import assert_even, bodies, broker_count, read_topic, spark_thread

N = 100_000


@pytest.fixture
def faulty(rocketmq_emulator_factory) -> Emulator:
    """A private Emulator(brokers=2, queues=4) for fault injection."""
    return rocketmq_emulator_factory(brokers=2, queues=4)


def write(df: DataFrame, endpoints: str, topic: str | None = None, **options: str) -> None:
    w = df.write.format("rocketmq").options(**connect_options(endpoints)).mode("append").options(**options)
    if topic is not None:
        w = w.option("topic", topic)
    w.save()


def numbered(spark: SparkSession, n: int) -> DataFrame:
    return spark.range(n).select(F.format_string("%08d", "id").alias("body"))


def expected(n: int) -> list[bytes]:
    return [f"{i:08d}".encode() for i in range(n)]


def stored_on(emu: Emulator, topic: str, broker: str) -> int:
    return sum(emu.min_max(topic, broker, q)[1] for q in range(4))


# ------------------------------------------------------------------------------------------ volume
def test_batch_write_lands_once_each_evenly(
    target, spark: SparkSession, rocketmq_emulator: Emulator, topic: str
) -> None:
    # Queues are picked per request: ~12 requests per queue (batchSize 1024) make ±25% evenness meaningful.
    write(numbered(spark, N), target, topic, batchSize="1024")
    tables = read_topic(target, topic)
    assert sorted(bodies(tables)) == expected(N)
    assert len(tables) == 8
    assert_even(tables)


def test_stream_write_lands_once_each_evenly(
    target, spark: SparkSession, rocketmq_emulator: Emulator, topic: str, tmp_path
) -> None:
    src = tmp_path / "in"
    src.mkdir()
    files = 2
    for f in range(files):
        ids = range(f * N // files, (f + 1) * N // files)
        pq.write_table(pa.table({"body": [f"{i:08d}" for i in ids]}), src / f"part-{f}.parquet")
    query = (
        spark.readStream.schema("body string")
        .option("maxFilesPerTrigger", 1)
        .parquet(str(src))
        .writeStream.format("rocketmq")
        .options(**connect_options(target))
        .option("topic", topic)
        .option("batchSize", "1024")  # enough requests per queue for the evenness check (see above)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180), "the streaming query did not finish"
    assert query.exception() is None
    batches = [p for p in query.recentProgress if p["numInputRows"]]
    assert [p["numInputRows"] for p in batches] == [N // files] * files
    tables = read_topic(target, topic)
    assert sorted(bodies(tables)) == expected(N)
    assert_even(tables)


# ------------------------------------------------------------------------------------------ faults
def test_broker_down_mid_write(protocol, spark: SparkSession, faulty: Emulator) -> None:
    topic = unique_name("down")
    faulty.create_topic(topic, queues=4)
    for b in faulty.brokers:
        b.set_fault(latency_ms=30)  # slow enough that the fault lands mid-write
    n = 40_000
    errors: list[BaseException] = []

    def run() -> None:
        write(
            numbered(spark, n), target_of(faulty, protocol), topic, batchSize="100", maxInFlightRequests="2"
        )

    thread = spark_thread(spark, run, errors)
    deadline = time.monotonic() + 120
    while stored_on(faulty, topic, "broker-b") < 2000:
        assert thread.is_alive() and time.monotonic() < deadline, (
            f"the write ended before the fault: {errors}"
        )
        time.sleep(0.01)
    faulty.broker("broker-b").set_fault(down=True)
    time.sleep(0.3)  # requests broker-b had already accepted finish
    b_at_fault, a_at_fault = stored_on(faulty, topic, "broker-b"), stored_on(faulty, topic, "broker-a")
    assert a_at_fault + b_at_fault < n * 0.8, "the fault came too late to be mid-write"
    thread.join(180)
    assert not thread.is_alive() and not errors, errors
    assert stored_on(faulty, topic, "broker-b") == b_at_fault  # later sends all went to broker-a
    faulty.broker("broker-b").clear_faults()
    got = sorted(bodies(read_topic(target_of(faulty, protocol), topic)))
    assert sorted(set(got)) == expected(n)  # nothing lost
    # A down broker closes its remoting connections (a crash), and the gRPC client sends over the emulator's
    # pull channel, which is one of them (docs/protocols.md): a request the broker had already stored when
    # the next one arrived loses its answer, and the producer sends it again to broker-a (at-least-once).
    # At most the requests in flight come twice (2 tasks × 2 requests × 100 messages).
    duplicates = len(got) - n
    assert 0 <= duplicates <= 2 * 2 * 100, duplicates
    assert stored_on(faulty, topic, "broker-a") == n - b_at_fault + duplicates


def test_slow_broker_with_latency_fault_enabled(protocol, spark: SparkSession, faulty: Emulator) -> None:
    topic = unique_name("slow")
    faulty.create_topic(topic, queues=4)
    faulty.broker("broker-b").set_fault(latency_ms=800)
    n = 20_000
    write(
        numbered(spark, n), target_of(faulty, protocol), topic, batchSize="50", sendLatencyFaultEnable="true"
    )
    tables = read_topic(target_of(faulty, protocol), topic)
    assert sorted(bodies(tables)) == expected(n)
    # each task sends at most its in-flight window (4 requests of 50) + 1 to broker-b before the first
    # slow answer isolates it; everything after goes to broker-a
    assert broker_count(tables, "broker-b") < 0.1 * n


def test_slow_broker_without_latency_fault_keeps_half(
    protocol, spark: SparkSession, faulty: Emulator
) -> None:
    topic = unique_name("slow")
    faulty.create_topic(topic, queues=4)
    faulty.broker("broker-b").set_fault(latency_ms=800)
    n = 8000
    write(numbered(spark, n), target_of(faulty, protocol), topic, batchSize="100", maxInFlightRequests="16")
    tables = read_topic(target_of(faulty, protocol), topic)
    assert sorted(bodies(tables)) == expected(n)
    assert 0.35 * n <= broker_count(tables, "broker-b") <= 0.65 * n


# ------------------------------------------------------------------------------------------ bad input
BAD_INPUT = [
    ("null body", "body string", [("a",), (None,)], None, "bad row 1 (0-based) of partition 0: body is null"),
    (
        "body over 4 MiB",
        None,
        None,
        "big",
        "bad row 1 (0-based) of partition 0: body of 4194305 bytes exceeds maxMessageSize=4194304",
    ),
    (
        "tag with |",
        "body string, tags string",
        [("a", "t1"), ("b", "x|y")],
        None,
        "bad row 1 (0-based) of partition 0: tag 'x|y' contains '|'",
    ),
    ("wrong column type", "body int", [(1,)], None, "column 'body' has type int; expected binary or string"),
    (
        "unknown column",
        "body string, value string",
        [("a", "b")],
        None,
        "unknown column 'value'; the accepted columns are body, topic, tags",
    ),
]


def test_bad_input_fails_clearly(
    target, spark: SparkSession, rocketmq_emulator: Emulator, topic: str
) -> None:
    for case, ddl, rows, special, message in BAD_INPUT:
        if special == "big":
            df = spark.range(2).select(
                F.when(F.col("id") == 1, F.expr("repeat('x', 4194305)")).otherwise(F.lit("ok")).alias("body")
            )
        else:
            df = spark.createDataFrame(rows, ddl)
        with pytest.raises(Exception) as e:
            write(df.coalesce(1), target, topic)
        assert message in str(e.value), f"{case}: {str(e.value)[:2000]}"
    # nothing of the failed jobs was sent, and the emulator keeps serving
    write(numbered(spark, 10), target, topic)
    assert sorted(bodies(read_topic(target, topic))) == expected(10)


def test_overwrite_mode_is_rejected(
    target, spark: SparkSession, rocketmq_emulator: Emulator, topic: str
) -> None:
    with pytest.raises(Exception, match="mode 'overwrite' is not supported"):
        numbered(spark, 1).write.format("rocketmq").options(**connect_options(target)).option(
            "topic", topic
        ).mode("overwrite").save()


def test_invalid_option_fails_before_any_task(
    target, spark: SparkSession, rocketmq_emulator: Emulator, topic: str
) -> None:
    with pytest.raises(Exception, match="option 'maxInFlightRequests'='zero' is invalid"):
        write(numbered(spark, 1), target, topic, maxInFlightRequests="zero")


# ------------------------------------------------------------------------------------------ message kinds
def test_fifo_groups_land_in_one_queue_in_order(
    target, spark: SparkSession, rocketmq_emulator: Emulator, topic: str
) -> None:
    n = 6000
    df = (
        spark.range(n)
        .coalesce(1)
        .select(
            F.format_string("%08d", "id").alias("body"),
            F.concat(F.lit("group-"), (F.col("id") % 5).cast("string")).alias("messageGroup"),
        )
    )
    write(df, target, topic, batchSize="50", maxInFlightRequests="8")
    where: dict[str, set] = {}
    for (broker, qid), t in read_topic(target, topic).items():
        per_group: dict[str, list[int]] = {}
        for r in t.to_pylist():
            assert r["message_type"] == 2  # FIFO
            per_group.setdefault(r["message_group"], []).append(int(r["body"]))
            where.setdefault(r["message_group"], set()).add((broker, qid))
        for g, seq in per_group.items():
            assert seq == sorted(seq), f"{g} out of order"
    assert sorted(where) == [f"group-{g}" for g in range(5)]
    assert all(len(queues) == 1 for queues in where.values()), where


def test_delivery_timestamp_sends_delay_messages(
    target, spark: SparkSession, rocketmq_emulator: Emulator, topic: str
) -> None:
    df = spark.range(3).select(
        F.format_string("%08d", "id").alias("body"),
        F.when(F.col("id") == 1, F.expr("current_timestamp() + interval 1 second")).alias(
            "deliveryTimestamp"
        ),
    )
    write(df, target, topic)
    deadline = time.monotonic() + 10
    while len(rows := [r for t in read_topic(target, topic).values() for r in t.to_pylist()]) < 3:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    by_body = {r["body"]: r for r in rows}
    assert (
        by_body[b"00000001"]["message_type"] == 3 and by_body[b"00000001"]["delivery_timestamp"] is not None
    )
    assert by_body[b"00000000"]["message_type"] == 1 and by_body[b"00000000"]["delivery_timestamp"] is None


def test_every_optional_column_round_trips(target, spark: SparkSession, rocketmq_emulator: Emulator) -> None:
    t1, t2 = unique_name("cols"), unique_name("cols")
    rocketmq_emulator.create_topic(t1)
    rocketmq_emulator.create_topic(t2)
    df = spark.createDataFrame(
        [
            (b"\x00\x01", t1, "TagA", ["k1", "k2"], {"region": "eu", "n": "1"}),
            (b"two", t2, None, None, None),
            (b"three", t2, "TagC", ["k3"], {}),
        ],
        "body binary, topic string, tags string, keys array<string>, properties map<string,string>",
    )
    write(df, target)  # no topic option: the topic column decides
    got = {}
    for t in (t1, t2):
        for table in read_topic(target, t).values():
            for r in table.to_pylist():
                got[r["body"]] = (t, r["tag"], r["keys"], dict(r["properties"] or []))
    assert got == {
        b"\x00\x01": (t1, "TagA", ["k1", "k2"], {"region": "eu", "n": "1"}),
        b"two": (t2, None, [], {}),
        b"three": (t2, "TagC", ["k3"], {}),
    }
    # the topic option overrides the column; a string `keys` column is one key
    df2 = spark.createDataFrame([("x", t2, "one-key")], "body string, topic string, keys string")
    write(df2, target, t1)
    rows = [r for table in read_topic(target, t1).values() for r in table.to_pylist()]
    assert sorted((r["body"], tuple(r["keys"])) for r in rows) == [
        (b"\x00\x01", ("k1", "k2")),
        (b"x", ("one-key",)),
    ]
