"""Offset ranges → the Spark partitions of one batch (shared by the batch and the stream reader)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .allocation import plan_partitions
from .options import DEFAULT_PULL_BATCH_SIZE, ReaderOptions
from .queues import MessageQueue, OffsetRange, RouteEntry
from .read_task import RangePartition

__all__ = ["build_partitions", "small_batch_limit"]


def small_batch_limit(opts: ReaderOptions) -> int:
    """The most messages a batch may hold to be read by one partition when `numPartitions` is not set:
    one pull's worth (`pullBatchSize`, at most its default), and never more than `maxMessagesPerPartition`."""
    limit = min(opts.pull_batch_size, DEFAULT_PULL_BATCH_SIZE)
    if opts.max_messages_per_partition is not None:
        limit = min(limit, opts.max_messages_per_partition)
    return limit


def build_partitions(
    opts: ReaderOptions,
    ranges: Sequence[OffsetRange],
    queues: Mapping[MessageQueue, RouteEntry],
) -> list[RangePartition]:
    """RangePartitions for `ranges`, planned by `allocation.plan_partitions`.

    The allocation runs over every queue of the topology in queue order, empty ones included, so which
    queues share a partition does not depend on where messages happen to be. Partitions with nothing to
    read are then left out, as Kafka's source drops empty offset ranges (one stays when all are empty,
    since Spark plans a batch read with at least one partition).

    Without `numPartitions`, a batch small enough for one task (`small_batch_limit`) is read by one
    partition holding every non-empty range: a Python read task costs Spark ~20–45 ms to schedule and
    run whatever it reads (~50–100 ms when its workers talk to the JVM over loopback TCP), so a trickle
    spread over 6 queues took three waves of tasks on two cores where one task does a few small pulls in a
    few milliseconds each."""
    planned = plan_partitions(
        ranges, opts.num_partitions, opts.max_messages_per_partition, opts.allocate_strategy
    )
    nonempty = [group for group in planned if any(r.end > r.start for r in group)]
    planned = nonempty or planned[:1]
    if opts.num_partitions is None and len(planned) > 1:
        total = sum(r.end - r.start for group in planned for r in group)
        if total <= small_batch_limit(opts):
            planned = [[r for group in planned for r in group if r.end > r.start]]
    return [
        RangePartition(
            config=opts.client_config,
            group=opts.consumer_group,
            filter=opts.filter,
            ranges=tuple(group),
            routes=tuple(queues[q] for q in dict.fromkeys(r.queue for r in group)),
            pull_batch_size=opts.pull_batch_size,
            pull_timeout_ms=opts.pull_timeout_ms,
            fail_on_data_loss=opts.fail_on_data_loss,
        )
        for group in planned
    ]
