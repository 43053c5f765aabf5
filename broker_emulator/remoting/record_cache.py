"""The encoded stored records of what remoting consumers pulled, kept for the next pull of the same offsets.

A real broker answers PULL_MESSAGE with bytes it already holds (its commit log, from the page cache); the
emulator stores columns and encodes each answer's records (`messages.stored_record_buffer`), ~0.3 µs of its
CPU per message. Stored messages never change, so an answer's records can be kept and a later pull of
offsets inside them (another consumer group, a replay from a checkpoint, the next micro-batch's retry)
answered with a slice, byte for byte what encoding again would give. Only unfiltered answers of at least
`MIN_RECORDS` messages are kept (a tail read's small answers are cheap to encode and rarely read twice),
and only when their first offset is encoded a second time: a backfill read once keeps no memory (new
memory is not free: on this VM a page the host took back costs 0.4–2 ns per byte to fault in again, as
much as encoding), data read again is kept from its second read on.

A consumer that pulls a few messages a time (Java's push consumer asks for 32, its lite pull consumer for
10) would pay the encoder's fixed cost, ~0.7 ms a call, for each answer: a small pull encodes a read-ahead
instead, up to `READ_AHEAD_RECORDS` / `READ_AHEAD_BYTES` from its first offset, kept as its queue's window
(one per queue, replaced by the next: its memory is reused, not grown) for the pulls that follow, as a
real broker's next answers come from pages the OS has read ahead. Up to a byte budget shared by the
brokers of one emulator; the least recently used answers go first.
"""

from __future__ import annotations

import bisect
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

#: Answers with fewer records are not kept.
MIN_RECORDS = 1024
#: The emulator's default budget (`serve --remoting-cache-mb`).
DEFAULT_BUDGET_BYTES = 512 << 20
#: First offsets of answers encoded once remembered (the second encode of one keeps its answer).
SEEN_ANSWERS = 65536
#: Records and body bytes a small pull's read-ahead encodes at most.
READ_AHEAD_RECORDS = 4096
READ_AHEAD_BYTES = 4 << 20


@dataclass(eq=False)
class _Answer:
    key: tuple[str, str, int]  # broker, topic, queue id
    first: int  # queue offset of the first record
    records: pa.Buffer
    starts: np.ndarray = field(repr=False)  # each record's start, and the end

    @property
    def end(self) -> int:
        return self.first + len(self.starts) - 1


class RecordCache:
    """Kept answers per (broker, topic, queue), found by offset; thread-safe."""

    def __init__(self, budget_bytes: int = DEFAULT_BUDGET_BYTES) -> None:
        self.budget_bytes = max(int(budget_bytes), 0)
        self.bytes = 0
        self.hits = 0
        self._lock = threading.Lock()
        self._by_queue: dict[tuple[str, str, int], list[_Answer]] = {}  # sorted by first offset
        self._lru: OrderedDict[int, _Answer] = OrderedDict()
        self._seen: OrderedDict[tuple[str, str, int, int], None] = OrderedDict()
        self._windows: dict[tuple[str, str, int], _Answer] = {}  # each queue's read-ahead

    def lookup(
        self, broker: str, topic: str, queue_id: int, first: int, count: int
    ) -> tuple[pa.Buffer, np.ndarray] | None:
        """The records of offsets [first, first + count) and their starts (from 0, one more: the end), when
        one kept answer holds them all."""
        if self.budget_bytes == 0 or count <= 0:
            return None
        with self._lock:
            answers = self._by_queue.get((broker, topic, queue_id))
            if not answers:
                return None
            i = bisect.bisect_right(answers, first, key=lambda a: a.first) - 1
            if i < 0 or answers[i].end < first + count:
                return None
            answer = answers[i]
            self._lru.move_to_end(id(answer))
            self.hits += 1
        lo = first - answer.first
        starts = answer.starts[lo : lo + count + 1]
        base = int(starts[0])
        return answer.records.slice(base, int(starts[-1]) - base), starts - base

    def keep(
        self, broker: str, topic: str, queue_id: int, first: int, records: pa.Buffer, starts: np.ndarray
    ) -> None:
        """Keeps an answer's records (offsets from `first`, one per start but the last) when an answer from
        the same offset was encoded before."""
        size = records.size
        if len(starts) - 1 < MIN_RECORDS or size > self.budget_bytes:
            return
        key = (broker, topic, queue_id)
        answer = _Answer(key, first, records, starts)
        with self._lock:
            seen = (*key, first)
            if seen not in self._seen:  # the first answer encoded from here: remember it, keep nothing
                self._seen[seen] = None
                if len(self._seen) > SEEN_ANSWERS:
                    self._seen.popitem(last=False)
                return
            del self._seen[seen]
            self._insert_locked(answer)

    def keep_ahead(
        self, broker: str, topic: str, queue_id: int, first: int, records: pa.Buffer, starts: np.ndarray
    ) -> None:
        """Keeps a small pull's read-ahead (offsets from `first`) as its queue's window, in place of the
        window kept before."""
        if records.size > self.budget_bytes:
            return
        key = (broker, topic, queue_id)
        with self._lock:
            old = self._windows.pop(key, None)
            if old is not None and id(old) in self._lru:
                self._drop_locked(old)
            answer = _Answer(key, first, records, starts)
            if self._insert_locked(answer):
                self._windows[key] = answer

    def _insert_locked(self, answer: _Answer) -> bool:
        """Adds an answer and evicts past the budget; False when one as long from its offset is kept."""
        answers = self._by_queue.setdefault(answer.key, [])
        i = bisect.bisect_left(answers, answer.first, key=lambda a: a.first)
        if i < len(answers) and answers[i].first == answer.first and answers[i].end >= answer.end:
            return False  # already kept (two pulls of the same offsets encoded at once)
        answers.insert(i, answer)
        self._lru[id(answer)] = answer
        self.bytes += answer.records.size
        while self.bytes > self.budget_bytes:
            self._drop_locked(next(iter(self._lru.values())))
        return True

    def _drop_locked(self, answer: _Answer) -> None:
        del self._lru[id(answer)]
        self.bytes -= answer.records.size
        kept = self._by_queue[answer.key]
        kept.remove(answer)
        if not kept:
            del self._by_queue[answer.key]
        if self._windows.get(answer.key) is answer:
            del self._windows[answer.key]
