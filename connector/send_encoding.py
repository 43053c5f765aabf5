"""Protobuf wire encoding of `apache.rocketmq.v2.SendMessageRequest`, written by hand for the writer's hot path.

Building a `definition_pb2.Message` per row costs ~5 µs in Python; the writer instead builds each message's
bytes from column-wise fragments (see `sink_rows`) and joins a request's messages with one `bytes.join`.
The output parses as the generated classes do (`tests/test_writer_encoding.py` checks it field by field).

Layout of one message (field numbers of rocketmq-apis `definition.proto`)::

    Message      = 0x0A len Resource(topic) | 0x12 len MapEntry(user property)* |
                   0x1A len SystemProperties | 0x22 len body
    SystemProps  = tag(1) keys(2)* message_id(3) body_encoding(5) message_type(6) born_timestamp(7)
                   born_host(8) delivery_timestamp(11) message_group(17) queue_id(13)

`queue_id` is written last, always (also 0: proto3 parsers accept a default value on the wire), so only the
lengths in front depend on the queue chosen at send time, and only when its id needs more than one byte.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = [
    "QUEUE_ID_KEY",
    "encode_request",
    "field_bytes",
    "field_varint",
    "message_headers",
    "queue_id_field",
    "resource_bytes",
    "timestamp_bytes",
    "varint",
    "varint_size",
]

_U64 = (1 << 64) - 1
QUEUE_ID_KEY = b"\x68"  # SystemProperties.queue_id: field 13, varint
_SYSTEM_PROPERTIES_KEY = b"\x1a"  # Message.system_properties: field 3, length-delimited
_MESSAGE_KEY = b"\x0a"  # SendMessageRequest.messages: field 1, length-delimited
_TABLE_SIZE = 1 << 14


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


def field_varint(key: bytes, value: int) -> bytes:
    """A varint field."""
    return key + varint(value)


def timestamp_bytes(ms_or_us: int, unit: str = "ms") -> bytes:
    """A `google.protobuf.Timestamp` message body from epoch milliseconds (`unit="ms"`) or microseconds."""
    per_s = 1000 if unit == "ms" else 1_000_000
    seconds, frac = divmod(ms_or_us, per_s)
    nanos = frac * (1_000_000_000 // per_s)
    out = b""
    if seconds:
        out += b"\x08" + varint(seconds)
    if nanos:
        out += b"\x10" + varint(nanos)
    return out


def resource_bytes(name: str, namespace: str = "") -> bytes:
    """`Message.topic` as a complete field (key, length, `Resource{resource_namespace, name}`)."""
    body = (field_bytes(b"\x0a", namespace.encode()) if namespace else b"") + field_bytes(
        b"\x12", name.encode()
    )
    return field_bytes(b"\x0a", body)


def queue_id_field(queue_id: int) -> bytes:
    """`SystemProperties.queue_id`, always present (see the module docstring)."""
    return QUEUE_ID_KEY + varint(queue_id)


_MESSAGE_HEADERS: tuple[bytes, ...] = tuple(_MESSAGE_KEY + v for v in _VARINTS)


def message_headers(
    topic_field: bytes, core_sizes: np.ndarray, tail_sizes: np.ndarray, queue_field_size: int
) -> tuple[list[bytes], bytes | list[bytes], np.ndarray]:
    """Per message: its key and length (`0x0A len`), its SystemProperties length varint (one shared value when
    all are equal), and its encoded size. `core_sizes` are the SystemProperties sizes without queue_id,
    `tail_sizes` the sizes of what follows the queue_id field (user properties and the body field)."""
    sp = core_sizes.astype(np.int64) + queue_field_size
    first = int(sp[0]) if len(sp) else 0
    uniform = bool(len(sp)) and bool((sp == first).all())
    if uniform:
        sp_headers: bytes | list[bytes] = varint(first)
        sp_varint = np.full(len(sp), len(sp_headers), np.int64)
    else:
        sp_headers = [varint(x) for x in sp.tolist()]
        sp_varint = np.fromiter(map(len, sp_headers), np.int64, len(sp))
    total = len(topic_field) + 1 + sp_varint + sp + tail_sizes
    table, size = _MESSAGE_HEADERS, _TABLE_SIZE
    headers = [table[x] if x < size else _MESSAGE_KEY + _varint_slow(x) for x in total.tolist()]
    sizes = total + np.fromiter(map(len, headers), np.int64, len(headers))
    return headers, sp_headers, sizes


def encode_request(
    topic_field: bytes,
    headers: Sequence[bytes],
    sp_headers: bytes | Sequence[bytes],
    cores: Sequence[bytes],
    queue_field: bytes,
    tails: Sequence[bytes],
    bodies: Sequence[bytes],
) -> bytes:
    """A serialized SendMessageRequest; message i is `headers[i] topic_field 0x1A sp_headers[i] cores[i]
    queue_field tails[i] bodies[i]`, all joined at once."""
    n = len(cores)
    if isinstance(sp_headers, bytes):
        parts: list[bytes] = [b""] * (6 * n)
        parts[0::6] = headers
        parts[1::6] = [topic_field + _SYSTEM_PROPERTIES_KEY + sp_headers] * n
        parts[2::6] = cores
        parts[3::6] = [queue_field] * n
        parts[4::6] = tails
        parts[5::6] = bodies
    else:
        parts = [b""] * (7 * n)
        parts[0::7] = headers
        parts[1::7] = [topic_field + _SYSTEM_PROPERTIES_KEY] * n
        parts[2::7] = sp_headers
        parts[3::7] = cores
        parts[4::7] = [queue_field] * n
        parts[5::7] = tails
        parts[6::7] = bodies
    return b"".join(parts)
