"""Rows of the sink's Arrow batches → checked messages (the protocol-neutral half of the writer's per-row work).

`RowChecker.check` applies RocketMQ's send rules (`rocketmq_protocol.send_rules`: the same predicates,
phrases and limits the emulator enforces) column-wise with pyarrow compute; the first failing row raises
`SinkInputError` naming the row (0-based, in the order Spark feeds the task) and its problem. What passes
becomes `CheckedRows`, one per topic: the columns as Arrow arrays, which a client's `SendEncoder` turns
into its protocol's requests (`connector.clients`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import cache, cached_property
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketmq_protocol.names import NAME_CHARACTERS, TOPIC_MAX_LENGTH, is_name
from rocketmq_protocol.send_rules import (
    CONTROL_CHARACTERS,
    MAX_DELAY_MS,
    MAX_MESSAGE_GROUP_BYTES,
    MAX_PROPERTIES_BYTES,
    MAX_USER_PROPERTIES,
    RESERVED_PROPERTY_KEYS,
    group_problem,
    key_problem,
    property_key_problem,
    tag_problem,
)

from .errors import SinkInputError
from .sink_schema import BODY, DELIVERY_TIMESTAMP, KEYS, MESSAGE_GROUP, PROPERTIES, TAGS, TOPIC

__all__ = ["CheckedRows", "RowChecker", "as_binary", "list_values"]


@cache
def _reserved() -> pa.Array:
    """RESERVED_PROPERTY_KEYS as an Arrow array, built on first use: converting a Python value is what
    makes pyarrow import pandas (a quarter second and more), which a writer without properties never
    needs."""
    return pa.array(sorted(RESERVED_PROPERTY_KEYS), pa.string())


@dataclass(eq=False)
class CheckedRows:
    """One topic's messages of a batch, checked; a column is None when no row has a value in it.

    `rows[i]` is message i's row number in the task's input. Arrays keep the input's Arrow types: `tags`,
    `groups` string; `keys` string or list<string>; `properties` map<string, string>; nulls mean "none".
    """

    topic: str
    rows: np.ndarray
    bodies: pa.Array  # binary or large_binary: no nulls, none empty
    body_sizes: np.ndarray  # int64, bytes
    born_ms: int  # the born timestamp of every message, ms since the epoch
    tags: pa.Array | None = None
    keys: pa.Array | None = None
    properties: pa.Array | None = None
    groups: pa.Array | None = None  # FIFO message groups
    delivery_us: pa.Array | None = None  # int64 µs since the epoch: delayed delivery

    def __len__(self) -> int:
        return len(self.bodies)

    @cached_property
    def group_list(self) -> list[str | None] | None:
        """Each message's message group as a Python list (None when no message has one)."""
        return None if self.groups is None else self.groups.to_pylist()


# ------------------------------------------------------------------------------------------ Arrow helpers
def list_values(values: pa.Array, offsets: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """The flat values of a (possibly sliced) list/map array and its offsets rebased to start at 0."""
    off = offsets.to_numpy(zero_copy_only=False).astype(np.int64)
    return values.slice(int(off[0]), int(off[-1] - off[0])), off - off[0]


def as_binary(arr: pa.Array) -> pa.Array:
    """A string or binary array as (large_)binary, whose `to_pylist()` gives bytes."""
    t = arr.type
    if pa.types.is_large_string(t) or pa.types.is_large_binary(t):
        return arr.cast(pa.large_binary())
    return arr.cast(pa.binary())


def _lengths(col: pa.Array) -> np.ndarray:
    """The byte length of each value of a (large_)binary array without nulls, read from its offsets (no
    conversion through Python values, which would make pyarrow import pandas)."""
    dtype = np.dtype(np.int64 if pa.types.is_large_binary(col.type) else np.int32)
    off = np.frombuffer(col.buffers()[1], dtype, len(col) + 1, dtype.itemsize * col.offset)
    return np.diff(off).astype(np.int64)


def _first(mask: pa.Array | pa.ChunkedArray) -> int:
    """Index of the first true value of a boolean array (nulls count as false), or -1."""
    return pc.index(pc.fill_null(mask, False), True).as_py()


def _row_of(flat_index: int, offsets: np.ndarray) -> int:
    return int(np.searchsorted(offsets, flat_index, side="right") - 1)


def _chars(values: pa.Array) -> np.ndarray:
    """Characters per value (0 for null)."""
    return pc.fill_null(pc.utf8_length(values), 0).to_numpy(zero_copy_only=False).astype(np.int64)


def _chars_per_row(flat: pa.Array, off: np.ndarray) -> np.ndarray:
    """Characters of each row's values of a flattened list array."""
    chars = np.concatenate([[0], np.cumsum(_chars(flat))])
    return chars[off[1:]] - chars[off[:-1]]


# ------------------------------------------------------------------------------------------ the checks
class RowChecker:
    """Checks the rows of one task (`layout`: sink column → input column, from `sink_schema`)."""

    def __init__(
        self,
        layout: dict[str, str],
        topic_option: str | None,
        max_message_size: int,
        label: str = "the task",
        clock_ms: Any = None,
    ) -> None:
        self.layout = layout
        self.topic_option = topic_option
        self.max_message_size = max_message_size
        self.label = label
        self._clock_ms = clock_ms or (lambda: int(time.time() * 1000))

    def _fail(self, row: int, problem: str) -> SinkInputError:
        return SinkInputError(f"rocketmq sink: bad row {row} (0-based) of {self.label}: {problem}")

    def _col(self, batch: pa.RecordBatch, name: str) -> pa.Array | None:
        actual = self.layout.get(name)
        i = -1 if actual is None else batch.schema.get_field_index(actual)
        return None if i < 0 else batch.column(i)

    def _present(self, batch: pa.RecordBatch, name: str) -> pa.Array | None:
        """The column, unless absent or null in every row."""
        col = self._col(batch, name)
        return None if col is None or col.null_count == len(col) else col

    # ------------------------------------------------------------------ entry point
    def check(self, batch: pa.RecordBatch, row_base: int) -> list[CheckedRows]:
        """The batch's messages, one `CheckedRows` per topic; `row_base` is the batch's first row number."""
        n = batch.num_rows
        rows = np.arange(row_base, row_base + n, dtype=np.int64)
        if n == 0:
            return []
        if self.topic_option is not None:
            return [self._check(batch, rows, self.topic_option)]
        topics = self._col(batch, TOPIC)
        assert topics is not None
        if topics.null_count:
            raise self._fail(
                int(rows[_first(pc.is_null(topics))]),
                "topic is null (give every row a topic, or set option 'topic')",
            )
        distinct = pc.unique(topics).to_pylist()
        for t in distinct:
            if not is_name(t, TOPIC_MAX_LENGTH):
                raise self._fail(
                    int(rows[_first(pc.equal(topics, t))]),
                    f"topic {t!r} is not a valid topic name "
                    f"(1 to {TOPIC_MAX_LENGTH} characters from {NAME_CHARACTERS})",
                )
        if len(distinct) == 1:
            return [self._check(batch, rows, distinct[0])]
        out = []
        for t in distinct:
            idx = pc.indices_nonzero(pc.equal(topics, t))
            out.append(self._check(batch.take(idx), rows[idx.to_numpy()], t))
        return out

    def _check(self, batch: pa.RecordBatch, rows: np.ndarray, topic: str) -> CheckedRows:
        bodies, body_sizes = self._bodies(batch, rows)
        tags = self._tags(batch, rows)
        keys, key_chars = self._keys(batch, rows)
        props, prop_chars = self._properties(batch, rows)
        self._check_properties_size(rows, None if tags is None else _chars(tags), key_chars, prop_chars)
        groups = self._groups(batch, rows)
        delivery = self._delivery(batch, rows, groups)
        return CheckedRows(
            topic, rows, bodies, body_sizes, self._clock_ms(), tags, keys, props, groups, delivery
        )

    # ------------------------------------------------------------------ columns
    def _bodies(self, batch: pa.RecordBatch, rows: np.ndarray) -> tuple[pa.Array, np.ndarray]:
        col = self._col(batch, BODY)
        assert col is not None
        if col.null_count:
            raise self._fail(
                int(rows[_first(pc.is_null(col))]), "body is null (column 'body' is required, non-null)"
            )
        col = as_binary(col)
        sizes = _lengths(col)
        if sizes.size and sizes.min() == 0:
            raise self._fail(
                int(rows[int(np.argmax(sizes == 0))]), "body is empty (RocketMQ rejects empty bodies)"
            )
        if sizes.size and sizes.max() > self.max_message_size:
            i = int(np.argmax(sizes > self.max_message_size))
            raise self._fail(
                int(rows[i]),
                f"body of {int(sizes[i])} bytes exceeds maxMessageSize={self.max_message_size} bytes",
            )
        return col, sizes.astype(np.int64)

    def _check_strings(
        self,
        values: pa.Array,
        rows_of: Any,
        what: str,
        problem: Any,
        *,
        allow_pipe: bool = True,
        max_bytes: int = 0,
    ) -> None:
        """Finds the first value `problem` (a `send_rules` predicate) refuses, column-wise: blank, control
        characters, '|' (unless `allow_pipe`), `max_bytes` bytes or more (when given)."""
        bad = pc.or_(
            pc.equal(pc.utf8_trim_whitespace(values), ""),
            pc.match_substring_regex(values, CONTROL_CHARACTERS),
        )
        if not allow_pipe:
            bad = pc.or_(bad, pc.match_substring(values, "|"))
        if max_bytes:
            bad = pc.or_(bad, pc.greater_equal(pc.binary_length(values), max_bytes))
        i = _first(bad)
        if i >= 0:
            v = values[i].as_py()
            raise self._fail(rows_of(i), f"{what} {v!r} {problem(v) or 'is not accepted'}")

    def _tags(self, batch: pa.RecordBatch, rows: np.ndarray) -> pa.Array | None:
        col = self._present(batch, TAGS)
        if col is not None:
            self._check_strings(col, lambda i: int(rows[i]), "tag", tag_problem, allow_pipe=False)
        return col

    def _keys(self, batch: pa.RecordBatch, rows: np.ndarray) -> tuple[pa.Array | None, np.ndarray | None]:
        """The keys column and the keys' characters per row (for the 16 KiB rule)."""
        col = self._present(batch, KEYS)
        if col is None:
            return None, None
        if not (pa.types.is_list(col.type) or pa.types.is_large_list(col.type)):
            self._check_strings(col, lambda i: int(rows[i]), "key", key_problem)
            return col, _chars(col)
        flat, off = list_values(col.values, col.offsets)
        if flat.null_count:
            k = _first(pc.is_null(flat))
            row = _row_of(k, off)
            raise self._fail(int(rows[row]), f"keys[{k - off[row]}] is null")
        self._check_strings(flat, lambda k: int(rows[_row_of(k, off)]), "key", key_problem)
        return col, _chars_per_row(flat, off)

    def _properties(
        self, batch: pa.RecordBatch, rows: np.ndarray
    ) -> tuple[pa.Array | None, np.ndarray | None]:
        """The properties column and the characters of its names and values per row."""
        col = self._present(batch, PROPERTIES)
        if col is None:
            return None, None
        keys, off = list_values(col.keys, col.offsets)
        items, _ = list_values(col.items, col.offsets)
        if items.null_count:
            k = _first(pc.is_null(items))
            raise self._fail(int(rows[_row_of(k, off)]), f"property {keys[k].as_py()!r} has a null value")
        bad_key = pc.or_(
            pc.or_(pc.equal(keys, ""), pc.is_in(keys, value_set=_reserved())),
            pc.match_substring_regex(keys, CONTROL_CHARACTERS),
        )
        k = _first(bad_key)
        if k >= 0:
            name = keys[k].as_py()
            why = property_key_problem(name) or "is not accepted"
            raise self._fail(int(rows[_row_of(k, off)]), f"property name {name!r} {why}")
        k = _first(pc.match_substring_regex(items, CONTROL_CHARACTERS))
        if k >= 0:
            raise self._fail(
                int(rows[_row_of(k, off)]),
                f"property {keys[k].as_py()!r} has a value with control characters",
            )
        counts = np.diff(off)
        if counts.size and counts.max() > MAX_USER_PROPERTIES:
            i = int(np.argmax(counts > MAX_USER_PROPERTIES))
            raise self._fail(
                int(rows[i]), f"{int(counts[i])} properties exceed the limit of {MAX_USER_PROPERTIES}"
            )
        return col, _chars_per_row(keys, off) + _chars_per_row(items, off)

    def _check_properties_size(self, rows: np.ndarray, *chars: np.ndarray | None) -> None:
        """RocketMQ's 16 KiB limit on a message's tag, keys and user properties together, counted whether or
        not the message has properties (`send_rules.properties_size`)."""
        present = [c for c in chars if c is not None]
        if not present:
            return
        total = present[0] if len(present) == 1 else sum(present[1:], present[0])
        over = total > MAX_PROPERTIES_BYTES
        if over.any():
            i = int(np.argmax(over))
            raise self._fail(
                int(rows[i]),
                f"tag, keys and properties of {int(total[i])} characters exceed the limit of "
                f"{MAX_PROPERTIES_BYTES}",
            )

    def _groups(self, batch: pa.RecordBatch, rows: np.ndarray) -> pa.Array | None:
        col = self._present(batch, MESSAGE_GROUP)
        if col is not None:
            self._check_strings(
                col, lambda i: int(rows[i]), "messageGroup", group_problem, max_bytes=MAX_MESSAGE_GROUP_BYTES
            )
        return col

    def _delivery(self, batch: pa.RecordBatch, rows: np.ndarray, groups: pa.Array | None) -> pa.Array | None:
        col = self._present(batch, DELIVERY_TIMESTAMP)
        if col is None:
            return None
        us = pc.cast(col, pa.timestamp("us", tz=col.type.tz), safe=False).cast(pa.int64())
        if groups is not None:
            i = _first(pc.and_(pc.is_valid(us), pc.is_valid(groups)))
            if i >= 0:
                raise self._fail(
                    int(rows[i]),
                    "messageGroup and deliveryTimestamp are both set: a FIFO message cannot be delayed",
                )
        limit_us = (self._clock_ms() + MAX_DELAY_MS) * 1000
        i = _first(pc.greater(us, limit_us))
        if i >= 0:
            raise self._fail(
                int(rows[i]),
                f"deliveryTimestamp {col[i].as_py()} is more than 1 day ahead (RocketMQ's longest delay)",
            )
        return us
