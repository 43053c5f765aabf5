"""The sink against a real RocketMQ 5.x broker that answers with flow control.

The broker's `waitTimeMillsInSendQueue` is set to 1 ms (200 by default), so nearly every send request that
waits behind another in its send queue is refused `SYSTEM_BUSY` "[TIMEOUT_CLEAN_QUEUE] broker busy",
as a loaded broker refuses requests that waited 200 ms (apache/rocketmq `BrokerFastFailure`). Such an
answer stores nothing: the producer backs off, halves the requests it keeps in flight and sends again until
`sendMsgTimeoutMs`, beyond `retryTimesWhenSendFailed`, so the write completes and every row is stored exactly
once.
"""

from __future__ import annotations

import time
import uuid

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from connector.options import parse_writer_options
from connector.producer import Producer
from connector.sink_rows import RowChecker
from tests.real import realcluster as rc

pytestmark = [pytest.mark.realbroker, pytest.mark.timeout(600)]

TASK_ROWS = 131_072  # the producer's own send, in 8,192-message requests (the default batchSize)
SPARK_ROWS = 100_000


def test_a_write_rides_through_the_brokers_flow_control(spark: SparkSession, busy_broker: rc.Cluster) -> None:
    topic = f"busy-{uuid.uuid4().hex[:8]}"
    busy_broker.update_topic(topic, 8)
    opts = {"nameServer": busy_broker.namesrv, "topic": topic}
    # What one write task does, in this process so its stats show the broker's refusals.
    options = parse_writer_options(opts)
    producer = Producer(options, label="busy")
    bodies = pa.array([b"task-%06d" % i for i in range(TASK_ROWS)], pa.binary())
    for checked in RowChecker({"body": "body"}, topic, options.max_message_size).check(
        pa.record_batch([bodies], names=["body"]), 0
    ):
        producer.send(checked)
    stats = producer.flush()
    producer.close()
    busy = sum(n for k, n in stats.failures.items() if k.endswith("SYSTEM_BUSY"))
    assert stats.messages == TASK_ROWS and busy > options.retry_times_when_send_failed, stats.failures
    df = spark.range(0, SPARK_ROWS, numPartitions=2).select(F.format_string("spark-%06d", "id").alias("body"))
    t0 = time.monotonic()
    df.write.format("rocketmq").options(**opts).mode("append").save()
    took = time.monotonic() - t0
    indexed = rc.wait_indexed(busy_broker.broker_addr, topic, 8, TASK_ROWS + SPARK_ROWS, 60)
    assert indexed == TASK_ROWS + SPARK_ROWS, f"the broker indexed {indexed:,} acknowledged messages"
    got = spark.read.format("rocketmq").options(**opts).load()
    back = got.agg(F.count("*").alias("n"), F.countDistinct("body").alias("distinct")).first()
    rc.evidence(
        f"RocketMQ {busy_broker.dist.version}, waitTimeMillsInSendQueue=1: {TASK_ROWS:,} messages sent "
        f"through {busy} SYSTEM_BUSY answers ({stats.requests} requests); {SPARK_ROWS:,} rows written by "
        f"Spark in {took:.1f} s; read back {back.n:,} ({back.distinct:,} distinct)"
    )
    assert (back.n, back.distinct) == (TASK_ROWS + SPARK_ROWS, TASK_ROWS + SPARK_ROWS)
