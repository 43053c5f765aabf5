"""Queue allocation (RocketMQ's Averagely / AveragelyByCircle) and Kafka-style range splitting.

The one place for the arithmetic that decides which Spark partition reads which offsets:
- `allocate`: apache/rocketmq's `AllocateMessageQueueAveragely` / `AllocateMessageQueueAveragelyByCircle`;
- `split_ranges`: apache/spark's `KafkaOffsetRangeCalculator` (`minPartitions`, `maxRecordsPerPartition`);
- `plan_partitions`: the two combined for `numPartitions` / `maxMessagesPerPartition` (README.md, 'Reader
  options' and 'Offsets and guarantees').
Admission control (how much a micro-batch may read) is in `admission.py`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypeVar

from .queues import OffsetRange

AVERAGELY = "averagely"
AVERAGELY_BY_CIRCLE = "averagelyByCircle"
STRATEGIES = (AVERAGELY, AVERAGELY_BY_CIRCLE)

T = TypeVar("T")


# ------------------------------------------------------------------------------------------ allocation
def _check(index: int, count: int) -> None:
    if count < 1:
        raise ValueError(f"consumer count must be >= 1, got {count}")
    if not 0 <= index < count:
        raise ValueError(f"consumer index {index} is outside 0..{count - 1}")


def allocate_averagely(items: Sequence[T], index: int, count: int) -> list[T]:
    """AllocateMessageQueueAveragely: consumer `index` of `count` gets one contiguous block of `items`."""
    _check(index, count)
    n = len(items)
    mod = n % count
    if n <= count:
        avg = 1
    elif mod > 0 and index < mod:
        avg = n // count + 1
    else:
        avg = n // count
    start = index * avg if (mod > 0 and index < mod) else index * avg + mod
    size = min(avg, n - start)
    return list(items[start : start + size]) if size > 0 else []


def allocate_by_circle(items: Sequence[T], index: int, count: int) -> list[T]:
    """AllocateMessageQueueAveragelyByCircle: consumer `index` gets every item `i` with `i % count == index`."""
    _check(index, count)
    return list(items[index::count])


def allocate(strategy: str, items: Sequence[T], index: int, count: int) -> list[T]:
    """The items (already sorted in `MessageQueue` order) that consumer `index` of `count` owns."""
    if strategy == AVERAGELY:
        return allocate_averagely(items, index, count)
    if strategy == AVERAGELY_BY_CIRCLE:
        return allocate_by_circle(items, index, count)
    raise ValueError(f"unknown allocation strategy {strategy!r}; expected one of {', '.join(STRATEGIES)}")


def allocate_all(strategy: str, items: Sequence[T], count: int) -> list[list[T]]:
    """Every consumer's share, consumer 0 first."""
    return [allocate(strategy, items, i, count) for i in range(count)]


# ------------------------------------------------------------------------------------------ splitting
def _divide(rng: OffsetRange, parts: int) -> list[OffsetRange]:
    """`parts` consecutive pieces of `rng`; integer division, the last piece absorbs the rounding."""
    remaining = rng.size
    start = rng.start
    out = []
    for part in range(parts):
        this = remaining // (parts - part)
        remaining -= this
        end = min(start + this, rng.end)
        out.append(OffsetRange(rng.queue, start, end))
        start = end
    return out


def _part_count(size: int, total: int, min_parts: int) -> int:
    """Kafka's `max(round(size / total * minParts), 1)` with Java's half-up `Math.round`."""
    return max(math.floor(size / total * min_parts + 0.5), 1)


def split_ranges(
    ranges: Sequence[OffsetRange],
    min_partitions: int | None = None,
    max_per_partition: int | None = None,
) -> list[OffsetRange]:
    """`KafkaOffsetRangeCalculator.getRanges`: drop empty ranges; split a range larger than `max_per_partition`
    into equal pieces; then, while there are fewer than `min_partitions` ranges, split the large ones in
    proportion to their size. Ranges that would get one part stay whole and are left out of the proportion
    (SPARK-36576). Order is preserved; pieces of a range are consecutive.

    One deliberate difference: Kafka tells the unsplit ranges apart by topic-partition, so pieces of one
    partition cut by `max_per_partition` share a fate; here each piece is judged by its own size.
    """
    out = [r for r in ranges if r.size > 0]
    if (min_partitions is None or len(out) >= min_partitions) and max_per_partition is None:
        return out
    if max_per_partition is not None:
        out = [p for r in out for p in _divide(r, math.ceil(r.size / max_per_partition)) if p.size > 0]
    if min_partitions is not None and min_partitions > len(out):
        total = sum(r.size for r in out)
        unsplit = [_part_count(r.size, total, min_partitions) == 1 for r in out]
        split_total = total - sum(r.size for r, u in zip(out, unsplit, strict=True) if u)
        split_min = max(min_partitions - sum(unsplit), 1)
        out = [
            p
            for r, u in zip(out, unsplit, strict=True)
            for p in _divide(r, 1 if u else _part_count(r.size, split_total, split_min))
            if p.size > 0
        ]
    return out


def _chunk(group: Sequence[OffsetRange], max_per_partition: int | None) -> list[list[OffsetRange]]:
    """A partition's ranges cut into consecutive chunks of at most `max_per_partition` messages."""
    ranges = [r for r in group if r.size > 0]
    if max_per_partition is None:
        return [ranges] if ranges else []
    chunks: list[list[OffsetRange]] = []
    current: list[OffsetRange] = []
    room = max_per_partition
    for r in ranges:
        start = r.start
        while start < r.end:
            take = min(room, r.end - start)
            current.append(OffsetRange(r.queue, start, start + take))
            start += take
            room -= take
            if room == 0:
                chunks.append(current)
                current, room = [], max_per_partition
    if current:
        chunks.append(current)
    return chunks


def plan_partitions(
    ranges: Sequence[OffsetRange],
    num_partitions: int | None = None,
    max_per_partition: int | None = None,
    strategy: str = AVERAGELY,
) -> list[list[OffsetRange]]:
    """The Spark partitions of one batch, each a list of ranges to read in order.

    `ranges` holds every queue of the current topology in queue order, empty ones included, so a queue
    keeps its partition index while the topology is unchanged. With `num_partitions` below the queue count,
    partition *i* reads the queues `strategy` gives consumer *i* (a partition over `max_per_partition`
    messages is cut, in place, into consecutive chunks); otherwise each non-empty range is its own
    partition, split by `split_ranges`. Partitions with nothing to read are dropped.
    """
    if num_partitions is not None and num_partitions < 1:
        raise ValueError(f"num_partitions must be >= 1, got {num_partitions}")
    if max_per_partition is not None and max_per_partition < 1:
        raise ValueError(f"max_per_partition must be >= 1, got {max_per_partition}")
    if num_partitions is not None and num_partitions < len(ranges):
        return [
            chunk
            for group in allocate_all(strategy, ranges, num_partitions)
            for chunk in _chunk(group, max_per_partition)
        ]
    return [[r] for r in split_ranges(ranges, num_partitions, max_per_partition)]
