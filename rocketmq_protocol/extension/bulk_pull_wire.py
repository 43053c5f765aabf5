"""BulkPullResponse written and read by hand around its Arrow IPC payload: the payload (megabytes) is written
once into the serialized response and read where it lies, without the copies protobuf makes on each side."""

from __future__ import annotations

from typing import NamedTuple

import pyarrow as pa

from ..message_schema import ipc_parts, write_ipc
from ..protobuf_wire import field_spans, read_varint, varint

# BulkPullResponse's fields (emulator_v1.proto) by number; protobuf wire types VARINT and LEN.
_CODE, _MESSAGE, _NEXT, _MIN, _MAX, _COUNT, _IPC = range(1, 8)
_VARINT, _LEN = 0, 2
_INT32 = (_CODE, _COUNT)
_INTS = {_CODE: "code", _NEXT: "next_offset", _MIN: "min_offset", _MAX: "max_offset", _COUNT: "count"}


class BulkPullReply(NamedTuple):
    """A BulkPullResponse's fields; `arrow_ipc` is a view into the received bytes (empty when absent)."""

    code: int
    message: str
    next_offset: int
    min_offset: int
    max_offset: int
    count: int
    arrow_ipc: memoryview


def _len_field(number: int, size: int) -> bytes:
    return varint(number << 3 | _LEN) + varint(size)


def encode_response(
    code: int,
    message: str,
    next_offset: int,
    min_offset: int,
    max_offset: int,
    count: int,
    rows: pa.Table | None,
    *,
    copy: bool = True,
) -> bytes | list[bytes | memoryview]:
    """The serialized BulkPullResponse, byte for byte what protobuf writes for the same fields (fields in
    number order, defaults left out), with `rows` as its Arrow IPC payload. As bytes (what gRPC takes; the
    payload written once, in place), or with `copy=False` as pieces whose concatenation it is, the rows'
    buffers among them as views of their own memory (what a socket takes, without a copy of the megabytes)."""
    head = bytearray()
    if code:
        head += varint(_CODE << 3 | _VARINT) + varint(code)
    if message:
        text = message.encode()
        head += _len_field(_MESSAGE, len(text)) + text
    for number, value in ((_NEXT, next_offset), (_MIN, min_offset), (_MAX, max_offset), (_COUNT, count)):
        if value:
            head += varint(number << 3 | _VARINT) + varint(value)
    if rows is None:
        return bytes(head)
    if not copy:
        parts = ipc_parts(rows)
        head += _len_field(_IPC, sum(p.nbytes for p in parts))
        return [bytes(head), *parts]
    size = write_ipc(rows, pa.MockOutputStream())
    head += _len_field(_IPC, size)
    buf = pa.allocate_buffer(len(head) + size)
    sink = pa.FixedSizeBufferWriter(buf)
    sink.write(head)
    write_ipc(rows, sink)
    return buf.to_pybytes()


def _signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def decode_response(raw: bytes) -> BulkPullReply:
    """A serialized BulkPullResponse read without copying its payload (of a repeated field the last one wins,
    as in protobuf; unknown fields are skipped); ValueError when the bytes are not a well-formed message."""
    view = memoryview(raw)
    ints = dict.fromkeys(_INTS.values(), 0)
    message, ipc = "", view[:0]
    for f in field_spans(view, 0, len(view)):
        name = _INTS.get(f.number)
        if name is not None and f.wire_type == _VARINT:
            value, _ = read_varint(view, f.start, f.end)
            ints[name] = _signed(value, 32 if f.number in _INT32 else 64)
        elif f.number == _MESSAGE and f.wire_type == _LEN:
            message = str(view[f.start : f.end], "utf-8")
        elif f.number == _IPC and f.wire_type == _LEN:
            ipc = view[f.start : f.end]
    return BulkPullReply(message=message, arrow_ipc=ipc, **ints)
