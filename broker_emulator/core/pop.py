"""POP consumption of one broker (RocketMQ 5's model behind SimpleConsumer/PushConsumer).

Per (group, topic, queue) a pop offset advances as messages are popped; each popped message is in
flight until acked or until its invisible time passes, then it is revived into the group's retry
topic `%RETRY%{group}_{topic}` with reconsume_times + 1, or into `%DLQ%{group}` once the group's
maximum deliveries are used. FIFO groups pop a queue only while nothing of it is in flight and
re-deliver the same offsets after expiry. State lives in journaled tables, so it survives kill -9.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import pyarrow as pa

from .filtering import MessageFilter
from .parked import columns_of
from .store.journal import JournaledTable
from .store.message_store import FOUND, NO_MATCHED_MSG, OFFSET_ILLEGAL, MessageStore

log = logging.getLogger(__name__)

RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
POP_FROM_RETRY_PROBABILITY = 0.2  # popFromRetryProbability 20
# System properties kept on stored copies (retry/DLQ) and never shown to clients as user properties.
PROP_RETRY_TOPIC = "RETRY_TOPIC"
PROP_DLQ_ORIGIN_TOPIC = "DLQ_ORIGIN_TOPIC"
PROP_DLQ_ORIGIN_MESSAGE_ID = "DLQ_ORIGIN_MESSAGE_ID"
HIDDEN_PROPERTIES = frozenset({PROP_RETRY_TOPIC, PROP_DLQ_ORIGIN_TOPIC, PROP_DLQ_ORIGIN_MESSAGE_ID})


def retry_topic(group: str, topic: str) -> str:
    return f"{RETRY_PREFIX}{group}_{topic}"


def dlq_topic(group: str) -> str:
    return f"{DLQ_PREFIX}{group}"


class InvalidHandle(Exception):
    """An unknown, malformed, stale or expired receipt handle (INVALID_RECEIPT_HANDLE)."""


class StaleHandle(InvalidHandle):
    """A well-formed handle, not expired by its own pop time and invisible duration, whose message is no
    longer in flight under it (already acked, or replaced by ChangeInvisibleDuration)."""


@dataclass
class InFlight:
    """One popped, not yet acknowledged message."""

    group: str
    topic: str  # the topic the consumer subscribed to
    source: str  # where it was popped from: the topic itself or the group's retry topic
    queue_id: int
    offset: int
    pop_time: int
    invisible_ms: int
    reconsume_times: int
    message_id: str
    fifo: bool = False

    @property
    def key(self) -> str:
        return f"{self.group}\t{self.source}\t{self.queue_id}\t{self.offset}"

    @property
    def deadline(self) -> int:
        return self.pop_time + self.invisible_ms

    def handle(self, broker: str) -> str:
        """The POP_CK extra info the proxy hands out (`PopMessageProcessor`, ExtraInfoUtil), fields separated by spaces."""
        topic_type = "1" if self.source.startswith(RETRY_PREFIX) else "0"
        revive_qid = 999 if self.fifo else self.offset % 8
        return (
            f"{self.offset} {self.pop_time} {self.invisible_ms} {revive_qid} {topic_type} {broker} "
            f"{self.queue_id} {self.offset} {self.source}"
        )


@dataclass
class PopResult:
    inflight: list[InFlight]
    table: pa.Table | None  # the popped rows, in inflight order


class PopService:
    """POP state of one broker; all methods run on the server's event loop."""

    def __init__(
        self,
        broker_name: str,
        store: MessageStore,
        data_dir: str | None,
        max_attempts: Callable[[str], int],
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self.broker_name = broker_name
        self.store = store
        self.max_attempts = max_attempts
        self.loop = loop
        self.offsets = JournaledTable(data_dir, "popOffset")
        self.inflight_table = JournaledTable(data_dir, "popInflight")
        self.fifo_attempts = JournaledTable(data_dir, "popFifoAttempts")
        self.inflight: dict[str, InFlight] = {k: InFlight(**v) for k, v in self.inflight_table.data.items()}
        self._drop_unfinished_pops()
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self.revived = 0
        self.dead_lettered = 0

    def _drop_unfinished_pops(self) -> None:
        """A pop records its messages in flight and then moves its offset past them; records at or past
        their queue's pop offset come from a pop a crash cut in between (its reply never left). The
        queue serves those messages again, so reviving the records too would deliver them twice."""
        for key, inf in list(self.inflight.items()):
            done = self.offsets.get(self._offset_key(inf.group, inf.source, inf.queue_id))
            if done is None or inf.offset >= done:
                del self.inflight[key]
                self.inflight_table.delete(key)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Schedules the revive of every in-flight message (also those recovered from disk)."""
        self.loop = loop
        for inf in list(self.inflight.values()):
            self._schedule(inf)

    def close(self) -> None:
        for t in self._timers.values():
            t.cancel()
        self._timers.clear()
        for t in (self.offsets, self.inflight_table, self.fifo_attempts):
            t.close()

    # ------------------------------------------------------------------ offsets
    def _offset_key(self, group: str, source: str, queue_id: int) -> str:
        return f"{group}\t{source}\t{queue_id}"

    def pop_offset(self, group: str, source: str, queue_id: int) -> int:
        """Where a group pops next; a first pop starts as RocketMQ 5 does (initMode MAX, in-memory check)."""
        off = self.offsets.get(self._offset_key(group, source, queue_id))
        if off is not None:
            return off
        committed = self.store.get_consumer_offset(group, source, queue_id)
        if committed is not None:
            return committed
        lo, hi = self.store.min_max(source, queue_id)
        if source.startswith(RETRY_PREFIX) or lo == 0:
            return lo
        return max(hi - 1, lo)

    def progress(self) -> list[tuple[str, str, int, int]]:
        """(group, topic or retry topic, queue, next pop offset) of every queue a group has popped."""
        out = []
        for key, off in self.offsets.data.items():
            group, source, qid = key.split("\t")
            out.append((group, source, int(qid), off))
        return out

    def _set_offset(self, group: str, source: str, queue_id: int, offset: int) -> None:
        self.offsets.set(self._offset_key(group, source, queue_id), offset)

    # ------------------------------------------------------------------ pop
    def queue_busy(self, group: str, source: str, queue_id: int) -> bool:
        prefix = f"{group}\t{source}\t{queue_id}\t"
        return any(k.startswith(prefix) for k in self.inflight)

    def pop(
        self, group: str, topic: str, flt: MessageFilter, batch: int, invisible_ms: int, fifo: bool
    ) -> PopResult:
        """Pops up to `batch` visible messages of `topic` (and the group's retry topic) for `group`."""
        cfg = self.store.topics.get(topic)
        if cfg is None:
            return PopResult([], None)
        retry = retry_topic(group, topic)
        sources = [topic]
        if not fifo and retry in self.store.topics:
            sources = [retry, topic] if random.random() < POP_FROM_RETRY_PROBABILITY else [topic, retry]
        now = int(time.time() * 1000)
        taken: list[InFlight] = []
        tables: list[pa.Table] = []
        for source in sources:
            queues = self.store.topics[source].queues
            start = random.randrange(queues)
            for i in range(queues):
                if len(taken) >= batch:
                    break
                qid = (start + i) % queues
                if fifo and self.queue_busy(group, source, qid):
                    continue
                self._pop_queue(
                    group, topic, source, qid, flt, batch - len(taken), invisible_ms, fifo, now, taken, tables
                )
        if not taken:
            return PopResult([], None)
        return PopResult(taken, pa.concat_tables(tables))

    def _pop_queue(
        self, group, topic, source, qid, flt, want, invisible_ms, fifo, now, taken, tables
    ) -> None:
        offset = self.pop_offset(group, source, qid)
        for _ in range(4):  # corrections: illegal offsets and filtered-out stretches
            r = self.store.get(source, qid, offset, want, None, flt)
            if r.status == OFFSET_ILLEGAL:
                offset = r.next_offset
                self._set_offset(group, source, qid, offset)
                continue
            if r.status == NO_MATCHED_MSG:
                offset = r.next_offset  # the proxy acks non-matching messages silently
                self._set_offset(group, source, qid, offset)
                continue
            if r.status != FOUND or r.table is None:
                return
            rows = r.table
            offsets = rows.column("queue_offset").to_pylist()
            ids = rows.column("message_id").to_pylist()
            reconsumes = rows.column("reconsume_times").to_pylist()
            keep = []
            for j, (off, mid, rc) in enumerate(zip(offsets, ids, reconsumes, strict=True)):
                if fifo:
                    rc = self.fifo_attempts.get(f"{group}\t{source}\t{qid}\t{off}", 0)
                if rc >= self.max_attempts(group):
                    self._dead_letter(group, topic, rows.slice(j, 1), mid)
                    continue
                inf = InFlight(group, topic, source, qid, off, now, invisible_ms, rc, mid, fifo)
                self._add(inf)
                taken.append(inf)
                keep.append(j)
            if keep:
                t = rows.take(keep)
                if fifo:
                    t = t.set_column(
                        t.schema.get_field_index("reconsume_times"),
                        "reconsume_times",
                        pa.array(
                            [taken[-len(keep) + k].reconsume_times for k in range(len(keep))], pa.int32()
                        ),
                    )
                tables.append(t)
            # Only now, with every popped message recorded in flight (or dead-lettered), may the offset
            # move past them: a kill -9 in between then re-delivers (at least once) instead of losing.
            self._set_offset(group, source, qid, r.next_offset)
            return

    def _add(self, inf: InFlight) -> None:
        self.inflight[inf.key] = inf
        self.inflight_table.set(inf.key, asdict(inf))
        self._schedule(inf)

    def _remove(self, key: str) -> InFlight | None:
        inf = self.inflight.pop(key, None)
        if inf is not None:
            self.inflight_table.delete(key)
        t = self._timers.pop(key, None)
        if t is not None:
            t.cancel()
        return inf

    def _schedule(self, inf: InFlight) -> None:
        if self.loop is None:
            return
        old = self._timers.pop(inf.key, None)
        if old is not None:
            old.cancel()
        delay = max(inf.deadline - time.time() * 1000, 0) / 1000.0
        self._timers[inf.key] = self.loop.call_later(delay, self._revive, inf.key, inf.pop_time)

    # ------------------------------------------------------------------ handles
    def _lookup(self, group: str, handle: str) -> InFlight:
        parts = handle.split(" ")
        if len(parts) < 9:
            raise InvalidHandle(f"malformed receipt handle {handle!r}")
        try:
            pop_time, invisible, qid, offset = int(parts[1]), int(parts[2]), int(parts[6]), int(parts[7])
        except ValueError:
            raise InvalidHandle(f"malformed receipt handle {handle!r}") from None
        if parts[5] != self.broker_name:
            raise InvalidHandle(f"receipt handle belongs to {parts[5]}, not {self.broker_name}")
        source = " ".join(parts[8:])
        if pop_time + invisible <= time.time() * 1000:
            raise InvalidHandle("receipt handle is expired")
        inf = self.inflight.get(f"{group}\t{source}\t{qid}\t{offset}")
        if inf is None or inf.pop_time != pop_time or inf.invisible_ms != invisible:
            raise StaleHandle("receipt handle is unknown or was replaced (already acked or changed)")
        if inf.deadline <= time.time() * 1000:
            raise InvalidHandle("receipt handle is expired")
        return inf

    def ack(self, group: str, handle: str) -> InFlight | None:
        """Acknowledges the message of `handle`. As Apache's broker, which only appends an ack record,
        acking a message that is no longer in flight under a handle that has not expired (acked twice, or
        a handle replaced by ChangeInvisibleDuration) succeeds and changes nothing (returns None)."""
        try:
            inf = self._lookup(group, handle)
        except StaleHandle:
            return None
        self._remove(inf.key)
        if inf.fifo:
            self.fifo_attempts.delete(inf.key)
        return inf

    def change_invisible(self, group: str, handle: str, invisible_ms: int) -> tuple[InFlight, str]:
        """Replaces the handle: visible again `invisible_ms` from now (the old handle stops working)."""
        inf = self._lookup(group, handle)
        new = InFlight(**{**asdict(inf), "pop_time": int(time.time() * 1000), "invisible_ms": invisible_ms})
        self._add(new)  # same key: one journal write replaces the record (and its timer)
        return new, new.handle(self.broker_name)

    def forward_to_dlq(self, group: str, handle: str) -> InFlight:
        inf = self._lookup(group, handle)
        r = self.store.get(inf.source, inf.queue_id, inf.offset, 1)
        if r.table is not None and r.count:
            self._dead_letter(group, inf.topic, r.table.slice(0, 1), inf.message_id)
        self._remove(inf.key)
        return inf

    # ------------------------------------------------------------------ revive
    def _revive(self, key: str, pop_time: int) -> None:
        inf = self.inflight.get(key)
        if inf is None or inf.pop_time != pop_time:
            return
        if inf.deadline > time.time() * 1000:
            # The loop's monotonic clock ran ahead of the wall clock that handles expire by: an ack in
            # between would find no record and "succeed" on a message about to be redelivered.
            self._schedule(inf)
            return
        # The in-flight record goes last: a kill -9 before it re-does the revive (at least once).
        if inf.fifo:
            # Orderly: the same offsets are popped again, with one more attempt counted.
            self.fifo_attempts.set(key, inf.reconsume_times + 1)
            current = self.pop_offset(inf.group, inf.source, inf.queue_id)
            if inf.offset < current:
                self._set_offset(inf.group, inf.source, inf.queue_id, inf.offset)
            self._remove(key)
            self.store.notify_waiters(inf.source, inf.queue_id)
            return
        r = self.store.get(inf.source, inf.queue_id, inf.offset, 1)
        if r.table is None or not r.count:
            log.warning("%s: cannot revive %s, the message is gone (retention)", self.broker_name, key)
            self._remove(key)
            return
        row = r.table.slice(0, 1)
        if inf.reconsume_times + 1 >= self.max_attempts(inf.group):
            # Apache RocketMQ 5 revives it into the retry topic once more (reconsume + 1); the proxy then pops
            # it, finds it past the maximum and sends it back to the DLQ (reconsume + 2): a DLQ consumer sees
            # delivery_attempt = max attempts + 2.
            self._dead_letter(inf.group, inf.topic, row, inf.message_id, reconsume=inf.reconsume_times + 2)
            self._remove(key)
            return
        retry = retry_topic(inf.group, inf.topic)
        if retry not in self.store.topics:
            self.store.create_topic(retry, 1)
        self.store.append(retry, 0, columns_of(row, inf.reconsume_times + 1, {PROP_RETRY_TOPIC: inf.topic}))
        self._remove(key)
        self.revived += 1

    def _dead_letter(
        self, group: str, topic: str, row: pa.Table, message_id: str, reconsume: int | None = None
    ):
        dlq = dlq_topic(group)
        if dlq not in self.store.topics:
            self.store.create_topic(dlq, 1)
        rc = reconsume if reconsume is not None else row.column("reconsume_times")[0].as_py()
        self.store.append(
            dlq,
            0,
            columns_of(
                row,
                rc,
                {
                    PROP_DLQ_ORIGIN_TOPIC: topic,
                    PROP_DLQ_ORIGIN_MESSAGE_ID: message_id,
                    PROP_RETRY_TOPIC: None,
                },
            ),
        )
        self.dead_lettered += 1

    def stats(self) -> dict:
        return {"inflight": len(self.inflight), "revived": self.revived, "dead_lettered": self.dead_lettered}
