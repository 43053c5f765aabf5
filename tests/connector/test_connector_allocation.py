"""connector.allocation and connector.admission: RocketMQ's queue allocation (`AllocateMessageQueueAveragely`/`...ByCircle` worked examples), Kafka's range
splitting (Spark's `KafkaOffsetRangeCalculator`), the partition planner (docs/design.md, 'Offsets') and the rate limiter (Spark's `KafkaMicroBatchStream` rate limit)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connector.admission import delay_batch, rate_limit
from connector.allocation import (
    AVERAGELY,
    AVERAGELY_BY_CIRCLE,
    allocate,
    allocate_all,
    plan_partitions,
    split_ranges,
)
from connector.options import parse_reader_options
from connector.planning import build_partitions
from connector.queues import MessageQueue, OffsetRange, RouteEntry

AVG_EXAMPLES = {
    (8, 3): [[0, 1, 2], [3, 4, 5], [6, 7]],
    (3, 5): [[0], [1], [2], [], []],
    (10, 4): [[0, 1, 2], [3, 4, 5], [6, 7], [8, 9]],
    (8, 2): [[0, 1, 2, 3], [4, 5, 6, 7]],
    (16, 3): [list(range(0, 6)), list(range(6, 11)), list(range(11, 16))],
}
CIRCLE_EXAMPLES = {
    (8, 3): [[0, 3, 6], [1, 4, 7], [2, 5]],
    (10, 4): [[0, 4, 8], [1, 5, 9], [2, 6], [3, 7]],
    (3, 5): [[0], [1], [2], [], []],
}


@pytest.mark.parametrize(("n", "c"), list(AVG_EXAMPLES))
def test_averagely_worked_examples(n: int, c: int) -> None:
    items = list(range(n))
    assert [allocate(AVERAGELY, items, i, c) for i in range(c)] == AVG_EXAMPLES[(n, c)]


@pytest.mark.parametrize(("n", "c"), list(CIRCLE_EXAMPLES))
def test_by_circle_worked_examples(n: int, c: int) -> None:
    assert allocate_all(AVERAGELY_BY_CIRCLE, list(range(n)), c) == CIRCLE_EXAMPLES[(n, c)]


@given(st.integers(0, 60), st.integers(1, 20), st.sampled_from([AVERAGELY, AVERAGELY_BY_CIRCLE]))
def test_allocation_is_a_partition_of_the_items(n: int, c: int, strategy: str) -> None:
    items = list(range(n))
    shares = allocate_all(strategy, items, c)
    assert sorted(x for share in shares for x in share) == items
    sizes = [len(share) for share in shares]
    assert max(sizes) - min(sizes) <= 1
    if strategy == AVERAGELY:  # contiguous blocks, in consumer order
        assert [x for share in shares for x in share] == items


def test_allocate_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="strategy"):
        allocate("consistentHash", [1], 0, 1)
    with pytest.raises(ValueError, match="index"):
        allocate(AVERAGELY, [1], 3, 3)
    with pytest.raises(ValueError, match="count"):
        allocate(AVERAGELY, [1], 0, 0)


# ------------------------------------------------------------------------------------------ splitting
def _r(q: int, start: int, end: int) -> OffsetRange:
    return OffsetRange(MessageQueue("t", "broker-a", q), start, end)


def test_split_drops_empty_ranges_and_keeps_enough_ones() -> None:
    ranges = [_r(0, 0, 10), _r(1, 5, 5), _r(2, 3, 7)]
    assert split_ranges(ranges) == [_r(0, 0, 10), _r(2, 3, 7)]
    assert split_ranges(ranges, min_partitions=2) == [_r(0, 0, 10), _r(2, 3, 7)]


def test_split_min_partitions_last_piece_absorbs_rounding() -> None:
    assert split_ranges([_r(0, 0, 10)], min_partitions=3) == [_r(0, 0, 3), _r(0, 3, 6), _r(0, 6, 10)]


def test_split_small_ranges_stay_whole() -> None:
    # Kafka's SPARK-36576 example shape: one big range gets the extra partitions, small ones stay whole.
    ranges = [_r(0, 0, 10_000), _r(1, 0, 1), _r(2, 0, 1)]
    out = split_ranges(ranges, min_partitions=5)
    assert [r for r in out if r.queue.queue_id != 0] == [_r(1, 0, 1), _r(2, 0, 1)]
    big = [r for r in out if r.queue.queue_id == 0]
    assert len(big) == 3 and big[0].start == 0 and big[-1].end == 10_000
    assert len(out) == 5


def test_split_proportional_to_size() -> None:
    out = split_ranges([_r(0, 0, 300), _r(1, 0, 100)], min_partitions=4)
    assert [(r.queue.queue_id, r.size) for r in out] == [(0, 100), (0, 100), (0, 100), (1, 100)]


def test_split_max_per_partition() -> None:
    out = split_ranges([_r(0, 0, 25), _r(1, 0, 5)], max_per_partition=10)
    assert out == [_r(0, 0, 8), _r(0, 8, 16), _r(0, 16, 25), _r(1, 0, 5)]


@given(
    st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 1000)), max_size=12),
    st.one_of(st.none(), st.integers(1, 40)),
    st.one_of(st.none(), st.integers(1, 500)),
)
def test_split_covers_every_offset_exactly_once(
    bounds: list[tuple[int, int]], min_parts: int | None, max_per: int | None
) -> None:
    ranges = [_r(i, min(a, b), max(a, b)) for i, (a, b) in enumerate(bounds)]
    out = split_ranges(ranges, min_parts, max_per)
    assert all(r.size > 0 for r in out)
    for rng in ranges:
        pieces = [p for p in out if p.queue == rng.queue]
        covered = [o for p in pieces for o in range(p.start, p.end)]
        assert covered == list(range(rng.start, rng.end))
    if max_per is not None:
        assert all(p.size <= max_per for p in out)


# ------------------------------------------------------------------------------------------ planning
def _queues(n: int, per_queue: int = 10) -> list[OffsetRange]:
    brokers = ["broker-a", "broker-b"]
    return [
        OffsetRange(MessageQueue("t", brokers[i // (n // 2)], i % (n // 2)), 0, per_queue) for i in range(n)
    ]


def test_plan_fewer_partitions_than_queues_uses_allocation() -> None:
    ranges = _queues(8)
    plan = plan_partitions(ranges, num_partitions=3)
    assert [[r.queue for r in p] for p in plan] == [
        [r.queue for r in ranges[0:3]],
        [r.queue for r in ranges[3:6]],
        [r.queue for r in ranges[6:8]],
    ]
    circle = plan_partitions(ranges, num_partitions=3, strategy=AVERAGELY_BY_CIRCLE)
    assert [[ranges.index(r) for r in p] for p in circle] == [[0, 3, 6], [1, 4, 7], [2, 5]]


def test_plan_drops_partitions_without_data_and_chunks_big_ones() -> None:
    ranges = _queues(8)
    ranges[6] = OffsetRange(ranges[6].queue, 10, 10)
    ranges[7] = OffsetRange(ranges[7].queue, 10, 10)
    plan = plan_partitions(ranges, num_partitions=3)
    assert len(plan) == 2
    chunked = plan_partitions(_queues(8), num_partitions=3, max_per_partition=25)
    # partition 0 (30 messages) → 25 + 5; partition 1 likewise; partition 2 (20) whole
    assert [sum(r.size for r in p) for p in chunked] == [25, 5, 25, 5, 20]
    assert chunked[0][-1] == OffsetRange(ranges[2].queue, 0, 5)
    assert chunked[1] == [OffsetRange(ranges[2].queue, 5, 10)]


def test_plan_default_and_more_partitions_than_queues() -> None:
    ranges = _queues(4, per_queue=100)
    assert plan_partitions(ranges) == [[r] for r in ranges]
    assert plan_partitions(ranges, num_partitions=4) == [[r] for r in ranges]
    plan = plan_partitions(ranges, num_partitions=8)
    assert len(plan) == 8 and all(len(p) == 1 and p[0].size == 50 for p in plan)


def _build(options: dict[str, str], ranges: list[OffsetRange]) -> list[list[tuple[int, int, int]]]:
    opts = parse_reader_options({"endpoints": "127.0.0.1:1", "topic": "t", **options}, streaming=True)
    routes = {r.queue: RouteEntry(r.queue, f"{r.queue.broker}:1") for r in ranges}
    return [
        [(ranges.index(next(x for x in ranges if x.queue == r.queue)), r.start, r.end) for r in p.ranges]
        for p in build_partitions(opts, ranges, routes)
    ]


def test_a_small_batch_without_num_partitions_is_one_partition_of_its_nonempty_ranges() -> None:
    ranges = _queues(8, per_queue=0)
    for i in (1, 2, 4, 5, 7):
        ranges[i] = OffsetRange(ranges[i].queue, 0, 3)
    assert _build({}, ranges) == [[(1, 0, 3), (2, 0, 3), (4, 0, 3), (5, 0, 3), (7, 0, 3)]]
    # up to pullBatchSize messages, and no more than maxMessagesPerPartition
    assert len(_build({"pullBatchSize": "15"}, ranges)) == 1
    assert _build({"pullBatchSize": "14"}, ranges) == [[(i, 0, 3)] for i in (1, 2, 4, 5, 7)]
    assert len(_build({"maxMessagesPerPartition": "14"}, ranges)) == 5
    # numPartitions set: its allocation (or split) is kept, however small the batch
    assert len(_build({"numPartitions": "8"}, ranges)) >= 8
    assert _build({"numPartitions": "2"}, ranges) == [
        [(1, 0, 3), (2, 0, 3)],
        [(4, 0, 3), (5, 0, 3), (7, 0, 3)],
    ]
    # a big batch keeps one partition per queue
    assert len(_build({}, _queues(8, per_queue=5000))) == 8


# ------------------------------------------------------------------------------------------ admission
def test_rate_limit_proportional_floor() -> None:
    start = {"a": 0, "b": 0}
    latest = {"a": 300, "b": 100}
    assert rate_limit(100, start, latest) == {"a": 75, "b": 25}


def test_rate_limit_ceil_for_small_shares_and_never_past_latest() -> None:
    start = {"a": 0, "b": 10, "c": 5}
    latest = {"a": 1000, "b": 11, "c": 5}
    out = rate_limit(10, start, latest)
    assert out["b"] == 11  # share 0.00999 → ceil → 1
    assert out["a"] == 9  # floor(10 * 1000/1001)
    assert out["c"] == 5  # no backlog → latest


def test_rate_limit_new_queue_and_no_backlog() -> None:
    assert rate_limit(5, {"a": 4}, {"a": 4, "b": 100}, new_start={"b": 90}) == {"a": 4, "b": 95}
    assert rate_limit(5, {"a": 4}, {"a": 4}) == {"a": 4}
    with pytest.raises(ValueError):
        rate_limit(0, {}, {})


@given(
    st.integers(1, 10_000),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 10_000)), min_size=1, max_size=10),
)
def test_rate_limit_bounds(limit: int, bounds: list[tuple[int, int]]) -> None:
    start = {i: a for i, (a, _) in enumerate(bounds)}
    latest = {i: b for i, (_, b) in enumerate(bounds)}
    out = rate_limit(limit, start, latest)
    backlog = {k: latest[k] - start[k] for k in latest if latest[k] > start[k]}
    for k in latest:
        assert out[k] <= latest[k]
        if k in backlog:
            assert out[k] >= start[k] + 1  # nobody starves
    admitted = sum(out[k] - start[k] for k in backlog)
    assert admitted <= limit + len(backlog)  # each rounded-up share adds less than one
    if sum(backlog.values()) <= limit:
        assert admitted == sum(backlog.values())


def test_delay_batch() -> None:
    assert delay_batch(100, 10, now_ms=1000, last_trigger_ms=500, max_trigger_delay_ms=900)
    assert not delay_batch(100, 100, now_ms=1000, last_trigger_ms=500, max_trigger_delay_ms=900)
    assert not delay_batch(100, 10, now_ms=1400, last_trigger_ms=500, max_trigger_delay_ms=900)
