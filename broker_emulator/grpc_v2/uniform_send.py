"""SendMessageRequests whose messages share one layout, read as columns of a 2-D byte array instead of parsed
message by message: a batching producer (this project's writer among them) sends messages that differ only
in their message id and body bytes, every other field written the same way in each."""

from __future__ import annotations

from dataclasses import fields, replace

import numpy as np
import pyarrow as pa

from rocketmq_protocol.grpc_v2 import definition_pb2 as d
from rocketmq_protocol.grpc_v2 import service_pb2 as s
from rocketmq_protocol.protobuf_wire import FieldSpan, field_spans, read_varint

from ..core.send_columns import SendColumns
from .messages import send_columns

_LEN = 2  # the length-delimited wire type
_MESSAGES = s.SendMessageRequest.DESCRIPTOR.fields_by_name["messages"].number
_MESSAGES_KEY = _MESSAGES << 3 | _LEN
_SYSTEM = d.Message.DESCRIPTOR.fields_by_name["system_properties"].number
_BODY = d.Message.DESCRIPTOR.fields_by_name["body"].number
_MESSAGE_ID = d.SystemProperties.DESCRIPTOR.fields_by_name["message_id"].number
_MIN_MESSAGES = 2


def _single(spans: list[FieldSpan], number: int) -> FieldSpan | None:
    """The one length-delimited field `number` of `spans`; None when it is absent, repeated or not LEN."""
    found = [f for f in spans if f.number == number]
    if len(found) != 1 or found[0].wire_type != _LEN:
        return None
    return found[0]


def _varying_columns(raw: bytes) -> tuple[int, int, FieldSpan, FieldSpan] | None:
    """(messages, bytes per message, message id span, body span) when `raw` is at least two messages of
    equal size, spans relative to a message's first byte; None otherwise."""
    size = len(raw)
    if size < 2 or raw[0] != _MESSAGES_KEY:
        return None
    try:
        length, start = read_varint(raw, 1, size)
        width = start + length
        if size % width or size // width < _MIN_MESSAGES:
            return None
        spans = field_spans(raw, start, width)
        body, system = _single(spans, _BODY), _single(spans, _SYSTEM)
        if body is None or system is None:
            return None
        ident = _single(field_spans(raw, system.start, system.end), _MESSAGE_ID)
    except ValueError:
        return None
    if ident is None:
        return None
    return size // width, width, ident, body


def _same_elsewhere(rows: np.ndarray, holes: list[tuple[int, int]]) -> bool:
    """Whether all rows equal the first outside the column ranges `holes` (sorted, disjoint)."""
    n, width = rows.shape
    lo = 0
    for start, end in [*holes, (width, width)]:
        if start > lo:
            first = rows[0, lo:start].tobytes()
            if rows[:, lo:start].tobytes() != first * n:
                return False
        lo = end
    return True


def _column(rows: np.ndarray, span: FieldSpan, type_: pa.DataType) -> pa.Array:
    """Each row's bytes in `span` as an Arrow binary/string array over one contiguous buffer."""
    n, width = len(rows), span.end - span.start
    data = pa.py_buffer(np.ascontiguousarray(rows[:, span.start : span.end]))
    offsets = pa.py_buffer(np.arange(n + 1, dtype=np.int32) * np.int32(width))
    return pa.Array.from_buffers(type_, n, [None, offsets, data])


def uniform_send(raw: bytes) -> tuple[s.SendMessageRequest, SendColumns] | None:
    """(a request holding the first message, the columns of all) for a serialized SendMessageRequest whose
    n >= 2 messages have one size and differ at most in the bytes of their message id and body; None for any
    other request (the caller parses it in full).

    Every other byte being the same, every other field has message #0's value in each message, so message
    #0's columns (read as `send_columns` reads any request) are repeated n times. Message ids must be ASCII
    here: a proto3 string must be UTF-8, and ASCII needs no check beyond the bytes' range.
    """
    found = _varying_columns(raw)
    if found is None:
        return None
    n, width, ident, body = found
    rows = np.frombuffer(raw, np.uint8).reshape(n, width)
    holes = sorted([(ident.start, ident.end), (body.start, body.end)])
    if holes[0][1] > holes[1][0] or not _same_elsewhere(rows, holes):
        return None
    if ident.end > ident.start and rows[:, ident.start : ident.end].max() >= 0x80:
        return None
    first_raw = raw[:width]
    first = s.SendMessageRequest.FromString(first_raw)
    one = send_columns(first, first_raw)
    repeated = {
        f.name: getattr(one, f.name) * n for f in fields(one) if isinstance(getattr(one, f.name), list)
    }
    repeated.update(
        n=n,
        topics_match=True,
        body=_column(rows, body, pa.binary()),
        message_id=_column(rows, ident, pa.string()),
    )
    return first, replace(one, **repeated)
