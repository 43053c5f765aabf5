"""failOnDataLoss with retention (a small emulator keeping 20 messages per queue): a stream restarted on a
checkpoint whose offsets were removed fails with `true` and skips to the earliest available with
`false`; the same for a batch's JSON start. Then a broker added to the cluster is picked up from offset 0."""

from __future__ import annotations

import json
import shutil
import uuid

import pytest
from pyspark.errors import PySparkException

from broker_emulator import Emulator
from tests.support.helpers import unique_name
from tests.support.reading import (
    Producer,
    Sent,
    arrow_rows,
    assert_rows_match,
    await_done,
    reader,
    running,
    wait_for,
)
from tests.support.targets import target_of

RETENTION = 20


@pytest.fixture
def small_emulator(rocketmq_emulator_factory) -> Emulator:
    return rocketmq_emulator_factory(brokers=1, queues=2, retention_messages=RETENTION)


def _send(emu: Emulator, topic: str, per_queue: int, sent: Sent | None = None) -> Sent:
    p = Producer(emu)
    try:
        return p.send_all(sent or Sent(topic), per_queue, 2)
    finally:
        p.close()


def _available_now(spark, emu: Emulator, topic: str, ckpt, fail: bool, rows: list):
    """An AvailableNow query appending what it reads to `rows` (foreachBatch recovers from checkpoints)."""
    df = reader(spark, emu.endpoints, topic, stream=True, startingOffsets="earliest", failOnDataLoss=fail)
    return (
        df.writeStream.foreachBatch(lambda batch, _id: rows.extend(arrow_rows(batch.toArrow())))
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )


def test_stream_retention_gap_fails_or_skips(spark, small_emulator: Emulator, tmp_path) -> None:
    emu = small_emulator
    topic = unique_name("loss")
    emu.create_topic(topic)
    _send(emu, topic, 10)
    base = tmp_path / "ckpt"
    read: list = []
    first = _available_now(spark, emu, topic, base, True, read)
    with running(first):
        await_done(first)
    assert first.exception() is None and len(read) == 20
    shutil.copytree(base, tmp_path / "ckpt2")
    later = _send(emu, topic, 40)  # offsets 10..49 per queue; retention keeps 30..49
    assert emu.min_max(topic, "broker-a", 0) == (30, 50)

    failing = _available_now(spark, emu, topic, base, True, [])
    with running(failing):
        with pytest.raises(PySparkException) as e:
            failing.awaitTermination(120)
    text = str(e.value)
    assert "DataLossError" in text and f"{topic}/broker-a/" in text and "offsets 10..29" in text
    assert "failOnDataLoss" in text

    read = []
    skipping = _available_now(spark, emu, topic, tmp_path / "ckpt2", False, read)
    with running(skipping):
        await_done(skipping)
    assert skipping.exception() is None
    kept = Sent(topic, {k: v for k, v in later.rows.items() if k[2] >= 30})
    assert_rows_match(kept, read)


def test_batch_json_start_below_the_min_offset(protocol, spark, small_emulator: Emulator) -> None:
    emu = small_emulator
    topic = unique_name("lossb")
    emu.create_topic(topic)
    sent = _send(emu, topic, 30)  # keeps 10..29
    start = json.dumps({topic: {"broker-a": {"0": 4, "1": 12}}})
    df = reader(spark, target_of(emu, protocol), topic, startingOffsets=start)
    with pytest.raises(PySparkException, match="starting offset 4"):
        df.collect()
    df = reader(spark, target_of(emu, protocol), topic, startingOffsets=start, failOnDataLoss="false")
    expected = Sent(topic, {k: v for k, v in sent.rows.items() if k[2] >= (10 if k[1] == 0 else 12)})
    assert_rows_match(expected, arrow_rows(df.toArrow()))


def test_a_new_broker_is_picked_up_from_offset_zero(
    protocol, spark, small_emulator: Emulator, tmp_path
) -> None:
    emu = small_emulator
    topic = unique_name("grow")
    emu.create_topic(topic)
    before = _send(emu, topic, 3)
    name = f"grow_{uuid.uuid4().hex[:6]}"
    df = reader(spark, target_of(emu, protocol), topic, stream=True, startingOffsets="earliest")
    query = (
        df.writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    with running(query):
        wait_for(lambda: spark.table(name).count() == 6, 60, "the first messages", query)
        emu.add_broker()
        p = Producer(emu)
        try:
            p.send_queue(before, "broker-b", 0, 4)
            p.send_queue(before, "broker-b", 1, 2)
        finally:
            p.close()
        wait_for(lambda: spark.table(name).count() >= 12, 60, "the new broker's messages", query)
        rows = arrow_rows(spark.table(name).toArrow())
    assert_rows_match(before, rows)
