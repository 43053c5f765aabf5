"""Streaming queries under crashes and broker outages : the process running
examples/streaming_etl.py (rocketmq → parquet with a checkpoint) is `kill -9`ed at random points
mid-stream and restarted, and a broker goes down and up during a streaming read and during a write.
In every case the committed parquet output (or the topic) equals the input exactly: no loss, no
duplicate. The emulator lives in the test process, across the Spark process kills.

RELIABILITY_SEED replays a run; STREAM_KILLS sets the number of kills (default 3)."""

from __future__ import annotations

import glob
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

import grpc
import pyarrow.parquet as pq
import pytest

from broker_emulator import Emulator
from rocketmq_protocol.grpc_v2 import definition_pb2 as d
from rocketmq_protocol.grpc_v2 import service_pb2_grpc as sg
from tests.support.helpers import make_message, send, unique_name
from tests.support.writing import bodies, read_topic

pytestmark = pytest.mark.reliability

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ETL = os.path.join(ROOT, "examples", "streaming_etl.py")
QUEUES = 2
PER_TRIGGER = 100
RUN_TIMEOUT_S = 240


def committed_files(output: str) -> list[str]:
    """The parquet files the file sink committed: its `_spark_metadata` log (latest compaction and the
    batches after it), so files left by a batch killed while writing are not counted."""
    log_dir = os.path.join(output, "_spark_metadata")
    entries: dict[int, str] = {}
    for path in os.listdir(log_dir):
        name = os.path.basename(path)
        if name.startswith(".") or name.endswith(".tmp"):
            continue
        entries[int(name.split(".")[0])] = name
    compact = max((b for b, n in entries.items() if n.endswith(".compact")), default=-1)
    files: dict[str, bool] = {}
    for batch in sorted(b for b in entries if b >= compact):
        with open(os.path.join(log_dir, entries[batch]), encoding="utf-8") as f:
            lines = f.read().splitlines()
        assert lines[0] == "v1", lines[0]
        for line in lines[1:]:
            e = json.loads(line)
            files[e["path"]] = e["action"] == "add"
    return [p.removeprefix("file://") for p, added in files.items() if added]


def committed_rows(output: str, columns: tuple[str, ...] = ("order_id", "messageId")) -> list[dict]:
    rows: list[dict] = []
    for path in committed_files(output):
        rows += pq.read_table(path, columns=list(columns)).to_pylist()
    return rows


def send_orders(rocketmq_emulator: Emulator, topic: str, count: int, run: str) -> list[str]:
    """`count` JSON orders (unique order ids) through v2 SendMessage batches, spread over every queue."""
    ids = [f"{run}-{i}" for i in range(count)]
    chans = [grpc.insecure_channel(b.endpoint) for b in rocketmq_emulator.brokers]
    try:
        stubs = [sg.MessagingServiceStub(c) for c in chans]
        for start in range(0, count, 50):
            chunk = ids[start : start + 50]
            k = start // 50
            stub, q = stubs[k % len(stubs)], (k // len(stubs)) % QUEUES
            body = lambda oid: json.dumps(  # noqa: E731
                {"order_id": oid, "customer": "c", "amount": 10.0, "currency": "EUR", "created_at": None}
            ).encode()
            r = send(stub, [make_message(topic, body(o), queue_id=q) for o in chunk], explicit=True)
            assert r.status.code == d.OK, r.status
    finally:
        for c in chans:
            c.close()
    return ids


def start_etl(endpoints: str, topic: str, output: str, checkpoint: str, log_path: str) -> subprocess.Popen:
    cmd = [sys.executable, ETL, "--endpoints", endpoints, "--topic", topic, "--output", output]
    cmd += ["--checkpoint", checkpoint, "--max-messages-per-trigger", str(PER_TRIGGER)]
    log = open(log_path, "w")
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env={**os.environ}
    )
    proc.log = log  # type: ignore[attr-defined]
    return proc


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the job and its JVM (its own process group): a machine-level crash of the driver."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(30)
    proc.log.close()  # type: ignore[attr-defined]


def commits(checkpoint: str) -> int:
    return len(glob.glob(os.path.join(checkpoint, "commits", "[0-9]*")))


@pytest.mark.timeout(900)
def test_kill9_of_the_streaming_job_then_restart_gives_exact_output(tmp_path):
    seed = int(os.environ.get("RELIABILITY_SEED", random.randrange(1 << 30)))
    kills = int(os.environ.get("STREAM_KILLS", "3"))
    rng = random.Random(seed)
    print(f"[reliability-stream] seed={seed} kills={kills}", flush=True)
    output, checkpoint = str(tmp_path / "orders"), str(tmp_path / "checkpoint")
    expected: list[str] = []
    t0 = time.time()
    with Emulator(brokers=2, queues=QUEUES) as emu:
        topic = unique_name("etl")
        emu.create_topic(topic, queues=QUEUES)
        expected += send_orders(emu, topic, 600, "r0")
        killed_at: list[str] = []
        for run in range(kills + 1):
            log_path = str(tmp_path / f"run{run}.log")
            started = time.time()
            proc = start_etl(emu.endpoints, topic, output, checkpoint, log_path)
            try:
                if run == kills:
                    assert proc.wait(RUN_TIMEOUT_S) == 0, open(log_path).read()[-4000:]
                    proc.log.close()  # type: ignore[attr-defined]
                    break
                before = commits(checkpoint)
                deadline = time.time() + RUN_TIMEOUT_S
                while commits(checkpoint) <= before and proc.poll() is None and time.time() < deadline:
                    time.sleep(0.1)
                assert proc.poll() is None, (
                    f"run {run} ended before it was killed:\n{open(log_path).read()[-4000:]}"
                )
                assert commits(checkpoint) > before, f"run {run} committed no batch in {RUN_TIMEOUT_S} s"
                delay = rng.uniform(0, 2.0)  # after a commit: often mid-way through the next batch
                time.sleep(delay)
                done = commits(checkpoint)
                kill_group(proc)
                killed_at.append(
                    f"run {run}: {done} batches committed, +{delay:.2f} s, {time.time() - started:.0f} s after start"
                )
                print(f"[reliability-stream] kill -9 {killed_at[-1]}", flush=True)
                # New input arrives while the job is down.
                expected += send_orders(emu, topic, rng.randint(20, 100), f"r{run + 1}")
            finally:
                if proc.poll() is None:
                    kill_group(proc)
        out = open(log_path).read()
        assert f"output holds {len(expected)} rows" in out, out[-3000:]
    rows = committed_rows(output)
    got = [r["order_id"] for r in rows]
    dupes = len(got) - len(set(got))
    assert dupes == 0, f"{dupes} duplicated rows in the output"
    assert len({r["messageId"] for r in rows}) == len(rows)
    missing = set(expected) - set(got)
    assert not missing, f"{len(missing)} orders lost, e.g. {sorted(missing)[:3]}"
    assert set(got) == set(expected)
    print(
        f"[reliability-stream] messages checked={len(expected)}, kill points={len(killed_at)}, "
        f"committed batches={commits(checkpoint)}, seed={seed}, {time.time() - t0:.0f} s",
        flush=True,
    )


# ------------------------------------------------------------------------------------------ broker outages
def _send_bodies(
    rocketmq_emulator: Emulator, topic: str, broker: int, prefix: str, count: int
) -> list[bytes]:
    out = [f"{prefix}-{i}".encode() for i in range(count)]
    with grpc.insecure_channel(rocketmq_emulator.brokers[broker].endpoint) as ch:
        stub = sg.MessagingServiceStub(ch)
        for q in range(QUEUES):
            r = send(stub, [make_message(topic, b, queue_id=q) for b in out[q::QUEUES]], explicit=True)
            assert r.status.code == d.OK, r.status
    return out


def _start_stream(spark, endpoints: str, topic: str, output: str, checkpoint: str, timeout_ms: int):
    df = (
        spark.readStream.format("rocketmq")
        .option("endpoints", endpoints)
        .option("topic", topic)
        .option("startingOffsets", "earliest")
        .option("pullTimeoutMs", str(timeout_ms))
        .load()
    )
    return (
        df.select("body", "messageId", "brokerName")
        .writeStream.format("parquet")
        .option("path", output)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="300 milliseconds")
        .start()
    )


def _wait_rows(output: str, expected: int, query, timeout: float) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if (
            os.path.isdir(os.path.join(output, "_spark_metadata"))
            and len(committed_rows(output, ("body",))) >= expected
        ):
            return
        if not query.isActive:
            raise AssertionError(f"query ended: {query.exception()}")
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {expected} rows")


def _assert_exact(output: str, expected: list[bytes]) -> None:
    got = [r["body"] for r in committed_rows(output, ("body",))]
    assert len(got) == len(set(got)), f"{len(got) - len(set(got))} duplicated rows"
    assert sorted(got) == sorted(expected), (
        f"lost {len(set(expected) - set(got))}, extra {len(set(got) - set(expected))}"
    )


def test_broker_down_during_a_streaming_read_rides_through_or_resumes(spark, tmp_path):
    """A short outage (< pullTimeoutMs) is ridden through; a long one fails the query with a clear error,
    and the query restarted on its checkpoint after the outage catches up without loss or duplicate."""
    with Emulator(brokers=2, queues=QUEUES) as emu:
        topic = unique_name("outage")
        emu.create_topic(topic, queues=QUEUES)
        b = emu.broker("broker-b")
        expected = _send_bodies(emu, topic, 0, "a0", 40) + _send_bodies(emu, topic, 1, "b0", 40)
        output, checkpoint = str(tmp_path / "out"), str(tmp_path / "ckpt")

        # 1. Short outage while the stream runs: retries within pullTimeoutMs ride through it.
        query = _start_stream(spark, emu.endpoints, topic, output, checkpoint, 20_000)
        try:
            _wait_rows(output, len(expected), query, 120)
            b.set_fault(down=True)
            expected += _send_bodies(emu, topic, 0, "a1", 40)
            time.sleep(3)
            b.clear_faults()
            expected += _send_bodies(emu, topic, 1, "b1", 40)
            _wait_rows(output, len(expected), query, 120)
            assert query.isActive and query.exception() is None
        finally:
            b.clear_faults()
            query.stop()
        _assert_exact(output, expected)
        short_rows = len(expected)

        # 2. Outage longer than pullTimeoutMs: the query fails, naming the broker and the timeout.
        query = _start_stream(spark, emu.endpoints, topic, output, checkpoint, 1500)
        try:
            b.set_fault(down=True)
            expected += _send_bodies(emu, topic, 0, "a2", 40)
            deadline = time.time() + 120
            while query.isActive and time.time() < deadline:
                time.sleep(0.2)
            assert not query.isActive, "the query kept running through a long outage"
            error = str(query.exception())
            assert "broker-b" in error or emu.brokers[1].endpoint in error, error[:2000]
            assert "1500 ms" in error or "UNAVAILABLE" in error, error[:2000]
        finally:
            b.clear_faults()
            if query.isActive:
                query.stop()

        # 3. Restarted on its checkpoint after the outage: exactly the input, once.
        expected += _send_bodies(emu, topic, 1, "b2", 40)
        query = _start_stream(spark, emu.endpoints, topic, output, checkpoint, 20_000)
        try:
            _wait_rows(output, len(expected), query, 120)
            query.processAllAvailable()
        finally:
            query.stop()
        _assert_exact(output, expected)
        print(
            f"[reliability-stream] broker outage during a read: {short_rows} rows through a 3 s outage, "
            f"{len(expected)} rows exact after a failed query resumed from its checkpoint",
            flush=True,
        )


def test_broker_down_during_a_write_moves_sends_to_the_other_broker(spark):
    """broker-b goes down mid-write and comes back: every row is stored exactly once (at-least-once with
    no retried duplicate, as a refused RPC stores nothing), the outage's sends on broker-a."""
    with Emulator(brokers=2, queues=QUEUES) as emu:
        topic = unique_name("wout")
        emu.create_topic(topic, queues=QUEUES)
        b = emu.broker("broker-b")
        n = 20_000
        df = spark.range(n).selectExpr("CAST(concat('w-', id) AS BINARY) AS body").repartition(2)
        outage: list[tuple[int, int]] = []  # (stored on broker-a, on broker-b) at down and at up
        finished = threading.Event()

        def on(broker: str) -> int:
            return sum(emu.min_max(topic, broker, q)[1] for q in range(QUEUES))

        def stored() -> int:
            return on("broker-a") + on("broker-b")

        def inject() -> None:
            """broker-b down once the write is under way (2000 rows stored), up 2 s later."""
            while not finished.is_set() and stored() < 2000:
                time.sleep(0.01)
            if finished.is_set():
                return
            b.set_fault(down=True)
            outage.append((on("broker-a"), on("broker-b")))
            finished.wait(2.0)
            outage.append((on("broker-a"), on("broker-b")))
            b.clear_faults()

        injector = threading.Thread(target=inject, daemon=True)
        injector.start()
        try:
            (
                df.write.format("rocketmq")
                .option("endpoints", emu.endpoints)
                .option("topic", topic)
                .option("batchSize", "50")
                .option("maxInFlightRequests", "1")
                .option("sendMsgTimeoutMs", "10000")
                .mode("append")
                .save()
            )
        finally:
            finished.set()
            injector.join(10)
            b.clear_faults()
        assert len(outage) == 2 and sum(outage[0]) < n, f"the outage did not overlap the write: {outage}"
        assert outage[1][1] == outage[0][1], f"broker-b stored messages while down: {outage}"
        tables = read_topic(emu.endpoints, topic)
        got = bodies(tables)
        assert len(got) == n and set(got) == {f"w-{i}".encode() for i in range(n)}, len(got)
        on_b = sum(t.num_rows for (br, _), t in tables.items() if br == "broker-b")
        print(
            f"[reliability-stream] broker down during a write: {n} rows exact, {outage[1][0] - outage[0][0]} "
            f"stored on broker-a during the outage (none on broker-b), {on_b} on broker-b in total",
            flush=True,
        )
