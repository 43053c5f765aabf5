"""The executor side of a read: one Spark partition's offset ranges pulled in chunks and yielded as Arrow.

`RangePartition` is the picklable InputPartition the driver plans (batch and stream alike); `read_partition`
pulls each `[start, end)` in `pullBatchSize` chunks, yielding every chunk as it arrives with the next pull
already in flight, the next range's first one included (memory stays bounded by two pulls), stops exactly
at `end`, treats filtered gaps as normal and applies `failOnDataLoss` to offsets the broker no longer holds.
Transient errors are retried by the client within `pullTimeoutMs`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from rocketmq_protocol.arrow_values import int64_values

from .clients import PullResult, PullStatus, RocketMQClient, get_client
from .config import ClientConfig, FilterSpec
from .data_loss import report_data_loss
from .errors import ConnectorError
from .queues import OffsetRange, RouteEntry
from .schema import to_record_batches
from .worker_heap import freeze_worker_heap

log = logging.getLogger(__name__)

__all__ = ["PULL_MAX_BYTES", "RangePartition", "read_partition", "read_ranges"]

#: Stored bytes one pull of a read task asks for at most: `pullBatchSize` 100-byte messages fit, larger ones
#: come in fewer per pull, so a task's two pulls in memory stay bounded whatever the message size.
PULL_MAX_BYTES = 8 << 20


@dataclass(frozen=True)
class RangePartition(InputPartition):
    """Everything one read task needs: its ranges in reading order and the route entries (broker endpoints,
    from the driver's route) of their queues; no client (created lazily in the executor's Python worker)."""

    config: ClientConfig
    group: str
    filter: FilterSpec
    ranges: tuple[OffsetRange, ...]
    routes: tuple[RouteEntry, ...]
    pull_batch_size: int
    pull_timeout_ms: int
    fail_on_data_loss: bool


def read_partition(partition: InputPartition | None) -> Iterator[pa.RecordBatch]:
    """Every message of the partition's ranges, in order, as RecordBatches of `schema.ARROW_SCHEMA`.

    Spark hands `InputPartition(None)` to a batch read that planned no partition: it yields nothing.
    """
    if not isinstance(partition, RangePartition):
        return
    client = get_client(partition.config)
    freeze_worker_heap()
    routes = {e.queue: e for e in partition.routes}
    work = [(routes[r.queue], r) for r in partition.ranges]
    pool = ThreadPoolExecutor(1, thread_name_prefix="rocketmq-prefetch")
    try:
        yield from read_ranges(client, partition, work, pool)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def _rows_before(table: pa.Table, end: int) -> int:
    """How many leading rows have `queue_offset < end` (offsets ascend within a pull); a pull that ends
    below `end`, as most do, is not searched."""
    column = table.column("queue_offset")
    if not len(column):
        return 0
    last = column.chunk(column.num_chunks - 1)
    if len(last) and last[len(last) - 1].as_py() < end:
        return len(column)
    return int(np.searchsorted(int64_values(column), end, side="left"))


def read_ranges(
    client: RocketMQClient,
    p: RangePartition,
    work: Sequence[tuple[RouteEntry, OffsetRange]],
    pool: Executor | None = None,
) -> Iterator[pa.RecordBatch]:
    """The messages of each `(route entry, [start, end))` in turn, one pull at a time. With `pool`, the
    next pull is in flight while the current one is converted and consumed, across ranges too: a range's
    last pull is followed at once by the next range's first, so a partition of several queues does not
    wait a round trip at each of them (at most two pulls in memory either way)."""

    def pull(entry: RouteEntry, rng: OffsetRange, offset: int) -> PullResult:
        return client.pull(
            entry,
            offset,
            min(p.pull_batch_size, rng.end - offset),
            group=p.group,
            filter=p.filter,
            timeout_ms=p.pull_timeout_ms,
            max_bytes=PULL_MAX_BYTES,
        )

    def submit(entry: RouteEntry, rng: OffsetRange, offset: int) -> Future[PullResult]:
        if pool is not None:
            return pool.submit(pull, entry, rng, offset)
        done: Future[PullResult] = Future()
        done.set_result(pull(entry, rng, offset))
        return done

    ranges = iter([(e, r) for e, r in work if r.start < r.end])

    def start_next() -> tuple[RouteEntry, OffsetRange, Future[PullResult]] | None:
        for entry, rng in ranges:
            return entry, rng, submit(entry, rng, rng.start)
        return None

    current = start_next()
    while current is not None:
        entry, rng, pending = current
        offset = rng.start
        following = None
        while pending is not None:
            table, after = _advance(p, entry, rng, offset, pending.result())
            if after is not None and after < rng.end:
                offset, pending = after, submit(entry, rng, after)
            else:
                pending, following = None, start_next()
            if table is not None:
                q = rng.queue
                yield from to_record_batches(table, q.topic, q.broker, q.queue_id)
        current = following


def _advance(
    p: RangePartition, entry: RouteEntry, rng: OffsetRange, offset: int, res: PullResult
) -> tuple[pa.Table | None, int | None]:
    """What one pull from `offset` contributes (rows below `end`) and the next offset (None: stop)."""
    q = rng.queue
    if res.status == PullStatus.FOUND:
        if res.next_offset <= offset:
            raise ConnectorError(
                f"queue {q}: a pull from offset {offset} found {res.table.num_rows} messages but did not "
                f"advance (next offset {res.next_offset}); {entry.endpoint} answered inconsistently"
            )
        table = res.table
        keep = _rows_before(table, rng.end)
        return (table.slice(0, keep) if keep < table.num_rows else table), res.next_offset
    if res.status == PullStatus.NO_MATCHED_MSG:
        return None, res.next_offset  # entries filtered out by filterExpression: a gap, not a loss
    if res.status == PullStatus.OFFSET_ILLEGAL and res.next_offset > offset:
        report_data_loss(
            f"queue {q}: offsets {offset}..{min(res.next_offset, rng.end) - 1} of the planned range "
            f"[{rng.start}, {rng.end}) are no longer available (the queue's earliest offset is now "
            f"{res.next_offset}, e.g. removed by retention)",
            p.fail_on_data_loss,
        )
        return None, res.next_offset
    # NO_NEW_MSG before `end`, or OFFSET_ILLEGAL pointing back: the queue holds fewer messages than planned
    report_data_loss(
        f"queue {q}: the queue ends at offset {res.next_offset} but the planned range is "
        f"[{rng.start}, {rng.end}) (status {res.status.value} at offset {offset}; the queue was "
        "reset, recreated or lost messages)",
        p.fail_on_data_loss,
    )
    return None, None
