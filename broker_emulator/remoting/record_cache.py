"""The encoded stored records of what remoting consumers pulled, kept for the next pull of the same offsets.

A real broker answers PULL_MESSAGE with bytes it already holds (its commit log, from the page cache); the
emulator stores columns and encodes each answer's records (`messages.stored_record_buffer`), ~0.3 µs of its
CPU per message. Stored messages never change, so an answer's records can be kept and a later pull of
offsets inside them (another consumer group, a replay from a checkpoint, the next micro-batch's retry)
answered with a slice, byte for byte what encoding again would give. Only unfiltered answers of at least
`MIN_RECORDS` messages are kept (a tail read's small answers are cheap to encode and rarely read twice),
and only when their first offset is encoded a second time: a backfill read once keeps no memory (new
memory is not free: on this VM a page the host took back costs 0.4–2 ns per byte to fault in again, as
much as encoding), data read again is kept from its second read on. Up to a byte budget shared by the
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
            answers = self._by_queue.setdefault(key, [])
            i = bisect.bisect_left(answers, first, key=lambda a: a.first)
            if i < len(answers) and answers[i].first == first and answers[i].end >= answer.end:
                return  # already kept (two pulls of the same offsets encoded at once)
            answers.insert(i, answer)
            self._lru[id(answer)] = answer
            self.bytes += size
            while self.bytes > self.budget_bytes:
                _, old = self._lru.popitem(last=False)
                self.bytes -= old.records.size
                kept = self._by_queue[old.key]
                kept.remove(old)
                if not kept:
                    del self._by_queue[old.key]
