"""Per-broker fault injection (docs/design.md, 'Faults'), each fault observed the way a client sees it."""

from __future__ import annotations

import time

import grpc
import pytest

from rocketmq_protocol.grpc_v2 import definition_pb2 as d
from tests.support.helpers import (
    bulk_pull,
    endpoints_by_broker,
    make_message,
    max_offsets,
    pull_v2,
    query_route,
    send,
)

FAULTY = "broker-b"
HEALTHY = "broker-a"
QUEUES = 4


@pytest.fixture
def brokers(rocketmq_emulator, v2_stub, ext_stub):
    """{name: (v2 stub, extension stub)}; every fault is cleared at teardown, whatever the test did."""
    eps = endpoints_by_broker(rocketmq_emulator)
    try:
        yield {name: (v2_stub(ep), ext_stub(ep)) for name, ep in eps.items()}
    finally:
        for b in rocketmq_emulator.brokers:
            b.clear_faults()


def _send_one(stub, topic: str) -> int:
    return send(stub, [make_message(topic, b"fault-test")]).status.code


def _assert_healthy(brokers, topic: str) -> None:
    for name, (stub, ext) in brokers.items():
        t0 = time.perf_counter()
        route = query_route(stub, topic)
        assert time.perf_counter() - t0 < 0.3, f"{name} is still slow"
        assert route.status.code == d.OK
        assert {q.permission for q in route.message_queues} == {d.READ_WRITE}
        assert _send_one(stub, topic) == d.OK, name
        assert pull_v2(stub, topic, 0, 0).code in (d.OK, d.MESSAGE_NOT_FOUND)
        assert bulk_pull(ext, topic, 0, 0).code in (d.OK, d.MESSAGE_NOT_FOUND)


def test_down_broker_is_unavailable_while_the_other_serves(rocketmq_emulator, topic, brokers):
    faulty, _ = brokers[FAULTY]
    healthy, _ = brokers[HEALTHY]
    rocketmq_emulator.broker(FAULTY).set_fault(down=True)

    for call in (
        lambda: query_route(faulty, topic),
        lambda: send(faulty, [make_message(topic)]),
        lambda: pull_v2(faulty, topic, 0, 0),
        lambda: bulk_pull(brokers[FAULTY][1], topic, 0, 0),
    ):
        with pytest.raises(grpc.RpcError) as info:
            call()
        assert info.value.code() == grpc.StatusCode.UNAVAILABLE

    route = query_route(healthy, topic)
    assert route.status.code == d.OK
    assert {q.broker.name for q in route.message_queues} == {HEALTHY, FAULTY}
    before = max_offsets(healthy, topic, QUEUES)
    assert _send_one(healthy, topic) == d.OK
    assert sum(max_offsets(healthy, topic, QUEUES)) == sum(before) + 1

    rocketmq_emulator.broker(FAULTY).set_fault(down=False)
    assert query_route(faulty, topic).status.code == d.OK
    assert _send_one(faulty, topic) == d.OK


def test_latency_is_added_to_every_rpc(rocketmq_emulator, topic, brokers):
    faulty, ext = brokers[FAULTY]
    healthy, _ = brokers[HEALTHY]
    query_route(faulty, topic)  # connect first, so the timing holds only the RPC
    rocketmq_emulator.broker(FAULTY).set_fault(latency_ms=300)

    t0 = time.perf_counter()
    assert query_route(faulty, topic).status.code == d.OK
    assert time.perf_counter() - t0 >= 0.3
    t0 = time.perf_counter()
    assert _send_one(faulty, topic) == d.OK
    assert time.perf_counter() - t0 >= 0.3
    t0 = time.perf_counter()
    assert bulk_pull(ext, topic, 0, 0).code in (d.OK, d.MESSAGE_NOT_FOUND)
    assert time.perf_counter() - t0 >= 0.3

    t0 = time.perf_counter()
    assert query_route(healthy, topic).status.code == d.OK
    assert time.perf_counter() - t0 < 0.3, "latency leaked to the other broker"

    rocketmq_emulator.broker(FAULTY).set_fault(latency_ms=0)
    t0 = time.perf_counter()
    assert query_route(faulty, topic).status.code == d.OK
    assert time.perf_counter() - t0 < 0.3


def test_error_rate_fails_sends_in_band(rocketmq_emulator, topic, brokers):
    faulty, _ = brokers[FAULTY]
    healthy, _ = brokers[HEALTHY]
    rocketmq_emulator.broker(FAULTY).set_fault(error_rate=1.0)
    before = max_offsets(faulty, topic, QUEUES)
    for _ in range(5):
        resp = send(faulty, [make_message(topic)])
        assert resp.status.code == d.INTERNAL_SERVER_ERROR
        assert not any(e.status.code == d.OK for e in resp.entries)
    assert max_offsets(faulty, topic, QUEUES) == before, "a failed send stored its message"
    # only sends fail: reads and routes still work, and the other broker is unaffected
    assert query_route(faulty, topic).status.code == d.OK
    assert pull_v2(faulty, topic, 0, 0).code in (d.OK, d.MESSAGE_NOT_FOUND)
    assert _send_one(healthy, topic) == d.OK

    rocketmq_emulator.broker(FAULTY).set_fault(error_rate=0.0)
    for _ in range(5):
        assert _send_one(faulty, topic) == d.OK


def test_partial_error_rate(rocketmq_emulator, topic, brokers):
    faulty, _ = brokers[FAULTY]
    rocketmq_emulator.broker(FAULTY).set_fault(error_rate=0.5)
    codes = [_send_one(faulty, topic) for _ in range(200)]
    failed = codes.count(d.INTERNAL_SERVER_ERROR)
    assert codes.count(d.OK) + failed == len(codes)
    assert 40 <= failed <= 160, failed


def test_read_only_broker(rocketmq_emulator, topic, brokers):
    faulty, _ = brokers[FAULTY]
    healthy, _ = brokers[HEALTHY]
    rocketmq_emulator.broker(FAULTY).set_fault(read_only=True)

    for stub in (faulty, healthy):  # any endpoint answers the cluster-wide route
        route = query_route(stub, topic)
        assert route.status.code == d.OK
        perms: dict[str, set[int]] = {}
        for q in route.message_queues:
            perms.setdefault(q.broker.name, set()).add(q.permission)
        assert perms == {FAULTY: {d.READ}, HEALTHY: {d.READ_WRITE}}
        assert sum(1 for q in route.message_queues if q.broker.name == FAULTY) == QUEUES

    before = max_offsets(faulty, topic, QUEUES)
    resp = send(faulty, [make_message(topic)])
    assert resp.status.code == d.FORBIDDEN
    assert max_offsets(faulty, topic, QUEUES) == before
    assert pull_v2(faulty, topic, 0, 0).code in (d.OK, d.MESSAGE_NOT_FOUND), "read-only must stay readable"
    assert _send_one(healthy, topic) == d.OK


def test_set_fault_keeps_unspecified_values(rocketmq_emulator, brokers):
    handle = rocketmq_emulator.broker(FAULTY)
    handle.set_fault(latency_ms=50, error_rate=0.25)
    state = handle.set_fault(read_only=True)
    assert state == {"down": False, "latency_ms": 50, "error_rate": 0.25, "read_only": True}
    with pytest.raises(ValueError):
        handle.set_fault(error_rate=1.5)
    with pytest.raises(ValueError):
        handle.set_fault(latency_ms=-1)
    assert handle.clear_faults() == {"down": False, "latency_ms": 0, "error_rate": 0.0, "read_only": False}


def test_clear_faults_restores_everything(rocketmq_emulator, topic, brokers):
    faulty, _ = brokers[FAULTY]
    handle = rocketmq_emulator.broker(FAULTY)
    handle.set_fault(down=True, latency_ms=300, error_rate=1.0, read_only=True)
    with pytest.raises(grpc.RpcError) as info:
        query_route(faulty, topic)
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    handle.clear_faults()
    _assert_healthy(brokers, topic)

    handle.set_fault(latency_ms=300, error_rate=1.0, read_only=True)
    assert send(faulty, [make_message(topic)]).status.code in (d.FORBIDDEN, d.INTERNAL_SERVER_ERROR)
    handle.clear_faults()
    _assert_healthy(brokers, topic)
