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
MAX_ROUNDS = 4


def test_a_write_rides_through_the_brokers_flow_control(spark: SparkSession, busy_broker: rc.Cluster) -> None:
    topic = f"busy-{uuid.uuid4().hex[:8]}"
    busy_broker.update_topic(topic, 8)
    opts = {"nameServer": busy_broker.namesrv, "topic": topic}
    # What one write task does, in this process so its stats show the broker's refusals. Whether requests
    # queue long enough to be refused depends on the broker's pace, so the task is repeated (at most
    # MAX_ROUNDS times) until the broker has refused more requests than retryTimesWhenSendFailed allows.
    options = parse_writer_options(opts)
    sent, busy, requests, rounds = 0, 0, 0, 0
    while busy <= options.retry_times_when_send_failed and rounds < MAX_ROUNDS:
        producer = Producer(options, label="busy")
        bodies = pa.array([b"task-%d-%06d" % (rounds, i) for i in range(TASK_ROWS)], pa.binary())
        for checked in RowChecker({"body": "body"}, topic, options.max_message_size).check(
            pa.record_batch([bodies], names=["body"]), 0
        ):
            producer.send(checked)
        stats = producer.flush()
        producer.close()
        assert stats.messages == TASK_ROWS, stats.failures
        sent += stats.messages
        requests += stats.requests
        busy += sum(n for k, n in stats.failures.items() if k.endswith("SYSTEM_BUSY"))
        rounds += 1
    assert busy > options.retry_times_when_send_failed, f"the broker refused {busy} of {requests} requests"
    df = spark.range(0, SPARK_ROWS, numPartitions=2).select(F.format_string("spark-%06d", "id").alias("body"))
    t0 = time.monotonic()
    df.write.format("rocketmq").options(**opts).mode("append").save()
    took = time.monotonic() - t0
    total = sent + SPARK_ROWS
    indexed = rc.wait_indexed(busy_broker.broker_addr, topic, 8, total, 60)
    assert indexed == total, f"the broker indexed {indexed:,} acknowledged messages"
    got = spark.read.format("rocketmq").options(**opts).load()
    back = got.agg(F.count("*").alias("n"), F.countDistinct("body").alias("distinct")).first()
    rc.evidence(
        f"RocketMQ {busy_broker.dist.version}, waitTimeMillsInSendQueue=1: {sent:,} messages sent "
        f"through {busy} SYSTEM_BUSY answers ({requests} requests, {rounds} round(s)); {SPARK_ROWS:,} rows "
        f"written by Spark in {took:.1f} s; read back {back.n:,} ({back.distinct:,} distinct)"
    )
    assert (back.n, back.distinct) == (total, total)
