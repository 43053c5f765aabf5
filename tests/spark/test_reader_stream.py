"""`spark.readStream.format("rocketmq")` on the session emulator: `latest` start, maxMessagesPerTrigger
bounding every micro-batch with a stable partition assignment and the group's offsets following each
batch, minMessagesPerTrigger + maxTriggerDelay, Trigger.AvailableNow stopping at its target while a
producer keeps sending, and a restart on a checkpoint continuing exactly where it stopped."""

from __future__ import annotations

import json
import threading
import time
import uuid
from typing import Any

from pyspark.sql import functions as F

from connector.allocation import allocate_all
from connector.clients import get_client
from tests.support.helpers import unique_name
from tests.support.reading import (
    Producer,
    Sent,
    arrow_rows,
    assert_rows_match,
    await_done,
    by_key,
    produce,
    reader,
    running,
    wait_for,
)
from tests.support.targets import client_config

SORTED_QUEUES = [(b, q) for b in ("broker-a", "broker-b") for q in range(4)]


def _new_topic(rocketmq_emulator) -> str:
    topic = unique_name("stream")
    rocketmq_emulator.create_topic(topic)
    return topic


def _group_offsets(endpoints: str, group: str, topic: str) -> dict[tuple[str, int], int | None]:
    client = get_client(client_config(endpoints))
    return {(q.broker, q.queue_id): client.get_committed(group, q) for q in client.route(topic)}


def test_latest_start_reads_only_messages_sent_after_the_start(
    target, spark, rocketmq_emulator, tmp_path
) -> None:
    topic = _new_topic(rocketmq_emulator)
    produce(rocketmq_emulator, topic, 3)
    name = f"latest_{uuid.uuid4().hex[:8]}"
    df = reader(spark, target, topic, stream=True)  # startingOffsets defaults to latest
    query = (
        df.writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    with running(query):
        wait_for(
            lambda: query.status["message"] == "Waiting for data to arrive", 60, "the first trigger", query
        )
        later = produce(rocketmq_emulator, topic, 2)
        wait_for(
            lambda: sum(p["numInputRows"] for p in query.recentProgress) >= 16, 60, "the new messages", query
        )
        last_batch = query.lastProgress["batchId"]
        time.sleep(1.0)  # five idle triggers: no empty micro-batch may run
        assert query.lastProgress["batchId"] == last_batch
        rows = arrow_rows(spark.table(name).toArrow())
    assert_rows_match(later, rows)


def test_max_messages_per_trigger_bounds_batches_with_stable_partitions_and_group_offsets(
    target, spark, rocketmq_emulator, tmp_path
) -> None:
    topic = _new_topic(rocketmq_emulator)
    sent = produce(rocketmq_emulator, topic, 15)  # 120 messages, 15 per queue
    group = unique_name("g")
    batches: list[dict[str, Any]] = []

    def on_batch(batch_df, batch_id: int) -> None:
        rows = arrow_rows(batch_df.withColumn("pid", F.spark_partition_id()).toArrow())
        batches.append(
            {
                "id": batch_id,
                "rows": rows,
                "group": _group_offsets(target, group, topic),
            }
        )

    df = reader(
        spark,
        target,
        topic,
        stream=True,
        startingOffsets="earliest",
        maxMessagesPerTrigger=40,
        numPartitions=3,
        consumerGroup=group,
    )
    query = (
        df.writeStream.foreachBatch(on_batch)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    with running(query):
        await_done(query)
    assert query.exception() is None
    data = [b for b in batches if b["rows"]]
    assert len(data) == 3
    assert all(len(b["rows"]) <= 40 for b in data)  # 40 / 8 queues → 5 per queue per batch
    assert_rows_match(sent, [r for b in data for r in b["rows"]])
    expected_pid = {q: i for i, qs in enumerate(allocate_all("averagely", SORTED_QUEUES, 3)) for q in qs}
    ends = dict.fromkeys(SORTED_QUEUES, 0)
    for b in data:
        assert b["group"] == ends, f"batch {b['id']}: group offsets are not the previous batch's end"
        for r in b["rows"]:
            q = (r["brokerName"], r["queueId"])
            assert r["pid"] == expected_pid[q], f"batch {b['id']}: queue {q} read by partition {r['pid']}"
            ends[q] = max(ends[q], r["queueOffset"] + 1)
    assert _group_offsets(target, group, topic) == ends == dict.fromkeys(SORTED_QUEUES, 15)
    progress = query.recentProgress
    assert progress and progress[-1]["sources"][0]["latestOffset"] is not None


def test_min_messages_per_trigger_waits_for_enough_messages_or_the_delay(
    target, spark, rocketmq_emulator, tmp_path
) -> None:
    topic = _new_topic(rocketmq_emulator)
    p = Producer(rocketmq_emulator)
    sizes: list[int] = []

    def on_batch(batch_df, _batch_id: int) -> None:
        n = batch_df.count()
        if n:
            sizes.append(n)

    df = reader(
        spark,
        target,
        topic,
        stream=True,
        startingOffsets="earliest",
        minMessagesPerTrigger=40,
        maxTriggerDelay="4s",
    )
    query = (
        df.writeStream.foreachBatch(on_batch)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="100 milliseconds")
        .start()
    )
    try:
        with running(query):
            p.send_queue(Sent(topic), "broker-a", 0, 16)
            time.sleep(1.5)
            assert sizes == [], "a batch ran with fewer than minMessagesPerTrigger messages before the delay"
            p.send_queue(Sent(topic), "broker-b", 1, 30)
            wait_for(lambda: sizes == [46], 30, "a batch once 46 >= 40 messages wait", query)
            started = time.monotonic()
            p.send_queue(Sent(topic), "broker-a", 2, 3)
            wait_for(lambda: len(sizes) == 2, 30, "a batch after maxTriggerDelay", query)
            assert sizes[1] == 3
            assert time.monotonic() - started >= 2.0
    finally:
        p.close()


def test_available_now_stops_at_its_target_while_producers_keep_sending(
    target, spark, rocketmq_emulator, tmp_path
) -> None:
    topic = _new_topic(rocketmq_emulator)
    produce(rocketmq_emulator, topic, 20)
    stop = threading.Event()
    sent = Sent(topic)
    p = Producer(rocketmq_emulator)

    def keep_sending() -> None:
        while not stop.is_set():
            for broker, q in SORTED_QUEUES:
                p.send_queue(sent, broker, q, 2)
            time.sleep(0.1)

    sender = threading.Thread(target=keep_sending, daemon=True)
    name = f"avn_{uuid.uuid4().hex[:8]}"
    df = reader(
        spark,
        target,
        topic,
        stream=True,
        startingOffsets="earliest",
        maxMessagesPerTrigger=100,
    )
    sender.start()
    try:
        time.sleep(0.3)
        query = (
            df.writeStream.format("memory")
            .queryName(name)
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        with running(query):
            await_done(query, 90)
        assert sender.is_alive()
    finally:
        stop.set()
        sender.join(10)
        p.close()
    assert query.exception() is None
    rows = arrow_rows(spark.table(name).toArrow())
    got = by_key(rows)
    client = get_client(client_config(target))
    last = json.loads(query.lastProgress["sources"][0]["endOffset"])[topic]
    for q in client.route(topic):
        read = sorted(o for (b, qid, o) in got if (b, qid) == (q.broker, q.queue_id))
        assert read == list(range(len(read))), f"queue {q.queue}: not a prefix"
        assert last[q.broker][str(q.queue_id)] == len(read)
        assert client.max_offset(q) > len(read), (
            f"queue {q.queue}: the producer sent nothing after the target"
        )
    assert len(rows) >= 8 * 20
    assert max(p["numInputRows"] for p in query.recentProgress) <= 100


def test_restart_on_checkpoint_continues_exactly_where_it_stopped(
    target, spark, rocketmq_emulator, tmp_path
) -> None:
    topic = _new_topic(rocketmq_emulator)
    first = produce(rocketmq_emulator, topic, 10)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"

    def start(trigger: dict[str, Any], **limits: Any):
        df = reader(spark, target, topic, stream=True, startingOffsets="earliest", **limits)
        return (
            df.writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(ckpt))
            .trigger(**trigger)
            .start()
        )

    query = start({"processingTime": "300 milliseconds"}, maxMessagesPerTrigger=24)
    with running(query):
        wait_for(lambda: query.lastProgress is not None, 60, "the first micro-batch", query)
    assert 0 < sum(p["numInputRows"] for p in query.recentProgress) < 80
    second = produce(rocketmq_emulator, topic, 5)
    query = start({"availableNow": True})
    with running(query):
        await_done(query)
    assert query.exception() is None
    everything = Sent(topic, {**first.rows, **second.rows})
    assert_rows_match(everything, arrow_rows(spark.read.parquet(str(out)).toArrow()))
