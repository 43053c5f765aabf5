"""The writer's send path, without Spark and without protocol: checked rows → send requests → every message
acknowledged, through a `connector.clients.RocketMQClient`.

* Requests hold up to `batchSize` messages / `batchBytes` bytes of one topic (each message counted at its
  `EncodedRows.batch_sizes`: its size in the batch the broker stores) and go to ONE queue
  (the client's encoder writes the queue into the request at each attempt). RocketMQ sends a batch to one
  queue, so each `send()` spreads its messages over the topic's writable queues in turn: its rows are cut
  into requests of at most ceil(rows / writable queues) messages, but not below 32 (10,000 rows over 8
  queues: 8 requests of 1,250), each going to the next queue of the round robin. Messages the protocol can only send alone
  (`EncodedRows.alone`) get a request each.
* The queue of a request comes from the topic's `QueueSelector` (round robin and fault latency, as
  apache/rocketmq's `MQFaultStrategy`) at each attempt; rows with a `messageGroup` go to the queue the group
  hashes to (Guava consistent hash of the group's Java hashCode over the topic's writable queues, as the
  proxy does), and a FIFO queue never has two requests in flight, so each group lands in order.
* Up to `maxInFlightRequests` requests are in flight (`RocketMQClient.send_async`); `flush()` returns when
  every message is acknowledged. Retryable outcomes (broker unreachable, busy, timed out; the client
  decides which codes are) are retried on a queue of another broker (`select(last_broker)`), with a backoff
  when the broker asks for one, at most `retryTimesWhenSendFailed` times within `sendMsgTimeoutMs`; every
  attempt's latency or failure is recorded in the selector. A flow-control answer also halves the requests
  allowed in flight (each acknowledgement adds one back, up to `maxInFlightRequests`), and retries are
  dispatched before new requests. A rejection raises `SendFailedError` with the
  broker's reason and the rows concerned: the rejected messages' rows when the broker reported per-message
  results, else every row of the request.

Routes and selectors are cached per process (30 s route TTL), so fault-latency isolation outlives one task,
as in a long-lived RocketMQ producer.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from rocketmq_protocol.hashing import guava_consistent_hash, java_string_hash

from .clients import EncodedRows, RocketMQClient, SendEncoder, SendFuture, SendOutcome, SendStatus, get_client
from .errors import SendFailedError
from .options import WriterOptions
from .queue_selector import LatencyFaultTolerance, QueueSelector, TopicPublishInfo
from .queues import MessageQueue
from .send_stats import SendStats, add_count
from .sink_rows import CheckedRows

log = logging.getLogger(__name__)

__all__ = ["Producer", "TopicRoute", "describe_rows", "topic_route"]

ROUTE_TTL_S = 30.0
ROUTE_TIMEOUT_MS = 10_000
BACKOFF_INITIAL_S = 0.01  # the proxy's producer backoff: 10 ms, ×2, at most 1 s
BACKOFF_MAX_S = 1.0
#: Spreading never cuts requests below this many messages (a handful of rows stays one request).
SPREAD_MIN_MESSAGES = 32


# ------------------------------------------------------------------------------------------ routes
@dataclass
class TopicRoute:
    """A topic's writable queues (sorted by broker, queue id), their brokers' endpoints and its selector."""

    topic: str
    queues: tuple[MessageQueue, ...]
    endpoints: dict[str, str]  # broker name → endpoint
    selector: QueueSelector
    fetched: float

    def group_queue(self, group: str) -> MessageQueue:
        """The queue of a FIFO message group."""
        return self.queues[guava_consistent_hash(java_string_hash(group), len(self.queues))]


_routes: dict[tuple, TopicRoute] = {}
_routes_lock = threading.Lock()
_routes_pid = os.getpid()


def topic_route(client: RocketMQClient, options: WriterOptions, topic: str) -> TopicRoute:
    """The process's route and selector of `topic`, (re)fetched when older than 30 s."""
    global _routes_pid
    key = (
        client.config,
        topic,
        options.send_latency_fault_enable,
        options.latency_max,
        options.not_available_duration,
    )
    with _routes_lock:
        if _routes_pid != os.getpid():
            _routes.clear()
            _routes_pid = os.getpid()
        cached = _routes.get(key)
    now = time.monotonic()
    if cached is not None and now - cached.fetched < ROUTE_TTL_S:
        return cached
    entries = client.route(topic, timeout_ms=max(options.send_msg_timeout_ms, ROUTE_TIMEOUT_MS))
    writable = [e for e in entries if e.writable]
    if not writable:
        raise SendFailedError(
            f"rocketmq sink: topic {topic!r} has no writable queue "
            f"({len(entries)} queues in its route from {client.config.target}, none with write permission)"
        )
    refs = tuple(e.queue for e in writable)
    endpoints = {e.queue.broker: e.endpoint for e in writable}
    with _routes_lock:
        cached = _routes.get(key)
        if cached is None:
            tolerance = LatencyFaultTolerance(options.latency_max, options.not_available_duration)
            selector = QueueSelector(
                TopicPublishInfo(refs), options.send_latency_fault_enable, tolerance=tolerance
            )
            cached = _routes[key] = TopicRoute(topic, refs, endpoints, selector, now)
        else:
            if refs != cached.queues:
                cached.selector.update_queues(refs)
            cached.queues, cached.endpoints, cached.fetched = refs, endpoints, now
    return cached


# ------------------------------------------------------------------------------------------ stats
def _delta(now: dict[str, object], base: dict[str, object], key: str) -> int:
    return int(now[key]) - int(base[key])  # type: ignore[call-overload]


# ------------------------------------------------------------------------------------------ requests
@dataclass(eq=False)
class _Request:
    """One send request's messages (positions in an `EncodedRows`) and the state of its attempts."""

    route: TopicRoute
    rows: EncodedRows
    idx: slice | list[int]  # the messages of `rows` it carries
    nbytes: int
    fixed: MessageQueue | None = None  # FIFO: the group's queue
    attempts: int = 0
    deadline: float = 0.0
    started: float = 0.0
    queue: MessageQueue | None = None
    endpoint: str = ""
    last_broker: str | None = None
    last_error: str = "no attempt was made"
    _payload: tuple[MessageQueue, object] | None = None

    def __len__(self) -> int:
        i = self.idx
        return len(i) if isinstance(i, list) else i.stop - i.start

    @property
    def row_numbers(self) -> np.ndarray:
        return self.rows.rows[self.idx]

    def payload(self, queue: MessageQueue) -> object:
        """The encoded request for `queue` (cached for the last queue)."""
        if self._payload is not None and self._payload[0] == queue:
            return self._payload[1]
        data = self.rows.payload(self.idx, queue)
        self._payload = (queue, data)
        return data

    def subset(self, positions: list[int]) -> _Request:
        """A request of some of these messages (by position in this one), with this one's attempt state."""
        i = self.idx
        idx = [i.start + p for p in positions] if isinstance(i, slice) else [i[p] for p in positions]
        req = _Request(self.route, self.rows, idx, 0, self.fixed)
        req.attempts, req.deadline, req.queue, req.endpoint = (
            self.attempts,
            self.deadline,
            self.queue,
            self.endpoint,
        )
        return req


def describe_rows(rows: np.ndarray) -> str:
    """`row 7`, `rows 0..99` or `12 rows from 3 to 40`."""
    if len(rows) == 1:
        return f"row {int(rows[0])}"
    first, last = int(rows[0]), int(rows[-1])
    if last - first + 1 == len(rows):
        return f"rows {first}..{last}"
    return f"{len(rows)} rows from {int(rows.min())} to {int(rows.max())}"


class Producer:
    """Sends checked rows; not thread-safe (one per task). Call `send()` per batch, then `flush()`."""

    def __init__(
        self,
        options: WriterOptions,
        *,
        client: RocketMQClient | None = None,
        label: str = "the task",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.options = options
        self.client = client or get_client(options.client_config)
        self.label = label
        self.stats = SendStats()
        self._clock = clock
        self._timeout_s = options.send_msg_timeout_ms / 1000.0
        self._max_attempts = 1 + options.retry_times_when_send_failed
        self._max_in_flight = options.max_in_flight_requests
        self._window = self._max_in_flight  # requests allowed in flight: halved by flow control, +1 per ack
        self._routes: dict[str, TopicRoute] = {}
        self._selector_base: dict[str, dict[str, object]] = {}
        self._ready: deque[_Request] = deque()
        self._delayed: list[tuple[float, int, _Request]] = []
        self._inflight: dict[int, tuple[_Request, SendFuture]] = {}
        self._done: queue.SimpleQueue[int] = queue.SimpleQueue()
        self._tokens = itertools.count()
        self._fifo_owned: set[MessageQueue] = set()
        self._fifo_waiting: dict[MessageQueue, deque[_Request]] = {}
        self._waiting = 0
        self._encoder: SendEncoder | None = None

    # ------------------------------------------------------------------ public
    def send(self, checked: CheckedRows) -> None:
        """Encodes the rows' messages and sends until all of them are in flight or acknowledged."""
        if not len(checked):
            return
        route = self._route(checked.topic)
        if self._encoder is None:
            self._encoder = self.client.send_encoder(self.options.producer_group)
        rows = self._encoder.encode(checked)
        for req in self._requests(rows, route):
            self._enqueue(req)
            self._pump(idle=False)

    def flush(self) -> SendStats:
        """Waits until every message sent so far is acknowledged OK; returns the stats."""
        self._pump(idle=True)
        for topic, route in self._routes.items():
            now, base = route.selector.stats(), self._selector_base[topic]
            self.stats.better_half_picks += _delta(now, base, "better_half_picks")
            self.stats.round_robin_fallbacks += _delta(now, base, "round_robin_fallbacks")
            self._selector_base[topic] = now
        return self.stats

    def close(self) -> None:
        """Cancels what is still in flight (after a failure)."""
        for _, fut in self._inflight.values():
            fut.cancel()
        self._inflight.clear()
        self._ready.clear()
        self._delayed.clear()

    # ------------------------------------------------------------------ building requests
    def _route(self, topic: str) -> TopicRoute:
        route = self._routes.get(topic)
        if route is None:
            route = self._routes[topic] = topic_route(self.client, self.options, topic)
            self._selector_base[topic] = route.selector.stats()
        return route

    def _chunks(self, sizes: np.ndarray, count: int | None = None) -> Iterator[tuple[int, int]]:
        """[start, end) ranges of at most `count` (default batchSize) messages and batchBytes bytes of
        `sizes` (the messages' `batch_sizes`; at least one message)."""
        n = len(sizes)
        cum = np.cumsum(sizes)
        limit = self.options.batch_bytes
        count = self.options.batch_size if count is None else count
        start = 0
        while start < n:
            base = int(cum[start - 1]) if start else 0
            end = int(np.searchsorted(cum, base + limit, side="right"))
            end = min(max(end, start + 1), start + count, n)
            yield start, end
            start = end

    def _requests(self, rows: EncodedRows, route: TopicRoute) -> Iterator[_Request]:
        alone = rows.alone
        if rows.groups is None and alone is None:
            yield from self._ranges(rows, route, None, None)
            return
        groups = rows.groups if rows.groups is not None else [None] * len(rows)
        single = alone.tolist() if alone is not None else [False] * len(rows)
        plain = [i for i, g in enumerate(groups) if g is None and not single[i]]
        by_queue: dict[MessageQueue, list[int]] = {}
        queue_of: dict[str, MessageQueue] = {}
        for i, g in enumerate(groups):
            if g is not None:
                q = queue_of.get(g)
                if q is None:
                    q = queue_of[g] = route.group_queue(g)
                by_queue.setdefault(q, []).append(i)
        if plain:
            yield from self._ranges(rows, route, plain, None)
        for i, s in enumerate(single):
            if s and groups[i] is None:
                yield _Request(route, rows, [i], int(rows.sizes[i]), None)
        for q, idx in by_queue.items():
            yield from self._ranges(rows, route, idx, q)

    def _ranges(
        self, rows: EncodedRows, route: TopicRoute, idx: list[int] | None, fixed: MessageQueue | None
    ) -> Iterator[_Request]:
        sizes = rows.sizes if idx is None else rows.sizes[idx]
        limited = rows.batch_sizes if idx is None else rows.batch_sizes[idx]
        count = None
        if fixed is None:  # spread over the writable queues in turn: one request per queue at most
            per_queue = -(-len(sizes) // max(len(route.queues), 1))
            count = min(self.options.batch_size, max(per_queue, SPREAD_MIN_MESSAGES))
        for a, b in self._chunks(limited, count):
            part: slice | list[int] = slice(a, b) if idx is None else idx[a:b]
            yield _Request(route, rows, part, int(sizes[a:b].sum()), fixed)

    def _enqueue(self, req: _Request) -> None:
        q = req.fixed
        if q is not None:
            if q in self._fifo_owned:
                self._fifo_waiting.setdefault(q, deque()).append(req)
                self._waiting += 1
                return
            self._fifo_owned.add(q)
        self._ready.append(req)

    def _release(self, q: MessageQueue) -> None:
        """A FIFO queue's request is acknowledged: its next request may go."""
        waiting = self._fifo_waiting.get(q)
        if waiting:
            self._ready.append(waiting.popleft())
            self._waiting -= 1
        else:
            self._fifo_owned.discard(q)

    # ------------------------------------------------------------------ the loop
    def _pump(self, idle: bool) -> None:
        """Dispatches and handles completions until nothing waits to be dispatched (`idle`: nothing is
        outstanding at all)."""
        while True:
            now = self._clock()
            due = []
            while self._delayed and self._delayed[0][0] <= now:
                due.append(heapq.heappop(self._delayed)[2])
            self._ready.extendleft(reversed(due))  # retries go before new requests
            while self._ready and len(self._inflight) < self._window:
                self._dispatch(self._ready.popleft())
            if not self._ready and not self._waiting and (not idle or not (self._inflight or self._delayed)):
                return
            timeout = max(self._delayed[0][0] - self._clock(), 0.0) if self._delayed else None
            if not self._inflight and timeout is None:
                return  # nothing outstanding (cannot happen while requests wait)
            try:
                token = self._done.get(timeout=timeout)
            except queue.Empty:
                continue
            self._complete(token)

    def _dispatch(self, req: _Request) -> None:
        now = self._clock()
        if req.attempts == 0:
            req.deadline = now + self._timeout_s
        remaining = req.deadline - now
        if remaining <= 0:
            raise self._exhausted(req)
        route = req.route
        q = req.fixed or route.selector.select(req.last_broker)
        endpoint = route.endpoints[q.broker]
        payload = req.payload(q)
        req.attempts += 1
        self.stats.attempts += 1
        if req.attempts > 1:
            self.stats.retries += 1
        req.queue, req.endpoint, req.started = q, endpoint, now
        fut = self.client.send_async(endpoint, payload, len(req), remaining)
        token = next(self._tokens)
        self._inflight[token] = (req, fut)
        fut.add_done_callback(lambda t=token: self._done.put(t))

    def _complete(self, token: int) -> None:
        entry = self._inflight.pop(token, None)
        if entry is None:
            return
        req, fut = entry
        latency_ms = (self._clock() - req.started) * 1000.0
        out = fut.outcome()
        if out is None:  # cancelled
            return
        status = out.status
        if status is SendStatus.OK:
            self._acked(req, latency_ms)
        elif status is SendStatus.PARTIAL:
            assert out.messages is not None
            self._partial(req, out.messages, latency_ms)
        elif status is SendStatus.RETRYABLE:
            self._failed(req, out.reason, out.label, latency_ms, backoff=out.backoff)
        else:
            raise self._rejected_outcome(req, out)

    def _record(self, req: _Request, latency_ms: float, failed: bool) -> None:
        assert req.queue is not None
        if req.route.selector.record(req.queue.broker, latency_ms, failed) > 0:
            add_count(self.stats.isolations, req.queue.broker)

    def _count(self, req: _Request) -> None:
        """Counts `req`'s messages as acknowledged on its queue."""
        q = req.queue
        assert q is not None
        s, n = self.stats, len(req)
        s.messages += n
        add_count(s.per_broker, q.broker, n)
        add_count(s.per_queue, f"{q.topic}/{q.broker}/{q.queue_id}", n)

    def _acked(self, req: _Request, latency_ms: float) -> None:
        self._record(req, latency_ms, failed=False)
        if self._window < self._max_in_flight:
            self._window += 1
        self._count(req)
        self.stats.requests += 1
        self.stats.bytes += req.nbytes
        if req.fixed is not None:
            self._release(req.fixed)

    def _failed(self, req: _Request, reason: str, short: str, latency_ms: float, backoff: bool) -> None:
        q = req.queue
        assert q is not None
        self._record(req, latency_ms, failed=True)
        add_count(self.stats.failures, f"{q.broker}: {short}")
        req.last_broker = q.broker
        req.last_error = f"{q} on {req.endpoint}: {reason}"
        now = self._clock()
        # A flow-control answer (`backoff`: the broker is busy and stored nothing) is retried until the
        # send's deadline however many attempts that takes; other failures get `retryTimesWhenSendFailed`.
        if now >= req.deadline or (req.attempts >= self._max_attempts and not backoff):
            raise self._exhausted(req)
        log.debug(
            "%s: attempt %d of %d messages failed (%s); retrying", self.label, req.attempts, len(req), reason
        )
        if backoff:
            # Requests queued behind each other at a busy broker are what it refuses (RocketMQ's
            # BrokerFastFailure): fewer in flight until acknowledgements come back.
            self._window = max(1, self._window // 2)
            delay = min(BACKOFF_INITIAL_S * 2 ** (req.attempts - 1), BACKOFF_MAX_S, req.deadline - now)
            heapq.heappush(self._delayed, (now + delay, next(self._tokens), req))
        else:
            self._ready.appendleft(req)

    def _partial(self, req: _Request, messages: tuple[SendOutcome, ...], latency_ms: float) -> None:
        """Per-message outcomes: count the OK ones, retry the rest if retryable, else fail."""
        failed = [i for i, m in enumerate(messages) if m.status is not SendStatus.OK]
        for i in failed:
            if messages[i].status is not SendStatus.RETRYABLE:
                raise self._rejected(req.subset([i]), messages[i].reason)
        bad = set(failed)
        if len(bad) < len(req):
            self._count(req.subset([i for i in range(len(req)) if i not in bad]))
        first = messages[failed[0]]
        self._failed(req.subset(failed), first.reason, first.label, latency_ms, backoff=first.backoff)

    # ------------------------------------------------------------------ errors
    def _context(self, req: _Request) -> str:
        n = len(req)
        return (
            f"the send of {n} message{'s' if n != 1 else ''} ({describe_rows(req.row_numbers)} of {self.label}) "
            f"to queue {req.queue} on {req.endpoint}"
        )

    def _acked_note(self) -> str:
        return (
            f"{self.stats.messages} messages of {self.label} were acknowledged before the failure "
            "(at-least-once: a retried task sends them again)"
        )

    def _rejected_outcome(self, req: _Request, out: SendOutcome) -> SendFailedError:
        """A rejected request: names the rejected messages' rows when the broker reported per-message results
        (with the first one's reason), else every row of the request with the request's reason."""
        if out.messages is not None:
            rejected = [i for i, m in enumerate(out.messages) if m.status is not SendStatus.OK]
            if rejected and len(rejected) < len(req):
                return self._rejected(req.subset(rejected), out.messages[rejected[0]].reason or out.reason)
        return self._rejected(req, out.reason)

    def _rejected(self, req: _Request, reason: str) -> SendFailedError:
        self.close()
        return SendFailedError(
            f"rocketmq sink: {self._context(req)} was rejected: {reason}; {self._acked_note()}"
        )

    def _exhausted(self, req: _Request) -> SendFailedError:
        self.close()
        return SendFailedError(
            f"rocketmq sink: {self._context(req)} failed after {req.attempts} attempt(s) "
            f"(retryTimesWhenSendFailed={self.options.retry_times_when_send_failed}, "
            f"sendMsgTimeoutMs={self.options.send_msg_timeout_ms}); last error: {req.last_error}; "
            f"{self._acked_note()}"
        )
