"""Every performance measure in one run: `python -m benchmarks [--quick] [--json PATH] [sizes...]`.

One emulator subprocess (`serve --brokers 2 --queues 4`, in-memory unless --data-dir) serves every topic;
one SparkSession from spark-defaults.conf (`examples/spark_defaults.py`) runs the Spark measures. Prints
one table and writes a JSON file (default `benchmarks/results.json`). Then, when `stacks` runs, a second
table: the same workload on this connector (emulator over gRPC and remoting, real RocketMQ 5.x over
remoting) and on Spark's Kafka connector with a real Kafka broker (`benchmarks/stacks.py`); and the first
write of a fresh session (`benchmarks/cold_start.py`) is a row of the first.

Columns: *figure* is the measure (messages/s unless a unit says otherwise); *ratio* is the figure over what
its target is stated against: the ceiling for reads, the discarding writer for the write, the official
client for the comparison rows (ours ÷ theirs), the target itself for absolute targets; *pass* applies the
target. Defaults are the full sizes (1,000,000 messages); `--quick` shrinks them so the whole run takes
about three minutes (a minute of it the first-write measure's four fresh Spark sessions). The Spark
throughput measures run `--repeat` times, interleaved, and keep each one's best run (the machine is
shared: the best run is the one least disturbed).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks import (
    cold_start,
    compiled_pyspark,
    grpc_floor,
    long_poll,
    official_client,
    raw_throughput,
    real_remoting,
    socket_ceiling,
    spark_reads,
    stacks,
)
from benchmarks.cpu_time import best_with_cpu, client_cpu, measured, run_logger, split_text
from benchmarks.first_touch import memory_in_use_mib
from benchmarks.latency_floor import latency_floor
from benchmarks.raw_throughput import (
    READ_TASK_PULL,
    TOPIC,
    WARMUP_TOPIC,
    bulk_response_bytes,
    client_pull,
    start_emulator,
)
from benchmarks.spark_reads import READ_TARGET
from benchmarks.table import Row, at_least, read_row, render
from benchmarks.write_throughput import raw_send, spark_ratio

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_JSON = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results.json")
WRITE_TOPIC = "bench-write"
CAPPED_TOPIC = "bench-capped"
#: Messages a real broker's PULL_MESSAGE answer holds (maxTransferCountOnMessageInMemory), and a Java push
#: consumer's pullBatchSize.
REAL_BROKER_ANSWER = 32
OFFICIAL_TOPIC = "bench-official"
LATENCY_TOPIC = "bench-latency"
POLL_TOPIC = "bench-poll"
MEMORY_TOPIC = "bench-memory"
COLD_TOPIC = "bench-cold"
# Topics of the stack comparison on the emulator (gRPC, remoting): a new one per write run, one for latency.
EMULATOR_PREFIXES = ("anchor-grpc-", "anchor-remoting-")
ANCHOR_WRITES = tuple(f"write-{r}" for r in range(10))
GROUPS = (
    "raw",
    "official",
    "long_poll",
    "reads",
    "remoting",
    "write",
    "latency",
    "memory",
    "real",
    "cold_start",
    "stacks",
)
# Each read against its ceiling, for the rows of their rounds' ratios: (read, ceiling, the row's name).
ROUND_RATIOS = (
    ("gRPC", "ceiling", "batch read"),
    ("socket ceiling", "ceiling", "read ceiling over a socket"),
    ("nameServer", "ceiling", "batch read (nameServer)"),
    ("stream", "stream ceiling", "stream read"),
    ("nameServer stream", "stream ceiling", "stream read (nameServer)"),
)


def round_ratio_measure(read: str) -> str:
    """The row name of `read`'s median round ratio (`round_ratio_rows`)."""
    return f"{read}: median of the rounds' ratios to the ceiling"


# Every row a full run prints, in order.
MEASURES = (
    "raw batched send",
    "raw bulk pull → Arrow",
    "raw bulk pull: emulator CPU",
    "raw bulk pull: client CPU",
    "gRPC floor (same-size responses from memory): server CPU",
    "gRPC floor: client CPU",
    "socket floor (same responses, plain TCP): server CPU",
    "socket floor: client CPU",
    "remoting pull → Arrow",
    "remoting pull: emulator CPU",
    "remoting pull: client CPU",
    "remoting pull, answers of 32 → Arrow",
    "remoting pull, answers of 32: emulator CPU",
    "remoting pull, answers of 32: client CPU",
    "official Producer send",
    "official SimpleConsumer receive+ack",
    "long-poll wake-up p50",
    "first write: one-time cost",
    "first write: one-time cost: Spark JVM CPU",
    "first write: one-time cost: Spark Python CPU",
    "first write: one-time cost, discarding writer",
    "first write: one-time cost, discarding writer: Spark JVM CPU",
    "first write: one-time cost, discarding writer: Spark Python CPU",
    "first write: the connector's part (over the discarding writer)",
    "first write: one-time cost, discarding writer, PySpark compiled",
    "first write: one-time cost, JVM noop sink",
    "read ceiling (Arrow from memory)",
    "batch read → noop",
    "read ceiling over a socket (same batches, plain TCP, × ceiling)",
    "stream read ceiling (same, as a stream)",
    "stream read → noop",
    "batch read → noop (nameServer)",
    "stream read → noop (nameServer)",
    *(round_ratio_measure(name) for _, _, name in ROUND_RATIOS),
    "stream read ceiling: Python CPU",
    "read ceiling: Python CPU",
    "read ceiling: Spark JVM CPU",
    "batch read: emulator CPU",
    "batch read: Python CPU",
    "batch read: Spark JVM CPU",
    "batch read (nameServer): emulator CPU",
    "batch read (nameServer): Python CPU",
    "batch read (nameServer): Spark JVM CPU",
    "batch read: emulator kernel CPU",
    "batch read (nameServer): emulator kernel CPU",
    "batch read: CPU beyond the ceiling's",
    "batch read (nameServer): CPU beyond the ceiling's",
    f"batch read: CPU beyond the ceiling's that {READ_TARGET} × its rate allows",
    "stream read: emulator CPU",
    "stream read: Python CPU",
    "stream read (nameServer): emulator CPU",
    "stream read (nameServer): Python CPU",
    "write ceiling (discarding Arrow writer)",
    "write → rocketmq",
    "write: emulator CPU",
    "write: emulator kernel CPU",
    "write: emulator fresh pages",
    "write: Python CPU",
    "write: Spark JVM CPU",
    "write ceiling: Python CPU",
    "write ceiling: Spark JVM CPU",
    "latency p50 (send → foreachBatch)",
    "latency p99 (send → foreachBatch)",
    "latency p50, numPartitions=2",
    "latency p99, numPartitions=2",
    "latency p50 floor (no broker)",
    "latency p99 floor (no broker)",
    "peak Python worker RSS (backlog read)",
)
# The rows that are one measure less another (the rest are rates, times, sizes and CPU, never negative):
# at --quick sizes fixed costs dominate them, and the runs' noise can take them below 0.
DIFFERENCES = (
    "first write: the connector's part (over the discarding writer)",
    "batch read: CPU beyond the ceiling's",
    "batch read (nameServer): CPU beyond the ceiling's",
)
# With --real-name-server, after the reads (benchmarks/real_remoting.py).
REAL_MEASURES = (
    "real 5.x: write → rocketmq (nameServer)",
    "real 5.x: remoting pull → Arrow",
    "real 5.x: stream read ceiling",
    "real 5.x: stream read → noop (nameServer)",
)
QUICK = {
    "messages": 50_000,
    "write_messages": 50_000,
    "official_seconds": 1.0,
    "official_max": 2_000,
    "latency_samples": 10,
    "latency_interval": 0.05,
    "poll_tries": 10,
    "memory_bytes": 64 << 20,
    "repeat": 1,
    "read_repeat": 1,
    "stack_messages": 50_000,
    "cold_messages": 50_000,
    "cold_pairs": 1,
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="small sizes (whole run about three minutes)")
    ap.add_argument("--messages", type=int, default=1_000_000, help="messages of the read and raw measures")
    ap.add_argument("--size", type=int, default=100, help="body bytes")
    ap.add_argument("--write-messages", type=int, default=1_000_000, help="rows of the Spark write measure")
    ap.add_argument("--official-seconds", type=float, default=3.0, help="time bound of each official loop")
    ap.add_argument("--official-max", type=int, default=5_000, help="message bound of each official loop")
    ap.add_argument("--latency-samples", type=int, default=100)
    ap.add_argument("--latency-interval", type=float, default=0.1, help="seconds between latency probes")
    ap.add_argument("--poll-tries", type=int, default=50, help="long-poll wake-up tries")
    ap.add_argument("--memory-bytes", type=int, default=2_000_000_000, help="backlog of the memory measure")
    ap.add_argument("--memory-size", type=int, default=1024, help="body bytes of the memory backlog")
    ap.add_argument(
        "--repeat", type=int, default=2, help="runs of each Spark throughput measure; the best is kept"
    )
    ap.add_argument(
        "--read-repeat",
        type=int,
        default=5,
        help="runs of each read and its ceiling, interleaved; the best is kept (a read of 1,000,000 takes ~0.5 s,"
        " and Spark's JIT keeps speeding both up over the first runs)",
    )
    ap.add_argument(
        "--stack-messages", type=int, default=1_000_000, help="messages of the stack comparison's workload"
    )
    ap.add_argument("--cold-messages", type=int, default=1_000_000, help="rows of the first-write measure")
    ap.add_argument(
        "--cold-pairs",
        type=int,
        default=3,
        help="fresh-session pairs (rocketmq, discarding writer; alternating order) of the first-write measure",
    )
    ap.add_argument("--data-dir", help="durable emulator storage (default: in-memory)")
    ap.add_argument(
        "--real-name-server",
        help="name server of a real RocketMQ cluster (e.g. tests/real/rocketmq.sh start) for the 'real' measures",
    )
    ap.add_argument("--only", help=f"comma-separated subset of {','.join(GROUPS)} (default: all)")
    ap.add_argument("--json", default=DEFAULT_JSON, help="where to write the results")
    args = ap.parse_args(argv)
    if args.quick:
        for key, value in QUICK.items():
            if getattr(args, key) == ap.get_default(key):
                setattr(args, key, value)
    groups = set(GROUPS if not args.only else args.only.split(","))
    if not args.real_name_server and not args.only:
        groups.discard("real")
    unknown = groups - set(GROUPS)
    if unknown:
        ap.error(f"--only: unknown {', '.join(sorted(unknown))}; expected some of {', '.join(GROUPS)}")
    args.groups = groups
    if not 1 <= args.repeat <= len(ANCHOR_WRITES):
        ap.error(f"--repeat: 1 to {len(ANCHOR_WRITES)}")
    if args.read_repeat < 1:
        ap.error(f"--read-repeat: at least 1, got {args.read_repeat}")
    if args.cold_pairs < 1:
        ap.error(f"--cold-pairs: at least 1, got {args.cold_pairs}")
    return args


def run(
    args: argparse.Namespace, log: Callable[[str], None]
) -> tuple[list[Row], list[stacks.Stack], list[str]]:
    """The main table's rows, the stack comparison's stacks and notes on the real systems."""
    rows: list[Row] = []
    n, size = args.messages, args.size
    names = [OFFICIAL_TOPIC, LATENCY_TOPIC]  # the writes' and memory's topics: scratch_emulator
    names += [
        f"{p}{w}" for p in EMULATOR_PREFIXES for w in [*ANCHOR_WRITES[: args.repeat], "latency", "warmup"]
    ]
    topics = [f"{t}:4" for t in names] + [f"{POLL_TOPIC}:1"]
    proc, endpoints = start_emulator(4, args.data_dir, brokers=2, topics=topics)
    real = stacks.RealSystems(Path(tempfile.mkdtemp(prefix="bench-real-")))
    stack_list: list[stacks.Stack] = []
    try:
        needs_data = args.groups & {"raw", "official", "reads"}
        send_rate = pull_rate = None
        if needs_data:
            log(f"raw batched send of {n:,} × {size} B")
            send_rate, _ = raw_send(endpoints, n, size, topic=TOPIC, warmup_topic=WARMUP_TOPIC)
            rows.append(at_least("raw batched send", send_rate, "msgs/s", 1, 300_000, "≥ 300,000"))
            log(f"raw bulk pull of {n:,}")
            with measured(proc.pid) as use, client_cpu() as mine:
                pull_rate, pulled = client_pull(endpoints, TOPIC, **READ_TASK_PULL)
            if pulled != n:
                raise RuntimeError(f"raw bulk pull read {pulled} messages, sent {n}")
            rows.append(at_least("raw bulk pull → Arrow", pull_rate, "msgs/s", 1, 1_000_000, "≥ 1,000,000"))
            rows += cpu_rows("raw bulk pull", use.seconds["emulator"], mine.seconds, n)
            response_bytes, count = bulk_response_bytes(endpoints, TOPIC)
            log(f"gRPC floor: {response_bytes:,}-byte responses ({count:,} messages each) from memory")
            server, client = grpc_floor.response_floor(response_bytes)
            rows.append(
                Row(
                    "gRPC floor (same-size responses from memory): server CPU",
                    server / count * 1e6,
                    "µs/msg",
                    "—",
                )
            )
            rows.append(Row("gRPC floor: client CPU", client / count * 1e6, "µs/msg", "—"))
            log(
                "socket floor: the same responses over a plain socket (what the pull channel moves them with)"
            )
            server, client = grpc_floor.socket_floor(response_bytes)
            rows.append(
                Row(
                    "socket floor (same responses, plain TCP): server CPU",
                    server / count * 1e6,
                    "µs/msg",
                    "—",
                )
            )
            rows.append(Row("socket floor: client CPU", client / count * 1e6, "µs/msg", "—"))
        if "remoting" in args.groups and raw_throughput.NAME_SERVER:
            if not needs_data:
                raw_send(endpoints, n, size, topic=TOPIC, warmup_topic=WARMUP_TOPIC)
            client_pull(endpoints, WARMUP_TOPIC, 8192, name_server=raw_throughput.NAME_SERVER)  # connections
            log(f"remoting pull of {n:,} (name server {raw_throughput.NAME_SERVER})")
            with measured(proc.pid) as use, client_cpu() as mine:
                rate, pulled = client_pull(
                    endpoints, TOPIC, name_server=raw_throughput.NAME_SERVER, **READ_TASK_PULL
                )
            if pulled != n:
                raise RuntimeError(f"remoting pull read {pulled} messages, sent {n}")
            rows.append(at_least("remoting pull → Arrow", rate, "msgs/s", 1, 1_000_000, "≥ 1,000,000"))
            rows += cpu_rows("remoting pull", use.seconds["emulator"], mine.seconds, n)
            # The path a real broker's reads take (answers of 32 messages, pipelined 64 at a time), and what
            # serving pulls of a Java consumer's size (32) costs the emulator.
            label = f"remoting pull, answers of {REAL_BROKER_ANSWER}"
            log(
                f"{label}: {n:,} messages (an emulator of its own, `--max-transfer-count {REAL_BROKER_ANSWER}`)"
            )
            with scratch_emulator(
                args, CAPPED_TOPIC, "--max-transfer-count", str(REAL_BROKER_ANSWER)
            ) as capped:
                raw_send(capped.endpoints, n, size, topic=CAPPED_TOPIC, warmup_topic=WARMUP_TOPIC)
                client_pull(
                    capped.endpoints, WARMUP_TOPIC, 8192, name_server=capped.name_server
                )  # connections
                with measured(capped.pid) as use, client_cpu() as mine:
                    rate, pulled = client_pull(
                        capped.endpoints, CAPPED_TOPIC, name_server=capped.name_server, **READ_TASK_PULL
                    )
            if pulled != n:
                raise RuntimeError(f"{label} read {pulled} messages, sent {n}")
            rows.append(Row(f"{label} → Arrow", rate, "msgs/s", "—"))
            rows += cpu_rows(label, use.seconds["emulator"], mine.seconds, n)
        elif "remoting" in args.groups:
            log("remoting measures skipped: the emulator printed no name server (no remoting front end)")
        if "official" in args.groups:
            log("official Producer send loop")
            theirs, sent = official_client.producer_rate(
                endpoints, OFFICIAL_TOPIC, size, args.official_seconds, args.official_max
            )
            rows.append(Row("official Producer send", theirs, "msgs/s", "ours ≥ 20×", send_rate / theirs))
            rows[-1].passed = rows[-1].ratio >= 20
            log("official SimpleConsumer receive+ack loop")
            theirs, _ = official_client.simple_consumer_rate(
                endpoints, OFFICIAL_TOPIC, "bench-official-group", sent, args.official_seconds
            )
            rows.append(
                Row("official SimpleConsumer receive+ack", theirs, "msgs/s", "ours ≥ 20×", pull_rate / theirs)
            )
            rows[-1].passed = rows[-1].ratio >= 20
        if "long_poll" in args.groups:
            log(f"long-poll wake-up × {args.poll_tries}")
            lat = sorted(long_poll.wake_up(endpoints, POLL_TOPIC, args.poll_tries))
            p50 = spark_reads._percentile(lat, 50) * 1000
            rows.append(Row("long-poll wake-up p50", p50, "ms", "≤ 20 ms", p50 / 20, p50 <= 20))
        if "cold_start" in args.groups:
            with scratch_emulator(args, COLD_TOPIC) as scratch:
                rows += cold_start_rows(args, scratch.endpoints, log)
        if "stacks" in args.groups:
            stack_list = prepare_stacks(endpoints, raw_throughput.NAME_SERVER, real, log, proc.pid)
        if args.groups & {"reads", "write", "latency", "memory", "real", "stacks"}:
            rows += spark_measures(args, endpoints, log, stack_list, real, proc.pid)
    finally:
        real.stop()
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    return rows, stack_list, real.notes


def read_measures(
    spark: SparkSession, endpoints: str, name_server: str | None, n: int, batch_server: str
) -> dict[str, tuple[str, Callable[[], float]]]:
    """The Spark reads of the main table, in the order they run: key → (what the log calls it, the read:
    messages/s). The `nameServer` reads only with a `name_server`; `batch_server`: the address of the
    socket ceiling's server (`benchmarks.socket_ceiling.serving`)."""
    reads: dict[str, tuple[str, Callable[[], float]]] = {
        "ceiling": (
            f"ceiling: {n:,} rows from memory",
            lambda: spark_reads.ceiling_read(spark, endpoints, TOPIC, n),
        ),
        "gRPC": (f"batch read of {n:,}", lambda: spark_reads.batch_read(spark, endpoints, TOPIC, n)),
        "socket ceiling": (
            f"socket ceiling: {n:,} rows from a server over plain TCP",
            lambda: spark_reads.socket_ceiling_read(spark, endpoints, TOPIC, n, batch_server),
        ),
        "stream ceiling": (
            f"stream ceiling: {n:,} rows from memory in one availableNow micro-batch",
            lambda: spark_reads.ceiling_stream_read(spark, endpoints, TOPIC, n),
        ),
        "stream": (
            f"stream read (availableNow) of {n:,}",
            lambda: spark_reads.stream_read(spark, endpoints, TOPIC, n),
        ),
    }
    if name_server:
        ns = {"nameServer": name_server}
        reads["nameServer"] = (
            f"batch read of {n:,} over nameServer",
            lambda: spark_reads.batch_read(spark, ns, TOPIC, n),
        )
        reads["nameServer stream"] = (
            f"stream read (availableNow) of {n:,} over nameServer",
            lambda: spark_reads.stream_read(spark, ns, TOPIC, n),
        )
    return reads


#: The batch reads' CPU rows: (key of `batch_cpu_rows`' argument, label, the process groups shown).
BATCH_CPU = (
    ("ceiling", "read ceiling", ("python", "jvm")),
    ("gRPC", "batch read", ("emulator", "python", "jvm")),
    ("nameServer", "batch read (nameServer)", ("emulator", "python", "jvm")),
)
_GROUP_LABEL = {"emulator": "emulator CPU", "python": "Python CPU", "jvm": "Spark JVM CPU"}


def kept_and_logged(
    runs: list[float], log_run: Callable[[float, dict[str, float]], None]
) -> Callable[[float, dict[str, float]], None]:
    """`best_with_cpu`'s `on_run` that appends each run's rate to `runs`, then logs it with `log_run`."""

    def on_run(rate: float, spent: dict[str, float]) -> None:
        runs.append(rate)
        log_run(rate, spent)

    return on_run


def round_ratio_rows(rates: dict[str, list[float]]) -> list[Row]:
    """Each read's median, over the rounds, of its run's rate over its ceiling's run of the same round: the
    ratio the rounds agree on, where the best-against-best ratio of the rows above follows whichever run of
    either was least disturbed (in one run of 2026-12-04 the ceiling's five runs went 1.19 → 1.62M msgs/s
    and the gRPC read's 0.94–1.23M). Shown, not judged: the targets apply to the best runs."""
    rows = []
    for key, ceiling_key, name in ROUND_RATIOS:
        pairs = list(zip(rates.get(key, []), rates.get(ceiling_key, []), strict=False))
        if pairs:
            ratio = statistics.median(ours / ceiling for ours, ceiling in pairs)
            rows.append(Row(round_ratio_measure(name), ratio, "×", "—"))
    return rows


def batch_cpu_rows(batch_cpu: dict[str, dict[str, float]]) -> list[Row]:
    """CPU µs per message of each batch read's best run, per process group: where the ceiling's and the
    reads' time goes on the two shared cores. Then each read's CPU beyond the ceiling's, and how much
    beyond it a read may spend and still reach READ_TARGET × the ceiling's rate when both keep the two
    cores busy (the socket floor rows are what moving the same bytes costs, before any work on them)."""
    rows = [
        Row(f"{label}: {_GROUP_LABEL[g]}", batch_cpu[key][g], "µs/msg", "—")
        for key, label, groups in BATCH_CPU
        if batch_cpu[key]
        for g in groups
    ]
    # Of the emulator's, its kernel's: sending the answers over loopback TCP, which no broker code avoids.
    rows += [
        Row(f"{label}: emulator kernel CPU", batch_cpu[key]["emulator_kernel"], "µs/msg", "—")
        for key, label, groups in BATCH_CPU
        if "emulator" in groups and "emulator_kernel" in batch_cpu[key]
    ]
    totals = {key: sum(batch_cpu[key][g] for g in groups) for key, _, groups in BATCH_CPU if batch_cpu[key]}
    if "ceiling" not in totals:
        return rows
    for key, label, _ in BATCH_CPU[1:]:
        if key in totals:
            rows.append(
                Row(f"{label}: CPU beyond the ceiling's", totals[key] - totals["ceiling"], "µs/msg", "—")
            )
    allowed = totals["ceiling"] * (1 / READ_TARGET - 1)
    rows.append(
        Row(
            f"batch read: CPU beyond the ceiling's that {READ_TARGET} × its rate allows",
            allowed,
            "µs/msg",
            "—",
        )
    )
    return rows


def cpu_rows(label: str, emulator_s: float, client_s: float, messages: int) -> list[Row]:
    """`label: emulator CPU` and `label: client CPU` in µs per message."""
    return [
        Row(f"{label}: emulator CPU", emulator_s / messages * 1e6, "µs/msg", "—"),
        Row(f"{label}: client CPU", client_s / messages * 1e6, "µs/msg", "—"),
    ]


@dataclass(frozen=True)
class Scratch:
    """An emulator of a measure's own: its gRPC endpoints, its process id, its name server."""

    endpoints: str
    pid: int
    name_server: str | None


@contextmanager
def scratch_emulator(args: argparse.Namespace, topic: str, *options: str) -> Iterator[Scratch]:
    """An emulator of its own (more `serve` `options`) for a measure that fills `topic` with data no later
    measure reads: the first write's 3 × `--cold-messages`, the write's, the memory measure's 2 GB backlog,
    the capped remoting pull's. In the shared emulator that data stayed for every later measure, which it
    made slower (see the write's), so the figures depended on which measures ran before them."""
    name_server = raw_throughput.NAME_SERVER  # start_emulator replaces it with the scratch emulator's
    data_dir = tempfile.mkdtemp(prefix="scratch-", dir=args.data_dir) if args.data_dir else None
    proc, endpoints = start_emulator(4, data_dir, brokers=2, topics=[f"{topic}:4"], options=options)
    scratch = Scratch(endpoints, proc.pid, raw_throughput.NAME_SERVER)
    raw_throughput.NAME_SERVER = name_server
    try:
        yield scratch
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        if data_dir:
            shutil.rmtree(data_dir, ignore_errors=True)


def cold_start_rows(args: argparse.Namespace, endpoints: str, log: Callable[[str], None]) -> list[Row]:
    """The first write of a fresh session (its own process and JVM) minus the same write warm: for the
    rocketmq sink; as Spark's own part, for a discarding Python writer; the connector's part, rocketmq's over
    the discarding writer's within each of `--cold-pairs` pairs of sessions run in alternating order (one
    pair's difference is as noisy as the machine's minute; the rows keep the medians); for the discarding
    writer again with PySpark's modules compiled (`benchmarks/compiled_pyspark.py`: what compiling them in
    every new Python worker costs); and for Spark's JVM `noop` sink (the JVM's first job, no Python)."""

    def fresh(sink: str, home: str | None = None) -> dict[str, Any]:
        label = sink + (" (PySpark compiled)" if home else "")
        log(f"first write in a fresh session: {args.cold_messages:,} rows → {label}")
        r = cold_start.measure(endpoints, args.cold_messages, args.size, sink, COLD_TOPIC, spark_home=home)
        log(
            f"  {label}: first {r['first_s']:.2f} s, then {', '.join(f'{w:.2f}' for w in r['writes_s'][1:])} s "
            f"(session start {r['session_s']:.1f} s, not counted; one-time {r['one_time_s']:.2f} s)"
        )
        return r

    paired: dict[str, list[dict[str, Any]]] = {"rocketmq": [], "discard": []}
    for i in range(args.cold_pairs):
        for sink in ("rocketmq", "discard") if i % 2 == 0 else ("discard", "rocketmq"):
            paired[sink].append(fresh(sink))
    out = []
    for sink, name in (
        ("rocketmq", "first write: one-time cost"),
        ("discard", "first write: one-time cost, discarding writer"),
    ):
        median = _median_run(paired[sink])
        cost = median["one_time_s"]
        out.append(_within_a_second(name, cost) if sink == "rocketmq" else Row(name, cost, "s", "—"))
        out += one_time_cpu_rows(median, name)
    own = statistics.median(
        ours["one_time_s"] - theirs["one_time_s"] for ours, theirs in zip(*paired.values(), strict=True)
    )
    out.append(_within_a_second("first write: the connector's part (over the discarding writer)", own))
    with tempfile.TemporaryDirectory(prefix="spark-home-compiled-") as tmp:
        compiled = os.path.join(tmp, "spark")
        started = time.perf_counter()
        compiled_pyspark.compiled_spark_home(compiled)
        log(f"SPARK_HOME with PySpark's modules compiled: {compiled} ({time.perf_counter() - started:.1f} s)")
        cost = fresh("discard", compiled)["one_time_s"]
        out.append(Row("first write: one-time cost, discarding writer, PySpark compiled", cost, "s", "—"))
    out.append(Row("first write: one-time cost, JVM noop sink", fresh("noop")["one_time_s"], "s", "—"))
    return out


def _within_a_second(name: str, seconds: float) -> Row:
    """A one-time cost against the first write's target, ≤ 1 s (its ratio: the seconds themselves)."""
    return Row(name, seconds, "s", "≤ 1 s", seconds, seconds <= 1.0)


def _median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run whose one-time cost is the median (the lower middle one of an even count)."""
    return sorted(runs, key=lambda r: r["one_time_s"])[(len(runs) - 1) // 2]


def one_time_cpu_rows(r: dict, name: str) -> list[Row]:
    """The first write's CPU beyond its warm write's (the fastest later one), in Spark's JVM and in its
    Python processes: on two cores, their sum over 2 is the least wall time that work can take."""
    warm = r["writes_s"].index(r["warm_s"])
    return [
        Row(f"{name}: {label} CPU", r["cpu_s"][0][group] - r["cpu_s"][warm][group], "s", "—")
        for group, label in (("jvm", "Spark JVM"), ("python", "Spark Python"))
    ]


def prepare_stacks(
    endpoints: str,
    name_server: str | None,
    real: stacks.RealSystems,
    log: Callable[[str], None],
    emulator_pid: int | None = None,
) -> list[stacks.Stack]:
    """The comparison's stacks; fetches what the real ones need (the JVMs start later, see spark_measures).
    `emulator_pid`: the emulator process, whose CPU is the emulator stacks' broker CPU."""
    grpc = stacks.Stack(
        "emulator-grpc", "emulator gRPC", "rocketmq", ours=True, topic_prefix=EMULATOR_PREFIXES[0]
    )
    grpc.connect = {"endpoints": endpoints}
    remoting_skip = stacks.remoting_available()
    remoting = stacks.Stack(
        "emulator-remoting", "emulator remoting", "rocketmq", ours=True, topic_prefix=EMULATOR_PREFIXES[1]
    )
    if remoting_skip is None and not name_server:
        remoting_skip = f"{stacks.REMOTING_MISSING} (the emulator printed no name server)"
    remoting.skip = remoting_skip
    remoting.connect = {"nameServer": name_server or ""}
    if emulator_pid is not None:
        grpc.broker_pids = remoting.broker_pids = [emulator_pid]
    kafka = stacks.fetch_kafka(real, log)
    rocketmq = stacks.Stack("rocketmq5-remoting", "RocketMQ 5 remoting", "rocketmq", ours=True)
    rocketmq.skip = remoting_skip  # replaced by the real cluster when it starts (spark_measures)
    return [grpc, remoting, rocketmq, kafka]


def read_rows(
    args: argparse.Namespace,
    spark: SparkSession,
    endpoints: str,
    batch_server: socket_ceiling.BatchServer,
    log: Callable[[str], None],
    emulator_pid: int | None,
) -> list[Row]:
    """The reads and their ceilings, interleaved round by round: the best run of each against its ceiling,
    the rounds' median ratios and the batch reads' CPU per process group (the socket ceiling's server
    counts as its "emulator")."""
    rows: list[Row] = []
    n = args.messages
    ns = raw_throughput.NAME_SERVER if "remoting" in args.groups else None
    reads = read_measures(spark, endpoints, ns, n, batch_server.address)
    servers = {"socket ceiling": batch_server.pid}
    best = dict.fromkeys(reads, 0.0)
    read_cpu: dict[str, dict[str, float]] = {key: {} for key in reads}  # µs/msg of each best run
    rates: dict[str, list[float]] = {key: [] for key in reads}  # every timed run's, round by round
    # One untimed run of each first: a session's first full-size reads run on a cold JIT (the ceiling
    # took 1.5 s in its first run and 0.6 s in its second), so the best of two would be one warm run.
    log("warm-up: each read once, untimed (Python workers, imports, Spark's JIT)")
    for label, read in reads.values():
        log(f"  {label}")
        read()
    for r in range(args.read_repeat):  # interleaved: a burst of load elsewhere hits one run of each
        for key, (label, read) in reads.items():
            log(f"{label} (run {r + 1} of {args.read_repeat})")
            broker = servers.get(key, emulator_pid)
            best[key] = best_with_cpu(
                best[key],
                read,
                broker,
                n,
                read_cpu[key],
                kept_and_logged(rates[key], run_logger(log, " msgs/s")),
                ignore=[p for p in (emulator_pid, batch_server.pid) if p not in (None, broker)],
            )
    ceiling, batch, stream_ceiling, stream = (
        best[k] for k in ("ceiling", "gRPC", "stream ceiling", "stream")
    )
    ns_batch, ns_stream = best.get("nameServer", 0.0), best.get("nameServer stream", 0.0)
    ceiling_cpu, cpu, ns_cpu = (
        read_cpu.get(k, {}) for k in ("stream ceiling", "stream", "nameServer stream")
    )
    batch_cpu = {k: read_cpu.get(k, {}) for k in ("ceiling", "gRPC", "nameServer")}
    rows.append(Row("read ceiling (Arrow from memory)", ceiling, "msgs/s", "—"))
    rows.append(read_row("batch read → noop", batch, ceiling))
    rows.append(
        Row(
            "read ceiling over a socket (same batches, plain TCP, × ceiling)",
            best["socket ceiling"] / ceiling,
            "×",
            "—",
        )
    )
    rows.append(Row("stream read ceiling (same, as a stream)", stream_ceiling, "msgs/s", "—"))
    rows.append(read_row("stream read → noop", stream, stream_ceiling, "stream ceiling"))
    if ns:
        rows.append(read_row("batch read → noop (nameServer)", ns_batch, ceiling))
        rows.append(read_row("stream read → noop (nameServer)", ns_stream, stream_ceiling, "stream ceiling"))
    rows += round_ratio_rows(rates)
    # Spark's Python processes: the read tasks' workers, and per query the data source's planning
    # and streaming-runner processes (a fixed cost, which the ceiling pays too).
    rows.append(Row("stream read ceiling: Python CPU", ceiling_cpu.get("python", 0.0), "µs/msg", "—"))
    rows += batch_cpu_rows(batch_cpu)
    for label, use in (("stream read", cpu), ("stream read (nameServer)", ns_cpu)):
        if use:
            rows.append(Row(f"{label}: emulator CPU", use["emulator"], "µs/msg", "—"))
            rows.append(Row(f"{label}: Python CPU", use["python"], "µs/msg", "—"))
    return rows


def spark_measures(
    args: argparse.Namespace,
    endpoints: str,
    log: Callable[[str], None],
    stack_list: list[stacks.Stack],
    real: stacks.RealSystems,
    emulator_pid: int | None = None,
) -> list[Row]:
    from examples.spark_defaults import spark_session

    rows: list[Row] = []
    n = args.messages
    log("starting Spark" + (f" (with {real.spark_conf['spark.jars']})" if real.spark_conf else ""))
    spark = spark_session("pyspark-rocketmq-benchmarks", extra=real.spark_conf)
    try:
        if "reads" in args.groups:
            with socket_ceiling.serving(endpoints, TOPIC) as batch_server:
                rows += read_rows(args, spark, endpoints, batch_server, log, emulator_pid)
        if "real" in args.groups and args.real_name_server:
            rows += real_remoting.measures(spark, args.real_name_server, n, args.size, args.repeat, log)
        if "write" in args.groups:
            discard = rocketmq = 0.0
            write_cpu: dict[str, dict[str, float]] = {}
            write_emu: dict[str, float] = {}
            # The write's emulator is its own and keeps one write's messages (a queue's oldest go past
            # that): on this machine a new page costs ~1.5-2 µs while less than ~3.3 GB is in use and
            # ~20-30 µs past that (`python -m benchmarks.first_touch --held`), and the shared emulator's
            # earlier data, then each run's, took the machine past it (the emulator's CPU per row x3-5).
            per_queue = -(-args.write_messages // 8)  # 2 brokers x 4 queues
            with scratch_emulator(args, WRITE_TOPIC, "--retention-messages", str(per_queue)) as scratch:
                for r in range(args.repeat):
                    log(
                        f"write of {args.write_messages:,} rows: discarding writer, then rocketmq (run {r + 1}; "
                        f"the machine's memory in use {memory_in_use_mib():,.0f} MiB)"
                    )
                    w = spark_ratio(
                        scratch.endpoints,
                        args.write_messages,
                        args.size,
                        spark,
                        topic=WRITE_TOPIC,
                        emulator_pid=scratch.pid,
                    )
                    use, emu = w["cpu_us_per_row"].get("rocketmq", {}), w["emulator_per_row"]
                    log(
                        f"  discarding writer {w['discard_rows_per_s']:,.0f}, rocketmq "
                        f"{w['rocketmq_rows_per_s']:,.0f} rows/s; rocketmq's CPU µs per row: {split_text(use)} "
                        f"(the emulator's kernel {emu['kernel_us']:.2f}, {emu['fresh_bytes']:.0f} bytes of fresh "
                        "pages per row)"
                    )
                    discard = max(discard, w["discard_rows_per_s"])
                    if w["rocketmq_rows_per_s"] > rocketmq:  # the best run, and its CPU split
                        rocketmq, write_cpu, write_emu = w["rocketmq_rows_per_s"], w["cpu_us_per_row"], emu
            rows.append(Row("write ceiling (discarding Arrow writer)", discard, "rows/s", "—"))
            rows.append(at_least("write → rocketmq", rocketmq, "rows/s", 0.5, discard, "≥ 0.5 × ceiling"))
            ours, ceiling_cpu = write_cpu.get("rocketmq", {}), write_cpu.get("discard", {})
            rows.append(Row("write: emulator CPU", ours.get("emulator", 0.0), "µs/row", "—"))
            # Of it, the kernel's; and the store's fresh pages, whose kernel cost per page depends on the machine.
            rows.append(Row("write: emulator kernel CPU", write_emu.get("kernel_us", 0.0), "µs/row", "—"))
            rows.append(Row("write: emulator fresh pages", write_emu.get("fresh_bytes", 0.0), "B/row", "—"))
            rows.append(Row("write: Python CPU", ours.get("python", 0.0), "µs/row", "—"))
            rows.append(Row("write: Spark JVM CPU", ours.get("jvm", 0.0), "µs/row", "—"))
            rows.append(Row("write ceiling: Python CPU", ceiling_cpu.get("python", 0.0), "µs/row", "—"))
            rows.append(Row("write ceiling: Spark JVM CPU", ceiling_cpu.get("jvm", 0.0), "µs/row", "—"))
        if "latency" in args.groups:
            # A session's streaming micro-batches get faster over its first few hundred (Spark's JIT): after
            # 50 warm-up batches, three rounds of 100 gave p50 266, 224, 205 ms; after 220, 235, 188, 188,
            # with the floor's 213, 179, 169 interleaved. Queries measured in turn would each be favoured by
            # the ones before (the floor and the stacks' Kafka query run last), so an untimed query first
            # brings the session to its steady state: the rows below are measured warm, as a long-running
            # stream runs.
            warm = max(args.latency_samples * 5, 10)
            log(f"latency warm-up × {warm} (not counted)")
            spark_reads.latency(spark, endpoints, LATENCY_TOPIC, warm, args.latency_interval)
            # Default options (a small batch is one task), then one task per core.
            for p50_name, p99_name, extra in (
                ("latency p50 (send → foreachBatch)", "latency p99 (send → foreachBatch)", {}),
                ("latency p50, numPartitions=2", "latency p99, numPartitions=2", {"numPartitions": "2"}),
            ):
                log(f"latency × {args.latency_samples} {extra or 'default options'}")
                p50, p99 = spark_reads.latency(
                    spark, endpoints, LATENCY_TOPIC, args.latency_samples, args.latency_interval, extra
                )
                log(f"  median micro-batch ms: {spark_reads.batch_phases(spark_reads.LAST_BATCH_BREAKDOWN)}")
                rows.append(Row(p50_name, p50 * 1000, "ms", "≤ 250 ms", p50 / 0.25, p50 <= 0.25))
                rows.append(Row(p99_name, p99 * 1000, "ms", "—"))
            log(f"latency floor × {args.latency_samples}: a Python stream source reading a local file")
            p50, p99 = latency_floor(spark, args.latency_samples, args.latency_interval)
            log(f"  median micro-batch ms: {spark_reads.batch_phases(spark_reads.LAST_BATCH_BREAKDOWN)}")
            rows.append(Row("latency p50 floor (no broker)", p50 * 1000, "ms", "—"))
            rows.append(Row("latency p99 floor (no broker)", p99 * 1000, "ms", "—"))
        if "memory" in args.groups:
            count = max(args.memory_bytes // args.memory_size, 1)
            log(f"memory: loading {count:,} × {args.memory_size} B ({args.memory_bytes / 1e9:.2f} GB)")
            with scratch_emulator(args, MEMORY_TOPIC) as scratch:
                raw_send(
                    scratch.endpoints, count, args.memory_size, topic=MEMORY_TOPIC, warmup_topic=WARMUP_TOPIC
                )
                log("memory: batch read while sampling Python workers' RSS")
                peak_mib, _rate = spark_reads.peak_worker_rss(spark, scratch.endpoints, MEMORY_TOPIC, count)
            rows.append(
                Row(
                    "peak Python worker RSS (backlog read)",
                    peak_mib,
                    "MiB",
                    "≤ 512 MiB",
                    peak_mib / 512,
                    peak_mib <= 512,
                )
            )
        if "stacks" in args.groups:
            stacks_phase(args, spark, stack_list, real, log)
    finally:
        spark.stop()
    return rows


def stacks_phase(
    args: argparse.Namespace,
    spark: SparkSession,
    stack_list: list[stacks.Stack],
    real: stacks.RealSystems,
    log: Callable[[str], None],
) -> None:
    """Starts the real systems (only now: their JVMs would disturb the measures above), runs the workload
    on every stack, stops them."""
    kafka = next(s for s in stack_list if s.key == "kafka")
    stacks.start_kafka(real, kafka, log)
    i = next(i for i, s in enumerate(stack_list) if s.key == "rocketmq5-remoting")
    stack_list[i] = stacks.prepare_real_rocketmq(real, log, stack_list[i].skip)
    for s in stack_list:
        if s.skip:
            log(f"{s.label}: skipped: {s.skip}")
    try:
        stacks.run_workload(
            spark,
            stack_list,
            args.stack_messages,
            args.size,
            args.repeat,
            args.latency_samples,
            args.latency_interval,
            log,
        )
    finally:
        real.stop()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    started = time.time()
    load_before = os.getloadavg()

    def log(msg: str) -> None:
        print(f"[{time.time() - started:6.1f} s] {msg}", file=sys.stderr, flush=True)

    rows, stack_list, notes = run(args, log)
    elapsed = time.time() - started
    table = render(rows)
    print(table)
    if stack_list:
        print()
        title = (
            f"stacks: the same workload ({args.stack_messages:,} × {args.size} B, 8 queues/partitions; "
            f"throughputs best of {args.repeat})"
        )
        print(stacks.render(stack_list, title))
        for note in notes:
            print(f"  {note}")
    print(f"load average {load_before[0]:.2f} before, {os.getloadavg()[0]:.2f} after; {elapsed:.0f} s in all")
    result = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "seconds": round(elapsed, 1),
        "cpus": os.cpu_count(),
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "storage": f"durable ({args.data_dir})" if args.data_dir else "in-memory",
        "options": {k: v for k, v in vars(args).items() if k not in ("groups", "json")},
        "measures": [asdict(r) for r in rows],
        "stacks": stacks.as_json(stack_list),
        "real_systems": notes,
    }
    with open(args.json, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
    return result
