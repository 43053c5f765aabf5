"""One broker's message store: topics, consume queues over the commit log, consumer offsets, retention."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketmq_protocol.arrow_values import value_offsets
from rocketmq_protocol.message_schema import MESSAGE_SCHEMA, ipc_to_table, table_to_ipc

from ..filtering import MATCH_ALL, MessageFilter
from .commitlog import CommitLog, Record, RecordKind
from .consume_queue import ConsumeQueue
from .journal import JournaledTable
from .records import MessageColumns

log = logging.getLogger(__name__)

# Entries scanned per pull when a filter drops messages (RocketMQ: maxFilterMessageSize 16000 B / 20 B per CQ unit).
MIN_SCAN_ENTRIES = 800

FOUND = "FOUND"
NO_NEW_MSG = "NO_NEW_MSG"
NO_MATCHED_MSG = "NO_MATCHED_MSG"
OFFSET_ILLEGAL = "OFFSET_ILLEGAL"

ArrivalListener = Callable[[str, int, int, list[int]], None]

# A message's commit-log offset, as remoting clients see it (offset message ids, CONSUMER_SEND_MSG_BACK,
# END_TRANSACTION, VIEW_MESSAGE_BY_ID): the queue's index on this broker in the high bits, its queue offset
# in the low ones. Unique per broker and decodable without a search; it is not a byte position.
QUEUE_OFFSET_BITS = 40
_QUEUE_OFFSET_MASK = (1 << QUEUE_OFFSET_BITS) - 1


@dataclass
class TopicConfig:
    name: str
    queues: int
    perm: int = 6  # RocketMQ PermName: 4 read, 2 write
    message_type: str = "MIXED"

    def to_json(self) -> dict:
        return {"queues": self.queues, "perm": self.perm, "message_type": self.message_type}


@dataclass
class GetResult:
    status: str
    next_offset: int
    min_offset: int
    max_offset: int
    table: pa.Table | None = None

    @property
    def count(self) -> int:
        return 0 if self.table is None else self.table.num_rows


def _body_bytes_at_most(rows: pa.Table) -> int:
    """The rows' body bytes, from the body column's offsets (at least the sum of the body lengths)."""
    total = 0
    for chunk in rows.column("body").chunks:
        if len(chunk):
            offsets = value_offsets(chunk)
            total += int(offsets[-1]) - int(offsets[0])
    return total


def _offset_key(group: str, topic: str, queue_id: int) -> str:
    return f"{group}\t{topic}\t{queue_id}"


class MessageStore:
    """Storage of one broker. `data_dir=None` is in-memory; otherwise everything is recovered at open."""

    def __init__(
        self,
        broker_name: str,
        data_dir: str | None = None,
        *,
        flush: str = "sync",
        retention_messages: int | None = None,
        retention_hours: float | None = None,
        commitlog_file_size: int | None = None,
    ) -> None:
        self.broker_name = broker_name
        self.data_dir = data_dir
        self.retention_messages = retention_messages
        self.retention_hours = retention_hours
        cl_dir = os.path.join(data_dir, "commitlog") if data_dir else None
        kwargs = {"file_size": commitlog_file_size} if commitlog_file_size else {}
        self.commitlog = CommitLog(cl_dir, flush=flush, **kwargs)
        self.topics_table = JournaledTable(data_dir, "topics")
        self.offsets_table = JournaledTable(data_dir, "consumerOffset")
        self.min_offsets_table = JournaledTable(data_dir, "queueMinOffset")
        self.queue_index_table = JournaledTable(data_dir, "queueIndex")
        self._queue_by_index: dict[int, tuple[str, int]] = {}
        for key, index in self.queue_index_table.data.items():
            topic, qid = key.rsplit("\t", 1)
            self._queue_by_index[int(index)] = (topic, int(qid))
        self.topics: dict[str, TopicConfig] = {
            name: TopicConfig(name, **cfg) for name, cfg in self.topics_table.data.items()
        }
        self.queues: dict[tuple[str, int], ConsumeQueue] = {}
        self.listeners: list[ArrivalListener] = []
        self.journal_handlers: list[Callable[[Record], None]] = []
        self.lock = threading.RLock()
        self.put_count = 0
        self.get_count = 0

    # ------------------------------------------------------------ lifecycle
    def recover(self) -> None:
        """Replays the commit log into consume queues (call once, after journal handlers are registered)."""
        n = 0
        for rec in self.commitlog.recover():
            if rec.kind == RecordKind.MESSAGES:
                table = ipc_to_table(rec.payload)
                cq = self.queue(rec.topic, rec.queue_id)
                if cq.max_offset != rec.base_offset:
                    if cq.max_offset > rec.base_offset:
                        log.warning(
                            "%s: skipping duplicate record %s:%d@%d",
                            self.broker_name,
                            rec.topic,
                            rec.queue_id,
                            rec.base_offset,
                        )
                        continue
                    cq.reset_empty(rec.base_offset)
                for batch in table.to_batches():
                    cq.append(batch, rec.position, rec.size)
                n += rec.count
            else:
                for handler in self.journal_handlers:
                    handler(rec)
        for key, min_offset in self.min_offsets_table.data.items():
            topic, qid = key.rsplit("\t", 1)
            cq = self.queue(topic, int(qid))
            if cq.max_offset < min_offset:
                cq.reset_empty(min_offset)
            cq.truncate_before(min_offset)
        if n:
            log.info("%s: recovered %d messages in %d queues", self.broker_name, n, len(self.queues))

    def close(self) -> None:
        self.commitlog.close()
        for t in (self.topics_table, self.offsets_table, self.min_offsets_table, self.queue_index_table):
            t.close()

    # ------------------------------------------------------------ topics
    def create_topic(self, name: str, queues: int, perm: int = 6, message_type: str = "MIXED") -> TopicConfig:
        """Creates or updates a topic (queue count may grow; it never shrinks existing data)."""
        with self.lock:
            cfg = TopicConfig(name, queues, perm, message_type)
            self.topics[name] = cfg
            self.topics_table.set(name, cfg.to_json())
            return cfg

    def queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        cq = self.queues.get((topic, queue_id))
        if cq is None:
            cq = self.queues[(topic, queue_id)] = ConsumeQueue(topic, queue_id)
        return cq

    # ------------------------------------------------------------ commit-log offsets
    def queue_index(self, topic: str, queue_id: int) -> int:
        """The queue's number on this broker (assigned on first use, persisted)."""
        key = f"{topic}\t{queue_id}"
        index = self.queue_index_table.get(key)
        if index is None:
            with self.lock:
                index = self.queue_index_table.get(key)
                if index is None:
                    index = len(self.queue_index_table.data) + 1
                    self.queue_index_table.set(key, index)
                    self._queue_by_index[index] = (topic, queue_id)
        return int(index)

    def commit_offsets(self, topic: str, queue_id: int, queue_offsets: np.ndarray) -> np.ndarray:
        """The commit-log offsets of messages of one queue (see QUEUE_OFFSET_BITS)."""
        base = np.int64(self.queue_index(topic, queue_id) << QUEUE_OFFSET_BITS)
        return np.asarray(queue_offsets, dtype=np.int64) + base

    def locate(self, commit_offset: int) -> tuple[str, int, int] | None:
        """(topic, queue id, queue offset) of a commit-log offset; None when it names no queue here."""
        if commit_offset < 0:
            return None
        where = self._queue_by_index.get(commit_offset >> QUEUE_OFFSET_BITS)
        if where is None:
            return None
        return where[0], where[1], commit_offset & _QUEUE_OFFSET_MASK

    def min_max(self, topic: str, queue_id: int) -> tuple[int, int]:
        cq = self.queues.get((topic, queue_id))
        return (0, 0) if cq is None else (cq.min_offset, cq.max_offset)

    # ------------------------------------------------------------ put
    def append(self, topic: str, queue_id: int, cols: MessageColumns) -> tuple[int, int]:
        """Stores messages in one queue; returns (base offset, commit-log end position to await for durability)."""
        with self.lock:
            cq = self.queue(topic, queue_id)
            base = cq.max_offset
            store_ts = max(int(time.time() * 1000), cq.last_store_timestamp)
            batch = cols.to_batch(base, store_ts)
            if self.commitlog.directory is None:
                size = batch.nbytes
                pos = self.commitlog.reserve(size)
            else:
                pos, size = self.commitlog.append(
                    RecordKind.MESSAGES, topic, queue_id, base, batch.num_rows, table_to_ipc(batch)
                )
            cq.append(batch, pos, size)
            self.put_count += batch.num_rows
            if (
                self.retention_messages is not None
                and cq.max_offset - cq.min_offset > self.retention_messages
            ):
                self._set_min(cq, cq.max_offset - self.retention_messages)
        for listener in self.listeners:
            listener(topic, queue_id, cq.max_offset, cols.tag_code)
        return base, pos + size

    def notify_waiters(self, topic: str, queue_id: int) -> None:
        """Wakes held requests on a queue whose messages became visible again without an append."""
        cq = self.queues.get((topic, queue_id))
        for listener in self.listeners:
            listener(topic, queue_id, cq.max_offset if cq else 0, None)

    async def wait_durable(self, end_position: int) -> None:
        await self.commitlog.wait_durable(end_position)

    # ------------------------------------------------------------ get
    def get(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_messages: int,
        max_bytes: int | None = None,
        flt: MessageFilter = MATCH_ALL,
        whole_segments: bool = False,
    ) -> GetResult:
        """RocketMQ `getMessage` semantics (docs/protocols.md, 'Pull results'): status, next offset, and the
        matching rows; `whole_segments`: see `ConsumeQueue.read` (a read of every message only)."""
        with self.lock:
            self.get_count += 1
            cq = self.queues.get((topic, queue_id))
            if cq is None or (cq.max_offset == 0):
                return GetResult(NO_NEW_MSG if offset == 0 else OFFSET_ILLEGAL, 0, 0, 0)
            lo, hi = cq.min_offset, cq.max_offset
            if offset < lo:
                return GetResult(OFFSET_ILLEGAL, lo, lo, hi)
            if offset == hi:
                return GetResult(NO_NEW_MSG, offset, lo, hi)
            if offset > hi:
                return GetResult(OFFSET_ILLEGAL, hi, lo, hi)
            max_messages = max(1, max_messages)
            scanned = (
                cq.read(offset, max_messages, whole_segments)
                if flt.match_all
                else cq.read(offset, max(MIN_SCAN_ENTRIES, max_messages))
            )
        n = scanned.num_rows
        mask = flt.mask(scanned)
        if mask is None:
            selected = scanned
        else:
            selected = scanned.filter(mask)
        if selected.num_rows == 0:
            return GetResult(NO_MATCHED_MSG, offset + n, lo, hi)
        limited = selected.num_rows > max_messages
        if limited:
            selected = selected.slice(0, max_messages)
        if max_bytes is not None and max_bytes > 0 and _body_bytes_at_most(selected) > max_bytes:
            sizes = pc.cumulative_sum(pc.binary_length(selected.column("body")))
            fit = int(pc.sum(pc.less_equal(sizes, max_bytes)).as_py() or 0)
            fit = max(fit, 1)  # the first message is always returned
            if fit < selected.num_rows:
                selected = selected.slice(0, fit)
                limited = True
        if limited:
            next_offset = selected.column("queue_offset")[-1].as_py() + 1
        else:
            next_offset = offset + n
        return GetResult(FOUND, next_offset, lo, hi, selected)

    def search_offset(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        with self.lock:
            cq = self.queues.get((topic, queue_id))
            return 0 if cq is None else cq.search_offset(timestamp_ms)

    # ------------------------------------------------------------ consumer offsets
    def get_consumer_offset(self, group: str, topic: str, queue_id: int) -> int | None:
        return self.offsets_table.get(_offset_key(group, topic, queue_id))

    def set_consumer_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        self.offsets_table.set(_offset_key(group, topic, queue_id), int(offset))

    def consumer_offsets(self) -> list[tuple[str, str, int, int]]:
        out = []
        for key, off in self.offsets_table.data.items():
            group, topic, qid = key.split("\t")
            out.append((group, topic, int(qid), off))
        return out

    # ------------------------------------------------------------ retention
    def _set_min(self, cq: ConsumeQueue, new_min: int) -> None:
        cq.truncate_before(new_min)
        self.min_offsets_table.set(f"{cq.topic}\t{cq.queue_id}", cq.min_offset)

    def apply_retention(self, now_ms: int | None = None) -> None:
        """Raises min offsets by age/count and deletes commit-log files no queue needs any more."""
        with self.lock:
            if self.retention_hours is not None:
                cutoff = (now_ms or int(time.time() * 1000)) - int(self.retention_hours * 3_600_000)
                for cq in self.queues.values():
                    if cq.max_offset > cq.min_offset:
                        first_kept = cq.search_offset(cutoff)
                        if first_kept > cq.min_offset:
                            self._set_min(cq, first_kept)
            if self.retention_messages is not None:
                for cq in self.queues.values():
                    if cq.max_offset - cq.min_offset > self.retention_messages:
                        self._set_min(cq, cq.max_offset - self.retention_messages)

            def needed(contents: dict[tuple[str, int], int]) -> bool:
                for (topic, qid), end in contents.items():
                    cq = self.queues.get((topic, qid))
                    if cq is not None and end > cq.min_offset:
                        return True
                return False

            deleted = self.commitlog.delete_files(needed)
        if deleted:
            log.info("%s: retention deleted %d commit-log files", self.broker_name, len(deleted))

    def stats(self) -> dict:
        with self.lock:
            return {
                "broker": self.broker_name,
                "topics": len(self.topics),
                "queues": len(self.queues),
                "messages": sum(cq.max_offset - cq.min_offset for cq in self.queues.values()),
                "put_messages": self.put_count,
                "get_requests": self.get_count,
                "commitlog_position": self.commitlog.position,
                "memory_bytes": sum(s.batch.nbytes for cq in self.queues.values() for s in cq.segments),
            }


__all__ = [
    "FOUND",
    "MESSAGE_SCHEMA",
    "NO_MATCHED_MSG",
    "NO_NEW_MSG",
    "OFFSET_ILLEGAL",
    "GetResult",
    "MessageStore",
    "TopicConfig",
]
