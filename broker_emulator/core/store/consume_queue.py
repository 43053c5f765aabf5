"""Consume queue of one (topic, queue): dense logical offsets over column segments of stored messages.

Each logical entry corresponds to RocketMQ's CQ unit (commit-log position, size, tag hash, store
timestamp); entries live column-wise in Arrow segments so pulls slice them without per-message work.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from .records import MESSAGE_SCHEMA

# Appends smaller than MERGE_BELOW rows (single sends, a producer's batch spread over many queues) join the
# last segment while it holds at most MERGE_LIMIT rows; larger appends are segments of their own (never
# copied). A pull then answers with a few large record batches instead of many small ones: each batch costs
# the IPC writer and the client's reader, whatever its size, and the client joins small ones.
MERGE_LIMIT = 8192
MERGE_BELOW = 4096


@dataclass
class Segment:
    """Consecutive entries of a consume queue; merged appends are concatenated on their first read once the
    segment is closed (a later one exists), not per append: reads of the open tail slice its parts."""

    base: int
    parts: list[pa.RecordBatch]
    position: int  # commit-log position of the first record contributing to this segment
    size: int  # bytes of commit-log records contributing to this segment
    count: int = field(init=False)

    def __post_init__(self) -> None:
        self.count = sum(p.num_rows for p in self.parts)

    @property
    def batch(self) -> pa.RecordBatch:
        if len(self.parts) > 1:
            self.parts = [pa.concat_batches(self.parts)]
        return self.parts[0]

    @property
    def end(self) -> int:
        return self.base + self.count

    def slices(self, lo: int, hi: int) -> list[pa.RecordBatch]:
        """Rows [lo, hi) of the segment as slices of its parts, without joining them."""
        out, start = [], 0
        for part in self.parts:
            end = start + part.num_rows
            if end > lo and start < hi:
                out.append(part.slice(max(lo - start, 0), min(hi, end) - max(lo, start)))
            start = end
        return out

    def add(self, batch: pa.RecordBatch, size: int) -> None:
        self.parts.append(batch)
        self.count += batch.num_rows
        self.size += size


class ConsumeQueue:
    """Logical queue: offsets [min_offset, max_offset) are readable; max_offset is the next to write."""

    def __init__(self, topic: str, queue_id: int, start_offset: int = 0) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.min_offset = start_offset
        self.max_offset = start_offset
        self.segments: list[Segment] = []
        self._bases: list[int] = []
        self.last_store_timestamp = 0

    def __repr__(self) -> str:
        return f"ConsumeQueue({self.topic}:{self.queue_id} [{self.min_offset},{self.max_offset}))"

    def append(self, batch: pa.RecordBatch, position: int, size: int) -> None:
        """Appends a batch whose queue_offset column starts at max_offset."""
        n = batch.num_rows
        if n == 0:
            return
        if not self.segments and self.max_offset == self.min_offset:
            first = batch.column(0)[0].as_py()
            self.min_offset = self.max_offset = first
        last = self.segments[-1] if self.segments else None
        if (
            last is not None
            and last.end == self.max_offset
            and n < MERGE_BELOW
            and last.count + n <= MERGE_LIMIT
        ):
            last.add(batch, size)
        else:
            self.segments.append(Segment(self.max_offset, [batch], position, size))
            self._bases.append(self.max_offset)
        self.max_offset += n
        ts = batch.column(MESSAGE_SCHEMA.get_field_index("store_timestamp"))
        self.last_store_timestamp = ts[n - 1].value

    def read(self, offset: int, limit: int, whole_segments: bool = False) -> pa.Table:
        """Rows with offsets in [offset, min(offset+limit, max_offset)): slices of the segments. With
        `whole_segments`, a read that `limit` cuts inside a segment ends at that segment's start instead
        when it still holds rows: the next read then starts on a boundary, and neither cuts a segment in two
        pieces (each piece is one more record batch for the sender and the reader to handle)."""
        end = min(offset + limit, self.max_offset)
        offset = max(offset, self.min_offset)
        if whole_segments and end < self.max_offset:
            base = self._bases[bisect.bisect_right(self._bases, end) - 1]
            if offset < base < end:
                end = base
        if end <= offset:
            return MESSAGE_SCHEMA.empty_table()
        i = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        parts = []
        while i < len(self.segments) and self.segments[i].base < end:
            seg = self.segments[i]
            lo = max(offset, seg.base) - seg.base
            hi = min(end, seg.end) - seg.base
            if hi > lo:
                if i == len(self.segments) - 1:
                    parts += seg.slices(lo, hi)  # still growing: joined once it is closed
                else:
                    parts.append(seg.batch.slice(lo, hi - lo))
            i += 1
        return pa.Table.from_batches(parts, schema=MESSAGE_SCHEMA)

    def search_offset(self, timestamp_ms: int) -> int:
        """First offset whose store timestamp is >= timestamp_ms; max_offset when every message is older."""
        lo_seg = max(bisect.bisect_right(self._bases, self.min_offset) - 1, 0)
        ts_idx = MESSAGE_SCHEMA.get_field_index("store_timestamp")
        for seg in self.segments[lo_seg:]:
            if seg.end <= self.min_offset:
                continue
            ts = seg.batch.column(ts_idx)
            if ts[seg.count - 1].value < timestamp_ms:
                continue
            arr = pc.cast(ts, pa.int64()).to_numpy()
            start = max(self.min_offset - seg.base, 0)
            idx = int(start + arr[start:].searchsorted(timestamp_ms, side="left"))
            return seg.base + idx
        return self.max_offset

    def truncate_before(self, new_min: int) -> None:
        """Retention: offsets below new_min are gone; whole segments below it are released."""
        new_min = min(new_min, self.max_offset)
        if new_min <= self.min_offset:
            return
        self.min_offset = new_min
        drop = 0
        while drop < len(self.segments) and self.segments[drop].end <= new_min:
            drop += 1
        if drop:
            del self.segments[:drop]
            del self._bases[:drop]

    def reset_empty(self, offset: int) -> None:
        """Restart point of a queue whose data was all removed (min = max = offset)."""
        self.min_offset = self.max_offset = offset
