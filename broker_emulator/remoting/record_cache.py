"""Stored-message records kept per consume-queue segment, so PULL_MESSAGE cuts its body out of bytes encoded
once instead of encoding the rows again on every pull.

A real broker serves a pull from its commit log, which holds each message in the stored encoding written at
send time. Here the store keeps rows in columns (shared with gRPC); the remoting front end encodes a
segment's rows the first time a pull reaches them (`messages.stored_record_buffer`) and keeps the records in
the segment (`Segment.derived`): one buffer per chunk of rows plus the int64 start of each record. Nothing
in a record differs from one pull to the next (queue offset, commit-log offset, store host, sysflag and
properties are the message's own), so a later pull is one slice per run of rows. A segment that grew since
(small sends merge into the last segment) gets its new rows encoded as a further chunk; chunks are merged
as they accumulate so a segment holds a few of them.

Memory: the records are a second copy of what is pulled over remoting; `max_bytes` bounds them per broker,
least recently pulled segments first out (they are encoded again if pulled again). Segments dropped by
retention take their records with them. Nothing here is persisted: after a restart the records are
encoded again from the recovered store.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from ..core.store.consume_queue import Segment
from ..core.store.message_store import GetResult
from .messages import store_host, stored_record_buffer

if TYPE_CHECKING:
    from ..core.cluster import Broker

KEY = "remoting.records"
#: Default bound of the records kept per broker.
MAX_BYTES = 512 << 20


@dataclass
class _Chunk:
    first: int  # the segment row of its first record
    data: memoryview
    starts: np.ndarray  # int64: where each record starts in `data`, then the end

    @property
    def rows(self) -> int:
        return len(self.starts) - 1

    @property
    def end(self) -> int:
        return self.first + self.rows


@dataclass
class _Records:
    """The encoded rows [0, end) of one segment."""

    host: str  # the store host and cluster name the records were encoded with
    cluster: str
    chunks: list[_Chunk]
    nbytes: int

    @property
    def end(self) -> int:
        return self.chunks[-1].end if self.chunks else 0


def _merge(a: _Chunk, b: _Chunk) -> _Chunk:
    data = b"".join(
        (a.data[int(a.starts[0]) : int(a.starts[-1])], b.data[int(b.starts[0]) : int(b.starts[-1])])
    )
    starts = np.concatenate(
        [a.starts - a.starts[0], b.starts[1:] - b.starts[0] + (a.starts[-1] - a.starts[0])]
    )
    return _Chunk(a.first, memoryview(data), starts)


class RecordCache:
    """The records of one broker's segments, bounded by `max_bytes`."""

    def __init__(self, broker: Broker, cluster_name: str, max_bytes: int = MAX_BYTES) -> None:
        self.broker = broker
        self.cluster_name = cluster_name
        self.max_bytes = max_bytes
        self.nbytes = 0
        self._lru: OrderedDict[int, tuple[weakref.ref[Segment], int]] = OrderedDict()

    # ------------------------------------------------------------------ pull bodies
    def body(self, result: GetResult, topic: str, queue_id: int) -> bytes:
        """The pull-response body of a FOUND result of `MessageStore.get` on (topic, queue_id)."""
        assert result.spans is not None
        self._encode_missing(result.spans, topic, queue_id)
        pieces: list[memoryview] = []
        if result.rows is None:
            remaining = result.count
            for seg, lo, hi in result.spans:
                hi = min(hi, lo + remaining)
                if hi <= lo:
                    break
                self._cut(seg, topic, queue_id, lo, hi, pieces)
                remaining -= hi - lo
        else:
            scan_base = 0
            rows = result.rows
            for seg, lo, hi in result.spans:
                width = hi - lo
                a, b = np.searchsorted(rows, [scan_base, scan_base + width])
                if b > a:
                    idx = rows[a:b] - scan_base + lo
                    breaks = np.flatnonzero(np.diff(idx) != 1) + 1
                    run_lo = idx[np.concatenate([[0], breaks])]
                    run_hi = idx[np.concatenate([breaks - 1, [len(idx) - 1]])] + 1
                    for r_lo, r_hi in zip(run_lo.tolist(), run_hi.tolist(), strict=True):
                        self._cut(seg, topic, queue_id, r_lo, r_hi, pieces)
                scan_base += width
        body = pieces[0].tobytes() if len(pieces) == 1 else b"".join(pieces)
        self._evict()  # after the cut: a pull larger than the bound still gets its records
        return body

    def _cut(self, seg: Segment, topic: str, queue_id: int, lo: int, hi: int, out: list[memoryview]) -> None:
        """Appends to `out` the records of segment rows [lo, hi)."""
        for c in seg.derived[KEY].chunks:
            if c.end <= lo:
                continue
            if c.first >= hi:
                break
            a, b = max(lo, c.first) - c.first, min(hi, c.end) - c.first
            out.append(c.data[int(c.starts[a]) : int(c.starts[b])])

    # ------------------------------------------------------------------ records
    def _encode_missing(self, spans: list[tuple[Segment, int, int]], topic: str, queue_id: int) -> None:
        """Encodes, in one call, every row of the spans' segments not encoded yet (each call of the encoder
        has a fixed cost of a few dozen Arrow calls: a pull over many small segments pays it once)."""
        todo: list[tuple[Segment, _Records, pa.RecordBatch]] = []
        for seg, _, hi in spans:
            records = self._records(seg)
            if records.end < hi:
                with self.broker.store.lock:  # the segment's parts are merged on read; appends hold it
                    batch = seg.batch
                todo.append((seg, records, batch.slice(records.end)))
        if not todo:
            return
        table = pa.Table.from_batches([b for _, _, b in todo])
        data, starts = stored_record_buffer(table, topic, queue_id, self.broker, self.cluster_name)
        view = memoryview(data)
        row = 0
        for seg, records, batch in todo:
            k = batch.num_rows
            records.chunks.append(_Chunk(records.end, view, starts[row : row + k + 1]))
            row += k
            # Keep few chunks: merge the last two while the older is not much larger (amortised copies).
            chunks = records.chunks
            while len(chunks) >= 2 and chunks[-2].rows < 2 * chunks[-1].rows:
                chunks[-2:] = [_merge(chunks[-2], chunks[-1])]
            self._resize(seg, records, sum(int(c.starts[-1] - c.starts[0]) + c.starts.nbytes for c in chunks))

    def _records(self, seg: Segment) -> _Records:
        """The segment's records (none yet when new), marked most recently used."""
        host = store_host(self.broker)
        records: _Records | None = seg.derived.get(KEY)
        if records is not None and (records.host != host or records.cluster != self.cluster_name):
            self._drop(seg)
            records = None
        if records is None:
            records = seg.derived[KEY] = _Records(host, self.cluster_name, [], 0)
        if id(seg) in self._lru:
            self._lru.move_to_end(id(seg))
        else:  # new, or made by another cache over the same store (counted here from now on)
            self._lru[id(seg)] = (weakref.ref(seg), records.nbytes)
            self.nbytes += records.nbytes
            weakref.finalize(seg, self._forget, id(seg))
        return records

    def _resize(self, seg: Segment, records: _Records, nbytes: int) -> None:
        self.nbytes += nbytes - records.nbytes
        records.nbytes = nbytes
        self._lru[id(seg)] = (weakref.ref(seg), nbytes)

    def _evict(self) -> None:
        """Least recently pulled segments' records out while over the bound (the last one stays)."""
        while self.nbytes > self.max_bytes and len(self._lru) > 1:
            key, (ref, _) = next(iter(self._lru.items()))
            victim = ref()
            if victim is None:
                self._forget(key)
            else:
                self._drop(victim)

    def _drop(self, seg: Segment) -> None:
        seg.derived.pop(KEY, None)
        self._forget(id(seg))

    def _forget(self, key: int) -> None:
        entry = self._lru.pop(key, None)
        if entry is not None:
            self.nbytes -= entry[1]
