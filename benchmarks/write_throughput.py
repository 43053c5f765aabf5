"""Writer throughput ("write" and "raw batched send"), against an emulator in its own process.

    python -m benchmarks.write_throughput [--messages 1000000] [--size 100] [--spark]

* raw: the connector's producer without Spark (`RowChecker` + `Producer`, one process): Arrow batches of
  `--size`-byte bodies → acknowledged messages per second (target >= 300,000).
* `--spark`: `spark.range(N)` with a `--size`-byte body column into `format("rocketmq")`, against the same
  into a Python `DataSourceArrowWriter` that discards its batches (the Python write-path ceiling); the
  ratio's target is >= 0.5. Each write's CPU per row is split into the emulator's, Spark's Python
  workers' and Spark's JVM's (`benchmarks/cpu_time.py`).
"""

from __future__ import annotations

import argparse
import json
import signal
import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from benchmarks.cpu_time import measured
from benchmarks.discard_sink import discard_source
from benchmarks.raw_throughput import start_emulator
from connector.options import parse_writer_options
from connector.producer import Producer
from connector.sink_rows import RowChecker
from examples.spark_defaults import spark_session

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

TOPIC = "bench"


def raw_send(
    endpoints: str,
    messages: int,
    size: int,
    batch_rows: int = 10_000,
    topic: str = TOPIC,
    warmup_topic: str | None = None,
    options: Mapping[str, str] | None = None,
) -> tuple[float, float]:
    """Messages/s acknowledged through RowChecker + Producer (Arrow batches of `batch_rows` rows), and
    messages per second of this process's CPU time (the producer's own cost, whatever the emulator's).

    Exactly `messages` messages reach `topic`; one untimed warm-up batch (route, channel, first calls)
    goes to `warmup_topic` when given, else to `topic` as well. `options`: more writer options."""
    opts = parse_writer_options({"endpoints": endpoints, "topic": topic, **(options or {})})
    checker = RowChecker({"body": "body"}, topic, opts.max_message_size)
    producer = Producer(opts)
    warm_opts = parse_writer_options({"endpoints": endpoints, "topic": warmup_topic or topic})
    warm_producer = Producer(warm_opts)
    warm_checker = RowChecker({"body": "body"}, warmup_topic or topic, opts.max_message_size)
    full = _body_batch(batch_rows, size)
    for rows in warm_checker.check(full, 0):
        warm_producer.send(rows)
    warm_producer.flush()
    for rows in checker.check(full.slice(0, 1), 0):  # this producer's route and channel, untimed
        producer.send(rows)
    producer.flush()
    sent = 1
    t0, cpu0 = time.perf_counter(), time.process_time()
    while sent < messages:
        batch = full if messages - sent >= batch_rows else full.slice(0, messages - sent)
        for rows in checker.check(batch, sent):
            producer.send(rows)
        sent += batch.num_rows
    stats = producer.flush()
    dt, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    assert stats.messages == sent, stats
    return (sent - 1) / dt, (sent - 1) / cpu


def _body_batch(rows: int, size: int) -> pa.RecordBatch:
    """`rows` bodies of `size` bytes, each starting with its row number (distinct messages)."""
    pad = b"x" * max(size - 12, 0)
    body = pa.array([(b"%012d" % i + pad)[:size] for i in range(rows)], pa.binary())
    return pa.record_batch([body], names=["body"])


def range_bodies(spark: SparkSession, messages: int, size: int) -> DataFrame:
    """`spark.range(messages)` as one `size`-byte binary `body` column, each starting with its row number."""
    from pyspark.sql import functions as F

    pad = "x" * (size - 20)
    return spark.range(messages).select(F.format_string(f"%020d{pad}", "id").cast("binary").alias("body"))


def spark_ratio(
    endpoints: str,
    messages: int,
    size: int,
    spark: SparkSession | None = None,
    topic: str = TOPIC,
    emulator_pid: int | None = None,
) -> dict[str, Any]:
    """`spark.range(N)` + body → rocketmq, and → a discarding Python Arrow writer; rows/s of each, the CPU
    µs per row each write cost the emulator (`emulator_pid`), Spark's Python workers and its JVM, and per
    row of the rocketmq write the emulator's kernel CPU and the fresh pages it took (its store's growth).

    Uses `spark` when given (left running), else a session of its own from spark-defaults.conf."""

    own = spark is None
    if spark is None:
        spark = spark_session("write-benchmark")
    spark.dataSource.register(discard_source())
    df = range_bodies(spark, messages, size)

    cpu: dict[str, dict[str, float]] = {}
    detail: dict[str, dict[str, float]] = {}

    def timed(fmt: str, **opts: str) -> float:
        with measured(emulator_pid) as use:
            df.write.format(fmt).options(**opts).mode("append").save()
        cpu[fmt] = use.per_item_us(messages)
        detail[fmt] = use.broker_per_item(messages)
        return messages / use.wall

    # Each writer once untimed first (workers, imports; the rocketmq writer's client and route): the target is
    # for warm writes, and a session's first rocketmq write pays its workers' imports (2.8-4.5 µs per row here).
    timed("discard")
    ceiling = timed("discard")
    timed("rocketmq", endpoints=endpoints, topic=topic)
    rocketmq = timed("rocketmq", endpoints=endpoints, topic=topic)
    if own:
        spark.stop()
    return {
        "discard_rows_per_s": ceiling,
        "rocketmq_rows_per_s": rocketmq,
        "ratio": rocketmq / ceiling,
        "cpu_us_per_row": cpu,
        "emulator_per_row": detail["rocketmq"],
    }


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--spark", action="store_true", help="also run the Spark write vs discard comparison")
    args = ap.parse_args(argv)
    proc, endpoints = start_emulator(8, None)
    try:
        result: dict = {"messages": args.messages, "body_bytes": args.size}
        rate, per_cpu = raw_send(endpoints, args.messages, args.size)
        result["raw_send_msgs_per_s"] = round(rate)
        result["producer_msgs_per_cpu_s"] = round(per_cpu)
        print(f"raw batched send (producer): {rate:12,.0f} msgs/s acknowledged (target >= 300,000)")
        print(f"producer's own CPU cost    : {per_cpu:12,.0f} msgs per CPU-second of its process")
        if args.spark:
            figures = spark_ratio(endpoints, args.messages, args.size, emulator_pid=proc.pid)
            cpu = figures.pop("cpu_us_per_row")
            emulator = figures.pop("emulator_per_row")
            result.update({k: round(v, 3) for k, v in figures.items()})
            result["cpu_us_per_row"] = {w: {k: round(v, 3) for k, v in g.items()} for w, g in cpu.items()}
            print(f"spark -> discard writer   : {figures['discard_rows_per_s']:12,.0f} rows/s")
            print(f"spark -> rocketmq         : {figures['rocketmq_rows_per_s']:12,.0f} rows/s")
            print(f"ratio                     : {figures['ratio']:12.3f} (target >= 0.5)")
            for sink, use in cpu.items():
                print(f"CPU µs per row, {sink:9s} : " + ", ".join(f"{k} {v:.2f}" for k, v in use.items()))
            result["emulator_per_row"] = {k: round(v, 3) for k, v in emulator.items()}
            print(
                f"rocketmq's emulator       : kernel {emulator['kernel_us']:.2f} µs per row, "
                f"{emulator['fresh_bytes']:.0f} bytes of fresh pages per row"
            )
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    result["run"] = uuid.uuid4().hex[:8]
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
