"""The writer's producer (RowChecker + Producer) against real emulators, without Spark: FIFO order, delayed
delivery, retries and fault-latency selection under injected faults, and fail-fast rejections."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

from broker_emulator import Emulator
from connector.errors import ErrorKind, RocketMQError, SendFailedError
from connector.options import parse_writer_options
from connector.producer import Producer, TopicRoute
from connector.sink_rows import RowChecker
from tests.support.helpers import unique_name
from tests.support.targets import connect_options, target_of
from tests.support.writing import bodies, read_topic

TS = pa.timestamp("us", tz="UTC")
# What each protocol's client calls a failure: a broker error, an unreachable broker, no answer in time.
BROKER_ERROR = {"grpc": "INTERNAL_SERVER_ERROR", "remoting": "SYSTEM_ERROR"}
UNREACHABLE = {"grpc": "UNAVAILABLE", "remoting": "UNAVAILABLE"}
NO_ANSWER = {"grpc": "DEADLINE_EXCEEDED", "remoting": "TIMEOUT: no response from"}
TOO_LARGE = {"grpc": "MESSAGE_BODY_TOO_LARGE (41301)", "remoting": "MESSAGE_ILLEGAL (13)"}


@pytest.fixture
def faulty(rocketmq_emulator_factory) -> Emulator:
    """A private Emulator(brokers=2, queues=4) for fault injection."""
    return rocketmq_emulator_factory(brokers=2, queues=4)


def make(endpoints: str, topic: str, **opts: str) -> tuple[Producer, RowChecker]:
    options = parse_writer_options({**connect_options(endpoints), "topic": topic, **opts})
    layout = {"body": "body", "messageGroup": "messageGroup", "deliveryTimestamp": "deliveryTimestamp"}
    checker = RowChecker(layout, topic, options.max_message_size, label="test")
    return Producer(options, label="test"), checker


def numbered(start: int, n: int, **extra: pa.Array) -> pa.RecordBatch:
    cols = {"body": pa.array([f"{i:08d}".encode() for i in range(start, start + n)], pa.binary()), **extra}
    return pa.record_batch(list(cols.values()), names=list(cols))


def send(producer: Producer, checker: RowChecker, batch: pa.RecordBatch, row_base: int = 0) -> None:
    for rows in checker.check(batch, row_base):
        producer.send(rows)


def stored_on(emu: Emulator, topic: str, broker: str) -> int:
    return sum(emu.min_max(topic, broker, q)[1] for q in range(4))


def instrument(route: TopicRoute) -> list[tuple]:
    """Records the selector's picks ("select", broker) and updates ("record", broker, latency_ms, failed)."""
    events: list[tuple] = []
    sel = route.selector
    select, record = sel.select, sel.record

    def traced_select(last_broker: str | None = None):  # type: ignore[no-untyped-def]
        q = select(last_broker)
        events.append(("select", q.broker))
        return q

    def traced_record(broker: str, latency_ms: float, failed: bool) -> float:
        events.append(("record", broker, latency_ms, failed))
        return record(broker, latency_ms, failed)

    sel.select = traced_select  # type: ignore[method-assign]
    sel.record = traced_record  # type: ignore[method-assign]
    return events


# ------------------------------------------------------------------------------------------ happy paths
def test_round_robin_batches_land_once_each(target, rocketmq_emulator: Emulator, topic: str) -> None:
    producer, enc = make(target, topic, batchSize="500")
    for k in range(4):
        send(producer, enc, numbered(k * 5000, 5000), k * 5000)
    stats = producer.flush()
    assert (stats.messages, stats.requests, stats.retries) == (20_000, 40, 0)
    tables = read_topic(target, topic)
    assert sorted(bodies(tables)) == [f"{i:08d}".encode() for i in range(20_000)]
    assert {f"{topic}/{b}/{q}": t.num_rows for (b, q), t in tables.items()} == stats.per_queue
    assert set(stats.per_queue.values()) == {2500}  # 40 requests of 500 over 8 queues: 5 each
    ids = [i for t in tables.values() for i in t.column("message_id").to_pylist()]
    assert len(set(ids)) == 20_000 and all(len(i) == 32 for i in ids)


def test_fifo_groups_keep_one_queue_and_their_order(target, rocketmq_emulator: Emulator, topic: str) -> None:
    producer, enc = make(target, topic, batchSize="40", maxInFlightRequests="8")
    groups = [f"order-{g}" for g in range(6)]
    n = 6000
    for start in range(0, n, 1500):  # several Arrow batches; rows of a group interleave with others
        group_col = pa.array([groups[i % 6] if i % 7 else None for i in range(start, start + 1500)])
        send(producer, enc, numbered(start, 1500, messageGroup=group_col), start)
    stats = producer.flush()
    assert stats.messages == n
    route = producer._routes[topic]
    seen: dict[str, tuple[str, int]] = {}
    for (broker, qid), t in read_topic(target, topic).items():
        seqs: dict[str, list[int]] = {}
        for body, group, mtype in zip(
            t.column("body").to_pylist(),
            t.column("message_group").to_pylist(),
            t.column("message_type").to_pylist(),
            strict=True,
        ):
            if group is None:
                assert mtype == 1
                continue
            assert mtype == 2
            assert seen.setdefault(group, (broker, qid)) == (broker, qid), f"{group} in two queues"
            seqs.setdefault(group, []).append(int(body))
        for group, seq in seqs.items():
            assert seq == sorted(seq), f"{group} out of order in {broker}/{qid}"
            assert len(seq) == sum(1 for i in range(n) if i % 7 and groups[i % 6] == group)
    for group, (broker, qid) in seen.items():
        q = route.group_queue(group)
        assert (q.broker, q.queue_id) == (broker, qid)
    assert set(seen) == set(groups)


def _send_delayed(rocketmq_emulator: Emulator, topic: str, delay_ms: int) -> int:
    producer, enc = make(rocketmq_emulator.endpoints, topic)
    due_ms = int(time.time() * 1000) + delay_ms
    send(producer, enc, numbered(0, 2, deliveryTimestamp=pa.array([None, due_ms * 1000], TS)))
    assert producer.flush().messages == 2
    return due_ms


def _delayed_row(tables: dict) -> dict | None:
    rows = [r for t in tables.values() for r in t.to_pylist() if r["body"] == b"00000001"]
    return rows[0] if rows else None


def test_delivery_timestamp_delays_the_message(target, rocketmq_emulator: Emulator, topic: str) -> None:
    due_ms = _send_delayed(rocketmq_emulator, topic, 1500)
    assert _delayed_row(read_topic(target, topic)) is None  # not visible before its time
    deadline = time.monotonic() + 10
    while (row := _delayed_row(read_topic(target, topic))) is None:
        assert time.monotonic() < deadline, "the delayed message never became visible"
        time.sleep(0.1)
    assert time.time() * 1000 >= due_ms - 50
    assert row["message_type"] == 3  # DELAY
    assert int(row["delivery_timestamp"].timestamp() * 1000) == due_ms


# ------------------------------------------------------------------------------------------ faults
def test_broker_down_mid_send_moves_sends_to_the_other_broker(protocol, faulty: Emulator) -> None:
    topic = unique_name("down")
    faulty.create_topic(topic, queues=4)
    producer, enc = make(target_of(faulty, protocol), topic, batchSize="100")
    send(producer, enc, numbered(0, 4000), 0)
    producer.flush()
    before = stored_on(faulty, topic, "broker-b")
    assert before > 0
    faulty.broker("broker-b").set_fault(down=True)
    send(producer, enc, numbered(4000, 6000), 4000)
    stats = producer.flush()
    assert stats.messages == 10_000
    assert stored_on(faulty, topic, "broker-b") == before  # nothing more went to broker-b
    assert stats.retries > 0 and stats.failures.get(f"broker-b: {UNREACHABLE[protocol]}", 0) == stats.retries
    faulty.broker("broker-b").clear_faults()
    assert sorted(bodies(read_topic(target_of(faulty, protocol), topic))) == [
        f"{i:08d}".encode() for i in range(10_000)
    ]


def test_latency_fault_isolates_a_slow_broker(protocol, faulty: Emulator) -> None:
    topic = unique_name("slow")
    faulty.create_topic(topic, queues=4)
    faulty.broker("broker-b").set_fault(latency_ms=800)
    producer, enc = make(target_of(faulty, protocol), topic, batchSize="100", sendLatencyFaultEnable="true")
    events = instrument(producer._route(topic))
    for k in range(10):
        send(producer, enc, numbered(k * 2000, 2000), k * 2000)
    stats = producer.flush()
    assert stats.messages == 20_000
    first_slow = next(
        i for i, e in enumerate(events) if e[0] == "record" and e[1] == "broker-b" and e[2] >= 550
    )
    after = [e[1] for e in events[first_slow:] if e[0] == "select"]
    assert len(after) > 100
    assert after.count("broker-b") < 0.1 * len(after), after.count("broker-b")
    assert stats.isolations.get("broker-b", 0) >= 1


def test_without_the_flag_a_slow_broker_keeps_half_the_sends(protocol, faulty: Emulator) -> None:
    topic = unique_name("slow")
    faulty.create_topic(topic, queues=4)
    faulty.broker("broker-b").set_fault(latency_ms=800)
    producer, enc = make(target_of(faulty, protocol), topic, batchSize="100", maxInFlightRequests="8")
    events = instrument(producer._route(topic))
    send(producer, enc, numbered(0, 4000))
    stats = producer.flush()
    picks = [e[1] for e in events if e[0] == "select"]
    assert len(picks) == 40 and picks.count("broker-b") == 20
    assert stats.per_broker == {"broker-a": 2000, "broker-b": 2000} and stats.isolations == {}


def test_error_rate_is_retried_on_the_other_broker(protocol, faulty: Emulator) -> None:
    topic = unique_name("err")
    faulty.create_topic(topic, queues=4)
    faulty.broker("broker-b").set_fault(error_rate=1.0)
    producer, enc = make(target_of(faulty, protocol), topic, batchSize="100")
    send(producer, enc, numbered(0, 3000))
    stats = producer.flush()
    assert stats.per_broker == {"broker-a": 3000}
    assert stats.failures == {f"broker-b: {BROKER_ERROR[protocol]}": stats.retries} and stats.retries >= 10


def test_all_brokers_down_fails_after_the_retries(protocol, faulty: Emulator) -> None:
    topic = unique_name("dead")
    faulty.create_topic(topic, queues=4)
    producer, enc = make(target_of(faulty, protocol), topic, retryTimesWhenSendFailed="2")
    producer._route(topic)
    for b in faulty.brokers:
        b.set_fault(down=True)
    started = time.monotonic()
    with pytest.raises(SendFailedError) as e:
        send(producer, enc, numbered(0, 10))
        producer.flush()
    msg = str(e.value)
    assert "failed after 3 attempt(s) (retryTimesWhenSendFailed=2, sendMsgTimeoutMs=3000)" in msg
    assert (
        "rows 0..9 of test" in msg
        and UNREACHABLE[protocol] in msg
        and "0 messages of test were acknowledged" in msg
    )
    assert time.monotonic() - started < 3.5


def test_send_timeout_bounds_all_attempts(protocol, faulty: Emulator) -> None:
    topic = unique_name("late")
    faulty.create_topic(topic, queues=4)
    producer, enc = make(target_of(faulty, protocol), topic, sendMsgTimeoutMs="400")
    producer._route(topic)
    for b in faulty.brokers:
        b.set_fault(latency_ms=1000)
    started = time.monotonic()
    with pytest.raises(SendFailedError, match=rf"sendMsgTimeoutMs=400.*{NO_ANSWER[protocol]}"):
        send(producer, enc, numbered(0, 5))
        producer.flush()
    assert time.monotonic() - started < 1.5


def test_server_rejection_fails_fast_with_the_reason(
    protocol, target, rocketmq_emulator: Emulator, topic: str
) -> None:
    # the client allows 8 MiB, the broker 4 MiB: the broker's MESSAGE_BODY_TOO_LARGE is not retried
    producer, enc = make(target, topic, maxMessageSize=str(8 << 20))
    big = pa.array([b"ok", b"x" * (5 << 20)], pa.binary())
    started = time.monotonic()
    with pytest.raises(SendFailedError) as e:
        send(producer, enc, pa.record_batch([big], names=["body"]), 10)
        producer.flush()
    msg = str(e.value)
    # batchBytes (4 MiB) puts the big body in a request of its own: the rejected request is row 11 alone
    assert "(row 11 of test)" in msg and f"was rejected: {TOO_LARGE[protocol]}" in msg, msg
    assert time.monotonic() - started < 2
    assert producer.stats.retries == 0
    # the emulator keeps serving
    p2, enc2 = make(target, topic)
    send(p2, enc2, numbered(0, 3))
    assert p2.flush().messages == 3


def test_unknown_topic_is_a_clear_error(target, rocketmq_emulator: Emulator) -> None:
    producer, enc = make(target, unique_name("missing"))
    with pytest.raises(RocketMQError) as e:
        send(producer, enc, numbered(0, 1))
    assert e.value.kind == ErrorKind.TOPIC_NOT_FOUND


def test_stats_count_every_attempt(protocol, faulty: Emulator) -> None:
    topic = unique_name("stats")
    faulty.create_topic(topic, queues=4)
    producer, enc = make(target_of(faulty, protocol), topic, batchSize="10", sendLatencyFaultEnable="true")
    producer._route(topic)
    faulty.broker("broker-a").set_fault(down=True)
    send(producer, enc, numbered(0, 100))
    first = producer.flush()
    retries_before = first.retries
    assert first.isolations.get("broker-a", 0) >= 1  # a failure isolates broker-a (30 000 ms → 600 s)
    # Only requests sent before the first failure came back went to broker-a; once isolated, it is avoided.
    send(producer, enc, numbered(100, 200))
    stats = producer.flush()
    assert stats.messages == 300 and stats.per_broker == {"broker-b": 300}
    assert stats.attempts == stats.requests + stats.retries
    assert stats.retries == retries_before


def test_one_send_spreads_over_every_writable_queue(target, topic: str) -> None:
    """RocketMQ sends a batch to one queue: 10,000 rows of one send over 8 queues land 1,250 per queue."""
    producer, enc = make(target, topic)
    send(producer, enc, numbered(0, 10_000))
    stats = producer.flush()
    assert stats.messages == 10_000 and stats.requests == 8
    assert set(stats.per_queue.values()) == {1250} and len(stats.per_queue) == 8
    tables = read_topic(target, topic)
    assert {k: t.num_rows for k, t in tables.items()} == {k: 1250 for k in tables}
    assert sorted(bodies(tables)) == [f"{i:08d}".encode() for i in range(10_000)]
