"""Producer queue selection: round robin plus RocketMQ's send-latency fault tolerance (README.md, 'Writer
options'), after apache/rocketmq's ``TopicPublishInfo``, ``MQFaultStrategy`` and ``LatencyFaultToleranceImpl``.

A pure component — no I/O, no protocol, no Spark — with an injectable clock (milliseconds) and
injectable counter start values, so every decision is reproducible in tests
(``tests/test_queue_selector.py``):

* ``TopicPublishInfo``: the topic's writable queues and the ``sendWhichQueue`` counter
  (random start, ``incrementAndGet = (v + 1) & 0x7FFFFFFF``). ``select_one(None)`` is
  ``queues[incrementAndGet() % n]``; ``select_one(last_broker)`` tries up to ``n`` increments for a
  queue of another broker, else falls back to plain round robin.
  Worked example: ``[A0, A1, B0, B1]``, counter 5 → send picks B0; B0 fails → retry skips B1 and
  picks A0.
* ``LatencyFaultTolerance``: one ``FaultItem(broker, current_latency, start_timestamp)`` per broker,
  updated after every send; a broker is skipped until ``now >= start_timestamp``. The isolation is
  ``notAvailableDuration[i]`` for the largest ``i`` with ``latencyMax[i] <= latency``; after a failure
  it is computed for 30,000 ms.
* ``QueueSelector.select``: latency off → ``select_one(last_broker)``. Latency on → the first
  round-robin queue whose broker is available (and, on a retry, is not the last broker); if none,
  the better-half broker of ``pick_one_at_least()`` with one of *its own* queues chosen round robin;
  if that yields nothing, plain round robin.

Where RocketMQ versions differ:

* Tables: the 4.x / ≤ 5.1.3 defaults (``latencyMax`` 50,100,550,1000,2000,3000,15000 →
  ``notAvailableDuration`` 0,0,30000,60000,120000,180000,600000) and the 4.x failure latency of
  30,000 ms (30000 >= latencyMax[6] → 600 s isolation), the README's defaults. Both tables are injectable.
* Item update: 4.x — every update overwrites ``current_latency`` and
  ``start_timestamp = now + duration`` (so a fast success ends an isolation early). 5.1.4+ never
  shortens an isolation; pass ``never_shorten=True`` for that behaviour.
* Available-queue scan: each try increments ``sendWhichQueue`` (develop's
  ``selectOneMessageQueue(filters)``), not 4.x's single increment with a local ``index++``,
  which skews traffic onto the queue after an isolated broker's block (#5672).
* Retry with latency on: the failed broker is *excluded* (develop's ``brokerFilter``). The old 4.x
  condition ``null == lastBrokerName || mq.brokerName.equals(lastBrokerName)`` that re-picks the
  failed broker (#1576, #2204, #2358, #1938, #4139) is NOT reproduced.
* Better-half pick: 4.x ``pickOneAtLeast`` (sort: available first, lower latency, earlier
  ``start_timestamp``; ``items[whichItemWorst.incrementAndGet() % (len // 2)]`` or ``items[0]``), but
  the 4.x shuffle before the stable sort is replaced by a tie-break on the broker name
  (deterministic), and the pick is restricted to brokers that serve the topic — 4.x instead removed
  the fault item of a picked broker without writable queues, un-isolating it for other topics.
  Queue objects are never mutated (4.x rewrote a shared ``MessageQueue``'s broker and queue id,
  #7779/#7812): the result is always a real, immutable ``MessageQueue`` from the writable list.
* Not taken from 5.x: ``reachableFlag``, the detector, and ``resetIndex()`` on retries.

``QueueSelector`` serialises ``select``/``record`` with a lock, so a writer with several requests in
flight can share one instance. ``stats()`` returns the counters the writer reports (per-broker
isolations, better-half picks, plain round-robin fallbacks).
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field

from .queues import MessageQueue

__all__ = [
    "DEFAULT_LATENCY_MAX",
    "DEFAULT_NOT_AVAILABLE_DURATION",
    "FAILURE_LATENCY_MS",
    "FaultItem",
    "LatencyFaultTolerance",
    "QueueSelector",
    "RoundRobinIndex",
    "SelectorStats",
    "TopicPublishInfo",
    "monotonic_ms",
    "parse_ms_table",
]

#: 4.x / ≤ 5.1.3 ``MQFaultStrategy.latencyMax`` (ms).
DEFAULT_LATENCY_MAX: tuple[int, ...] = (50, 100, 550, 1000, 2000, 3000, 15000)
#: 4.x / ≤ 5.1.3 ``MQFaultStrategy.notAvailableDuration`` (ms).
DEFAULT_NOT_AVAILABLE_DURATION: tuple[int, ...] = (0, 0, 30000, 60000, 120000, 180000, 600000)
#: Latency used to compute the isolation after a failed send (4.x ``updateFaultItem(..., true)``).
FAILURE_LATENCY_MS = 30000

_MASK = 0x7FFFFFFF


def monotonic_ms() -> float:
    """The default clock: ``time.monotonic()`` in milliseconds."""
    return time.monotonic() * 1000.0


def parse_ms_table(text: str | Sequence[int | float], name: str = "table") -> tuple[int, ...]:
    """Parse a comma-separated list of non-negative milliseconds (a writer option) into a tuple."""
    parts: Iterable[object] = text.split(",") if isinstance(text, str) else text
    out: list[int] = []
    for raw in parts:
        s = str(raw).strip()
        if not s:
            continue
        try:
            v = int(float(s))
        except ValueError:
            raise ValueError(f"{name}: {s!r} is not a number of milliseconds") from None
        if v < 0:
            raise ValueError(f"{name}: {v} must be >= 0")
        out.append(v)
    if not out:
        raise ValueError(f"{name}: empty")
    return tuple(out)


class RoundRobinIndex:
    """RocketMQ's ``ThreadLocalIndex``: a non-negative int counter, random start unless injected."""

    __slots__ = ("_value",)

    def __init__(self, start: int | None = None, rng: random.Random | None = None) -> None:
        if start is None:
            start = (rng or random.Random()).randrange(0, _MASK + 1)
        self._value = int(start) & _MASK

    @property
    def value(self) -> int:
        """The current value (what the next ``increment_and_get`` starts from)."""
        return self._value

    def increment_and_get(self) -> int:
        """``v = (v + 1) & 0x7FFFFFFF``; return it."""
        self._value = (self._value + 1) & _MASK
        return self._value


class TopicPublishInfo:
    """A topic's writable queues (broker order as given) and its ``sendWhichQueue`` counter."""

    def __init__(
        self,
        queues: Sequence[MessageQueue],
        start: int | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.queues: tuple[MessageQueue, ...] = tuple(queues)
        if not self.queues:
            raise ValueError("TopicPublishInfo: the topic has no writable queues")
        for q in self.queues:
            if not isinstance(q, MessageQueue):
                raise TypeError(f"TopicPublishInfo: expected MessageQueue, got {type(q).__name__}")
        self.send_which_queue = RoundRobinIndex(start, rng)
        by_broker: dict[str, list[MessageQueue]] = {}
        for q in self.queues:
            by_broker.setdefault(q.broker, []).append(q)
        self._by_broker: dict[str, tuple[MessageQueue, ...]] = {b: tuple(v) for b, v in by_broker.items()}

    @property
    def brokers(self) -> tuple[str, ...]:
        """Brokers serving the topic, in first-appearance order."""
        return tuple(self._by_broker)

    def queues_of(self, broker: str) -> tuple[MessageQueue, ...]:
        """The writable queues of ``broker`` (empty if it does not serve the topic)."""
        return self._by_broker.get(broker, ())

    def next_index(self) -> int:
        """``sendWhichQueue.incrementAndGet()``."""
        return self.send_which_queue.increment_and_get()

    def select_plain(self) -> MessageQueue:
        """``selectOneMessageQueue()``: ``queues[incrementAndGet() % n]``."""
        return self.queues[self.next_index() % len(self.queues)]

    def select_filtered(self, accept: Callable[[MessageQueue], bool]) -> MessageQueue | None:
        """Up to ``n`` round-robin tries; the first queue ``accept`` takes, else ``None``."""
        n = len(self.queues)
        for _ in range(n):
            q = self.queues[self.next_index() % n]
            if accept(q):
                return q
        return None

    def select_one(self, last_broker: str | None = None) -> MessageQueue:
        """Round robin; a retry (``last_broker`` set) avoids that broker when another one exists."""
        if last_broker is None:
            return self.select_plain()
        q = self.select_filtered(lambda m: m.broker != last_broker)
        return q if q is not None else self.select_plain()


@dataclass(frozen=True, slots=True)
class FaultItem:
    """Per-broker send record: last latency and the time (ms) until which the broker is avoided."""

    broker: str
    current_latency: float
    start_timestamp: float

    def is_available(self, now: float) -> bool:
        """``now >= start_timestamp``."""
        return now >= self.start_timestamp


class LatencyFaultTolerance:
    """``MQFaultStrategy`` tables + ``LatencyFaultToleranceImpl``'s ``faultItemTable`` (4.x)."""

    def __init__(
        self,
        latency_max: Sequence[int | float] = DEFAULT_LATENCY_MAX,
        not_available_duration: Sequence[int | float] = DEFAULT_NOT_AVAILABLE_DURATION,
        clock: Callable[[], float] = monotonic_ms,
        *,
        failure_latency_ms: float = FAILURE_LATENCY_MS,
        pick_start: int | None = None,
        never_shorten: bool = False,
        rng: random.Random | None = None,
    ) -> None:
        lm = tuple(latency_max)
        nad = tuple(not_available_duration)
        if not lm or len(lm) != len(nad):
            raise ValueError(
                f"latencyMax ({len(lm)} values) and notAvailableDuration ({len(nad)} values) "
                "must be non-empty and of the same length"
            )
        if any(v < 0 for v in lm + nad):
            raise ValueError("latencyMax and notAvailableDuration must be >= 0")
        if any(a > b for a, b in itertools.pairwise(lm)):
            raise ValueError(f"latencyMax must be ascending, got {list(lm)}")
        self.latency_max: tuple[int | float, ...] = lm
        self.not_available_duration: tuple[int | float, ...] = nad
        self.failure_latency_ms = failure_latency_ms
        self.never_shorten = never_shorten
        self._clock = clock
        self._items: dict[str, FaultItem] = {}
        self._which_item_worst = RoundRobinIndex(pick_start, rng)

    def compute_not_available_duration(self, latency_ms: float) -> float:
        """``notAvailableDuration[i]`` for the largest ``i`` with ``latencyMax[i] <= latency``, else 0."""
        for i in range(len(self.latency_max) - 1, -1, -1):
            if latency_ms >= self.latency_max[i]:
                return self.not_available_duration[i]
        return 0

    def update(self, broker: str, latency_ms: float, isolation: bool, now: float | None = None) -> float:
        """Record a send to ``broker``; return the isolation duration (ms) it caused.

        ``isolation=True`` (a failed send) computes the duration for ``failure_latency_ms``.
        """
        t = self._clock() if now is None else now
        duration = self.compute_not_available_duration(self.failure_latency_ms if isolation else latency_ms)
        start = t + duration
        old = self._items.get(broker)
        if old is not None and self.never_shorten and old.start_timestamp > start:
            start = old.start_timestamp
        self._items[broker] = FaultItem(broker, latency_ms, start)
        return duration

    def is_available(self, broker: str, now: float | None = None) -> bool:
        """No item, or ``now >= start_timestamp``."""
        item = self._items.get(broker)
        if item is None:
            return True
        return item.is_available(self._clock() if now is None else now)

    def remove(self, broker: str) -> None:
        """Forget ``broker``'s item."""
        self._items.pop(broker, None)

    def get(self, broker: str) -> FaultItem | None:
        """``broker``'s item, if any."""
        return self._items.get(broker)

    def items(self) -> tuple[FaultItem, ...]:
        """A snapshot of all items."""
        return tuple(self._items.values())

    def sorted_items(
        self, now: float | None = None, candidates: Collection[str] | None = None
    ) -> list[FaultItem]:
        """Items ordered available first, then lower latency, earlier start, broker name."""
        t = self._clock() if now is None else now
        items = [i for i in self._items.values() if candidates is None or i.broker in candidates]
        items.sort(key=lambda i: (not i.is_available(t), i.current_latency, i.start_timestamp, i.broker))
        return items

    def pick_one_at_least(
        self, now: float | None = None, candidates: Collection[str] | None = None
    ) -> str | None:
        """4.x ``pickOneAtLeast``: round robin over the better half of the sorted items (or items[0])."""
        items = self.sorted_items(now, candidates)
        if not items:
            return None
        half = len(items) // 2
        if half <= 0:
            return items[0].broker
        return items[self._which_item_worst.increment_and_get() % half].broker


@dataclass
class SelectorStats:
    """Counters the writer reports in its commit message."""

    isolations: dict[str, int] = field(default_factory=dict)
    better_half_picks: int = 0
    round_robin_fallbacks: int = 0

    def as_dict(self) -> dict[str, object]:
        """A JSON-friendly copy."""
        return {
            "isolations": dict(self.isolations),
            "better_half_picks": self.better_half_picks,
            "round_robin_fallbacks": self.round_robin_fallbacks,
        }


class QueueSelector:
    """``MQFaultStrategy.selectOneMessageQueue`` + ``updateFaultItem`` for one topic."""

    def __init__(
        self,
        publish_info: TopicPublishInfo,
        fault_enabled: bool = False,
        tolerance: LatencyFaultTolerance | None = None,
        clock: Callable[[], float] = monotonic_ms,
    ) -> None:
        self.publish_info = publish_info
        self.fault_enabled = fault_enabled
        self.tolerance = tolerance if tolerance is not None else LatencyFaultTolerance(clock=clock)
        self._clock = clock
        self._stats = SelectorStats()
        self._lock = threading.Lock()

    def update_queues(self, queues: Sequence[MessageQueue]) -> None:
        """Swap in a refreshed route, keeping the ``sendWhichQueue`` position."""
        with self._lock:
            info = TopicPublishInfo(queues, start=self.publish_info.send_which_queue.value)
            self.publish_info = info

    def select(self, last_broker: str | None = None) -> MessageQueue:
        """Pick the queue for a send; ``last_broker`` is the broker of the failed previous attempt."""
        with self._lock:
            info = self.publish_info
            if not self.fault_enabled:
                return info.select_one(last_broker)
            now = self._clock()
            tol = self.tolerance
            q = info.select_filtered(lambda m: m.broker != last_broker and tol.is_available(m.broker, now))
            if q is not None:
                return q
            broker = tol.pick_one_at_least(now, candidates=info.brokers)
            own = info.queues_of(broker) if broker is not None else ()
            if own:
                self._stats.better_half_picks += 1
                return own[info.next_index() % len(own)]
            self._stats.round_robin_fallbacks += 1
            return info.select_plain()

    def record(self, broker: str, latency_ms: float, failed: bool) -> float:
        """After each send attempt: update ``broker``'s fault item (latency on only); return isolation ms."""
        if not self.fault_enabled:
            return 0
        with self._lock:
            duration = self.tolerance.update(broker, latency_ms, failed, now=self._clock())
            if duration > 0:
                self._stats.isolations[broker] = self._stats.isolations.get(broker, 0) + 1
            return duration

    def is_isolated(self, broker: str) -> bool:
        """Whether ``broker`` is currently avoided (always ``False`` with latency off)."""
        return self.fault_enabled and not self.tolerance.is_available(broker, self._clock())

    def stats(self) -> dict[str, object]:
        """Snapshot of the counters (per-broker isolations, better-half picks, fallbacks)."""
        with self._lock:
            return self._stats.as_dict()
