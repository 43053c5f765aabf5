"""The same workload on each stack a data engineer would compare, measured in one run on one machine.

Stacks (columns of the comparison table):

* `emulator gRPC`: this connector (`endpoints`, gRPC v2 + BulkPull) on the bundled emulator;
* `emulator remoting`: this connector over RocketMQ's remoting protocol (`nameServer`) on the emulator;
* `RocketMQ 5.x remoting`: this connector (`nameServer`) on a real Apache RocketMQ 5.x name server and
  broker (Maven Central jars, `tests/real/realcluster.py`);
* `Kafka`: Spark's own Kafka connector (`spark-sql-kafka-0-10`) on a real Apache Kafka broker (KRaft, one
  node, Maven Central jars, `tests/real/kafka.py`).

A stack that cannot run is skipped with a printed reason: the remoting ones until `connector.clients` has
a remoting client and the emulator a name server; the real systems where Java or Maven is missing (a
failure instead under `ROCKETMQ_REAL=required`, as in CI).

Workload, per stack, 8 queues/partitions (the emulator and RocketMQ 2 brokers × 4 queues; Kafka 8
partitions), `--stack-messages` messages of `--size` bytes:

* write: `spark.range(N)` → one binary column (`body` / `value`) → the sink, into a new topic per run;
* batch read: `spark.read` of the first run's topic → `noop`;
* stream read: `readStream` + `availableNow` of the same topic → `noop` (fails unless exactly N rows);
* latency: single messages sent one by one (and acknowledged) while a `foreachBatch` query with
  `processingTime="0 seconds"` runs; p50 and p99 of send → collected on the driver.

The throughput measures run `--repeat` times, interleaved across stacks, best kept; the latency queries
too, the stacks' order reversed in every other run, each stack's lowest p50 and p99 kept.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks import spark_reads
from benchmarks.cpu_time import best_with_cpu, idle_cores, run_logger

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

WORKLOAD = ("write", "batch read", "stream read", "latency p50", "latency p99")
UNITS = {"write": "rows/s", "batch read": "msgs/s", "stream read": "msgs/s", "latency p50": "ms"}
UNITS["latency p99"] = "ms"
HIGHER_IS_BETTER = {"write": True, "batch read": True, "stream read": True}
REMOTING_MISSING = "remoting client not available yet"
WARMUP_MESSAGES = 1000


@dataclass
class Stack:
    """One column: how to reach it and what it measured."""

    key: str
    label: str
    fmt: str  # the Spark format: "rocketmq" or "kafka"
    ours: bool
    connect: dict[str, str] = field(default_factory=dict)  # connection options
    skip: str | None = None  # why it does not run
    topic_prefix: str = ""
    figures: dict[str, float] = field(default_factory=dict)
    batch_ms: dict[str, float] = field(default_factory=dict)  # latency query: median ms per batch phase
    # The broker's processes (the emulator; the real name server and broker; Kafka's JVM), and per throughput
    # measure the best run's CPU µs per message of the broker, Spark's Python workers and Spark's JVM.
    broker_pids: list[int] = field(default_factory=list)
    cpu: dict[str, dict[str, float]] = field(default_factory=dict)
    # Before each run: make sure a topic exists with 8 queues (real RocketMQ needs it, the others create).
    create_topic: Callable[[SparkSession, str], None] | None = None
    latency_send: Callable[[SparkSession, str], Callable[[bytes], None]] | None = None
    failures: list[str] = field(default_factory=list)  # runs that raised: "measure (run r): first line"
    # The broker processes' CPU while idle, in cores, measured after the warm-up: part of every broker CPU
    # per message above (a read of 1,000,000 in 3 s carries 3 s of it), spent whatever the broker serves.
    idle: float | None = None

    def topic(self, what: str) -> str:
        return f"{self.topic_prefix}{what}"

    def write_options(self, topic: str) -> dict[str, str]:
        if self.fmt == "kafka":
            return {**self.connect, "topic": topic}
        return {**spark_reads.connection(self.connect), "topic": topic}

    def read_options(self, topic: str) -> dict[str, str]:
        if self.fmt == "kafka":
            return {**self.connect, "subscribe": topic, "startingOffsets": "earliest"}
        return spark_reads._reader_options(self.connect, topic)

    @property
    def column(self) -> str:
        return "value" if self.fmt == "kafka" else "body"


# ------------------------------------------------------------------------------------------ measures
def body_frame(spark: SparkSession, rows: int, size: int, column: str) -> DataFrame:
    """`spark.range(rows)` → one binary column of `size`-byte bodies (the row number, zero-padded, then x)."""
    from pyspark.sql import functions as F

    pad = "x" * max(size - 20, 0)
    return spark.range(rows).select(F.format_string(f"%020d{pad}", "id").cast("binary").alias(column))


def write(spark: SparkSession, stack: Stack, topic: str, rows: int, size: int) -> float:
    if stack.create_topic:
        stack.create_topic(spark, topic)
    df = body_frame(spark, rows, size, stack.column)
    t0 = time.perf_counter()
    df.write.format(stack.fmt).options(**stack.write_options(topic)).mode("append").save()
    return rows / (time.perf_counter() - t0)


def batch_read(spark: SparkSession, stack: Stack, topic: str, messages: int) -> float:
    df = spark.read.format(stack.fmt).options(**stack.read_options(topic)).load()
    t0 = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    return messages / (time.perf_counter() - t0)


def stream_read(spark: SparkSession, stack: Stack, topic: str, messages: int) -> float:
    df = spark.readStream.format(stack.fmt).options(**stack.read_options(topic)).load()
    return spark_reads.available_now_rate(df, messages, stack.label)


def latency(
    spark: SparkSession, stack: Stack, samples: int, interval_s: float, create: bool = True
) -> tuple[float, float]:
    """p50 and p99 in seconds of one latency query on the stack's latency topic (created first if `create`)."""
    topic = stack.topic("latency")
    if create and stack.create_topic:
        stack.create_topic(spark, topic)
    if stack.fmt == "rocketmq":
        return spark_reads.latency(spark, stack.connect, topic, samples, interval_s)
    assert stack.latency_send is not None
    send = stack.latency_send(spark, topic)
    send(b"w-first")  # the producer has its metadata before the query starts
    opts = {**stack.connect, "subscribe": topic, "startingOffsets": "latest"}
    stream = spark.readStream.format("kafka").options(**opts).load().select("value")
    try:
        return spark_reads.probe_latency(stream, send, samples, interval_s)
    finally:
        send.close()  # type: ignore[attr-defined]


def kafka_topic_creator(bootstrap: str) -> Callable[[SparkSession, str], None]:
    """Creates a topic of 8 partitions with Kafka's AdminClient in the driver's JVM and waits until every
    partition has a leader (auto-creation on a first produce races with idempotent producers on a fresh
    KRaft node: NOT_LEADER_OR_FOLLOWER, then OUT_OF_ORDER_SEQUENCE_NUMBER until the batch expires)."""

    def create(spark: SparkSession, topic: str) -> None:
        from tests.real.kafka import PARTITIONS

        jvm = spark._jvm  # type: ignore[attr-defined]
        props = jvm.java.util.Properties()
        props.put("bootstrap.servers", bootstrap)
        admin = jvm.org.apache.kafka.clients.admin.AdminClient.create(props)
        try:
            new = jvm.org.apache.kafka.clients.admin.NewTopic(topic, PARTITIONS, 1)
            admin.createTopics(jvm.java.util.Collections.singletonList(new)).all().get()
            deadline = time.monotonic() + 60
            while True:
                try:
                    desc = (
                        admin.describeTopics(jvm.java.util.Collections.singletonList(topic))
                        .allTopicNames()
                        .get()
                        .get(topic)
                    )
                except Exception as e:  # Py4JJavaError
                    # createTopics answers before the broker serves the topic's metadata: a describe right
                    # after it can fail with UnknownTopicOrPartitionException (a full run's write once did)
                    if "UnknownTopicOrPartitionException" not in str(e) or time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
                    continue
                parts = list(desc.partitions())
                if len(parts) == PARTITIONS and all(p.leader() is not None for p in parts):
                    return
                if time.monotonic() > deadline:
                    raise RuntimeError(f"Kafka topic {topic}: partitions without a leader after 60 s")
                time.sleep(0.2)
        finally:
            admin.close()

    return create


def kafka_sender(bootstrap: str) -> Callable[[SparkSession, str], Callable[[bytes], None]]:
    """A Kafka producer in the driver's JVM (kafka-clients is on its class path with the connector): each
    body is sent alone and acknowledged (`acks=all`, the default) before `send` returns."""

    def make(spark: SparkSession, topic: str) -> Callable[[bytes], None]:
        jvm = spark._jvm  # type: ignore[attr-defined]
        props = jvm.java.util.Properties()
        serializer = "org.apache.kafka.common.serialization.ByteArraySerializer"
        for k, v in {
            "bootstrap.servers": bootstrap,
            "key.serializer": serializer,
            "value.serializer": serializer,
            "linger.ms": "0",
        }.items():
            props.put(k, v)
        producer = jvm.org.apache.kafka.clients.producer.KafkaProducer(props)
        record = jvm.org.apache.kafka.clients.producer.ProducerRecord

        def send(body: bytes) -> None:
            producer.send(record(topic, bytearray(body))).get()

        send.close = producer.close  # type: ignore[attr-defined]
        return send

    return make


def run_workload(
    spark: SparkSession,
    stacks: list[Stack],
    messages: int,
    size: int,
    repeat: int,
    latency_samples: int,
    latency_interval: float,
    log: Callable[[str], None],
) -> None:
    """Every measure of WORKLOAD on every stack that runs; figures into `stack.figures` (best of `repeat`
    for throughputs, interleaved across stacks)."""
    live = [s for s in stacks if s.skip is None]
    for s in live:  # untimed: each stack's first write, read and stream pay one-time costs (workers, classes)
        log(f"{s.label}: warm-up (write, batch read, stream read of {WARMUP_MESSAGES:,})")
        write(spark, s, s.topic("warmup"), WARMUP_MESSAGES, size)
        batch_read(spark, s, s.topic("warmup"), WARMUP_MESSAGES)
        stream_read(spark, s, s.topic("warmup"), WARMUP_MESSAGES)
    measure_idle(live, log)
    readable: list[Stack] = []  # the stacks whose first write (the reads' topic) succeeded
    for r in range(repeat):
        for s in live:
            log(f"{s.label}: write of {messages:,} rows (run {r + 1} of {repeat})")
            ok = _keep_best(
                s,
                "write",
                messages,
                lambda s=s, r=r: write(spark, s, s.topic(f"write-{r}"), messages, size),
                r,
                log,
                _other_brokers(stacks, s),
            )
            if r == 0 and ok:
                readable.append(s)
        for s in readable:
            log(f"{s.label}: batch read of {messages:,} (run {r + 1})")
            _keep_best(
                s,
                "batch read",
                messages,
                lambda s=s: batch_read(spark, s, s.topic("write-0"), messages),
                r,
                log,
                _other_brokers(stacks, s),
            )
        for s in readable:
            log(f"{s.label}: stream read (availableNow) of {messages:,} (run {r + 1})")
            _keep_best(
                s,
                "stream read",
                messages,
                lambda s=s: stream_read(spark, s, s.topic("write-0"), messages),
                r,
                log,
                _other_brokers(stacks, s),
            )
    # Latency: `repeat` rounds, the stacks' order reversed in every other round, each stack keeping its lowest
    # p50 and p99. The first latency queries after the throughput jobs ran slower whichever stack ran them,
    # so a fixed order handicapped the stack measured first.
    for r in range(repeat):
        for s in live if r % 2 == 0 else live[::-1]:
            log(f"{s.label}: latency × {latency_samples} (run {r + 1} of {repeat})")
            p50, p99 = latency(spark, s, latency_samples, latency_interval, create=r == 0)
            phases = spark_reads.batch_phases(spark_reads.LAST_BATCH_BREAKDOWN)
            log(
                f"{s.label}: p50 {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms; median micro-batch ms: {phases}"
            )
            if p50 * 1000 < s.figures.get("latency p50", float("inf")):
                s.figures["latency p50"] = p50 * 1000
                s.batch_ms = dict(spark_reads.LAST_BATCH_BREAKDOWN)
            s.figures["latency p99"] = min(p99 * 1000, s.figures.get("latency p99", float("inf")))


#: Seconds over which the brokers' idle CPU is measured.
IDLE_SECONDS = 3.0


def measure_idle(stacks: list[Stack], log: Callable[[str], None]) -> None:
    """Each stack's broker processes' idle CPU (`Stack.idle`), all at once while none is asked anything; the
    emulator's two stacks share their process and its figure."""
    groups = sorted({tuple(sorted(s.broker_pids)) for s in stacks if s.broker_pids})
    if not groups:
        return
    log(f"the brokers' idle CPU over {IDLE_SECONDS:.0f} s")
    for group, cores in zip(groups, idle_cores(groups, IDLE_SECONDS), strict=True):
        for s in stacks:
            if tuple(sorted(s.broker_pids)) == group:
                s.idle = cores


def _other_brokers(stacks: list[Stack], stack: Stack) -> list[int]:
    """The broker processes of every stack but `stack` (idle while it is measured)."""
    return [pid for other in stacks for pid in other.broker_pids if pid not in stack.broker_pids]


def _keep_best(
    stack: Stack,
    measure: str,
    messages: int,
    run: Callable[[], float],
    r: int,
    log: Callable[[str], None],
    others: Collection[int] = (),
) -> bool:
    """Runs one throughput measure; keeps its rate, and its CPU per message per process group, when it is
    the stack's best so far. A run that raises is recorded in `stack.failures` (False), so one stack's
    failure (a broker that stops answering) leaves the other stacks' figures and its own other runs; a
    measure none of whose runs succeeded has neither a figure nor a CPU split.
    `others`: the other stacks' broker processes, counted in no group."""
    cpu = dict(stack.cpu.get(measure, {}))
    try:
        best = best_with_cpu(
            stack.figures.get(measure, 0.0),
            run,
            stack.broker_pids,
            messages,
            cpu,
            run_logger(log, "/s"),
            ignore=others,
        )
    except Exception as e:
        reason = failure_reason(e)
        stack.failures.append(f"{measure} (run {r + 1}): {reason}")
        log(f"{stack.label}: {measure} run {r + 1} failed: {reason}")
        return False
    stack.figures[measure] = best
    stack.cpu[measure] = cpu
    return True


def failure_reason(e: BaseException) -> str:
    """A run's exception in one line: its first line and, for a Py4JJavaError (whose first line only names the
    JVM call, "An error occurred while calling o5817.get."), the Java exception and its root cause."""
    lines = [line.strip() for line in str(e).strip().splitlines()]
    java = [line.lstrip(": ") for line in lines[1:] if line.startswith(": ") or line.startswith("Caused by:")]
    parts = lines[:1] + java[:1] + java[1:][-1:]
    return f"{type(e).__name__}: {' | '.join(p[:300] for p in parts)}"


# ------------------------------------------------------------------------------------------ the table
def ratio(ours: Stack, kafka: Stack, measure: str) -> float | None:
    a, b = ours.figures.get(measure), kafka.figures.get(measure)
    return a / b if a and b else None


def ours_at_least_kafka(ours: Stack, kafka: Stack, measure: str) -> bool | None:
    """Whether `ours` does at least as well as Kafka: a rate ≥ Kafka's, a latency ≤ Kafka's."""
    r = ratio(ours, kafka, measure)
    if r is None:
        return None
    return r >= 1 if HIGHER_IS_BETTER.get(measure, False) else r <= 1


def render(stacks: list[Stack], title: str) -> str:
    """The comparison table: a column per stack, then ours/Kafka for each of our stacks that ran."""
    kafka = next((s for s in stacks if s.fmt == "kafka" and s.skip is None), None)
    ours = [s for s in stacks if s.ours and s.skip is None]
    width = max(16, *(len(s.label) + 1 for s in stacks))
    head = f"{'measure':<14} {'unit':<7}" + "".join(f"{s.label:>{width}}" for s in stacks)
    if kafka:
        head += "".join(f"{s.label + ' / Kafka':>{width + 8}}" for s in ours)
    lines = [title, head, "-" * len(head)]
    for m in WORKLOAD:
        line = f"{m:<14} {UNITS[m]:<7}"
        for s in stacks:
            v = s.figures.get(m)
            cell = (
                "skipped" if s.skip else "" if v is None else f"{v:,.1f}" if UNITS[m] == "ms" else f"{v:,.0f}"
            )
            line += f"{cell:>{width}}"
        if kafka:
            for s in ours:
                r, ok = ratio(s, kafka, m), ours_at_least_kafka(s, kafka, m)
                cell = "" if r is None else f"{r:.2f} {'ok' if ok else 'BELOW'}"
                line += f"{cell:>{width + 8}}"
        lines.append(line)
    for s in stacks:
        if s.skip:
            lines.append(f"{s.label}: skipped: {s.skip}")
        for failure in s.failures:
            lines.append(f"{s.label}: FAILED {failure}")
    for s in stacks:
        if s.cpu:
            cells = ", ".join(
                f"{m} {c['emulator']:.2f} / {c['python']:.2f} / {c['jvm']:.2f}" for m, c in s.cpu.items()
            )
            lines.append(
                f"{s.label}: CPU µs per message of the best run (broker / Spark's Python / Spark's JVM): {cells}"
            )
    idle = [f"{s.label} {s.idle * 100:.1f}%" for s in stacks if s.idle is not None]
    if idle:
        lines.append(
            f"the brokers' own CPU while idle ({IDLE_SECONDS:.0f} s after the warm-up), % of a core, part of each "
            f"broker figure above for as long as its run took: {', '.join(idle)}"
        )
    for s in stacks:
        if s.batch_ms:
            lines.append(
                f"{s.label}: median micro-batch of the latency run with the lowest p50 (ms): "
                f"{spark_reads.batch_phases(s.batch_ms)}"
            )
    lines.append(
        "ours/Kafka: a rate's ratio ≥ 1 and a latency's ≤ 1 mean ours does at least as well ('ok'), "
        "else 'BELOW'"
    )
    return "\n".join(lines)


def as_json(stacks: list[Stack]) -> list[dict[str, Any]]:
    kafka = next((s for s in stacks if s.fmt == "kafka" and s.skip is None), None)
    out = []
    for s in stacks:
        entry: dict[str, Any] = {
            "stack": s.label,
            "skipped": s.skip,
            "figures": dict(s.figures),
            "failures": list(s.failures),
        }
        if s.batch_ms:
            entry["latency_batch_ms"] = dict(s.batch_ms)
        if s.idle is not None:
            entry["broker_idle_cores"] = s.idle
        if s.cpu:
            entry["cpu_us_per_message"] = {
                m: {"broker": c["emulator"], "python": c["python"], "jvm": c["jvm"]} for m, c in s.cpu.items()
            }
        if kafka and s.ours and s.skip is None:
            entry["ours_over_kafka"] = {m: ratio(s, kafka, m) for m in WORKLOAD}
        out.append(entry)
    return out


# ------------------------------------------------------------------------------------------ availability
def remoting_available() -> str | None:
    """None when the connector has a remoting client (`nameServer`) and the emulator a name server, else
    why not."""
    import importlib.util

    from broker_emulator.embedded import Emulator

    if importlib.util.find_spec("connector.clients.remoting") is None:
        return f"{REMOTING_MISSING} (connector.clients has no remoting implementation)"
    if not hasattr(Emulator, "name_server"):
        return f"{REMOTING_MISSING} (the emulator has no name server)"
    return None


def real_required() -> bool:
    return os.environ.get("ROCKETMQ_REAL", "").strip().lower() == "required"


def unavailable(what: str, reason: str) -> str:
    """The skip reason of a real system that cannot run; raises under ROCKETMQ_REAL=required."""
    if real_required():
        raise RuntimeError(f"ROCKETMQ_REAL=required but {what} is unavailable: {reason}")
    return f"{what} unavailable: {reason}"


@dataclass
class RealSystems:
    """The JVMs started for the real stacks (stopped by `stop`), and the Spark settings Kafka needs."""

    work_dir: Path
    kafka_broker: Any = None
    rocketmq: Any = None
    spark_conf: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def stop(self) -> None:
        for system in (self.kafka_broker, self.rocketmq):
            if system is not None:
                system.stop()
        self.kafka_broker = self.rocketmq = None
        shutil.rmtree(self.work_dir, ignore_errors=True)


def fetch_kafka(real: RealSystems, log: Callable[[str], None]) -> Stack:
    """Fetches Spark's Kafka connector and Kafka with Maven (cached) and sets the Spark settings the
    connector needs (`real.spark_conf`, for the session to come); `start_kafka` starts the broker. The stack
    is skipped, with the reason, when Java or Maven is missing."""
    stack = Stack("kafka", "Kafka", "kafka", ours=False, topic_prefix="anchor-kafka-")
    try:
        from tests.real import kafka
        from tests.real.jvm import Unavailable
    except ImportError as e:  # an installed copy without the tests/ tree
        stack.skip = unavailable("Kafka", f"tests/real is not importable ({e})")
        return stack
    try:
        log("Kafka: fetching Spark's Kafka connector and the broker with Maven (cached after the first run)")
        connector = kafka.fetch_spark_connector()
        lib = kafka.fetch_broker()
    except Unavailable as e:
        stack.skip = unavailable("Kafka", str(e).splitlines()[0])
        return stack
    real.kafka_broker = kafka.KafkaBroker(lib, real.work_dir / "kafka")
    stack.label = f"Kafka {real.kafka_broker.version}"
    jars = [str(j) for j in connector.jars]
    real.spark_conf["spark.jars"] = ",".join(jars)
    real.spark_conf["spark.driver.extraClassPath"] = os.pathsep.join(jars)
    real.notes.append(f"Spark's connector: spark-sql-kafka-0-10_2.13 {connector.version}")
    return stack


def start_kafka(real: RealSystems, stack: Stack, log: Callable[[str], None]) -> None:
    """Starts the broker `fetch_kafka` prepared (the stack is skipped if it fails to start)."""
    broker = real.kafka_broker
    if stack.skip is not None or broker is None:
        return
    log(f"{stack.label}: starting the broker (KRaft, one node)")
    try:
        broker.start()
    except Exception as e:
        broker.stop()
        stack.skip = unavailable("Kafka", f"the broker did not start: {str(e)[:2000]}")
        return
    real.notes.append(
        f"{stack.label}: KRaft, 1 node, 8 partitions per topic, started in {broker.start_seconds:.1f} s"
    )
    stack.connect = {"kafka.bootstrap.servers": broker.bootstrap}
    stack.broker_pids = [broker.process.pid] if broker.process is not None else []
    stack.latency_send = kafka_sender(broker.bootstrap)
    stack.create_topic = kafka_topic_creator(broker.bootstrap)


def prepare_real_rocketmq(real: RealSystems, log: Callable[[str], None], remoting_skip: str | None) -> Stack:
    """A real RocketMQ 5.x name server and two brokers of 4 queues per topic (no proxy: remoting), as the
    emulator's 2 × 4, when the connector speaks remoting."""
    stack = Stack(
        "rocketmq5-remoting", "RocketMQ 5 remoting", "rocketmq", ours=True, topic_prefix="anchor-rmq-"
    )
    if remoting_skip is not None:
        stack.skip = remoting_skip
        return stack
    try:
        from tests.real import realcluster as rc
    except ImportError as e:
        stack.skip = unavailable("real RocketMQ", f"tests/real is not importable ({e})")
        return stack
    try:
        log(f"RocketMQ {rc.ROCKETMQ5_VERSION}: fetching with Maven (cached after the first run)")
        dist = rc.fetch(rc.ROCKETMQ5_VERSION)
        cluster = rc.Cluster(dist, real.work_dir / "rocketmq", with_proxy=False, brokers=2)
        log(f"RocketMQ {dist.version}: starting a name server and two brokers")
        real.rocketmq = cluster.start()
    except rc.Unavailable as e:
        stack.skip = unavailable("real RocketMQ", str(e).splitlines()[0])
        return stack
    stack.label = f"RocketMQ {dist.version} remoting"
    stack.connect = {"nameServer": cluster.namesrv}
    stack.broker_pids = [p.pid for p in cluster.processes]
    stack.create_topic = lambda _spark, topic: cluster.update_topic(topic, 4)  # on each broker
    real.notes.append(
        f"RocketMQ {dist.version}: name server + 2 brokers (4 queues per topic on each), started in "
        f"{cluster.start_seconds:.1f} s"
    )
    return stack
