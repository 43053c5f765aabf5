"""Load : 32 concurrent producers and 8 pull consumers (two groups of four) against one emulator
subprocess for LOAD_SECONDS (default 60): no error, no loss, no duplicated offset. Each group pulls every
queue's offsets densely and once, and every acknowledged message exactly once. Prints throughput and the
emulator's peak RSS."""

from __future__ import annotations

import os
import random
import threading
import time
import uuid
from collections import defaultdict

import grpc
import psutil
import pytest

from connector.allocation import AVERAGELY, allocate
from connector.clients import close_clients, get_client
from connector.config import ClientConfig
from rocketmq_protocol.grpc_v2 import definition_pb2 as d
from rocketmq_protocol.grpc_v2 import service_pb2 as s
from rocketmq_protocol.grpc_v2 import service_pb2_grpc as sg
from tests.support.emulator_proc import EmulatorProcess

pytestmark = pytest.mark.reliability

TOPIC = "load"
QUEUES = 4  # per broker: 8 queues
PRODUCERS = 32
GROUPS = ("load-g1", "load-g2")
CONSUMERS_PER_GROUP = 4
MD = [("x-mq-client-id", "reliability-load"), ("x-mq-queue-id-explicit", "true")]


class Tally:
    """Everything the threads observed, under one lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.acked: dict[str, tuple[str, int, int]] = {}  # id -> (broker, queue, offset)
        self.pulled: dict[str, list[tuple[str, int, int, str]]] = defaultdict(list)  # group -> entries
        self.errors: list[str] = []
        self.sends = 0


def producer(tally: Tally, endpoints: list[str], stop: threading.Event, seed: int) -> None:
    rng = random.Random(seed)
    chans = [grpc.insecure_channel(ep) for ep in endpoints]
    stubs = [sg.MessagingServiceStub(c) for c in chans]
    try:
        while not stop.is_set():
            b = rng.randrange(len(stubs))
            q = rng.randrange(QUEUES)
            msgs = []
            for _ in range(rng.randint(1, 32)):
                sp = d.SystemProperties(
                    message_id=uuid.uuid4().hex, queue_id=q, tag="load", body_encoding=d.IDENTITY
                )
                msgs.append(d.Message(topic=d.Resource(name=TOPIC), body=b"x" * 100, system_properties=sp))
            try:
                r = stubs[b].SendMessage(s.SendMessageRequest(messages=msgs), metadata=MD, timeout=30)
            except grpc.RpcError as e:
                with tally.lock:
                    tally.errors.append(f"send: {e.code()} {e.details()}")
                return
            broker = f"broker-{'ab'[b]}"
            with tally.lock:
                if r.status.code != d.OK:
                    tally.errors.append(f"send: {r.status}")
                    return
                tally.sends += 1
                for m, e in zip(msgs, r.entries, strict=True):
                    tally.acked[m.system_properties.message_id] = (broker, q, e.offset)
    finally:
        for c in chans:
            c.close()


def consumer(
    tally: Tally, endpoints: str, group: str, index: int, stop: threading.Event, drained: threading.Event
) -> None:
    """Pulls its share of the queues (AllocateMessageQueueAveragely), commits, until told to drain and
    every queue is at its max offset."""
    client = get_client(ClientConfig(endpoints))
    queues = sorted(client.route(TOPIC), key=lambda q: (q.broker, q.queue_id))
    mine = allocate(AVERAGELY, queues, index, CONSUMERS_PER_GROUP)
    pos = {q.queue: 0 for q in mine}
    try:
        while True:
            progressed = False
            for q in mine:
                r = client.pull(q, pos[q.queue], 512, group=group, timeout_ms=30_000, long_polling_ms=200)
                n = r.table.num_rows
                if n:
                    progressed = True
                    offs = r.table.column("queue_offset").to_pylist()
                    ids = r.table.column("message_id").to_pylist()
                    with tally.lock:
                        tally.pulled[group].extend(
                            (q.broker, q.queue_id, o, i) for o, i in zip(offs, ids, strict=True)
                        )
                pos[q.queue] = r.next_offset
                if n:
                    client.commit(group, q, r.next_offset, 10_000)
            if stop.is_set() and not progressed:
                if all(pos[q.queue] >= client.max_offset(q) for q in mine):
                    drained.set()
                    return
    except Exception as e:
        with tally.lock:
            tally.errors.append(f"consumer {group}/{index}: {type(e).__name__}: {e}")


def test_32_producers_8_consumers_no_error_no_loss_no_duplicate():
    seconds = float(os.environ.get("LOAD_SECONDS", "60"))
    emu = EmulatorProcess(
        "--brokers", "2", "--queues", str(QUEUES), "--in-memory", "--topic", f"{TOPIC}:{QUEUES}"
    )
    proc = psutil.Process(emu.proc.pid)
    tally = Tally()
    peak = [proc.memory_info().rss]
    stop, done_sampling = threading.Event(), threading.Event()

    def sample() -> None:
        while not done_sampling.wait(0.25):
            try:
                peak[0] = max(peak[0], proc.memory_info().rss)
            except psutil.Error:
                return

    eps = emu.endpoints.split(";")
    try:
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        consumers = []
        for g in GROUPS:
            for i in range(CONSUMERS_PER_GROUP):
                drained = threading.Event()
                t = threading.Thread(
                    target=consumer, args=(tally, emu.endpoints, g, i, stop, drained), daemon=True
                )
                consumers.append((t, drained))
        producers = [
            threading.Thread(target=producer, args=(tally, eps, stop, i), daemon=True)
            for i in range(PRODUCERS)
        ]
        t0 = time.time()
        for t, _ in consumers:
            t.start()
        for t in producers:
            t.start()
        time.sleep(seconds)
        stop.set()
        for t in producers:
            t.join(60)
            assert not t.is_alive(), "a producer hangs"
        produced_s = time.time() - t0
        for t, _ in consumers:
            t.join(120)
            assert not t.is_alive(), "a consumer did not drain"
        total_s = time.time() - t0
        done_sampling.set()
        assert emu.proc.poll() is None, emu.output[-3000:]
    finally:
        done_sampling.set()
        close_clients()
        emu.stop()

    assert not tally.errors, tally.errors[:10]
    assert all(drained.is_set() for _, drained in consumers)
    # Offsets acknowledged to producers: dense per queue, each once.
    per_queue: dict[tuple[str, int], list[int]] = defaultdict(list)
    for broker, q, off in tally.acked.values():
        per_queue[(broker, q)].append(off)
    for key, offs in per_queue.items():
        assert sorted(offs) == list(range(len(offs))), f"{key}: acknowledged offsets not dense/unique"
    for g in GROUPS:
        entries = tally.pulled[g]
        pulled_q: dict[tuple[str, int], list[int]] = defaultdict(list)
        for broker, q, off, _ in entries:
            pulled_q[(broker, q)].append(off)
        for key, offs in pulled_q.items():
            assert sorted(offs) == list(range(len(offs))), (
                f"{g} {key}: pulled offsets not dense or duplicated"
            )
        ids = [e[3] for e in entries]
        assert len(ids) == len(set(ids)), f"{g}: a message pulled twice"
        assert set(ids) == set(tally.acked), (
            f"{g}: pulled {len(set(ids))} distinct, acknowledged {len(tally.acked)}"
        )
        for broker, q, off, mid in entries:
            assert tally.acked[mid] == (broker, q, off)
    n = len(tally.acked)
    print(
        f"[reliability-load] {PRODUCERS} producers, {len(GROUPS) * CONSUMERS_PER_GROUP} consumers, {seconds:.0f} s: "
        f"{n} messages acknowledged in {tally.sends} sends ({n / produced_s:.0f} msg/s produced), "
        f"{sum(len(v) for v in tally.pulled.values())} pulled by {len(GROUPS)} groups "
        f"({sum(len(v) for v in tally.pulled.values()) / total_s:.0f} msg/s), 0 errors, 0 lost, 0 duplicated; "
        f"emulator peak RSS {peak[0] >> 20} MiB",
        flush=True,
    )
    assert n > 0
