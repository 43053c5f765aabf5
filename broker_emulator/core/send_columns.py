"""The messages of one send request, field by field: what every protocol front end hands the broker core,
and how the core turns them into stored columns without per-message Python objects where it can."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketmq_protocol.hashing import java_string_hash
from rocketmq_protocol.message_schema import DELAY, FIFO, MESSAGE_SCHEMA, NORMAL

from .store.records import Column, MessageColumns, repeated


@dataclass
class SendColumns:
    """The messages of one SendMessageRequest field by field: lists in message order.

    A column is None when no message sets the field (every message has the proto default); an optional
    field's list holds None for the messages that leave it unset. Timestamps are epoch milliseconds.
    """

    n: int
    topics_match: bool  # True: every message certainly names message #0's topic (False: compare one by one)
    # body and message_id: lists, or Arrow arrays (binary, string) when a front end read them in bulk
    body: list[bytes] | pa.Array
    body_size: list[int]
    message_id: list[str] | pa.Array
    tag: list[str | None] | None
    keys: list[list[str]] | None
    properties: list[list[tuple[str, str]]] | None
    born_timestamp: list[int] | None
    born_host: list[str] | None
    message_group: list[str | None] | None
    delivery_timestamp: list[int | None] | None
    message_type: list[int] | None
    compressed: list[bool] | None  # bodies compressed (gzip or zlib) by the sender
    queue_id: list[int] | None
    # Properties a protocol carries besides the user's (RocketMQ's reserved names such as a remoting
    # producer's PGROUP or a send-back's RETRY_TOPIC): stored with the user properties, never checked
    # against the user-property rules. None when no message has any.
    system_properties: list[list[tuple[str, str]]] | None = None


def value_at(values: list | pa.Array, i: int) -> Any:
    """Item i of a column that is a list or an Arrow array."""
    return values[i].as_py() if isinstance(values, pa.Array) else values[i]


def all_present(message_ids: list[str] | pa.Array) -> bool:
    """Whether no message id is blank (empty or only whitespace)."""
    if isinstance(message_ids, pa.Array):
        if _none_blank(message_ids):
            return True
        shortest = pc.min(pc.binary_length(pc.utf8_trim_whitespace(message_ids))).as_py()
        return shortest is not None and shortest > 0
    return all(map(str.strip, message_ids))


def _none_blank(ids: pa.Array) -> bool:
    """True when no id can be blank: none is null or empty, and each starts with a printable ASCII byte
    (whitespace is ASCII <= 0x20 or non-ASCII). False only means "check properly"."""
    n = len(ids)
    if ids.null_count or not n or not pa.types.is_string(ids.type):
        return False
    offsets = np.frombuffer(ids.buffers()[1], np.int32)[ids.offset : ids.offset + n + 1]
    if (offsets[1:] <= offsets[:-1]).any():
        return False
    first = np.frombuffer(ids.buffers()[2], np.uint8)[offsets[:-1]]
    return bool(((first > 0x20) & (first < 0x7F)).all())


def _all(values: list, value: Any) -> bool:
    """Whether every item of `values` equals `value` (equality, no hashing: cheap on fresh str objects)."""
    return values.count(value) == len(values)


def message_types(cols: SendColumns) -> list[int] | None:
    """Each message's type (as sent, else FIFO with a group, DELAY with a delivery time, NORMAL); None when
    all are NORMAL by default."""
    types = cols.message_type
    if cols.message_group is None and cols.delivery_timestamp is None:
        if types is None or 0 not in types:
            return types
        return [t or NORMAL for t in types]
    n = cols.n
    return [
        t or (FIFO if g is not None else DELAY if w is not None else NORMAL)
        for t, g, w in zip(
            types or repeat(0, n),
            cols.message_group or repeat(None, n),
            cols.delivery_timestamp or repeat(None, n),
            strict=True,
        )
    ]


_WIRE_TYPES = {f.name: f.type for f in MESSAGE_SCHEMA}


def _column(values: list | None, n: int, type_: pa.DataType, default: Any) -> Column:
    """A stored column: a value shared by every row without per-row work, else the list itself."""
    if values is None:
        return repeated(default, n, type_)
    if _all(values, values[0]):
        return repeated(values[0], n, type_)
    return values


def _binary_array(data: bytes, sizes: list[int], type_: pa.DataType) -> pa.Array:
    """A binary/string array over `data` (the values back to back) without copying it."""
    n = len(sizes)
    if _all(sizes, sizes[0]):
        offsets = np.arange(n + 1, dtype=np.int32) * np.int32(sizes[0])
    else:
        offsets = np.zeros(n + 1, np.int32)
        np.cumsum(sizes, out=offsets[1:])
    return pa.Array.from_buffers(type_, n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _string_array(values: list[str] | pa.Array) -> pa.Array:
    """pa.array(values, pa.string()), built from one joined buffer when every value is ASCII."""
    if isinstance(values, pa.Array):
        return values
    joined = "".join(values)
    if not joined.isascii():
        return pa.array(values, pa.string())
    return _binary_array(joined.encode("ascii"), list(map(len, values)), pa.string())


def _stored_properties(cols: SendColumns) -> list[list[tuple[str, str]]] | None:
    """User properties followed by the system properties the sender carried."""
    extra = cols.system_properties
    if extra is None:
        return cols.properties
    user = cols.properties or [[]] * cols.n
    if _all(user, user[0]) and _all(extra, extra[0]):  # one producer's batch: one list, shared
        return [(user[0] or []) + (extra[0] or [])] * cols.n
    return [(u or []) + (x or []) for u, x in zip(user, extra, strict=True)]


def message_columns(
    cols: SendColumns, bodies: list[bytes] | pa.Array, types: list[int] | None, now_ms: int
) -> MessageColumns:
    """The stored columns of a validated request's messages .

    `bodies` are the messages' decoded bodies; shared values cost nothing per row, and the message id
    and body columns are views of one joined buffer each (one exact allocation, no Arrow builder).
    """
    n = cols.n
    tags = cols.tag
    if tags is None:
        tag_code = np.zeros(n, np.int32)
    elif _all(tags, tags[0]):
        tag_code = np.full(n, java_string_hash(tags[0]) if tags[0] else 0, np.int32)
    else:
        codes = {t: java_string_hash(t) if t else 0 for t in set(tags)}
        tag_code = np.fromiter((codes[t] for t in tags), np.int32, n)
    delivery = cols.delivery_timestamp  # kept as sent, past or future (held_rows parks the future ones)
    sizes = cols.body_size if bodies is cols.body else list(map(len, bodies))
    typ = _WIRE_TYPES.__getitem__
    return MessageColumns(
        message_id=_string_array(cols.message_id),
        tag=_column(tags, n, typ("tag"), None),
        keys=_column(cols.keys, n, typ("keys"), []),
        body=bodies if isinstance(bodies, pa.Array) else _binary_array(b"".join(bodies), sizes, typ("body")),
        properties=_column(_stored_properties(cols), n, typ("properties"), []),
        born_timestamp=_column(cols.born_timestamp, n, typ("born_timestamp"), 0),
        born_host=_column(cols.born_host, n, typ("born_host"), ""),
        reconsume_times=repeated(0, n, typ("reconsume_times")),
        message_group=_column(cols.message_group, n, typ("message_group"), None),
        delivery_timestamp=_column(delivery, n, typ("delivery_timestamp"), None),
        message_type=_column(types, n, typ("message_type"), NORMAL),
        tag_code=tag_code,
    )
