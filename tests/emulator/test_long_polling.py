"""Long polling (docs/protocols.md, 'Pull results'): a held pull is answered the moment a matching message is stored, at its
timeout otherwise, and a non-matching arrival does not wake a filtered hold."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from connector.clients.remoting_connection import RemotingConnection
from rocketmq_protocol.grpc_v2 import definition_pb2 as d
from tests.support.helpers import (
    bulk_pull,
    endpoints_by_broker,
    percentile,
    pull_channel_address,
    pull_v2,
    send_to_queue,
    wait_until,
)

BROKER = "broker-a"
TRIES = 100
HOLD_MS = 5000
P50_LIMIT_S = 0.050
QUEUE = 1


def _held(rocketmq_emulator) -> int:
    return rocketmq_emulator.cluster.broker(BROKER).polling.held


def _pull_fn(protocol: str, stub, ext, conn) -> Callable[..., tuple[int, int, list[int]]]:
    """(topic, offset, polling_ms, expression) → (code, next_offset, offsets)."""

    def pull(topic: str, offset: int, polling_ms: int, expression: str | None = None):
        if protocol == "PullMessage":
            r = pull_v2(stub, topic, QUEUE, offset, 32, expression=expression, polling_ms=polling_ms)
        elif protocol == "BulkPull":
            r = bulk_pull(ext, topic, QUEUE, offset, 32, expression=expression, polling_ms=polling_ms)
        else:
            r = bulk_pull(conn, topic, QUEUE, offset, 32, expression=expression, polling_ms=polling_ms)
        return r.code, r.next_offset, r.offsets

    return pull


@pytest.fixture(params=["PullMessage", "BulkPull", "PullChannel"])
def protocol(request) -> str:
    return request.param


@pytest.fixture
def clients(rocketmq_emulator, v2_stub, ext_stub, protocol) -> Iterator[tuple[Callable, object]]:
    endpoint = endpoints_by_broker(rocketmq_emulator)[BROKER]
    ext = ext_stub(endpoint)
    conn = RemotingConnection(pull_channel_address(ext)) if protocol == "PullChannel" else None
    try:
        # Separate channels for the held pull and the sender, as two clients would have.
        yield _pull_fn(protocol, v2_stub(endpoint), ext, conn), v2_stub(endpoint)
    finally:
        if conn is not None:
            conn.close()


def _hold(pool, rocketmq_emulator, pull, *args):
    """Starts `pull(*args)` in a thread and returns once the emulator holds it; the future yields
    ((code, next, offsets), return time)."""
    before = _held(rocketmq_emulator)

    def run():
        res = pull(*args)
        return res, time.perf_counter()

    fut = pool.submit(run)
    wait_until(lambda: _held(rocketmq_emulator) > before or fut.done(), timeout=5)
    assert not fut.done(), f"the pull was answered without being held: {fut.result()}"
    return fut


def test_held_pull_answered_on_arrival(rocketmq_emulator, topic, clients, protocol):
    pull, sender = clients
    latencies = []
    with ThreadPoolExecutor(max_workers=1) as pool:
        for i in range(TRIES):
            fut = _hold(pool, rocketmq_emulator, pull, topic, i, HOLD_MS)
            t0 = time.perf_counter()
            offsets = send_to_queue(sender, topic, QUEUE, 1)
            (code, next_offset, got), t_done = fut.result(timeout=HOLD_MS / 1000 + 5)
            latencies.append(t_done - t0)
            assert offsets == [i]
            assert code == d.OK
            assert got == [i]
            assert next_offset == i + 1
    p50, p99 = percentile(latencies, 50), percentile(latencies, 99)
    print(
        f"\n[long-poll wake-up {protocol}] {TRIES} tries: p50 {p50 * 1000:.1f} ms, "
        f"p99 {p99 * 1000:.1f} ms, max {max(latencies) * 1000:.1f} ms",
        flush=True,
    )
    assert p50 < P50_LIMIT_S
    assert max(latencies) < HOLD_MS / 1000 / 2, "some held pull was answered by its timeout, not the arrival"


def test_held_pull_times_out_with_not_found(rocketmq_emulator, topic, clients):
    pull, _sender = clients
    t0 = time.perf_counter()
    code, next_offset, got = pull(topic, 0, 500)
    elapsed = time.perf_counter() - t0
    assert code == d.MESSAGE_NOT_FOUND
    assert next_offset == 0
    assert got == []
    assert 0.45 <= elapsed <= 1.5, elapsed


def test_held_pull_at_max_offset_times_out(rocketmq_emulator, topic, clients):
    """Same with data in the queue: a pull at max offset waits and then answers with next == offset."""
    pull, sender = clients
    send_to_queue(sender, topic, QUEUE, 3)
    t0 = time.perf_counter()
    code, next_offset, got = pull(topic, 3, 500)
    elapsed = time.perf_counter() - t0
    assert (code, next_offset, got) == (d.MESSAGE_NOT_FOUND, 3, [])
    assert 0.45 <= elapsed <= 1.5, elapsed


def test_non_matching_arrival_does_not_wake_filtered_hold(rocketmq_emulator, topic, clients):
    pull, sender = clients
    hold_ms = 1000
    with ThreadPoolExecutor(max_workers=1) as pool:
        t0 = time.perf_counter()
        fut = _hold(pool, rocketmq_emulator, pull, topic, 0, hold_ms, "TagA")
        send_to_queue(sender, topic, QUEUE, 1, tags="TagB")
        send_to_queue(sender, topic, QUEUE, 1)  # untagged does not match TagA either
        (code, next_offset, got), t_done = fut.result(timeout=hold_ms / 1000 + 5)
    elapsed = t_done - t0
    assert elapsed >= 0.9 * hold_ms / 1000, f"woken after {elapsed:.3f} s by a non-matching arrival"
    assert elapsed <= hold_ms / 1000 + 1.0
    assert code == d.MESSAGE_NOT_FOUND
    assert got == []
    assert next_offset == 2  # past the two scanned, filtered entries


def test_matching_arrival_wakes_filtered_hold(rocketmq_emulator, topic, clients):
    pull, sender = clients
    with ThreadPoolExecutor(max_workers=1) as pool:
        fut = _hold(pool, rocketmq_emulator, pull, topic, 0, HOLD_MS, "TagA || TagC")
        send_to_queue(sender, topic, QUEUE, 1, tags="TagB")
        time.sleep(0.1)
        assert not fut.done(), "a TagB arrival woke a 'TagA || TagC' hold"
        t0 = time.perf_counter()
        send_to_queue(sender, topic, QUEUE, 1, tags="TagC")
        (code, next_offset, got), t_done = fut.result(timeout=HOLD_MS / 1000 + 5)
    assert t_done - t0 < 1.0
    assert code == d.OK
    assert got == [1]
    assert next_offset == 2


def test_arrival_on_another_queue_does_not_wake(rocketmq_emulator, topic, clients):
    pull, sender = clients
    hold_ms = 600
    with ThreadPoolExecutor(max_workers=1) as pool:
        t0 = time.perf_counter()
        fut = _hold(pool, rocketmq_emulator, pull, topic, 0, hold_ms)
        send_to_queue(sender, topic, QUEUE + 1, 1)
        (code, next_offset, got), t_done = fut.result(timeout=hold_ms / 1000 + 5)
    assert t_done - t0 >= 0.9 * hold_ms / 1000
    assert (code, next_offset, got) == (d.MESSAGE_NOT_FOUND, 0, [])
