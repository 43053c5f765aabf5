"""The Spark measures on the read side: stream read, batch read, their ceiling, end-to-end
latency and the peak RSS of a Python worker. Each takes a running SparkSession and an emulator's endpoints
(or, where typed `str | dict`, a connection option such as `{"nameServer": "127.0.0.1:9876"}`)."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

import psutil
import pyarrow as pa

from benchmarks.ceiling import NAME as CEILING_FORMAT
from benchmarks.ceiling import CeilingSource
from benchmarks.socket_ceiling import NAME as SOCKET_CEILING_FORMAT
from benchmarks.socket_ceiling import SocketCeilingSource

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

QUERY_TIMEOUT_S = 600
#: The reads' target: each read ≥ this × its ceiling's rate.
READ_TARGET = 0.85


Connection = str | dict[str, str]


def connection(target: str | dict[str, str]) -> dict[str, str]:
    """The connection option of a target: gRPC `endpoints` (a string) or a dict such as
    `{"nameServer": "127.0.0.1:9876"}` (remoting)."""
    return dict(target) if isinstance(target, dict) else {"endpoints": target}


def _reader_options(endpoints: str | dict[str, str], topic: str) -> dict[str, str]:
    return {
        **connection(endpoints),
        "topic": topic,
        "startingOffsets": "earliest",
        "consumerGroup": f"bench_{uuid.uuid4().hex[:8]}",
    }


def batch_read(
    spark: SparkSession,
    endpoints: str | dict[str, str],
    topic: str,
    messages: int,
    fmt: str = "rocketmq",
    **extra: str,
) -> float:
    """`spark.read.format(fmt)` of the whole topic (with `extra` options) → `noop`; messages/s."""
    df = spark.read.format(fmt).options(**_reader_options(endpoints, topic), **extra).load()
    t0 = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    return messages / (time.perf_counter() - t0)


def ceiling_read(spark: SparkSession, endpoints: str | dict[str, str], topic: str, messages: int) -> float:
    """The synthetic ceiling (`benchmarks.ceiling`): the same batches from memory, same partitions."""
    spark.dataSource.register(CeilingSource)
    return batch_read(spark, endpoints, topic, messages, CEILING_FORMAT)


def socket_ceiling_read(
    spark: SparkSession, endpoints: str | dict[str, str], topic: str, messages: int, server: str
) -> float:
    """The ceiling's batches sent over plain TCP by `server` (`benchmarks.socket_ceiling`), same partitions."""
    spark.dataSource.register(SocketCeilingSource)
    return batch_read(spark, endpoints, topic, messages, SOCKET_CEILING_FORMAT, ceilingServer=server)


def ceiling_stream_read(
    spark: SparkSession, endpoints: str | dict[str, str], topic: str, messages: int
) -> float:
    """The ceiling as a stream: the same batches from memory in one availableNow micro-batch."""
    spark.dataSource.register(CeilingSource)
    return stream_read(spark, endpoints, topic, messages, CEILING_FORMAT)


def stream_read(
    spark: SparkSession, endpoints: str | dict[str, str], topic: str, messages: int, fmt: str = "rocketmq"
) -> float:
    """`readStream` + `trigger(availableNow=True)` → `noop` over the whole topic; messages/s from
    `start()` to termination. Fails unless the query's progress reports exactly `messages` rows."""
    df = spark.readStream.format(fmt).options(**_reader_options(endpoints, topic)).load()
    return available_now_rate(df, messages)


def available_now_rate(df: DataFrame, messages: int, label: str = "") -> float:
    """Runs the streaming `df` → `noop` with `trigger(availableNow=True)`; messages/s from `start()` to
    termination. Fails unless the query's progress reports exactly `messages` rows."""
    what = f"{label}: " if label else ""
    checkpoint = tempfile.mkdtemp(prefix="bench-stream-")
    try:
        t0 = time.perf_counter()
        q = (
            df.writeStream.format("noop")
            .trigger(availableNow=True)
            .option("checkpointLocation", checkpoint)
            .start()
        )
        if not q.awaitTermination(QUERY_TIMEOUT_S):
            q.stop()
            raise RuntimeError(
                f"{what}the availableNow stream read did not finish within {QUERY_TIMEOUT_S} s"
            )
        dt = time.perf_counter() - t0
        rows = sum(p["numInputRows"] for p in q.recentProgress)
        if rows != messages:
            raise RuntimeError(f"{what}the stream read {rows} rows, expected {messages}")
        return messages / dt
    finally:
        shutil.rmtree(checkpoint, ignore_errors=True)


def latency(
    spark: SparkSession,
    endpoints: Connection,
    topic: str,
    samples: int,
    interval_s: float,
    options: dict[str, str] | None = None,
    warmup: int = 20,
) -> tuple[float, float]:
    """Send → visible in a `foreachBatch` (trigger processingTime 0 s), p50 and p99 in seconds; `options`
    are extra reader options. Each message is sent alone by the connector's Producer and acknowledged
    before the next (`probe_latency` does the rest)."""
    from connector.options import parse_writer_options
    from connector.producer import Producer
    from connector.sink_rows import RowChecker

    opts = {**_reader_options(endpoints, topic), "startingOffsets": "latest", **(options or {})}
    wopts = parse_writer_options({**connection(endpoints), "topic": topic})
    producer, checker = Producer(wopts), RowChecker({"body": "body"}, topic, wopts.max_message_size)

    def send(body: bytes) -> None:
        for rows in checker.check(pa.record_batch([pa.array([body], pa.binary())], names=["body"]), 0):
            producer.send(rows)
        producer.flush()

    stream = spark.readStream.format("rocketmq").options(**opts).load().select("body")
    return probe_latency(stream, send, samples, interval_s, warmup)


def probe_latency(
    stream: DataFrame,
    send: Callable[[bytes], None],
    samples: int,
    interval_s: float,
    warmup: int = 20,
) -> tuple[float, float]:
    """p50 and p99 in seconds of send → visible in a `foreachBatch` of `stream` (one binary column holding
    the bodies) with trigger processingTime 0 s.

    Sends `warmup` and then `samples` single messages `interval_s` apart through `send`, each body its send
    time; the batch function takes each body's age once its rows are collected on the driver. The warm-up
    ones (body prefixed `w`) let the query's Python workers start and are not counted."""
    seen: list[float] = []
    done = threading.Event()

    def on_batch(df, _batch_id: int) -> None:  # type: ignore[no-untyped-def]
        rows = df.collect()
        now = time.time()
        seen.extend(now - float(r[0]) for r in rows if not bytes(r[0]).startswith(b"w"))
        if len(seen) >= samples:
            done.set()

    checkpoint = tempfile.mkdtemp(prefix="bench-latency-")
    q = (
        stream.writeStream.foreachBatch(on_batch)
        .trigger(processingTime="0 seconds")
        .option("checkpointLocation", checkpoint)
        .start()
    )
    try:
        deadline = time.monotonic() + 120
        while not q.recentProgress and time.monotonic() < deadline:  # the first (empty) batch ran
            time.sleep(0.05)
        for i in range(warmup + samples):
            send(("w" if i < warmup else "").encode() + repr(time.time()).encode())
            time.sleep(interval_s)
        if not done.wait(60):
            raise RuntimeError(f"only {len(seen)} of {samples} latency samples arrived within 60 s")
        progress = [p for p in q.recentProgress if p["numInputRows"]]
    finally:
        q.stop()
        shutil.rmtree(checkpoint, ignore_errors=True)
    LAST_BATCH_BREAKDOWN.clear()
    for key in sorted({k for p in progress for k in p["durationMs"]}):
        values = sorted(p["durationMs"].get(key, 0) for p in progress)
        LAST_BATCH_BREAKDOWN[key] = float(values[len(values) // 2])
    ordered = sorted(seen)
    return _percentile(ordered, 50), _percentile(ordered, 99)


#: Median `durationMs` of the last `probe_latency` query's non-empty micro-batches, per phase (Spark's
#: progress: latestOffset, queryPlanning, addBatch, walCommit, commitOffsets, triggerExecution, ...).
LAST_BATCH_BREAKDOWN: dict[str, float] = {}
#: The phases `batch_phases` prints, in a micro-batch's order (triggerExecution holds the others).
BATCH_PHASES = ("triggerExecution", "latestOffset", "queryPlanning", "addBatch", "walCommit", "commitOffsets")


def batch_phases(batch_ms: dict[str, float]) -> str:
    """`triggerExecution 346, latestOffset 15, ...`: a latency query's median micro-batch, in ms."""
    return ", ".join(f"{k} {batch_ms.get(k, 0):.0f}" for k in BATCH_PHASES)


def _percentile(ordered: list[float], p: float) -> float:
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def python_workers() -> list[psutil.Process]:
    """Spark's Python worker processes under this driver (the daemon and the workers it forks)."""
    out = []
    for proc in psutil.Process(os.getpid()).children(recursive=True):
        try:
            cmd = " ".join(proc.cmdline())
        except psutil.Error:
            continue
        if "pyspark.daemon" in cmd or "pyspark.worker" in cmd:
            out.append(proc)
    return out


def peak_worker_rss(spark: SparkSession, endpoints: str, topic: str, messages: int) -> tuple[float, float]:
    """Batch read of the topic → `noop` while sampling every Python worker's RSS every 20 ms; returns
    (peak RSS in MiB of any one worker, messages/s)."""
    peak = 0
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.is_set():
            for proc in python_workers():
                try:
                    peak = max(peak, proc.memory_info().rss)
                except psutil.Error:
                    pass
            stop.wait(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        rate = batch_read(spark, endpoints, topic, messages)
    finally:
        stop.set()
        sampler.join(5)
    return peak / (1 << 20), rate
