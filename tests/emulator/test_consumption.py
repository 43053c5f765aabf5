"""POP consumption, retry/DLQ, FIFO, delay and transactions with the official rocketmq-python-client
against `python -m broker_emulator serve` (docs/protocols.md: 'SendMessage checks', 'POP')."""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest
from rocketmq import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    Message,
    MessageListener,
    Producer,
    PushConsumer,
    SimpleConsumer,
    TransactionChecker,
    TransactionResolution,
)

from tests.support.emulator_proc import EmulatorProcess, run_admin, wait_for

# Short timers so the redelivery paths run in seconds (the proxy's defaults are 10 s / 6 s).
SERVE_ARGS = (
    "--brokers",
    "2",
    "--queues",
    "4",
    "--min-invisible-ms",
    "1000",
    "--transaction-check-ms",
    "4000",  # check-backs come within the transaction test's waits
    "--min-long-polling-ms",
    "1000",  # a receive the client sends to a drained queue waits 1 s, not 5
)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    emu = EmulatorProcess(*SERVE_ARGS, "--data-dir", str(tmp_path_factory.mktemp("consumption")))
    try:
        yield emu
    finally:
        emu.stop()


def admin(endpoints: str, *args: str):
    r = run_admin(endpoints, "--json", *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def new_topic(endpoints: str, queues: int = 4, *brokers: str) -> str:
    name = "t_" + uuid.uuid4().hex[:10]
    admin(
        endpoints,
        "create-topic",
        name,
        "--queues",
        str(queues),
        *(x for b in brokers for x in ("--broker", b)),
    )
    return name


def config(endpoints: str) -> ClientConfiguration:
    return ClientConfiguration(endpoints.split(";")[0], Credentials(), request_timeout=10)


def message(topic: str, i: int, **extra) -> Message:
    m = Message()
    m.topic = topic
    m.body = f"body-{i}".encode()
    m.tag = "even" if i % 2 == 0 else "odd"
    m.keys = f"key-{i}"
    m.add_property("seq", str(i))
    for k, v in extra.items():
        setattr(m, k, v)
    return m


class Clients:
    """Starts official clients and shuts every one down at the end of a test."""

    def __init__(self, endpoints: str) -> None:
        self.endpoints = endpoints
        self.started: list = []

    def producer(self, topic: str, checker: TransactionChecker | None = None) -> Producer:
        p = Producer(config(self.endpoints), (topic,), checker)
        p.startup()
        self.started.append(p)
        return p

    def simple(self, group: str, topic: str, await_s: int = 5) -> SimpleConsumer:
        c = SimpleConsumer(config(self.endpoints), group, {topic: FilterExpression()}, await_duration=await_s)
        c.startup()
        self.started.append(c)
        return c

    def push(self, group: str, topic: str, listener: MessageListener) -> PushConsumer:
        c = PushConsumer(config(self.endpoints), group, listener, {topic: FilterExpression()})
        c.startup()
        self.started.append(c)
        return c

    def close(self) -> None:
        for c in reversed(self.started):
            try:
                c.shutdown()
            except Exception:
                pass


@pytest.fixture
def clients(served):
    c = Clients(served.endpoints)
    try:
        yield c
    finally:
        c.close()


def receive_all(
    consumer: SimpleConsumer, expected: int, timeout: float, ack: bool = True, idle_s: float | None = None
) -> list:
    """Receives until `expected` messages came, `timeout` passed, or (with `idle_s`) that long went by
    without a message. The client picks a queue at random per receive, so once one broker is drained each
    receive sent to it waits its whole long-polling time: a fixed deadline alone fails at random."""
    got = []
    deadline = time.time() + timeout
    last = time.time()
    while len(got) < expected and time.time() < deadline:
        if idle_s is not None and time.time() - last > idle_s:
            break
        batch = consumer.receive(32, 15)
        if batch:
            last = time.time()
        for m in batch:
            got.append(m)
            if ack:
                consumer.ack(m)
    return got


def test_producer_to_simple_consumer_exactly_once_per_group(served, clients):
    topic = new_topic(served.endpoints)
    producer = clients.producer(topic)
    sent = {}
    for i in range(1000):
        receipt = producer.send(message(topic, i))
        sent[receipt.message_id] = i
    for group in ("g_a_" + topic, "g_b_" + topic):
        consumer = clients.simple(group, topic, await_s=1)
        got = receive_all(consumer, 1000, 600, idle_s=90)
        ids = [m.message_id for m in got]
        assert len(ids) == 1000 and set(ids) == set(sent), (
            f"{group}: {len(ids)} received, {len(set(ids))} distinct"
        )
        for m in got:
            i = sent[m.message_id]
            assert m.body == f"body-{i}".encode()
            assert m.tag == ("even" if i % 2 == 0 else "odd")
            assert set(m.keys) == {f"key-{i}"}
            assert m.properties["seq"] == str(i)
            assert m.delivery_attempt == 1
        # Nothing is left and nothing comes back: every message was acked exactly once.
        assert consumer.receive(32, 15) == []


def test_an_empty_receive_is_held_for_the_min_long_polling_time(served, clients, tmp_path):
    """A ReceiveMessage that finds nothing is held for its long-polling time, but never less than
    --min-long-polling-ms (the proxy's 5 s by default)."""

    def empty_receive_s(consumer: SimpleConsumer) -> float:
        t0 = time.monotonic()
        assert consumer.receive(32, 15) == []
        return time.monotonic() - t0

    topic = new_topic(served.endpoints)
    assert 0.9 <= empty_receive_s(clients.simple("g_hold_" + topic, topic, await_s=1)) < 3.5  # 1,000 ms here
    assert 0.9 <= empty_receive_s(clients.simple("g_hold2_" + topic, topic, await_s=2)) < 4.5

    default = EmulatorProcess("--data-dir", str(tmp_path / "default"))
    others = Clients(default.endpoints)
    try:
        topic = new_topic(default.endpoints)
        assert 4.9 <= empty_receive_s(others.simple("g_hold_" + topic, topic, await_s=1)) < 8
    finally:
        others.close()
        default.stop()


def test_redelivery_change_invisible_and_dlq(served, clients):
    topic = new_topic(served.endpoints, 1, "broker-a")
    group = "g_retry_" + topic
    admin(served.endpoints, "update-group", group, "--max-retries", "2")  # 3 deliveries, then DLQ
    producer = clients.producer(topic)
    mid = producer.send(message(topic, 1)).message_id
    consumer = clients.simple(group, topic)

    first = []
    deadline = time.time() + 20
    while not first and time.time() < deadline:
        first = consumer.receive(32, 1)
    assert [m.message_id for m in first] == [mid] and first[0].delivery_attempt == 1
    t0 = time.time()
    # Not acked: it comes back after its invisible duration (1 s) with delivery attempt 2.
    c2 = consumer
    again = []
    while not again and time.time() - t0 < 20:
        again = [m for m in c2.receive(32, 1) if m.message_id == mid]
    assert again and again[0].delivery_attempt == 2
    # ChangeInvisibleDuration extends it: hidden 4 s from now instead of 1 s, then attempt 3.
    c2.change_invisible_duration(again[0], 4)
    t1 = time.time()
    third = []
    while not third and time.time() - t1 < 20:
        third = [m for m in c2.receive(32, 1) if m.message_id == mid]
    assert time.time() - t1 >= 3.5, "redelivered before the extended invisible duration"
    assert third and third[0].delivery_attempt == 3

    # The 3rd delivery expires too: the group's 3 attempts are used, so it moves to %DLQ%group.
    def in_dlq():
        rows = admin(served.endpoints, "topics", "--topic", f"%DLQ%{group}")
        return sum(r["max_offset"] for r in rows) == 1

    wait_for(in_dlq, 20, 0.2, "the message to reach the DLQ")
    # Retry bookkeeping is visible: the group's POP progress on the topic and on its retry topic.
    progress = admin(served.endpoints, "lag", "--group", group)
    assert any(r["mode"] == "pop" and r["topic"] == topic and r["committed"] == 1 for r in progress)
    assert any(r["mode"] == "pop" and r["topic"] == f"%RETRY%{group}_{topic}" for r in progress)
    assert c2.receive(32, 1) == []


class FlakyListener(MessageListener):
    """Fails the first delivery of every 5th message, succeeds otherwise."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.done: dict[str, int] = {}
        self.failed: set[str] = set()

    def consume(self, message) -> ConsumeResult:
        seq = int(message.properties["seq"])
        with self.lock:
            if seq % 5 == 0 and message.message_id not in self.failed:
                self.failed.add(message.message_id)
                return ConsumeResult.FAILURE
            self.done[message.message_id] = message.delivery_attempt
            return ConsumeResult.SUCCESS


def test_push_consumer_with_listener_failures_redelivered(served, clients):
    topic = new_topic(served.endpoints)
    producer = clients.producer(topic)
    ids = {producer.send(message(topic, i)).message_id for i in range(500)}
    listener = FlakyListener()
    clients.push("g_push_" + topic, topic, listener)
    wait_for(lambda: set(listener.done) == ids, 90, 0.2, "500 messages consumed by the push consumer")
    assert len(listener.failed) == 100
    assert all(listener.done[m] == 2 for m in listener.failed)  # failed once, redelivered as attempt 2


def test_fifo_order_within_message_groups(served, clients):
    topic = new_topic(served.endpoints)
    group = "g_fifo_" + topic
    admin(served.endpoints, "update-group", group, "--fifo")
    producer = clients.producer(topic)
    for i in range(200):
        producer.send(message(topic, i, message_group=f"order-{i % 8}"))
    consumer = clients.simple(group, topic, await_s=1)
    got = receive_all(consumer, 200, 600, idle_s=90)
    assert len(got) == 200
    per_group: dict[str, list[int]] = {}
    for m in got:
        per_group.setdefault(m.message_group, []).append(int(m.properties["seq"]))
    assert len(per_group) == 8
    for g, seqs in per_group.items():
        assert seqs == sorted(seqs), f"{g} out of order: {seqs}"


def test_delayed_message_visible_at_its_time(served, clients):
    # One queue on one broker: the consumer's held receive is on the queue the message is due in.
    topic = new_topic(served.endpoints, 1, "broker-a")
    producer = clients.producer(topic)
    consumer = clients.simple("g_delay_" + topic, topic, await_s=5)
    deliver_at = time.time() + 2.0
    # The official client writes its value into Timestamp.seconds; milliseconds are accepted as such.
    producer.send(message(topic, 7, delivery_timestamp=int(deliver_at * 1000)))
    got, received_at = [], 0.0
    while not got and time.time() < deliver_at + 10:
        got = consumer.receive(32, 15)  # a held receive: answered when the message becomes visible
        received_at = time.time()
    assert got and got[0].properties["seq"] == "7"
    lateness_ms = (received_at - deliver_at) * 1000
    print(f"delayed delivery lateness: {lateness_ms:.0f} ms", flush=True)
    assert lateness_ms >= -5, "visible before its delivery time"
    assert lateness_ms < 1500


class Checker(TransactionChecker):
    """Answers check-backs from the application's own record of each transaction (as real apps do)."""

    def __init__(self, default) -> None:
        self.default = default
        self.intent: dict[str, object] = {}
        self.checked: list[str] = []

    def check(self, message) -> TransactionResolution:
        self.checked.append(message.message_id)
        return self.intent.get(message.properties.get("seq"), self.default)


def visible_count(endpoints: str, topic: str) -> int:
    """Messages stored in the topic's queues (QueryOffset END over every broker's queue 0)."""
    return sum(r["max_offset"] for r in admin(endpoints, "topics", "--topic", topic))


def test_transactions_commit_rollback_and_check_back(served, clients):
    topic = new_topic(served.endpoints, 1, "broker-a")  # one queue: every receive polls where messages land
    consumer = clients.simple("g_tx_" + topic, topic, await_s=5)
    checker = Checker(TransactionResolution.ROLLBACK)
    # Transactions 1 and 2 are ended by the producer below. A check-back that comes before (the admin call
    # in between can take seconds on a loaded machine) is answered as an app whose local transaction still
    # runs answers it: not known yet, so the broker asks again later and the producer's own end decides.
    unknown = TransactionResolution.TRANSACTION_RESOLUTION_UNSPECIFIED
    checker.intent = {"1": unknown, "2": unknown}
    producer = clients.producer(topic, checker)

    tx = producer.begin_transaction()
    producer.send(message(topic, 1), tx)
    assert visible_count(served.endpoints, topic) == 0  # the half message is invisible
    tx.commit()
    got = receive_all(consumer, 1, 10)
    assert [m.properties["seq"] for m in got] == ["1"]

    tx = producer.begin_transaction()
    producer.send(message(topic, 2), tx)
    tx.rollback()
    time.sleep(5)  # past the check interval: nothing resurrects it
    assert receive_all(consumer, 1, 3) == []
    assert visible_count(served.endpoints, topic) == 1

    # A producer dies with an open transaction; another producer of the topic answers the check-back.
    producer.shutdown()
    clients.started.remove(producer)
    doomed = Producer(config(served.endpoints), (topic,), Checker(TransactionResolution.ROLLBACK))
    doomed.startup()
    tx = doomed.begin_transaction()
    orphan = doomed.send(message(topic, 3), tx).message_id
    doomed.shutdown()
    rescuer = Checker(TransactionResolution.COMMIT)
    clients.producer(topic, rescuer)
    got = receive_all(consumer, 1, 30)
    assert [m.message_id for m in got] == [orphan]
    assert orphan in rescuer.checked


def test_kill9_keeps_pop_state_delayed_and_half_messages(tmp_path):
    """kill -9 with messages in flight, acked, delayed and half-sent: after restart nothing acked comes
    back, everything else is delivered, the delayed message at its time, the half message after check-back."""
    data = str(tmp_path / "data")
    args = (
        "--brokers",
        "1",
        "--queues",
        "1",
        "--min-invisible-ms",
        "1000",
        "--transaction-check-ms",
        "1500",
        "--data-dir",
        data,
    )
    emu = EmulatorProcess(*args)
    topic, group = "restart_t", "restart_g"
    try:
        admin(emu.endpoints, "create-topic", topic, "--queues", "1")
        c = Clients(emu.endpoints)
        try:
            producer = c.producer(topic, Checker(TransactionResolution.ROLLBACK))
            ids = [producer.send(message(topic, i)).message_id for i in range(20)]
            consumer = c.simple(group, topic)
            popped = []
            deadline = time.time() + 20
            while len(popped) < 10 and time.time() < deadline:
                popped += consumer.receive(10 - len(popped), 3)
            acked = {m.message_id for m in popped[:5]}
            for m in popped[:5]:
                consumer.ack(m)
            due = time.time() + 4
            delayed = producer.send(message(topic, 100, delivery_timestamp=int(due * 1000))).message_id
            tx = producer.begin_transaction()
            half = producer.send(message(topic, 200), tx).message_id
        finally:
            emu.kill()  # no shutdown of the clients' server side: a crash
            c.close()
        emu = EmulatorProcess(*args)
        c = Clients(emu.endpoints)
        try:
            rescuer = Checker(TransactionResolution.COMMIT)
            c.producer(topic, rescuer)
            consumer = c.simple(group, topic)
            seen: dict[str, int] = {}
            times: dict[str, float] = {}
            expected = (set(ids) - acked) | {delayed, half}
            deadline = time.time() + 40
            while not expected <= set(seen) and time.time() < deadline:
                for m in consumer.receive(32, 30):
                    seen[m.message_id] = m.delivery_attempt
                    times.setdefault(m.message_id, time.time())
                    consumer.ack(m)
            assert set(seen) == expected, f"missing {expected - set(seen)}, unexpected {set(seen) - expected}"
            assert not acked & set(seen), "an acknowledged message was delivered again"
            assert all(seen[m.message_id] == 2 for m in popped[5:])  # in flight at the crash: redelivered
            assert times[delayed] >= due - 0.05
            assert half in rescuer.checked
        finally:
            c.close()
    finally:
        emu.stop()
