"""Rows of the sink's Arrow batches → checked, encoded v2 messages (the writer's per-row work).

Each check runs column-wise with pyarrow compute; the first failing row raises `SinkInputError` naming
the row (0-based, in the order Spark feeds the task) and its problem. Encoding builds the wire fragments of
every message (see `send_encoding`) with one comprehension per column; the queue is not known yet, so
each message is kept as `head` (up to its queue_id field), `tail` (user properties + body key) and `body`.
"""

from __future__ import annotations

import itertools
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketmq_protocol.limits import (
    MAX_DELAY_MS,
    MAX_MESSAGE_GROUP_BYTES,
    MAX_PROPERTIES_BYTES,
    MAX_USER_PROPERTIES,
    RESERVED_PROPERTY_KEYS,
)
from rocketmq_protocol.names import NAME_CHARACTERS, TOPIC_MAX_LENGTH, is_name

from .errors import SinkInputError
from .send_encoding import message_headers, resource_bytes, timestamp_bytes, varint
from .sink_schema import BODY, DELIVERY_TIMESTAMP, KEYS, MESSAGE_GROUP, PROPERTIES, TAGS, TOPIC

__all__ = ["QUEUE_FIELD_SIZE", "EncodedRows", "RowEncoder"]

#: Size of the queue_id field every head is computed for (key + 1-byte varint: queue ids 0..127).
QUEUE_FIELD_SIZE = 2
_CONTROL = r"[\x00-\x1f\x7f-\x9f]"
_CONTROL_RE = re.compile(_CONTROL)
_RESERVED = pa.array(sorted(RESERVED_PROPERTY_KEYS), pa.string())

# v2 enum numbers (definition.proto): Encoding.IDENTITY, MessageType.NORMAL / FIFO / DELAY.
_IDENTITY, _NORMAL, _FIFO, _DELAY = 1, 1, 2, 3
_TYPE_FIELD = {t: b"\x30" + varint(t) for t in (_NORMAL, _FIFO, _DELAY)}
_TABLE = 1 << 14
_BODY_KEYS = tuple(b"\x22" + varint(i) for i in range(_TABLE))  # Message.body: field 4


@dataclass
class EncodedRows:
    """One topic's messages of a batch, as the fragments `send_encoding.encode_request` joins.

    `rows[i]` is message i's row number in the task's input; `headers`, `sp_headers` and `sizes` are for a
    queue_id field of QUEUE_FIELD_SIZE bytes (queue ids 0..127); `groups` is None when no row has a group.
    """

    topic: str
    topic_field: bytes
    rows: np.ndarray
    cores: list[bytes]  # SystemProperties without queue_id
    tails: list[bytes]  # user property fields + the body's key and length
    bodies: list[bytes]
    core_sizes: np.ndarray
    tail_sizes: np.ndarray  # tails + bodies
    headers: list[bytes]
    sp_headers: bytes | list[bytes]
    sizes: np.ndarray  # encoded size of each message in the request
    groups: list[str | None] | None = None

    def __len__(self) -> int:
        return len(self.bodies)


def _fields(key: bytes, values: Sequence[bytes | None]) -> list[bytes]:
    """A length-delimited field per value (b"" for None)."""
    return [b"" if v is None else key + varint(len(v)) + v for v in values]


def _first(mask: pa.Array | pa.ChunkedArray) -> int:
    """Index of the first true value of a boolean array (nulls count as false), or -1."""
    return pc.index(pc.fill_null(mask, False), True).as_py()


def _sliced(values: pa.Array, offsets: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """The flat values of a (possibly sliced) list/map array and its offsets rebased to start at 0."""
    off = offsets.to_numpy(zero_copy_only=False).astype(np.int64)
    return values.slice(int(off[0]), int(off[-1] - off[0])), off - off[0]


def _row_of(flat_index: int, offsets: np.ndarray) -> int:
    return int(np.searchsorted(offsets, flat_index, side="right") - 1)


def _to_binary(arr: pa.Array) -> pa.Array:
    t = arr.type
    if pa.types.is_large_string(t) or pa.types.is_large_binary(t):
        return arr.cast(pa.large_binary())
    return arr.cast(pa.binary())


def _local_host() -> str:
    import socket

    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


class RowEncoder:
    """Checks and encodes the rows of one task; message ids are `<16 random hex><16 hex counter>`."""

    def __init__(
        self,
        layout: dict[str, str],
        topic_option: str | None,
        namespace: str,
        max_message_size: int,
        label: str = "the task",
        born_host: str | None = None,
        clock_ms: Any = None,
    ) -> None:
        self.layout = layout
        self.topic_option = topic_option
        self.namespace = namespace
        self.max_message_size = max_message_size
        self.label = label
        self.born_host = born_host or _local_host()
        self._clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self._id_prefix = os.urandom(8).hex().upper().encode()
        self._seq = 0
        self._topic_fields: dict[str, bytes] = {}

    # ------------------------------------------------------------------ errors
    def _fail(self, row: int, problem: str) -> SinkInputError:
        return SinkInputError(f"rocketmq sink: bad row {row} (0-based) of {self.label}: {problem}")

    def _col(self, batch: pa.RecordBatch, name: str) -> pa.Array | None:
        actual = self.layout.get(name)
        i = -1 if actual is None else batch.schema.get_field_index(actual)
        return None if i < 0 else batch.column(i)

    # ------------------------------------------------------------------ entry point
    def encode(self, batch: pa.RecordBatch, row_base: int) -> list[EncodedRows]:
        """The batch's messages, one `EncodedRows` per topic; `row_base` is the batch's first row number."""
        n = batch.num_rows
        rows = np.arange(row_base, row_base + n, dtype=np.int64)
        if n == 0:
            return []
        if self.topic_option is not None:
            return [self._encode(batch, rows, self.topic_option)]
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
            return [self._encode(batch, rows, distinct[0])]
        out = []
        for t in distinct:
            idx = pc.indices_nonzero(pc.equal(topics, t))
            out.append(self._encode(batch.take(idx), rows[idx.to_numpy()], t))
        return out

    # ------------------------------------------------------------------ one topic
    def _encode(self, batch: pa.RecordBatch, rows: np.ndarray, topic: str) -> EncodedRows:
        n = batch.num_rows
        bodies, body_sizes = self._bodies(batch, rows)
        tags = self._tags(batch, rows)
        keys, key_chars = self._keys(batch, rows)
        props, prop_chars = self._properties(batch, rows)
        groups, group_f = self._groups(batch, rows)
        delivery_f = self._delivery(batch, rows, groups)
        if props is not None:
            self._check_property_size(batch, rows, prop_chars, key_chars)

        hex_ids = np.arange(self._seq, self._seq + n, dtype=">u8").tobytes().hex().upper().encode()
        ids = [hex_ids[i : i + 16] for i in range(0, 16 * n, 16)]
        self._seq += n
        id_key = b"\x1a\x20" + self._id_prefix
        born = b"\x3a" + varint(len(ts := timestamp_bytes(self._clock_ms()))) + ts
        fixed = b"\x28" + varint(_IDENTITY)
        host = b"\x42" + varint(len(h := self.born_host.encode())) + h
        if groups is None and delivery_f is None:
            types: list[bytes] | bytes = _TYPE_FIELD[_NORMAL]
        else:
            types = [
                _TYPE_FIELD[_FIFO if g is not None else _DELAY if d else _NORMAL]
                for g, d in zip(
                    groups or itertools.repeat(None, n), delivery_f or itertools.repeat(b"", n), strict=True
                )
            ]
        cores = _concat(n, [tags, keys, id_key, ids, fixed, types, born, host, delivery_f, group_f])
        if props is None:
            tails = [_BODY_KEYS[s] if s < _TABLE else b"\x22" + varint(s) for s in body_sizes.tolist()]
        else:
            tails = [p + b"\x22" + varint(s) for p, s in zip(props, body_sizes.tolist(), strict=True)]
        core_sizes = np.fromiter(map(len, cores), np.int64, n)
        tail_sizes = np.fromiter(map(len, tails), np.int64, n) + body_sizes
        topic_field = self._topic_field(topic)
        headers, sp_headers, sizes = message_headers(topic_field, core_sizes, tail_sizes, QUEUE_FIELD_SIZE)
        return EncodedRows(
            topic,
            topic_field,
            rows,
            cores,
            tails,
            bodies,
            core_sizes,
            tail_sizes,
            headers,
            sp_headers,
            sizes,
            groups,
        )

    def _topic_field(self, topic: str) -> bytes:
        f = self._topic_fields.get(topic)
        if f is None:
            f = self._topic_fields[topic] = resource_bytes(topic, self.namespace)
        return f

    # ------------------------------------------------------------------ columns
    def _bodies(self, batch: pa.RecordBatch, rows: np.ndarray) -> tuple[list[bytes], np.ndarray]:
        col = self._col(batch, BODY)
        assert col is not None
        if col.null_count:
            raise self._fail(
                int(rows[_first(pc.is_null(col))]), "body is null (column 'body' is required, non-null)"
            )
        col = _to_binary(col)
        sizes = pc.binary_length(col).to_numpy(zero_copy_only=False)
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
        return col.to_pylist(), sizes.astype(np.int64)

    def _check_strings(
        self, values: pa.Array, rows_of: Any, what: str, *, allow_pipe: bool = True, max_bytes: int = 0
    ) -> None:
        """Blank values, control characters, '|' (tags) and byte length (message groups)."""
        bad = pc.or_(
            pc.equal(pc.utf8_trim_whitespace(values), ""), pc.match_substring_regex(values, _CONTROL)
        )
        if not allow_pipe:
            bad = pc.or_(bad, pc.match_substring(values, "|"))
        if max_bytes:
            bad = pc.or_(bad, pc.greater_equal(pc.binary_length(values), max_bytes))
        i = _first(bad)
        if i < 0:
            return
        v = values[i].as_py()
        if not v.strip():
            problem = "is blank"
        elif _CONTROL_RE.search(v):
            problem = "contains control characters"
        elif not allow_pipe and "|" in v:
            problem = "contains '|' (RocketMQ separates tags with '||' in subscriptions)"
        else:
            problem = f"is {len(v.encode())} bytes long (the limit is {max_bytes - 1})"
        raise self._fail(rows_of(i), f"{what} {v!r} {problem}")

    def _tags(self, batch: pa.RecordBatch, rows: np.ndarray) -> list[bytes] | None:
        col = self._col(batch, TAGS)
        if col is None or col.null_count == len(col):
            return None
        self._check_strings(col, lambda i: int(rows[i]), "tag", allow_pipe=False)
        return _fields(b"\x0a", _to_binary(col).to_pylist())

    def _keys(self, batch: pa.RecordBatch, rows: np.ndarray) -> tuple[list[bytes] | None, np.ndarray | None]:
        """Key fields per row and the keys' length in characters per row (for the property-size check)."""
        col = self._col(batch, KEYS)
        if col is None or col.null_count == len(col):
            return None, None
        if not (pa.types.is_list(col.type) or pa.types.is_large_list(col.type)):
            self._check_strings(col, lambda i: int(rows[i]), "key")
            chars = pc.fill_null(pc.utf8_length(col), 0).to_numpy(zero_copy_only=False)
            return _fields(b"\x12", _to_binary(col).to_pylist()), chars
        flat, off = _sliced(col.values, col.offsets)
        if flat.null_count:
            k = _first(pc.is_null(flat))
            row = _row_of(k, off)
            raise self._fail(int(rows[row]), f"keys[{k - off[row]}] is null")
        self._check_strings(flat, lambda k: int(rows[_row_of(k, off)]), "key")
        kf = _fields(b"\x12", _to_binary(flat).to_pylist())
        chars = np.concatenate([[0], np.cumsum(pc.utf8_length(flat).to_numpy(zero_copy_only=False))])
        out = [b"".join(kf[a:b]) if b > a else b"" for a, b in itertools.pairwise(off.tolist())]
        return out, chars[off[1:]] - chars[off[:-1]]

    def _properties(
        self, batch: pa.RecordBatch, rows: np.ndarray
    ) -> tuple[list[bytes] | None, np.ndarray | None]:
        """User property fields per row and, per row, (entries, characters)."""
        col = self._col(batch, PROPERTIES)
        if col is None or col.null_count == len(col):
            return None, None
        keys, off = _sliced(col.keys, col.offsets)
        items, _ = _sliced(col.items, col.offsets)
        if items.null_count:
            k = _first(pc.is_null(items))
            raise self._fail(int(rows[_row_of(k, off)]), f"property {keys[k].as_py()!r} has a null value")
        bad_key = pc.or_(
            pc.or_(pc.equal(keys, ""), pc.is_in(keys, value_set=_RESERVED)),
            pc.match_substring_regex(keys, _CONTROL),
        )
        k = _first(bad_key)
        if k >= 0:
            name = keys[k].as_py()
            why = (
                "is empty"
                if not name
                else "is a reserved system property"
                if name in RESERVED_PROPERTY_KEYS
                else "contains control characters"
            )
            raise self._fail(int(rows[_row_of(k, off)]), f"property name {name!r} {why}")
        k = _first(pc.match_substring_regex(items, _CONTROL))
        if k >= 0:
            raise self._fail(
                int(rows[_row_of(k, off)]),
                f"property {keys[k].as_py()!r} has a value with control characters",
            )
        kb, vb = _to_binary(keys).to_pylist(), _to_binary(items).to_pylist()
        entries = [
            b"\x12" + varint(len(e)) + e
            for e in (
                b"\x0a" + varint(len(a)) + a + b"\x12" + varint(len(b)) + b
                for a, b in zip(kb, vb, strict=True)
            )
        ]
        lengths = pc.add(pc.utf8_length(keys), pc.utf8_length(items)).to_numpy(zero_copy_only=False)
        chars = np.concatenate([[0], np.cumsum(lengths)])
        counts = np.diff(off)
        if counts.size and counts.max() > MAX_USER_PROPERTIES:
            i = int(np.argmax(counts > MAX_USER_PROPERTIES))
            raise self._fail(
                int(rows[i]), f"{int(counts[i])} properties exceed the limit of {MAX_USER_PROPERTIES}"
            )
        out = [b"".join(entries[a:b]) if b > a else b"" for a, b in itertools.pairwise(off.tolist())]
        return out, chars[off[1:]] - chars[off[:-1]]

    def _check_property_size(
        self,
        batch: pa.RecordBatch,
        rows: np.ndarray,
        prop_chars: np.ndarray | None,
        key_chars: np.ndarray | None,
    ) -> None:
        """The proxy's limit: user properties + tag + keys of a message with properties ≤ 16 KiB."""
        assert prop_chars is not None
        total = prop_chars.astype(np.int64)
        tags = self._col(batch, TAGS)
        if tags is not None:
            total = total + pc.fill_null(pc.utf8_length(tags), 0).to_numpy(zero_copy_only=False)
        if key_chars is not None:
            total = total + key_chars
        over = (prop_chars > 0) & (total > MAX_PROPERTIES_BYTES)
        if over.any():
            i = int(np.argmax(over))
            raise self._fail(
                int(rows[i]),
                f"properties, tag and keys of {int(total[i])} characters exceed the limit of "
                f"{MAX_PROPERTIES_BYTES}",
            )

    def _groups(
        self, batch: pa.RecordBatch, rows: np.ndarray
    ) -> tuple[list[str | None] | None, list[bytes] | None]:
        col = self._col(batch, MESSAGE_GROUP)
        if col is None or col.null_count == len(col):
            return None, None
        self._check_strings(col, lambda i: int(rows[i]), "messageGroup", max_bytes=MAX_MESSAGE_GROUP_BYTES)
        return col.to_pylist(), [
            b"" if g is None else b"\x8a\x01" + varint(len(g)) + g for g in _to_binary(col).to_pylist()
        ]

    def _delivery(
        self, batch: pa.RecordBatch, rows: np.ndarray, groups: list[str | None] | None
    ) -> list[bytes] | None:
        col = self._col(batch, DELIVERY_TIMESTAMP)
        if col is None or col.null_count == len(col):
            return None
        us = pc.cast(col, pa.timestamp("us", tz=col.type.tz), safe=False).cast(pa.int64())
        if groups is not None:
            both = pc.and_(pc.is_valid(us), pc.is_valid(self._col(batch, MESSAGE_GROUP)))
            i = _first(both)
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
        return [
            b"" if v is None else b"\x5a" + varint(len(t := timestamp_bytes(v, "us"))) + t
            for v in us.to_pylist()
        ]


def _concat(n: int, parts: list[bytes | list[bytes] | None]) -> list[bytes]:
    """Per row, the concatenation of `parts`: each a per-row list, a constant or None (absent)."""
    merged: list[bytes | list[bytes]] = []
    for p in parts:
        if p is None:
            continue
        if isinstance(p, bytes) and merged and isinstance(merged[-1], bytes):
            merged[-1] = merged[-1] + p
        else:
            merged.append(p)
    varying = [p for p in merged if not isinstance(p, bytes)]
    if len(varying) == 1:
        k = merged.index(varying[0])
        prefix = b"".join(merged[:k])  # type: ignore[arg-type]
        suffix = b"".join(merged[k + 1 :])  # type: ignore[arg-type]
        return [prefix + v + suffix for v in varying[0]]
    columns = [p if not isinstance(p, bytes) else itertools.repeat(p, n) for p in merged]
    return [b"".join(t) for t in zip(*columns, strict=False)]
