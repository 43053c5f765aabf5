"""Unit tests of connector.queue_selector (`TopicPublishInfo`, `MQFaultStrategy`, `LatencyFaultToleranceImpl`): injected clock and
counter starts, no I/O."""

from __future__ import annotations

import copy
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connector.queue_selector import (
    DEFAULT_LATENCY_MAX,
    DEFAULT_NOT_AVAILABLE_DURATION,
    FaultItem,
    LatencyFaultTolerance,
    QueueSelector,
    RoundRobinIndex,
    TopicPublishInfo,
    monotonic_ms,
    parse_ms_table,
)
from connector.queues import MessageQueue

TOPIC = "T"


class FakeClock:
    """A settable millisecond clock."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, ms: float) -> None:
        self.now += ms


def queues(layout: dict[str, int], topic: str = TOPIC) -> list[MessageQueue]:
    """Queues broker by broker: {"A": 2, "B": 2} → [A0, A1, B0, B1]."""
    return [MessageQueue(topic, b, i) for b, n in layout.items() for i in range(n)]


def make(
    layout: dict[str, int] | None = None,
    start: int = 0,
    fault: bool = True,
    pick_start: int = 0,
    **tol_kwargs: object,
) -> tuple[QueueSelector, FakeClock]:
    clock = FakeClock()
    info = TopicPublishInfo(queues(layout or {"A": 2, "B": 2}), start=start)
    tol = LatencyFaultTolerance(clock=clock, pick_start=pick_start, **tol_kwargs)  # type: ignore[arg-type]
    return QueueSelector(info, fault_enabled=fault, tolerance=tol, clock=clock), clock


def qname(q: MessageQueue) -> str:
    return f"{q.broker}{q.queue_id}"


# --- counter -----------------------------------------------------------------------------------


def test_counter_increment_and_wrap() -> None:
    idx = RoundRobinIndex(start=5)
    assert idx.increment_and_get() == 6
    idx = RoundRobinIndex(start=0x7FFFFFFF)
    assert idx.increment_and_get() == 0
    assert idx.increment_and_get() == 1


def test_counter_random_start_is_non_negative() -> None:
    for _ in range(100):
        assert 0 <= RoundRobinIndex().value <= 0x7FFFFFFF


def test_default_clock_is_milliseconds() -> None:
    a = monotonic_ms()
    assert abs(a - monotonic_ms()) < 1000


# --- `TopicPublishInfo` examples, fault latency off ---------------------------------------


def test_reference_example_first_send_then_retry_avoids_failed_broker() -> None:
    sel, _ = make(start=5, fault=False)
    first = sel.select(None)
    assert qname(first) == "B0"  # idx 6 % 4 = 2
    retry = sel.select(last_broker="B")  # idx 7 → B1 filtered, idx 8 → A0
    assert qname(retry) == "A0"
    assert sel.publish_info.send_which_queue.value == 8


def test_first_send_is_plain_round_robin() -> None:
    sel, _ = make(start=0, fault=False)
    assert [qname(sel.select()) for _ in range(6)] == ["A1", "B0", "B1", "A0", "A1", "B0"]


def test_retry_single_broker_falls_back_to_round_robin() -> None:
    sel, _ = make({"A": 3}, start=0, fault=False)
    q = sel.select(last_broker="A")
    # 3 filtered tries (idx 1, 2, 3), then plain round robin with idx 4 → 4 % 3 = 1.
    assert qname(q) == "A1"
    assert sel.publish_info.send_which_queue.value == 4


def test_retry_with_unknown_last_broker_is_plain_round_robin() -> None:
    sel, _ = make(start=0, fault=False)
    assert qname(sel.select(last_broker="Z")) == "A1"


def test_record_is_noop_without_fault_latency() -> None:
    sel, _ = make(start=0, fault=False)
    assert sel.record("B", 5000, failed=True) == 0
    assert sel.tolerance.items() == ()
    assert not sel.is_isolated("B")
    assert sel.stats()["isolations"] == {}


# --- latency tables ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("latency", "isolation"),
    [
        (0, 0),
        (49, 0),
        (50, 0),
        (99, 0),
        (100, 0),
        (549, 0),
        (550, 30000),
        (999, 30000),
        (1000, 60000),
        (1999, 60000),
        (2000, 120000),
        (2999, 120000),
        (3000, 180000),
        (14999, 180000),
        (15000, 600000),
        (30000, 600000),
    ],
)
def test_latency_table_rows(latency: int, isolation: int) -> None:
    tol = LatencyFaultTolerance(clock=FakeClock())
    assert tol.compute_not_available_duration(latency) == isolation
    assert tol.update("B", latency, isolation=False) == isolation


def test_default_tables_are_4x() -> None:
    assert DEFAULT_LATENCY_MAX == (50, 100, 550, 1000, 2000, 3000, 15000)
    assert DEFAULT_NOT_AVAILABLE_DURATION == (0, 0, 30000, 60000, 120000, 180000, 600000)


def test_failure_isolates_as_for_30000_ms() -> None:
    """A failure computes the isolation for 30,000 ms: 30000 >= latencyMax[6] = 15000 → 600 s
    (`MQFaultStrategy`'s table, "lat 30000 → 600000"), whatever the attempt's own latency."""
    sel, clock = make()
    assert sel.tolerance.compute_not_available_duration(30000) == 600000
    assert sel.record("B", 12, failed=True) == 600000
    item = sel.tolerance.get("B")
    assert item == FaultItem("B", 12, clock.now + 600000)
    assert sel.stats()["isolations"] == {"B": 1}


def test_custom_tables() -> None:
    clock = FakeClock()
    tol = LatencyFaultTolerance(
        latency_max=[50, 100, 550, 1800, 3000, 5000, 15000],
        not_available_duration=[0, 0, 2000, 5000, 6000, 10000, 30000],
        clock=clock,
        failure_latency_ms=10000,
    )
    vectors = {
        49: 0,
        549: 0,
        550: 2000,
        1799: 2000,
        1800: 5000,
        3000: 6000,
        4999: 6000,
        5000: 10000,
        14999: 10000,
        15000: 30000,
    }
    for lat, iso in vectors.items():
        assert tol.compute_not_available_duration(lat) == iso, lat
    assert tol.update("A", 3, isolation=True) == 10000


def test_custom_tables_from_option_strings() -> None:
    lm = parse_ms_table("10, 20", "latencyMax")
    nad = parse_ms_table("0,500", "notAvailableDuration")
    sel, clock = make(latency_max=lm, not_available_duration=nad)
    assert sel.record("A", 25, failed=False) == 500
    assert sel.is_isolated("A")
    clock.advance(500)
    assert not sel.is_isolated("A")


@pytest.mark.parametrize(
    ("lm", "nad"),
    [([], []), ([1, 2], [0]), ([100, 50], [0, 1]), ([-1], [0]), ([1], [-5])],
)
def test_bad_tables_rejected(lm: list[int], nad: list[int]) -> None:
    with pytest.raises(ValueError):
        LatencyFaultTolerance(lm, nad)


@pytest.mark.parametrize("text", ["", "1,x", "-3", " , "])
def test_parse_ms_table_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_ms_table(text, "latencyMax")


# --- isolation and expiry ----------------------------------------------------------------------


def test_isolation_expires_as_clock_advances() -> None:
    sel, clock = make()
    sel.record("B", 800, failed=False)  # 30 s
    assert sel.is_isolated("B")
    clock.advance(29_999)
    assert sel.is_isolated("B")
    clock.advance(1)  # now == start_timestamp → available
    assert not sel.is_isolated("B")


def test_failed_broker_skipped_until_start_timestamp() -> None:
    sel, clock = make(start=0)
    sel.record("A", 5, failed=True)  # 600 s
    picks = [sel.select() for _ in range(20)]
    assert {q.broker for q in picks} == {"B"}
    clock.advance(599_999)
    assert sel.select().broker == "B" and sel.select().broker == "B"
    clock.advance(1)
    assert {sel.select().broker for _ in range(4)} == {"A", "B"}


def test_fast_success_overwrites_isolation_4x() -> None:
    sel, clock = make()
    sel.record("B", 5, failed=True)
    clock.advance(10)
    assert sel.record("B", 5, failed=False) == 0
    assert not sel.is_isolated("B")
    assert sel.tolerance.get("B") == FaultItem("B", 5, clock.now)


def test_never_shorten_option_5x() -> None:
    sel, clock = make(never_shorten=True)
    sel.record("B", 5, failed=True)
    until = clock.now + 600000
    clock.advance(10)
    sel.record("B", 5, failed=False)
    assert sel.is_isolated("B")
    assert sel.tolerance.get("B") == FaultItem("B", 5, until)


# --- fault latency on: selection ---------------------------------------------------------------


def test_fault_on_first_send_like_plain_round_robin() -> None:
    sel, _ = make(start=5)
    assert qname(sel.select()) == "B0"


def test_fault_on_retry_avoids_failed_broker() -> None:
    sel, _ = make(start=5)
    q = sel.select()
    assert qname(q) == "B0"
    sel.record("B", 3000, failed=True)
    assert qname(sel.select(last_broker="B")) == "A0"


def test_fault_on_retry_avoids_last_broker_even_if_available() -> None:
    """The 4.x bug (`lastBrokerName == null || mq.broker.equals(lastBrokerName)`) must not return."""
    sel, _ = make(start=5, latency_max=[0], not_available_duration=[0])  # failures never isolate
    assert sel.record("B", 1, failed=True) == 0
    for _ in range(50):
        assert sel.select(last_broker="B").broker == "A"


def test_all_isolated_better_half_pick() -> None:
    sel, clock = make({"A": 2, "B": 2, "C": 2, "D": 2}, start=0, pick_start=0)
    sel.record("A", 900, failed=False)  # 30 s, latency 900
    sel.record("B", 5, failed=True)  # 600 s, latency 5
    sel.record("C", 20000, failed=False)  # 600 s, latency 20000
    sel.record("D", 5, failed=True)  # 600 s, latency 5
    clock.advance(1)
    # Every broker isolated → sorted by latency, then start: B(5, t+600000) ~ D(5, same) (name breaks
    # the tie), A(900), C(20000). Better half = [B, D]; whichItemWorst 1 % 2 = 1 → D, then 2 % 2 → B.
    assert [i.broker for i in sel.tolerance.sorted_items()] == ["B", "D", "A", "C"]
    first = sel.select()
    assert first.broker == "D"
    assert sel.select().broker == "B"
    assert sel.select().broker == "D"
    assert sel.stats()["better_half_picks"] == 3


def test_better_half_prefers_available_items() -> None:
    sel, clock = make({"A": 1, "B": 1, "C": 1}, pick_start=0)
    sel.record("A", 600, failed=False)  # 30 s
    sel.record("B", 10, failed=True)  # 600 s
    sel.record("C", 10, failed=True)  # 600 s
    clock.advance(30_000)  # A available again, B and C still isolated
    assert [i.broker for i in sel.tolerance.sorted_items()] == ["A", "B", "C"]
    # Retry after a failure on A: the scan skips A (last) and B, C (isolated); the better half is [A].
    assert sel.select(last_broker="A").broker == "A"
    assert sel.stats()["better_half_picks"] == 1


def test_better_half_single_item_is_items0() -> None:
    sel, _ = make({"A": 2}, start=0, pick_start=0)
    sel.record("A", 5, failed=True)
    q = sel.select()
    assert q.broker == "A"
    assert sel.stats()["better_half_picks"] == 1


def test_better_half_queue_round_robin_within_broker() -> None:
    sel, _ = make({"A": 3, "B": 3}, start=0, pick_start=0)
    sel.record("A", 5, failed=True)
    sel.record("B", 100, failed=True)
    # Sorted: A(5), B(100); half = 1 → always A; A's queue = own[idx % 3] after 6 failed tries.
    picks = [sel.select() for _ in range(6)]
    assert {q.broker for q in picks} == {"A"}
    assert Counter(q.queue_id for q in picks) == {0: 2, 1: 2, 2: 2}


def test_better_half_returns_real_queue_objects_and_never_mutates() -> None:
    qs = queues({"A": 2, "B": 2})
    snapshot = copy.deepcopy(qs)
    info = TopicPublishInfo(qs, start=0)
    clock = FakeClock()
    sel = QueueSelector(info, True, LatencyFaultTolerance(clock=clock, pick_start=0), clock)
    sel.record("A", 5, failed=True)
    sel.record("B", 50, failed=True)
    for _ in range(200):
        q = sel.select()
        assert any(q is x for x in qs)
        assert q.broker == "A"
    assert qs == snapshot
    assert [qname(q) for q in info.queues] == ["A0", "A1", "B0", "B1"]
    with pytest.raises(AttributeError):  # immutable
        qs[0].broker = "B"  # type: ignore[misc]


def test_fallback_to_plain_round_robin_when_no_item_of_topic() -> None:
    # Shared tolerance: only a broker that does not serve this topic has an item, the topic's single
    # broker is the last broker → filtered scan finds nothing, better half yields nothing → plain.
    clock = FakeClock()
    tol = LatencyFaultTolerance(clock=clock, pick_start=0)
    tol.update("X", 5, isolation=True)
    info = TopicPublishInfo(queues({"A": 2}), start=0)
    sel = QueueSelector(info, True, tol, clock)
    assert qname(sel.select(last_broker="A")) == "A1"  # tries idx 1, 2; plain idx 3 → 1
    assert sel.stats()["round_robin_fallbacks"] == 1
    assert tol.get("X") is not None  # 4.x would have removed it; we never pick X for this topic


def test_pick_one_at_least_unrestricted_and_empty() -> None:
    tol = LatencyFaultTolerance(clock=FakeClock(), pick_start=0)
    assert tol.pick_one_at_least() is None
    tol.update("X", 7, isolation=True)
    assert tol.pick_one_at_least() == "X"
    assert tol.pick_one_at_least(candidates=["A"]) is None


def test_update_queues_keeps_counter() -> None:
    sel, _ = make(start=5, fault=False)
    sel.select()
    sel.update_queues(queues({"A": 2, "B": 2, "C": 2}))
    assert sel.publish_info.send_which_queue.value == 6
    assert qname(sel.select()) == "A1"  # idx 7 % 6 = 1 of [A0, A1, B0, B1, C0, C1]


def test_empty_route_rejected() -> None:
    with pytest.raises(ValueError):
        TopicPublishInfo([])


# --- distribution ------------------------------------------------------------------------------


@pytest.mark.parametrize("fault", [False, True])
def test_round_robin_even_without_faults(fault: bool) -> None:
    sel, _ = make({"A": 4, "B": 3, "C": 5}, start=123_456, fault=fault)
    counts: Counter[MessageQueue] = Counter()
    n = 10_007
    for _ in range(n):
        q = sel.select()
        counts[q] += 1
        sel.record(q.broker, 5, failed=False)
    mean = n / 12
    assert len(counts) == 12
    assert all(abs(c - mean) <= 1 for c in counts.values()), counts


def simulate_slow_broker(fault: bool, sends: int = 20_000) -> tuple[int, int, QueueSelector]:
    """Sequential sends on 2 brokers x 4 queues; broker B answers in 800 ms (→ 30 s isolation), A in
    5 ms. Returns (sends to B after its first slow send, total sends after it, the selector)."""
    sel, clock = make({"A": 4, "B": 4}, start=7, fault=fault)
    first_slow = None
    to_b = 0
    for i in range(sends):
        q = sel.select()
        latency = 800 if q.broker == "B" else 5
        clock.advance(latency)
        sel.record(q.broker, latency, failed=False)
        if q.broker == "B":
            if first_slow is None:
                first_slow = i
            else:
                to_b += 1
    assert first_slow is not None
    return to_b, sends - first_slow - 1, sel


def test_slow_broker_avoided_with_fault_latency() -> None:
    to_b, total, sel = simulate_slow_broker(True)
    assert to_b / total < 0.10
    assert sel.stats()["isolations"] == {"B": to_b + 1}  # every slow send re-isolates B


def test_slow_broker_gets_half_without_fault_latency() -> None:
    to_b, total, sel = simulate_slow_broker(False)
    assert sel.stats()["isolations"] == {}
    assert 0.45 < to_b / total < 0.55


def test_isolated_broker_even_spread_over_others() -> None:
    """Per-try increments: an isolated broker's block does not pile onto the next queue (#5672)."""
    sel, _ = make({"A": 4, "B": 4}, start=0)
    sel.record("B", 5, failed=True)
    counts = Counter(qname(sel.select()) for _ in range(4000))
    assert set(counts) == {"A0", "A1", "A2", "A3"}
    assert max(counts.values()) - min(counts.values()) <= 1


def test_stats_counts_isolations_per_broker() -> None:
    sel, _ = make()
    sel.record("A", 800, failed=False)
    sel.record("A", 10, failed=False)
    sel.record("B", 10, failed=True)
    sel.record("B", 10, failed=True)
    assert sel.stats() == {"isolations": {"A": 1, "B": 2}, "better_half_picks": 0, "round_robin_fallbacks": 0}


# --- property ----------------------------------------------------------------------------------

layouts = st.dictionaries(st.sampled_from("ABCDE"), st.integers(1, 4), min_size=1, max_size=5)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("select"), st.one_of(st.none(), st.sampled_from("ABCDEZ"))),
        st.tuples(st.just("record"), st.sampled_from("ABCDEZ"), st.integers(0, 40_000), st.booleans()),
        st.tuples(st.just("advance"), st.integers(0, 700_000)),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(
    layout=layouts,
    fault=st.booleans(),
    start=st.integers(0, 1 << 30),
    pick=st.integers(0, 1 << 30),
    steps=ops,
)
def test_select_always_returns_a_listed_queue(
    layout: dict[str, int], fault: bool, start: int, pick: int, steps: list[tuple]
) -> None:
    qs = queues(layout)
    snapshot = list(qs)
    clock = FakeClock()
    tol = LatencyFaultTolerance(clock=clock, pick_start=pick)
    sel = QueueSelector(TopicPublishInfo(qs, start=start), fault, tol, clock)
    brokers = set(layout)
    for op in steps:
        if op[0] == "advance":
            clock.advance(op[1])
        elif op[0] == "record":
            sel.record(op[1], op[2], op[3])
        else:
            last = op[1]
            q = sel.select(last)
            assert any(q is x for x in qs)
            others = brokers - {last}
            if last is not None and others:
                if not fault:
                    assert q.broker != last
                elif any(tol.is_available(b) for b in others):
                    assert q.broker != last and tol.is_available(q.broker)
    assert qs == snapshot
