"""20,000 messages on 2 brokers × 4 queues read back with every column right: by `spark.read`, by
`readStream` with Trigger.AvailableNow into the memory sink and with a processing-time trigger into a
parquet file sink; a tag filter returns exactly the matching messages and reports no data loss."""

from __future__ import annotations

import time
import uuid

import pytest

from tests.support.helpers import unique_name
from tests.support.reading import (
    Sent,
    arrow_rows,
    assert_rows_match,
    await_done,
    produce,
    reader,
    running,
    wait_for,
)

TOTAL = 20_000
QUEUES = 4
TAGS = ("TagA", "TagB", None)


@pytest.fixture(scope="module")
def big(rocketmq_emulator) -> Sent:
    topic = unique_name("big")
    rocketmq_emulator.create_topic(topic)
    per_queue = TOTAL // (QUEUES * len(rocketmq_emulator.brokers))
    sent = produce(rocketmq_emulator, topic, per_queue, QUEUES, tags=lambda i: TAGS[i % 3], rich=True)
    assert len(sent.rows) == TOTAL
    return sent


def test_batch_read_returns_every_message_with_every_column(
    target, spark, rocketmq_emulator, big: Sent
) -> None:
    df = reader(spark, target, big.topic)
    assert df.schema.simpleString().startswith("struct<topic:string,brokerName:string,queueId:int")
    rows = arrow_rows(df.toArrow())
    assert_rows_match(big, rows)
    assert any(r["messageGroup"] is not None for r in rows)


def test_tag_filter_reads_only_matching_messages_without_data_loss(
    target, spark, rocketmq_emulator, big: Sent
) -> None:
    df = reader(
        spark,
        target,
        big.topic,
        filterExpression="TagA",
        failOnDataLoss="true",
        pullBatchSize=64,
    )
    rows = arrow_rows(df.toArrow())
    expected = Sent(big.topic, {k: v for k, v in big.rows.items() if v["tags"] == "TagA"})
    assert_rows_match(expected, rows)


def test_available_now_stream_into_memory_reads_everything(
    target, spark, rocketmq_emulator, big: Sent, tmp_path
) -> None:
    name = f"mem_{uuid.uuid4().hex[:8]}"
    df = reader(spark, target, big.topic, stream=True, startingOffsets="earliest")
    query = (
        df.writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    with running(query):
        await_done(query)
    assert query.exception() is None
    rows = arrow_rows(spark.table(name).toArrow())
    assert_rows_match(big, rows)
    spark.sql(f"DROP VIEW IF EXISTS {name}")


def test_processing_time_stream_into_parquet_reads_everything(
    target, spark, rocketmq_emulator, big: Sent, tmp_path
) -> None:
    out = tmp_path / "out"
    df = reader(
        spark,
        target,
        big.topic,
        stream=True,
        startingOffsets="earliest",
        numPartitions=4,
    )
    query = (
        df.writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )

    def rows_written() -> int:
        return sum(p["numInputRows"] for p in query.recentProgress)

    with running(query):
        wait_for(lambda: rows_written() >= TOTAL, 90, "all messages in the file sink", query)
        time.sleep(0.5)  # one more trigger: nothing new must be read
        assert rows_written() == TOTAL
    table = spark.read.parquet(str(out)).toArrow()
    assert table.num_rows == TOTAL
    assert_rows_match(big, arrow_rows(table))
