"""Long polling over remoting (PULL_MESSAGE with the SUSPEND flag, broker_emulator/remoting/pulling.py): the
pull is held in the broker's one LongPollingService (the same as gRPC's) and answered the moment a matching
message is stored, or at suspendTimeoutMillis with PULL_NOT_FOUND; responses on one connection come back
out of order. Prints the wake-up p50/p99 over 100 tries."""

from __future__ import annotations

import time

from rocketmq_protocol.remoting.codes import ResponseCode as R
from tests.support.helpers import percentile, unique_name, wait_until
from tests.support.remoting import RemotingClient, messages

TRIES = 100
P50_LIMIT_S = 0.020
SUSPEND = 0x2 | 0x4


def _clients(emu):
    addr = f"127.0.0.1:{emu.cluster.broker('broker-a').remoting_port}"
    return RemotingClient(addr), RemotingClient(addr)


def _held(emu) -> int:
    return emu.cluster.broker("broker-a").polling.held


def test_held_pull_is_answered_on_arrival_p50(rocketmq_emulator):
    topic = unique_name("lp")
    rocketmq_emulator.create_topic(topic, 2)
    puller, sender = _clients(rocketmq_emulator)
    waits = []
    try:
        for i in range(TRIES):
            opaque = puller.send_pull(topic, 1, i, sys_flag=SUSPEND, suspend_ms=10_000)
            wait_until(lambda: _held(rocketmq_emulator) >= 1, timeout=5)
            t0 = time.perf_counter()
            sender.send(310, {"a": "p", "b": topic, "c": "TBW102", "d": 4, "e": 1, "f": 0,
                              "g": int(time.time() * 1000), "h": 0, "i": ""}, f"m{i}".encode())  # fmt: skip
            r = puller.wait(opaque, timeout=5)
            waits.append(time.perf_counter() - t0)
            assert r.code == R.SUCCESS and messages(r).to_pylist()[0]["queue_offset"] == i
    finally:
        puller.close()
        sender.close()
    p50, p99 = percentile(waits, 50), percentile(waits, 99)
    print(
        f"\nremoting long-poll wake-up over {TRIES} tries: p50 {p50 * 1000:.2f} ms, p99 {p99 * 1000:.2f} ms"
    )
    assert p50 <= P50_LIMIT_S


def test_held_pull_times_out_with_pull_not_found(rocketmq_emulator):
    topic = unique_name("lp")
    rocketmq_emulator.create_topic(topic, 2)
    puller, _ = _clients(rocketmq_emulator)
    try:
        t0 = time.monotonic()
        r = puller.pull(topic, 0, 0, sys_flag=SUSPEND, suspend_ms=700)
        took = time.monotonic() - t0
        assert r.code == R.PULL_NOT_FOUND and r.ext_fields["nextBeginOffset"] == "0"
        assert 0.6 <= took < 3.0
        # Without the SUSPEND flag nothing is held.
        t0 = time.monotonic()
        assert puller.pull(topic, 0, 0, sys_flag=0x4, suspend_ms=5000).code == R.PULL_NOT_FOUND
        assert time.monotonic() - t0 < 0.5
    finally:
        puller.close()


def test_responses_come_back_out_of_order_and_filters_hold(rocketmq_emulator):
    topic = unique_name("lp")
    rocketmq_emulator.create_topic(topic, 2)
    puller, sender = _clients(rocketmq_emulator)
    try:
        held = puller.send_pull(topic, 0, 0, sys_flag=SUSPEND, suspend_ms=10_000, subscription="TagA")
        wait_until(lambda: _held(rocketmq_emulator) >= 1, timeout=5)
        quick = puller.call(30, {"topic": topic, "queueId": 0})  # answered while the pull is held
        assert quick.code == R.SUCCESS
        sender.send_message(
            topic, b"b", queue_id=0, properties={"TAGS": "TagB"}
        )  # does not match: still held
        time.sleep(0.2)
        assert _held(rocketmq_emulator) >= 1
        sender.send_message(topic, b"a", queue_id=0, properties={"TAGS": "TagA"})
        r = puller.wait(held, timeout=5)
        assert r.code == R.SUCCESS
        assert [x["body"] for x in messages(r).to_pylist()] == [b"a"]
        assert r.ext_fields["nextBeginOffset"] == "2"
    finally:
        puller.close()
        sender.close()


def test_a_grpc_send_wakes_a_remoting_pull(rocketmq_emulator, v2_stub):
    from tests.support.helpers import send_to_queue

    topic = unique_name("lp")
    rocketmq_emulator.create_topic(topic, 2)
    puller, _ = _clients(rocketmq_emulator)
    try:
        held = puller.send_pull(topic, 1, 0, sys_flag=SUSPEND, suspend_ms=10_000)
        wait_until(lambda: _held(rocketmq_emulator) >= 1, timeout=5)
        t0 = time.monotonic()
        send_to_queue(v2_stub(rocketmq_emulator.broker("broker-a").endpoint), topic, 1)
        assert puller.wait(held, timeout=5).code == R.SUCCESS
        assert time.monotonic() - t0 < 1.0
    finally:
        puller.close()
