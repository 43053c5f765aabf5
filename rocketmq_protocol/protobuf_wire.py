"""Protocol Buffers wire primitives both sides of the v2 protocol build or read messages with by hand: varints,
length-delimited fields, and the field spans of one serialized message."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["FieldSpan", "field_bytes", "field_spans", "read_varint", "varint", "varint_size"]

_U64 = (1 << 64) - 1
_TABLE_SIZE = 1 << 14
# Wire types: VARINT, I64, LEN, SGROUP, EGROUP, I32.
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


def _varint_slow(value: int) -> bytes:
    value &= _U64  # negative int32/int64 values take 10 bytes (two's complement), as protobuf writes them
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_VARINTS: tuple[bytes, ...] = tuple(_varint_slow(i) for i in range(_TABLE_SIZE))


def varint(value: int) -> bytes:
    """Base-128 varint of an int (negative numbers as 64-bit two's complement)."""
    return _VARINTS[value] if 0 <= value < _TABLE_SIZE else _varint_slow(value)


def varint_size(value: int) -> int:
    """Bytes `varint(value)` takes."""
    if value < 0:
        return 10
    return 1 if value < 0x80 else 2 if value < 0x4000 else (value.bit_length() + 6) // 7


def field_bytes(key: bytes, data: bytes) -> bytes:
    """A length-delimited field: key, varint length, data."""
    return key + varint(len(data)) + data


def read_varint(buf: bytes | memoryview, pos: int, end: int) -> tuple[int, int]:
    """The varint at buf[pos:] (at most 10 bytes, before `end`) and the position after it; ValueError if
    it is cut off or too long."""
    value = shift = 0
    while pos < end and shift < 70:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
    raise ValueError("truncated or overlong varint")


class FieldSpan(NamedTuple):
    """One field of a serialized message: its number, wire type and where its value lies (for VARINT, I64
    and I32 the value's bytes, for LEN the bytes after the length)."""

    number: int
    wire_type: int
    start: int
    end: int


def field_spans(buf: bytes | memoryview, start: int, end: int) -> list[FieldSpan]:
    """The fields of the message serialized at buf[start:end], in wire order; ValueError when the bytes are
    not a well-formed message (groups, which proto3 has none of, count as malformed)."""
    spans = []
    pos = start
    while pos < end:
        key, pos = read_varint(buf, pos, end)
        number, wire_type = key >> 3, key & 7
        if number == 0:
            raise ValueError("field number 0")
        if wire_type == _VARINT:
            value_start = pos
            _, pos = read_varint(buf, pos, end)
        elif wire_type == _LEN:
            size, value_start = read_varint(buf, pos, end)
            pos = value_start + size
        elif wire_type in (_I64, _I32):
            value_start = pos
            pos += 8 if wire_type == _I64 else 4
        else:
            raise ValueError(f"wire type {wire_type}")
        if pos > end:
            raise ValueError("field runs past the message")
        spans.append(FieldSpan(number, wire_type, value_start, pos))
    return spans
