"""The connector's client interface (`connector.clients`) without a server: which client a config selects, the
gRPC client's mapping of v2 responses to neutral send outcomes and error kinds, the producer's handling of
neutral outcomes (per-message results, retries, rejections naming rows) against a scripted fake client, and
that the reader and the writer never import the gRPC client."""

from __future__ import annotations

import json
import pickle
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pytest

from connector.clients import (
    EncodedRows,
    PullResult,
    RocketMQClient,
    SendEncoder,
    SendOutcome,
    SendStatus,
    close_clients,
    get_client,
    new_client,
)
from connector.clients.base import SEND_OK
from connector.clients.grpc_v2 import GrpcClient, send_outcome, v2_error
from connector.config import ClientConfig
from connector.errors import AccessDeniedError, ErrorKind, RocketMQError, SendFailedError
from connector.options import parse_reader_options, parse_writer_options
from connector.producer import Producer
from connector.queues import MessageQueue, RouteEntry
from connector.sink_rows import CheckedRows, RowChecker
from rocketmq_protocol.grpc_v2 import definition_pb2 as d
from rocketmq_protocol.grpc_v2 import service_pb2 as s
from tests.support.helpers import unique_name

BROKERS = ("broker-a", "broker-b")


# ------------------------------------------------------------------------------------------ selection
def test_get_client_selects_the_grpc_client_for_endpoints() -> None:
    config = ClientConfig("127.0.0.1:1")
    try:
        client = get_client(config)
        assert isinstance(client, GrpcClient) and isinstance(client, RocketMQClient)
        assert client.config == config
    finally:
        close_clients()
    fresh = new_client(config)
    try:
        assert isinstance(fresh, GrpcClient) and fresh is not client
    finally:
        fresh.close()


def test_pull_protocol_travels_in_the_client_config() -> None:
    reader = parse_reader_options(
        {"endpoints": "h:1", "topic": "t", "pullProtocol": "standard"}, streaming=True
    )
    assert reader.client_config.pull_protocol == "standard"
    assert parse_writer_options({"endpoints": "h:1", "topic": "t"}).client_config.pull_protocol == "auto"
    with pytest.raises(ValueError, match="unknown pull protocol 'tcp'"):
        GrpcClient(ClientConfig("h:1", pull_protocol="tcp"))


def test_route_entries_pickle_and_share_the_queue_identity() -> None:
    q = MessageQueue("t", "broker-a", 3)
    e = RouteEntry(q, "127.0.0.1:1", readable=True, writable=False)
    assert pickle.loads(pickle.dumps(e)) == e
    assert (e.topic, e.broker, e.queue_id, str(q)) == ("t", "broker-a", 3, "t/broker-a/3")
    assert {q: 1}[MessageQueue("t", "broker-a", 3)] == 1


# ------------------------------------------------------------------------------------------ v2 → neutral
def _response(code: int, message: str = "", entries: tuple[int, ...] = ()) -> s.SendMessageResponse:
    return s.SendMessageResponse(
        status=d.Status(code=code, message=message),
        entries=[s.SendResultEntry(status=d.Status(code=c, message=f"entry {c}")) for c in entries],
    )


def test_send_outcome_maps_v2_responses() -> None:
    assert send_outcome(_response(d.OK, entries=(d.OK, d.OK)), 2) is SEND_OK
    partial = send_outcome(_response(d.MULTIPLE_RESULTS, entries=(d.OK, d.INTERNAL_SERVER_ERROR)), 2)
    assert partial.status is SendStatus.PARTIAL and partial.messages is not None
    assert [m.status for m in partial.messages] == [SendStatus.OK, SendStatus.RETRYABLE]
    assert partial.messages[1].label == "INTERNAL_SERVER_ERROR"
    busy = send_outcome(_response(d.TOO_MANY_REQUESTS, "slow down"), 3)
    assert (busy.status, busy.backoff, busy.label) == (SendStatus.RETRYABLE, True, "TOO_MANY_REQUESTS")
    assert busy.reason == f"TOO_MANY_REQUESTS ({d.TOO_MANY_REQUESTS}): slow down"
    down = send_outcome(_response(d.INTERNAL_SERVER_ERROR, "oops"), 3)
    assert (down.status, down.backoff) == (SendStatus.RETRYABLE, False)
    big = send_outcome(_response(d.MESSAGE_BODY_TOO_LARGE, "message #0: too large"), 3)
    assert big.status is SendStatus.REJECTED and big.messages is None
    assert big.reason == f"MESSAGE_BODY_TOO_LARGE ({d.MESSAGE_BODY_TOO_LARGE}): message #0: too large"
    # a rejection that reports every message keeps the per-message outcomes; a count mismatch does not
    keyed = send_outcome(_response(d.ILLEGAL_MESSAGE_KEY, "bad", (d.OK, d.ILLEGAL_MESSAGE_KEY)), 2)
    assert keyed.status is SendStatus.REJECTED and keyed.messages is not None
    assert keyed.messages[1].status is SendStatus.REJECTED
    odd = send_outcome(_response(d.MULTIPLE_RESULTS, entries=(d.OK,)), 2)
    assert odd.status is SendStatus.REJECTED and odd.messages is None


def test_v2_errors_carry_a_neutral_kind_and_pickle() -> None:
    missing = v2_error(d.TOPIC_NOT_FOUND, "no such topic", "h:1", "QueryRoute(t)")
    assert missing.kind is ErrorKind.TOPIC_NOT_FOUND and missing.code_name == "TOPIC_NOT_FOUND"
    assert (
        str(missing) == f"QueryRoute(t) on h:1 failed: TOPIC_NOT_FOUND ({d.TOPIC_NOT_FOUND}): no such topic"
    )
    denied = v2_error(d.FORBIDDEN, "lacks SUB", "h:1", "PullMessage")
    assert isinstance(denied, AccessDeniedError) and denied.kind is ErrorKind.FORBIDDEN
    assert "refused the request (FORBIDDEN)" in str(denied)
    copy = pickle.loads(pickle.dumps(denied))
    assert type(copy) is AccessDeniedError and (copy.kind, str(copy)) == (denied.kind, str(denied))
    other = v2_error(12345, "?", "h:1", "X")
    assert type(other) is RocketMQError and other.kind is ErrorKind.OTHER and other.code_name == "CODE_12345"


# ------------------------------------------------------------------------------------------ fake client
class _Encoded(EncodedRows):
    def payload(self, idx: slice | list[int], queue: MessageQueue) -> bytes:
        return json.dumps({"queue": list(queue), "rows": self.rows[idx].tolist()}).encode()


class _Encoder(SendEncoder):
    def encode(self, rows: CheckedRows) -> EncodedRows:
        return _Encoded(rows, rows.body_sizes + 10)


class _Pending:
    """A send of a fake client, answered at once or later from a broker thread."""

    def __init__(self) -> None:
        self._outcome: SendOutcome | None = None
        self._callbacks: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    def add_done_callback(self, fn: Callable[[], None]) -> None:
        with self._lock:
            if self._outcome is None:
                self._callbacks.append(fn)
                return
        fn()

    def answer(self, outcome: SendOutcome) -> None:
        with self._lock:
            self._outcome, callbacks = outcome, self._callbacks
        for fn in callbacks:
            fn()

    def cancel(self) -> bool:
        return False

    def outcome(self) -> SendOutcome | None:
        return self._outcome


class FakeClient(RocketMQClient):
    """Two brokers of two queues; each send is answered by `answer(queue, rows)` (default: OK)."""

    def __init__(self, answer: Callable[[MessageQueue, list[int]], SendOutcome] | None = None) -> None:
        self.config = ClientConfig(f"fake-{unique_name('c')}:1")
        self.answer = answer or (lambda q, rows: SEND_OK)
        self.sends: list[tuple[MessageQueue, list[int]]] = []

    def route(self, topic: str, timeout_ms: int = 0) -> list[RouteEntry]:
        return [RouteEntry(MessageQueue(topic, b, i), f"{b}:1") for b in BROKERS for i in range(2)]

    def send_encoder(self, producer_group: str | None = None) -> SendEncoder:
        return _Encoder()

    def send_async(self, endpoint: str, payload: bytes, count: int, timeout_s: float) -> _Pending:
        sent = json.loads(payload)
        q, rows = MessageQueue(*sent["queue"]), sent["rows"]
        assert endpoint == f"{q.broker}:1" and len(rows) == count
        self.sends.append((q, rows))
        done = _Pending()
        done.answer(self.answer(q, rows))
        return done

    def min_offset(self, queue, timeout_ms=0):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    max_offset = get_committed = commit = offset_for_timestamp = min_offset  # type: ignore[assignment]

    def pull(self, *args, **kwargs) -> PullResult:  # type: ignore[no-untyped-def]
        raise NotImplementedError

    def close(self) -> None:
        pass


def _send(client: FakeClient, n: int, row_base: int = 10, **opts: str) -> Producer:
    topic = unique_name("fake")
    options = parse_writer_options({"endpoints": client.config.endpoints, "topic": topic, **opts})
    producer = Producer(options, client=client, label="test")
    batch = pa.record_batch([pa.array([b"m%d" % i for i in range(n)], pa.binary())], names=["body"])
    for checked in RowChecker({"body": "body"}, topic, options.max_message_size).check(batch, row_base):
        producer.send(checked)
    return producer


def _outcomes(*statuses: SendStatus) -> SendOutcome:
    def one(st: SendStatus) -> SendOutcome:
        if st is SendStatus.OK:
            return SEND_OK
        label = "INTERNAL_SERVER_ERROR" if st is SendStatus.RETRYABLE else "ILLEGAL_MESSAGE_KEY"
        return SendOutcome(st, f"{label} (1): per-message reason", label)

    return SendOutcome(SendStatus.PARTIAL, messages=tuple(one(x) for x in statuses))


def test_partial_results_count_the_ok_messages_and_retry_the_rest_elsewhere() -> None:
    script = [_outcomes(SendStatus.OK, SendStatus.RETRYABLE, SendStatus.OK)]
    client = FakeClient(lambda q, rows: script.pop(0) if script else SEND_OK)
    stats = _send(client, 3).flush()
    (first_q, first_rows), (retry_q, retry_rows) = client.sends
    assert first_rows == [10, 11, 12] and retry_rows == [11]
    assert retry_q.broker != first_q.broker  # a retry avoids the broker that failed
    assert (stats.messages, stats.requests, stats.attempts, stats.retries) == (3, 1, 2, 1)
    assert stats.failures == {f"{first_q.broker}: INTERNAL_SERVER_ERROR": 1}
    assert sum(stats.per_broker.values()) == 3


def test_a_rejected_message_of_partial_results_names_its_row() -> None:
    client = FakeClient(lambda q, rows: _outcomes(SendStatus.OK, SendStatus.REJECTED, SendStatus.OK))
    producer = _send(client, 3)
    with pytest.raises(SendFailedError) as e:
        producer.flush()
    msg = str(e.value)
    assert "(row 11 of test)" in msg and "was rejected: ILLEGAL_MESSAGE_KEY (1): per-message reason" in msg
    assert len(client.sends) == 1


def test_a_request_rejection_names_every_row_of_the_request_and_the_reason() -> None:
    reason = "MESSAGE_BODY_TOO_LARGE (41301): message #1: body of 9 bytes exceeds the limit of 8"
    client = FakeClient(lambda q, rows: SendOutcome(SendStatus.REJECTED, reason, "MESSAGE_BODY_TOO_LARGE"))
    producer = _send(client, 3)
    with pytest.raises(SendFailedError) as e:
        producer.flush()
    msg = str(e.value)
    assert "the send of 3 messages (rows 10..12 of test)" in msg and f"was rejected: {reason};" in msg
    assert "0 messages of test were acknowledged" in msg and producer.stats.retries == 0


def test_a_request_rejection_with_per_message_results_names_the_rejected_rows() -> None:
    per_message = _outcomes(SendStatus.OK, SendStatus.REJECTED, SendStatus.REJECTED, SendStatus.OK)
    rejected = SendOutcome(
        SendStatus.REJECTED, "ILLEGAL_MESSAGE_KEY (1): request", "X", messages=per_message.messages
    )
    producer = _send(FakeClient(lambda q, rows: rejected), 4)
    with pytest.raises(SendFailedError) as e:
        producer.flush()
    msg = str(e.value)
    assert "the send of 2 messages (rows 11..12 of test)" in msg and "per-message reason" in msg


def test_retryable_outcomes_back_off_when_asked_and_give_up_after_the_retries() -> None:
    busy = SendOutcome(SendStatus.RETRYABLE, "TOO_MANY_REQUESTS (42900): busy", "TOO_MANY_REQUESTS", True)
    script = [busy]
    client = FakeClient(lambda q, rows: script.pop(0) if script else SEND_OK)
    stats = _send(client, 2).flush()
    assert (stats.messages, stats.retries) == (2, 1) and [r for _, r in client.sends] == [[10, 11], [10, 11]]
    # Flow control stores nothing: it is retried past retryTimesWhenSendFailed, until sendMsgTimeoutMs.
    script = [busy] * 5
    stats = _send(client, 2, retryTimesWhenSendFailed="1").flush()
    assert (stats.messages, stats.retries, sum(stats.failures.values())) == (2, 5, 5)
    producer = _send(FakeClient(lambda q, rows: busy), 2, sendMsgTimeoutMs="300")
    t0 = time.monotonic()
    with pytest.raises(SendFailedError, match=r"sendMsgTimeoutMs=300\).*TOO_MANY_REQUESTS \(42900\): busy"):
        producer.flush()
    assert 0.25 < time.monotonic() - t0 < 2.0 and producer.stats.retries >= 3
    down = SendOutcome(SendStatus.RETRYABLE, "gRPC UNAVAILABLE: down", "UNAVAILABLE")
    producer = _send(FakeClient(lambda q, rows: down), 2, retryTimesWhenSendFailed="2")
    with pytest.raises(
        SendFailedError, match=r"failed after 3 attempt\(s\).*last error: .*UNAVAILABLE: down"
    ):
        producer.flush()


class SendQueueBroker(FakeClient):
    """One broker thread storing one request at a time (`service_s` each); a request that waited in its send
    queue over `max_wait_s` is answered busy and stores nothing, as RocketMQ's BrokerFastFailure does."""

    BUSY = SendOutcome(SendStatus.RETRYABLE, "SYSTEM_BUSY (2): [TIMEOUT_CLEAN_QUEUE]", "SYSTEM_BUSY", True)

    def __init__(self, service_s: float, max_wait_s: float) -> None:
        super().__init__()
        self.service_s, self.max_wait_s = service_s, max_wait_s
        self.queue: queue.SimpleQueue[tuple[float, list[int], _Pending] | None] = queue.SimpleQueue()
        self.stored: list[int] = []
        self.attempts: dict[int, int] = {}  # first row of a request: its attempts
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def send_async(self, endpoint: str, payload: bytes, count: int, timeout_s: float) -> _Pending:
        rows = json.loads(payload)["rows"]
        self.attempts[rows[0]] = self.attempts.get(rows[0], 0) + 1
        pending = _Pending()
        self.queue.put((time.monotonic(), rows, pending))
        return pending

    def _serve(self) -> None:
        while (item := self.queue.get()) is not None:
            arrived, rows, pending = item
            if time.monotonic() - arrived > self.max_wait_s:
                pending.answer(self.BUSY)
                continue
            time.sleep(self.service_s)
            self.stored.extend(rows)
            pending.answer(SEND_OK)

    def close(self) -> None:
        self.queue.put(None)
        self.thread.join(5)


def test_flow_control_narrows_what_is_in_flight_so_no_request_starves() -> None:
    """Against a broker that refuses requests queued behind another (over 5 ms here, 1 ms in
    tests/real/test_real_flow_control.py), requests in flight halve at each busy answer and retries go
    first: every request is stored once, within a few attempts, although 8 may be in flight. (Before, with 8
    in flight all along, a request was refused until its sendMsgTimeoutMs ran out.)"""
    broker = SendQueueBroker(service_s=0.02, max_wait_s=0.005)
    try:
        stats = _send(broker, 64 * 32, row_base=0, batchSize="32", sendMsgTimeoutMs="3000").flush()
    finally:
        broker.close()
    assert sorted(broker.stored) == list(range(64 * 32)) and stats.messages == 64 * 32
    assert stats.requests == 64 and max(broker.attempts.values()) <= 3, broker.attempts


def test_fifo_groups_go_to_their_queue_in_order() -> None:
    client = FakeClient()
    topic = unique_name("fifo")
    options = parse_writer_options({"endpoints": client.config.endpoints, "topic": topic, "batchSize": "2"})
    producer = Producer(options, client=client, label="test")
    batch = pa.record_batch(
        [pa.array([b"x"] * 6, pa.binary()), pa.array(["g1", "g2", "g1", None, "g1", "g2"])],
        names=["body", "messageGroup"],
    )
    checker = RowChecker({"body": "body", "messageGroup": "messageGroup"}, topic, 1 << 20)
    for checked in checker.check(batch, 0):
        producer.send(checked)
    assert producer.flush().messages == 6
    route = producer._routes[topic]
    for group, rows in (("g1", [0, 2, 4]), ("g2", [1, 5])):
        sent = [r for q, rs in client.sends if q == route.group_queue(group) for r in rs if r in rows]
        assert sent == rows


# ------------------------------------------------------------------------------------------ 16 KiB rule
def test_the_checked_rows_are_protocol_neutral() -> None:
    batch = pa.record_batch(
        [pa.array([b"ab", b"c"], pa.binary()), pa.array(["T1", None]), pa.array(["k", None])],
        names=["body", "tags", "keys"],
    )
    [c] = RowChecker({"body": "body", "tags": "tags", "keys": "keys"}, "T", 100, clock_ms=lambda: 7).check(
        batch, 5
    )
    assert (c.topic, c.rows.tolist(), c.body_sizes.tolist(), c.born_ms) == ("T", [5, 6], [2, 1], 7)
    assert c.tags.to_pylist() == ["T1", None] and c.keys.to_pylist() == ["k", None]
    assert c.properties is None and c.groups is None and c.group_list is None and c.delivery_us is None
    assert isinstance(c.rows, np.ndarray)


# ------------------------------------------------------------------------------------------ layering
def test_reader_and_writer_do_not_import_the_grpc_client() -> None:
    code = (
        "import sys\n"
        "import connector.datasource, connector.batch_reader, connector.stream_reader, connector.read_task\n"
        "import connector.positions, connector.planning, connector.writer, connector.producer\n"
        "bad = [m for m in sys.modules if m == 'grpc' or m.startswith(('grpc.', 'rocketmq_protocol.grpc_v2',\n"
        "       'rocketmq_protocol.extension', 'connector.clients.grpc'))]\n"
        "print(bad)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout
