"""`kill -9` of a durable emulator at random points while producers send and consumers pull and pop, over
many restarts of one data directory . After each restart: every message acknowledged OK is
stored exactly once with dense offsets, committed offsets never went back past an acknowledged
UpdateOffset, an acknowledged POP ack stays acked, and delayed and half messages come back.

The seed is random unless RELIABILITY_SEED is set; it is printed so a failure can be replayed.
KILL_POINTS sets the number of kills (default 12)."""

from __future__ import annotations

import os
import random
import threading
import time
import uuid
from dataclasses import dataclass, field

import grpc
import pyarrow as pa
import pytest
from rocketmq import (
    ClientConfiguration,
    Credentials,
    Message,
    Producer,
    SimpleConsumer,
    TransactionResolution,
)
from rocketmq import FilterExpression as OfficialFilter

from connector.clients import close_clients, get_client
from connector.config import ClientConfig
from connector.options import parse_writer_options
from connector.producer import Producer as ConnectorProducer
from connector.queues import MessageQueue, RouteEntry
from connector.sink_rows import RowChecker
from rocketmq_protocol.grpc_v2 import definition_pb2 as d
from rocketmq_protocol.grpc_v2 import service_pb2 as s
from rocketmq_protocol.grpc_v2 import service_pb2_grpc as sg
from tests.emulator.test_consumption import Checker
from tests.support.emulator_proc import EmulatorProcess
from tests.support.helpers import read_queue

pytestmark = pytest.mark.reliability

LOG_TOPIC = "klog"  # raw v2 and connector producers, pull consumers
POP_TOPIC = "kpop"  # official Producer (normal, delayed, transactional) and SimpleConsumer
QUEUES = 4
BROKERS = ("broker-a", "broker-b")
PULL_GROUP = "kill-pull"
POP_GROUP = "kill-pop"
MD = [("x-mq-client-id", "reliability-kill")]
SERVE_ARGS = ("--brokers", "2", "--queues", str(QUEUES), "--min-invisible-ms", "1000")
SERVE_ARGS += ("--transaction-check-ms", "1500")
INVISIBLE_S = 2
JOIN_S = 40


@dataclass
class Ledger:
    """What the clients were told OK, across every cycle (threads append under `lock`)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    raw: dict[str, tuple[str, int, int]] = field(default_factory=dict)  # id -> (broker, queue, offset)
    connector: set[bytes] = field(default_factory=set)  # bodies of batches whose flush() returned
    committed: dict[tuple[str, int], int] = field(default_factory=dict)  # (broker, queue) -> offset
    pop_sent: dict[str, float] = field(default_factory=dict)  # id -> due time (0 when not delayed)
    half_sent: set[str] = field(default_factory=set)  # transactional, resolved COMMIT by the checker
    pop_acked: set[str] = field(default_factory=set)
    ack_unknown: set[str] = field(default_factory=set)  # ack sent, the broker died before answering
    redelivered_after_ack: list[str] = field(default_factory=list)
    early: list[str] = field(default_factory=list)  # delayed messages received before their time
    errors: list[str] = field(default_factory=list)  # unexpected failures inside the threads


def _guard(ledger: Ledger, name: str, fn, *args) -> None:
    """Runs a worker; RPC failures after the kill end it quietly, anything else is recorded."""
    try:
        fn(*args)
    except (grpc.RpcError, ConnectionError, TimeoutError):
        pass
    except Exception as e:
        text = f"{type(e).__name__}: {e}"
        if not _is_outage(text):
            ledger.errors.append(f"{name}: {text[:500]}")


def _is_outage(text: str) -> bool:
    words = ("UNAVAILABLE", "Connection refused", "DEADLINE", "Deadline", "timed out", "Socket closed")
    words += ("failed to connect", "RetriesExhausted", "retries", "unavailable", "Timeout", "timeout")
    return any(w in text for w in words)


# ------------------------------------------------------------------------------------------ workers
def raw_sender(ledger: Ledger, endpoint: str, broker: str, stop: threading.Event, seed: int) -> None:
    """v2 SendMessage batches to an explicit queue; records where each OK entry was stored."""
    rng = random.Random(seed)
    with grpc.insecure_channel(endpoint) as ch:
        stub = sg.MessagingServiceStub(ch)
        while not stop.is_set():
            q = rng.randrange(QUEUES)
            msgs = []
            for _ in range(rng.randint(1, 30)):
                sp = d.SystemProperties(
                    message_id=uuid.uuid4().hex, queue_id=q, tag="raw", body_encoding=d.IDENTITY
                )
                msgs.append(
                    d.Message(
                        topic=d.Resource(name=LOG_TOPIC), body=sp.message_id.encode(), system_properties=sp
                    )
                )
            r = stub.SendMessage(
                s.SendMessageRequest(messages=msgs),
                metadata=[*MD, ("x-mq-queue-id-explicit", "true")],
                timeout=5,
            )
            if r.status.code != d.OK:
                ledger.errors.append(f"raw send: {r.status}")
                return
            with ledger.lock:
                for m, e in zip(msgs, r.entries, strict=True):
                    ledger.raw[m.system_properties.message_id] = (broker, q, e.offset)


def connector_sender(ledger: Ledger, endpoints: str, stop: threading.Event, seed: int) -> None:
    """The sink's Producer (round robin over both brokers); a batch counts once flush() returned."""
    rng = random.Random(seed)
    options = parse_writer_options(
        {"endpoints": endpoints, "topic": LOG_TOPIC, "sendMsgTimeoutMs": "1000", "batchSize": "64"}
    )
    producer = ConnectorProducer(options, label="kill-test")
    checker = RowChecker({"body": "body"}, LOG_TOPIC, options.max_message_size, label="kill-test")
    try:
        while not stop.is_set():
            bodies = [f"conn-{uuid.uuid4().hex}".encode() for _ in range(rng.randint(1, 200))]
            batch = pa.record_batch([pa.array(bodies, pa.binary())], names=["body"])
            for rows in checker.check(batch, 0):
                producer.send(rows)
            producer.flush()
            with ledger.lock:
                ledger.connector.update(bodies)
    finally:
        producer.close()


def puller(ledger: Ledger, endpoints: str, stop: threading.Event, seed: int) -> None:
    """Pulls every queue of the log topic from the committed offset on, checks order, commits."""
    rng = random.Random(seed)
    client = get_client(ClientConfig(endpoints))
    queues = [q for q in client.route(LOG_TOPIC, 5000)]
    positions: dict[tuple[str, int], int] = {}
    for q in queues:
        positions[(q.broker, q.queue_id)] = client.get_committed(PULL_GROUP, q, 5000) or 0
    while not stop.is_set():
        q = rng.choice(queues)
        key = (q.broker, q.queue_id)
        r = client.pull(q, positions[key], 256, group=PULL_GROUP, timeout_ms=1000)
        offsets = r.table.column("queue_offset").to_pylist() if r.table.num_rows else []
        if offsets and offsets != list(range(positions[key], positions[key] + len(offsets))):
            ledger.errors.append(f"pull {key} from {positions[key]}: offsets not dense {offsets[:5]}...")
        positions[key] = r.next_offset
        client.commit(PULL_GROUP, q, r.next_offset, 1000)
        with ledger.lock:
            ledger.committed[key] = max(ledger.committed.get(key, 0), r.next_offset)


def _official_config(endpoints: str) -> ClientConfiguration:
    return ClientConfiguration(endpoints.split(";")[0], Credentials(), request_timeout=3)


def official_sender(ledger: Ledger, producer: Producer, stop: threading.Event, seed: int) -> None:
    """Official Producer: normal, delayed (1-3 s) and transactional (left open: the checker commits)."""
    rng = random.Random(seed)
    while not stop.is_set():
        m = Message()
        m.topic = POP_TOPIC
        m.body = uuid.uuid4().hex.encode()
        kind = rng.random()
        due = 0.0
        if kind < 0.15:
            due = time.time() + rng.uniform(1, 3)
            m.delivery_timestamp = int(due * 1000)
        if kind > 0.92:
            tx = producer.begin_transaction()
            mid = producer.send(m, tx).message_id
            with ledger.lock:
                ledger.half_sent.add(mid)
            continue
        mid = producer.send(m).message_id
        with ledger.lock:
            ledger.pop_sent[mid] = due


def receive_and_ack(ledger: Ledger, consumer: SimpleConsumer, stop: threading.Event | None = None) -> None:
    """One SimpleConsumer receive; acks each message unless `stop` is set by then (left in flight, it must
    reappear after its invisible time). An id whose ack was acknowledged must never come back."""
    for m in consumer.receive(16, INVISIBLE_S):
        now = time.time()
        with ledger.lock:
            if m.message_id in ledger.pop_acked:
                ledger.redelivered_after_ack.append(m.message_id)
            due = ledger.pop_sent.get(m.message_id, 0.0)
            if due and now < due - 0.05:
                ledger.early.append(m.message_id)
        if stop is not None and stop.is_set():
            return
        with ledger.lock:
            ledger.ack_unknown.add(m.message_id)
        consumer.ack(m)
        with ledger.lock:
            ledger.ack_unknown.discard(m.message_id)
            ledger.pop_acked.add(m.message_id)


def popper(ledger: Ledger, consumer: SimpleConsumer, stop: threading.Event) -> None:
    while not stop.is_set():
        receive_and_ack(ledger, consumer, stop)


# ------------------------------------------------------------------------------------------ checks
def read_log(endpoints: list[str]) -> dict[tuple[str, int], pa.Table]:
    """Every stored message of the log topic per (broker, queue), checking offsets are dense from 0."""
    out = {}
    for broker, ep in zip(BROKERS, endpoints, strict=True):
        for q in range(QUEUES):
            t = read_queue(ep, LOG_TOPIC, q, batch=20_000)
            if t is not None:
                t = t.select(["queue_offset", "message_id", "body"])
                n = t.num_rows
                assert t.column("queue_offset").to_pylist() == list(range(n)), (
                    f"{broker}/{q}: offsets not dense"
                )
            out[(broker, q)] = t
    return out


def verify_log(ledger: Ledger, endpoints: list[str], cycle: int) -> int:
    """Every acknowledged message is stored once where it was acknowledged; returns the number checked."""
    stored = read_log(endpoints)
    where: dict[str, tuple[str, int, int]] = {}
    bodies: dict[bytes, int] = {}
    for (broker, q), t in stored.items():
        if t is None:
            continue
        for off, mid, body in zip(
            *(t.column(c).to_pylist() for c in ("queue_offset", "message_id", "body")), strict=True
        ):
            assert mid not in where, (
                f"cycle {cycle}: message id {mid} stored twice ({where[mid]}, {(broker, q, off)})"
            )
            where[mid] = (broker, q, off)
            bodies[body] = bodies.get(body, 0) + 1
    for mid, at in ledger.raw.items():
        assert where.get(mid) == at, (
            f"cycle {cycle}: raw {mid} acknowledged at {at}, stored at {where.get(mid)}"
        )
    for body in ledger.connector:
        assert bodies.get(body) == 1, (
            f"cycle {cycle}: connector body {body!r} stored {bodies.get(body, 0)} times"
        )
    return len(ledger.raw) + len(ledger.connector)


def verify_offsets(ledger: Ledger, endpoints: str, cycle: int) -> None:
    client = get_client(ClientConfig(endpoints))
    for (broker, q), acked in ledger.committed.items():
        ep = endpoints.split(";")[BROKERS.index(broker)]
        got = client.get_committed(PULL_GROUP, RouteEntry(MessageQueue(LOG_TOPIC, broker, q), ep), 5000)
        assert got is not None and got >= acked, (
            f"cycle {cycle}: {broker}/{q} committed {got} < acked {acked}"
        )


def drain_pop(ledger: Ledger, consumer: SimpleConsumer, timeout: float) -> None:
    """Receives until every message sent OK (normal, delayed, committed half) was received and acked."""
    expected = set(ledger.pop_sent) | ledger.half_sent
    deadline = time.time() + timeout
    while not expected <= ledger.pop_acked and time.time() < deadline:
        receive_and_ack(ledger, consumer)
    # An ack cut by the kill may or may not have been stored: such a message may not come back.
    missing = expected - ledger.pop_acked - ledger.ack_unknown
    kinds = {
        m: "half" if m in ledger.half_sent else "delayed" if ledger.pop_sent.get(m) else "normal"
        for m in missing
    }
    assert not missing, f"{len(missing)} POP messages never delivered: {sorted(kinds.items())[:5]}"


# ------------------------------------------------------------------------------------------ the test
def test_kill9_at_random_points_loses_nothing_acknowledged(tmp_path):
    seed = int(os.environ.get("RELIABILITY_SEED", random.randrange(1 << 30)))
    kill_points = int(os.environ.get("KILL_POINTS", "12"))
    print(f"[reliability-kill] seed={seed} kill_points={kill_points}", flush=True)
    rng = random.Random(seed)
    data = str(tmp_path / "data")
    args = (
        *SERVE_ARGS,
        "--data-dir",
        data,
        "--topic",
        f"{LOG_TOPIC}:{QUEUES}",
        "--topic",
        f"{POP_TOPIC}:{QUEUES}",
    )
    ledger = Ledger()
    checked = 0
    t0 = time.time()
    for cycle in range(kill_points + 1):
        c0 = time.time()
        emu = EmulatorProcess(*args)
        started: list = []
        try:
            c1 = time.time()
            eps = emu.endpoints.split(";")
            checked = verify_log(ledger, eps, cycle)
            verify_offsets(ledger, emu.endpoints, cycle)
            c2 = time.time()
            assert not ledger.errors, ledger.errors
            assert not ledger.redelivered_after_ack, (
                f"acked POP messages redelivered: {ledger.redelivered_after_ack}"
            )
            assert not ledger.early, f"delayed messages delivered early: {ledger.early}"

            producer = Producer(
                _official_config(emu.endpoints), (POP_TOPIC,), Checker(TransactionResolution.COMMIT)
            )
            producer.startup()
            started.append(producer)
            consumer = SimpleConsumer(
                _official_config(emu.endpoints), POP_GROUP, {POP_TOPIC: OfficialFilter()}, await_duration=1
            )
            consumer.startup()
            started.append(consumer)
            if cycle == kill_points:
                drain_pop(ledger, consumer, 60)
                assert not ledger.redelivered_after_ack, ledger.redelivered_after_ack
                assert not ledger.early, ledger.early
                assert emu.stop() == 0
                break

            stop = threading.Event()
            workers = [
                ("raw-a", raw_sender, ledger, eps[0], "broker-a", stop, rng.random()),
                ("raw-b", raw_sender, ledger, eps[1], "broker-b", stop, rng.random()),
                ("connector", connector_sender, ledger, emu.endpoints, stop, rng.random()),
                ("puller", puller, ledger, emu.endpoints, stop, rng.random()),
                ("official", official_sender, ledger, producer, stop, rng.random()),
                ("popper", popper, ledger, consumer, stop),
            ]
            threads = [
                threading.Thread(target=_guard, args=(ledger, w[0], *w[1:]), daemon=True) for w in workers
            ]
            for t in threads:
                t.start()
            run_s = rng.uniform(0.3, 1.8)
            time.sleep(run_s)
            emu.kill()  # SIGKILL mid-flight: no flush, no shutdown
            stop.set()
            c3 = time.time()
            for t in threads:
                t.join(JOIN_S)
                assert not t.is_alive(), f"cycle {cycle}: a worker hangs after the kill"
            print(
                f"[reliability-kill] cycle {cycle}: start {c1 - c0:.1f} s, verify {c2 - c1:.1f} s, "
                f"killed after {run_s:.2f} s, workers stopped in {time.time() - c3:.1f} s, "
                f"{checked} log messages checked",
                flush=True,
            )
        finally:
            emu.kill()
            for c in reversed(started):
                try:
                    c.shutdown()
                except Exception:
                    pass
            close_clients()
    total = checked + len(ledger.pop_acked)
    print(
        f"[reliability-kill] messages checked={total} (log {checked}, pop {len(ledger.pop_acked)}, "
        f"delayed {sum(1 for v in ledger.pop_sent.values() if v)}, half {len(ledger.half_sent)}, "
        f"acks cut by a kill {len(ledger.ack_unknown)}), "
        f"kill points={kill_points}, seed={seed}, {time.time() - t0:.1f} s",
        flush=True,
    )
    assert checked > 1000 and ledger.half_sent and any(ledger.pop_sent.values())
