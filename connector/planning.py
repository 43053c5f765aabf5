"""Offset ranges → the Spark partitions of one batch (shared by the batch and the stream reader)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .allocation import plan_partitions
from .options import ReaderOptions
from .queues import MessageQueue, OffsetRange, RouteEntry
from .read_task import RangePartition

__all__ = ["build_partitions"]


def build_partitions(
    opts: ReaderOptions,
    ranges: Sequence[OffsetRange],
    queues: Mapping[MessageQueue, RouteEntry],
) -> list[RangePartition]:
    """RangePartitions for `ranges`, planned by `allocation.plan_partitions`.

    The allocation runs over every queue of the topology in queue order, empty ones included, so which
    queues share a partition does not depend on where messages happen to be. Partitions with nothing to
    read are then left out, as Kafka's source drops empty offset ranges: a small micro-batch runs one
    task per queue with new messages instead of one per queue (one stays when all are empty, since
    Spark plans a batch read with at least one partition)."""
    planned = plan_partitions(
        ranges, opts.num_partitions, opts.max_messages_per_partition, opts.allocate_strategy
    )
    nonempty = [group for group in planned if any(r.end > r.start for r in group)]
    planned = nonempty or planned[:1]
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
