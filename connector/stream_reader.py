"""`spark.readStream.format("rocketmq")`: micro-batches over queue offsets with Kafka's admission control.

One instance lives in Spark's long-lived driver-side runner process (initialOffset, latestOffset,
partitions, commit); `read()` runs on executors on a pickled copy, so all it needs travels in the
partitions. The reader holds only picklable state; clients come from `get_client` when needed.
Offsets are the JSON dict `{"topic": {"broker": {"queueId": next}}}` (connector.offsets).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, wait
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from .admission import delay_batch, rate_limit
from .clients import RocketMQClient, get_client
from .data_loss import report_data_loss
from .errors import ConnectorError
from .offsets import JsonOffsets, from_json_dict, to_json, to_json_dict
from .options import ReaderOptions, parse_reader_options
from .planning import build_partitions
from .positions import discover_queues, fetch_bounds, fetch_max_offsets, resolve_start, submit_queues
from .queues import MessageQueue, OffsetRange, RouteEntry
from .read_task import read_partition
from .schema import check_user_schema

log = logging.getLogger(__name__)

__all__ = ["RocketMQStreamReader"]

BROKER_ABSENCE_GRACE_MS = 120_000  # a broker missing from the route is waited for this long (restarts)
COMMIT_TIMEOUT_MS = 5000  # group commits are advisory: a slow broker must not stall triggers for long


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class _Commit:
    """UpdateOffsets in flight: (queue's route entry, offset) pairs and one future each."""

    todo: list[tuple[RouteEntry, int]]
    futures: list[Future[None]]


def _first_per_broker(
    todo: list[tuple[RouteEntry, int]], seen: set[tuple[str, str]]
) -> tuple[list[tuple[RouteEntry, int]], list[tuple[RouteEntry, int]]]:
    """`todo` split into one item per (topic, broker) not in `seen`, and the rest, in order."""
    seeds: list[tuple[RouteEntry, int]] = []
    rest: list[tuple[RouteEntry, int]] = []
    seen = set(seen)
    for item in todo:
        key = (item[0].topic, item[0].broker)
        (rest if key in seen else seeds).append(item)
        seen.add(key)
    return seeds, rest


class RocketMQStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Stream reader: options validated here (driver, before any task); the semantics are apache/spark's
    `KafkaMicroBatchStream`'s over RocketMQ queues (README.md, 'Offsets and guarantees')."""

    def __init__(self, options: Mapping[str, Any], schema: StructType | None) -> None:
        check_user_schema(schema)
        self.opts: ReaderOptions = parse_reader_options(options, streaming=True)
        self._queues: dict[MessageQueue, RouteEntry] = {}  # the latest route seen
        self._latest: dict[MessageQueue, int] | None = None  # max offsets at the last latestOffset
        self._target: dict[MessageQueue, int] | None = None  # Trigger.AvailableNow's fixed end
        self._last_trigger_ms: int | None = None  # when the last batch was admitted (minMessagesPerTrigger)
        self._committed: dict[MessageQueue, int] = {}  # offsets last written to the consumer group
        self._vanished: set[MessageQueue] = set()  # queues of the offsets missing from the route
        self._absent_since: dict[str, float] = {}  # broker → when it was first missing from the route

    # ------------------------------------------------------------------ helpers
    def _client(self) -> RocketMQClient:
        return get_client(self.opts.client_config)

    def _refresh_queues(self, missing_ok: bool = True) -> dict[MessageQueue, RouteEntry]:
        self._queues = discover_queues(self._client(), self.opts, missing_ok=missing_ok)
        return self._queues

    def _max_offsets(self) -> dict[MessageQueue, int]:
        queues = self._refresh_queues()
        return fetch_max_offsets(self._client(), list(queues.values()), self.opts.pull_timeout_ms)

    def _carry_vanished(self, begin: Mapping[MessageQueue, int], latest: dict[MessageQueue, int]) -> None:
        """Queues of `begin` missing from the route are data loss (failOnDataLoss); when tolerated, they
        keep their offset, so a broker that comes back is resumed where it was rather than from 0.

        A queue whose whole broker is missing from the topic's route is first waited for: RocketMQ's name
        servers drop a broker's routes while it restarts, and it comes back with its queues and offsets. Its
        offsets are carried for `max(pullTimeoutMs, 2 min)` before that counts as data loss."""
        now = time.monotonic()
        present_brokers = {(q.topic, q.broker) for q in self._queues}
        grace_s = max(self.opts.pull_timeout_ms, BROKER_ABSENCE_GRACE_MS) / 1000.0
        warned: set[tuple[str, str]] = set()  # once per broker, not per queue
        for key in begin.keys() - latest.keys():
            if key not in self._vanished:
                if (key.topic, key.broker) not in present_brokers:
                    first = self._absent_since.setdefault(key.broker, now)
                    if now - first < grace_s:
                        if first == now and (key.topic, key.broker) not in warned:
                            warned.add((key.topic, key.broker))
                            log.warning(
                                "broker %s is not in the route of topic %r (restarting?); its queues keep their "
                                "offsets for up to %.0f s",
                                key.broker,
                                key.topic,
                                grace_s,
                            )
                        latest[key] = begin[key]
                        continue
                report_data_loss(
                    f"queue {key} (next offset {begin[key]}) is no longer in the route of topic "
                    f"{key.topic!r}; its remaining messages cannot be read",
                    self.opts.fail_on_data_loss,
                )
                self._vanished.add(key)
            latest[key] = begin[key]
        self._vanished &= begin.keys() - self._queues.keys()
        back = {b for b in self._absent_since if any(q.broker == b for q in self._queues)}
        for b in back:
            log.info("broker %s is back in the route", b)
            del self._absent_since[b]

    def _cap_to_target(
        self, start: Mapping[MessageQueue, int], latest: Mapping[MessageQueue, int]
    ) -> dict[MessageQueue, int]:
        """Under Trigger.AvailableNow, `latest` never passes the target; queues that appeared after the
        target was fixed are left out (or kept at their start)."""
        if self._target is None:
            return dict(latest)
        out: dict[MessageQueue, int] = {}
        for key, value in latest.items():
            target = self._target.get(key)
            begin = start.get(key)
            if target is None:
                if begin is not None:
                    out[key] = begin
                continue
            if begin is not None and value < begin:
                out[key] = value  # an offset reset: partitions() reports it
            else:
                out[key] = max(min(value, target), begin if begin is not None else 0)
        return out

    def _admit(self, min_rows: int, available: int, now: int) -> bool:
        """minMessagesPerTrigger + maxTriggerDelay (Kafka's delayBatch); never waits under AvailableNow."""
        if self._target is not None:
            return True
        last = self._last_trigger_ms if self._last_trigger_ms is not None else now
        if delay_batch(min_rows, available, now, last, self.opts.max_trigger_delay_ms):
            log.debug("trigger skipped: %d messages waiting, minMessagesPerTrigger=%d", available, min_rows)
            return False
        return True

    # ------------------------------------------------------------------ DataSourceStreamReader
    def initialOffset(self) -> JsonOffsets:
        """The starting positions, resolved now (Python sources get no checkpoint dir to persist them)."""
        client = self._client()
        queues = self._refresh_queues(missing_ok=False)
        bounds = fetch_bounds(client, list(queues.values()), self.opts.pull_timeout_ms)
        start = resolve_start(client, self.opts, queues, bounds)
        log.info("initial offsets (%s): %s", self.opts.starting.kind, to_json(start))
        return to_json_dict(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_messages_per_trigger is not None:
            return ReadMaxRows(self.opts.max_messages_per_trigger)
        if self.opts.min_messages_per_trigger is not None:
            return ReadMinRows(self.opts.min_messages_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._max_offsets()
        log.info("Trigger.AvailableNow target offsets: %s", to_json(self._target))

    def latestOffset(self, start: JsonOffsets, limit: ReadLimit) -> JsonOffsets:
        begin = from_json_dict(start)
        # `start` is the end of the last completed batch: its commit runs alongside the offset queries.
        committing = self._start_commit(begin)
        try:
            latest = self._max_offsets()
        finally:
            self._finish_commit(committing)
        self._carry_vanished(begin, latest)
        self._latest = latest
        bounded = self._cap_to_target(begin, latest)
        new_start = {k: 0 for k in bounded if k not in begin}
        available = sum(max(v - begin.get(k, 0), 0) for k, v in bounded.items())
        now = _now_ms()
        if self._last_trigger_ms is None:
            self._last_trigger_ms = now
        if isinstance(limit, ReadAllAvailable):
            end = bounded
        else:
            min_rows = (
                limit.min_rows if isinstance(limit, ReadMinRows) else self.opts.min_messages_per_trigger
            )
            if min_rows is not None and available > 0 and not self._admit(min_rows, available, now):
                return start
            if isinstance(limit, ReadMaxRows) and available > 0:
                end = rate_limit(limit.max_rows, begin, bounded, new_start)
            else:
                end = bounded
        if end == begin:
            return start
        self._last_trigger_ms = now
        return to_json_dict(end)

    def reportLatestOffset(self) -> JsonOffsets | None:
        return None if self._latest is None else to_json_dict(self._latest)

    def partitions(self, start: JsonOffsets, end: JsonOffsets) -> list[InputPartition]:
        begin, until = from_json_dict(start), from_json_dict(end)
        fail = self.opts.fail_on_data_loss
        for key in begin.keys() - until.keys():
            report_data_loss(
                f"queue {key} (next offset {begin[key]}) is no longer served by any broker in the route of "
                f"topic {key.topic!r}; its remaining messages will not be read",
                fail,
            )
        if any(k not in self._queues for k in until):
            self._refresh_queues()  # a replayed batch, or a queue that appeared since the last route
        ranges: list[OffsetRange] = []
        for key, stop in until.items():
            first = begin.get(key, 0)  # queues added to a topic, and new brokers, start at 0
            if stop < first:
                report_data_loss(
                    f"queue {key}: its offset went back from {first} to {stop} (the queue was reset or "
                    "recreated); skipping to the new offset",
                    fail,
                )
                stop = first
            if key not in self._queues:
                if stop > first:
                    report_data_loss(
                        f"queue {key} vanished from the route before its offsets [{first}, {stop}) were read",
                        fail,
                    )
                continue
            ranges.append(OffsetRange(key, first, stop))
        return list(build_partitions(self.opts, ranges, self._queues))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(partition)

    def commit(self, end: JsonOffsets) -> None:
        self._commit_group(from_json_dict(end))

    def stop(self) -> None:
        log.info("rocketmq stream reader of %s stopped", ", ".join(self.opts.topics))

    # ------------------------------------------------------------------ consumer group
    def _commit_group(self, offsets: Mapping[MessageQueue, int]) -> None:
        """UpdateOffset of each changed queue to `consumerGroup` (for lag tools; progress itself lives in
        the checkpoint, so a failure is logged, not raised)."""
        self._finish_commit(self._start_commit(offsets))

    def _start_commit(self, offsets: Mapping[MessageQueue, int]) -> _Commit | None:
        """Starts the UpdateOffsets of `_commit_group` on the shared pool (after the first of each (topic,
        broker) not committed to yet); None when nothing changed."""
        if not self.opts.commit_offsets_to_group:
            return None
        changed = {k: v for k, v in offsets.items() if self._committed.get(k) != v}
        if not changed:
            return None
        if any(k not in self._queues for k in changed):
            self._refresh_queues()
        todo = [(self._queues[k], v) for k, v in changed.items() if k in self._queues]
        client, group = self._client(), self.opts.consumer_group
        timeout = min(self.opts.pull_timeout_ms, COMMIT_TIMEOUT_MS)

        def commit(item: tuple[RouteEntry, int]) -> None:
            client.commit(group, item[0], item[1], timeout)

        # A broker creates a group's offset table of a topic with a get-then-put (RocketMQ's
        # ConsumerOffsetManager.commitOffset), so two first commits in parallel can lose one: each
        # (topic, broker) this reader never committed to gets one queue's commit first, waited for here.
        seeds, rest = _first_per_broker(todo, {(k.topic, k.broker) for k in self._committed})
        seeded = submit_queues(commit, seeds)
        wait(seeded)
        return _Commit(seeds + rest, seeded + submit_queues(commit, rest))

    def _finish_commit(self, commit: _Commit | None) -> None:
        """Waits for a started commit; records it, or logs why it failed."""
        if commit is None:
            return
        try:
            for f in commit.futures:
                f.result()
        except ConnectorError as e:
            log.warning("could not commit offsets to consumer group %r: %s", self.opts.consumer_group, e)
            return
        self._committed.update((e.queue, v) for e, v in commit.todo)
