"""`spark.read.format("rocketmq")` on the session emulator: starting and ending positions (earliest, JSON,
timestamp, group), queue allocation to Spark partitions (Averagely, ByCircle, splitting above the queue
count), delayed messages' deliveryTimestamp, and the user-schema rejection."""

from __future__ import annotations

import json
import time

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import functions as F

from connector.allocation import allocate_all
from connector.clients import get_client
from rocketmq_protocol.grpc_v2 import definition_pb2 as d
from rocketmq_protocol.grpc_v2 import service_pb2_grpc as sg
from tests.support.helpers import make_message, send, unique_name, wait_until
from tests.support.reading import Producer, Sent, arrow_rows, assert_rows_match, produce, reader
from tests.support.targets import client_config, connect_options

PER_QUEUE = 12
BROKERS = ("broker-a", "broker-b")
SORTED_QUEUES = [(b, q) for b in BROKERS for q in range(4)]  # MessageQueue order: broker, then id


@pytest.fixture(scope="module")
def small(rocketmq_emulator) -> Sent:
    topic = unique_name("batch")
    rocketmq_emulator.create_topic(topic)
    return produce(rocketmq_emulator, topic, PER_QUEUE, tags=lambda i: "TagA" if i % 2 else "TagB")


def _subset(sent: Sent, keep) -> Sent:
    return Sent(sent.topic, {k: v for k, v in sent.rows.items() if keep(k, v)})


def _partition_map(df) -> dict[tuple[str, int], set[int]]:
    rows = df.select(F.spark_partition_id().alias("p"), "brokerName", "queueId").distinct().collect()
    out: dict[tuple[str, int], set[int]] = {}
    for r in rows:
        out.setdefault((r.brokerName, r.queueId), set()).add(r.p)
    return out


def test_earliest_is_the_default_and_reads_every_message(
    target, spark, rocketmq_emulator, small: Sent
) -> None:
    assert_rows_match(small, arrow_rows(reader(spark, target, small.topic).toArrow()))


def test_json_starting_and_ending_offsets(target, spark, rocketmq_emulator, small: Sent) -> None:
    start = {small.topic: {"broker-a": {"0": 5, "3": -2}, "broker-b": {"2": 11, "1": 12}}}
    end = {small.topic: {"broker-a": {"0": 9}, "broker-b": {"3": 4, "2": -1}}}
    df = reader(
        spark,
        target,
        small.topic,
        startingOffsets=json.dumps(start),
        endingOffsets=json.dumps(end),
    )
    first = {("broker-a", 0): 5, ("broker-b", 2): 11, ("broker-b", 1): PER_QUEUE}
    last = {("broker-a", 0): 9, ("broker-b", 3): 4}

    def keep(k, _v) -> bool:
        return first.get(k[:2], 0) <= k[2] < last.get(k[:2], PER_QUEUE)

    assert_rows_match(_subset(small, keep), arrow_rows(df.toArrow()))


def test_starting_and_ending_timestamps(target, spark, rocketmq_emulator) -> None:
    topic = unique_name("ts")
    rocketmq_emulator.create_topic(topic)
    p = Producer(rocketmq_emulator)
    try:
        before = p.send_all(Sent(topic), 3, 4)
        time.sleep(0.05)
        t1 = int(time.time() * 1000)
        time.sleep(0.05)
        middle = p.send_all(Sent(topic), 2, 4)
        time.sleep(0.05)
        t2 = int(time.time() * 1000)
        time.sleep(0.05)
        p.send_all(Sent(topic), 1, 4)
    finally:
        p.close()
    assert len(before.rows) == 24
    df = reader(spark, target, topic, startingTimestamp=t1, endingTimestamp=t2)
    assert_rows_match(middle, arrow_rows(df.toArrow()))
    # startingTimestamp wins over startingOffsets
    df = reader(spark, target, topic, startingTimestamp=t2, startingOffsets="earliest")
    assert df.count() == 8


def test_group_start_uses_committed_offsets_and_earliest_elsewhere(
    target, spark, rocketmq_emulator, small: Sent
) -> None:
    group = unique_name("grp")
    client = get_client(client_config(target))
    committed = {("broker-a", 1): 7, ("broker-b", 3): 12}
    for q in client.route(small.topic):
        if (q.broker, q.queue_id) in committed:
            client.commit(group, q, committed[(q.broker, q.queue_id)])
    df = reader(spark, target, small.topic, startingOffsets="group", consumerGroup=group)
    expected = _subset(small, lambda k, _v: k[2] >= committed.get(k[:2], 0))
    assert_rows_match(expected, arrow_rows(df.toArrow()))


def test_num_partitions_below_queue_count_follows_averagely(
    target, spark, rocketmq_emulator, small: Sent
) -> None:
    df = reader(spark, target, small.topic, numPartitions=3)
    assert df.rdd.getNumPartitions() == 3
    expected = {q: {i} for i, qs in enumerate(allocate_all("averagely", SORTED_QUEUES, 3)) for q in qs}
    assert expected[("broker-a", 3)] == {1} and expected[("broker-b", 2)] == {2}  # 8/3 → [3, 3, 2]
    assert _partition_map(df) == expected
    assert df.count() == len(small.rows)


def test_num_partitions_by_circle(target, spark, rocketmq_emulator, small: Sent) -> None:
    df = reader(spark, target, small.topic, numPartitions=3, allocateStrategy="averagelyByCircle")
    expected = {q: {i % 3} for i, q in enumerate(SORTED_QUEUES)}
    assert _partition_map(df) == expected


def test_num_partitions_above_queue_count_splits_without_loss_or_duplicates(
    target, spark, rocketmq_emulator, small: Sent
) -> None:
    df = reader(spark, target, small.topic, numPartitions=12, pullBatchSize=4)
    assert df.rdd.getNumPartitions() >= 12
    pm = _partition_map(df)
    assert all(len(parts) >= 2 for parts in pm.values())  # every queue's range is split
    assert_rows_match(small, arrow_rows(df.toArrow()))


def test_max_messages_per_partition_splits_ranges(target, spark, rocketmq_emulator, small: Sent) -> None:
    df = reader(spark, target, small.topic, maxMessagesPerPartition=5)
    assert df.rdd.getNumPartitions() == 8 * 3  # 12 per queue → 4 + 4 + 4
    assert_rows_match(small, arrow_rows(df.toArrow()))


def test_no_data_reads_an_empty_frame(target, spark, rocketmq_emulator) -> None:
    topic = unique_name("empty")
    rocketmq_emulator.create_topic(topic)
    df = reader(spark, target, topic)
    assert df.count() == 0


def test_delayed_message_has_its_delivery_timestamp(target, spark, rocketmq_emulator) -> None:
    topic = unique_name("delay")
    rocketmq_emulator.create_topic(topic)
    b = rocketmq_emulator.brokers[0]
    import grpc

    with grpc.insecure_channel(b.endpoint) as ch:
        deliver = int(time.time() * 1000) + 300
        m = make_message(topic, b"later", queue_id=0, delivery_ms=deliver)
        assert send(sg.MessagingServiceStub(ch), [m], explicit=True).status.code == d.OK
    wait_until(lambda: rocketmq_emulator.min_max(topic, b.name, 0)[1] == 1, timeout=10, interval=0.05)
    rows = arrow_rows(reader(spark, target, topic).toArrow())
    assert len(rows) == 1
    assert rows[0]["deliveryTimestamp"] == deliver
    assert rows[0]["body"] == b"later"


def test_user_schema_is_rejected_naming_the_fixed_schema(
    target, spark, rocketmq_emulator, small: Sent
) -> None:
    df = (
        spark.read.format("rocketmq")
        .schema("body binary")
        .options(**connect_options(target))
        .option("topic", small.topic)
        .load()
    )
    with pytest.raises(PySparkException) as e:
        df.collect()
    assert "fixed schema" in str(e.value) and "queueOffset:bigint" in str(e.value)
