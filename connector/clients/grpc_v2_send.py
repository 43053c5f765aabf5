"""The gRPC client's send encoding: checked rows → serialized `apache.rocketmq.v2.SendMessageRequest`s,
written by hand for the writer's hot path.

Building a `definition_pb2.Message` per row costs ~5 µs in Python; `GrpcSendEncoder` instead builds each
message's bytes from column-wise fragments (one comprehension per column of `connector.sink_rows.CheckedRows`)
and `GrpcEncodedRows.payload` joins a request's messages with one `bytes.join`. The output parses as the
generated classes do (`tests/test_writer_encoding.py` checks it field by field).

Layout of one message (field numbers of rocketmq-apis `definition.proto`)::

    Message      = 0x0A len Resource(topic) | 0x12 len MapEntry(user property)* |
                   0x1A len SystemProperties | 0x22 len body
    SystemProps  = tag(1) keys(2)* message_id(3) body_encoding(5) message_type(6) born_timestamp(7)
                   born_host(8) delivery_timestamp(11) message_group(17) queue_id(13)

The queue is chosen at send time, so each message is kept as `core` (SystemProperties up to its queue_id
field), `tail` (user properties + the body's key and length) and `body`. `queue_id` is written last,
always (also 0: proto3 parsers accept a default value on the wire), so only the lengths in front depend
on the queue, and only when its id needs more than one byte.
"""

from __future__ import annotations

import itertools
import os
import socket
from collections.abc import Sequence
from functools import cached_property

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketmq_protocol.arrow_values import binary_scalar, byte_lengths, fixed_width_rows
from rocketmq_protocol.names import wrap_namespace
from rocketmq_protocol.protobuf_wire import field_bytes, varint, varint_size
from rocketmq_protocol.send_rules import BORN_HOST_RESERVED, proxy_record_sizes

from ..queues import MessageQueue
from ..sink_rows import CheckedRows, as_binary, list_values
from .base import EncodedRows, SendEncoder

__all__ = [
    "QUEUE_FIELD_SIZE",
    "QUEUE_ID_KEY",
    "GrpcEncodedRows",
    "GrpcSendEncoder",
    "PlainEncodedRows",
    "encode_request",
    "field_bytes",
    "message_headers",
    "proxy_batch_sizes",
    "queue_id_field",
    "resource_bytes",
    "timestamp_bytes",
    "varint",
    "varint_size",
]

QUEUE_ID_KEY = b"\x68"  # SystemProperties.queue_id: field 13, varint
#: Size of the queue_id field every message header is computed for (key + 1-byte varint: queue ids 0..127).
QUEUE_FIELD_SIZE = 2
_SYSTEM_PROPERTIES_KEY = b"\x1a"  # Message.system_properties: field 3, length-delimited
_MESSAGE_KEY = b"\x0a"  # SendMessageRequest.messages: field 1, length-delimited
_TABLE_SIZE = 1 << 14


# ------------------------------------------------------------------------------------------ wire primitives
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


_MESSAGE_HEADERS: tuple[bytes, ...] = tuple(_MESSAGE_KEY + varint(i) for i in range(_TABLE_SIZE))


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
    headers = [table[x] if x < size else _MESSAGE_KEY + varint(x) for x in total.tolist()]
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


# ------------------------------------------------------------------------------------------ proxy batches
def _list_bytes(values: pa.Array, offsets: np.ndarray, per_item: int) -> np.ndarray:
    """Per row of a list column (values flattened, `offsets` n+1): the bytes of its items + `per_item` each."""
    sizes = byte_lengths(values) + per_item
    cum = np.zeros(len(sizes) + 1, np.int64)
    np.cumsum(sizes, out=cum[1:])
    return cum[offsets[1:]] - cum[offsets[:-1]]


def _valid(col: pa.Array) -> np.ndarray:
    return col.is_valid().to_numpy(zero_copy_only=False)


def proxy_batch_sizes(rows: CheckedRows, stored_topic: str) -> np.ndarray:
    """Each message's record in the remoting batch a RocketMQ proxy forwards for the v2 request
    (`rocketmq_protocol.send_rules.proxy_record_sizes`; the born host at its longest), which the broker
    checks against its maxMessageSize: `batchBytes` counts a message at this size where it is larger."""
    keys = user = group = None
    if rows.keys is not None:
        if pa.types.is_list(rows.keys.type) or pa.types.is_large_list(rows.keys.type):
            flat, off = list_values(rows.keys.values, rows.keys.offsets)
            keys = _list_bytes(flat, off, 1) - 1  # joined by single spaces; -1: no key
        else:
            keys = np.where(_valid(rows.keys), byte_lengths(rows.keys), -1)
    if rows.properties is not None:
        names, off = list_values(rows.properties.keys, rows.properties.offsets)
        values, _ = list_values(rows.properties.items, rows.properties.offsets)
        user = _list_bytes(names, off, 1) + _list_bytes(values, off, 1)
    if rows.groups is not None:
        group = np.where(_valid(rows.groups), byte_lengths(rows.groups), -1)
    return proxy_record_sizes(
        rows.body_sizes,
        32,  # the encoder's message ids
        stored_topic,
        BORN_HOST_RESERVED,
        tag=None if rows.tags is None else byte_lengths(rows.tags),
        keys=keys,
        user=user,
        group=group,
        delivery=None if rows.delivery_us is None else _valid(rows.delivery_us),
    )


# ------------------------------------------------------------------------------------------ messages
# v2 enum numbers (definition.proto): Encoding.IDENTITY, MessageType.NORMAL / FIFO / DELAY.
_IDENTITY, _NORMAL, _FIFO, _DELAY = 1, 1, 2, 3
_TYPE_FIELD = {t: b"\x30" + varint(t) for t in (_NORMAL, _FIFO, _DELAY)}
_BODY_KEYS = tuple(b"\x22" + varint(i) for i in range(_TABLE_SIZE))  # Message.body: field 4
_FIXED = b"\x28" + varint(_IDENTITY)  # SystemProperties.body_encoding


def _born_field(born_ms: int) -> bytes:
    """SystemProperties.born_timestamp as a complete field."""
    ts = timestamp_bytes(born_ms)
    return b"\x3a" + varint(len(ts)) + ts


def _fields(key: bytes, values: Sequence[bytes | None]) -> list[bytes]:
    """A length-delimited field per value (b"" for None)."""
    return [b"" if v is None else key + varint(len(v)) + v for v in values]


def _pick(values: list[bytes], idx: slice | list[int]) -> list[bytes]:
    return values[idx] if isinstance(idx, slice) else [values[k] for k in idx]


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


def _local_host() -> str:
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


class GrpcEncodedRows(EncodedRows):
    """One topic's messages as the fragments `encode_request` joins. `headers`, `sp_headers` and `sizes`
    are for a queue_id field of QUEUE_FIELD_SIZE bytes (queue ids 0..127); other queue ids re-derive them."""

    def __init__(
        self,
        checked: CheckedRows,
        topic_field: bytes,
        cores: list[bytes],
        tails: list[bytes],
        bodies: list[bytes],
        core_sizes: np.ndarray,
        tail_sizes: np.ndarray,
        headers: list[bytes],
        sp_headers: bytes | list[bytes],
        sizes: np.ndarray,
        batch_sizes: np.ndarray | None = None,
    ) -> None:
        super().__init__(checked, sizes, batch_sizes)
        self.topic_field = topic_field
        self.cores = cores  # SystemProperties without queue_id
        self.tails = tails  # user property fields + the body's key and length
        self.bodies = bodies
        self.core_sizes = core_sizes
        self.tail_sizes = tail_sizes  # tails + bodies
        self.headers = headers
        self.sp_headers = sp_headers

    def payload(self, idx: slice | list[int], queue: MessageQueue) -> bytes:
        qf = queue_id_field(queue.queue_id)
        if len(qf) == QUEUE_FIELD_SIZE:
            headers, sp_headers = _pick(self.headers, idx), self.sp_headers
            if not isinstance(sp_headers, bytes):
                sp_headers = _pick(sp_headers, idx)
        else:
            headers, sp_headers, _ = message_headers(
                self.topic_field, self.core_sizes[idx], self.tail_sizes[idx], len(qf)
            )
        return encode_request(
            self.topic_field,
            headers,
            sp_headers,
            _pick(self.cores, idx),
            qf,
            _pick(self.tails, idx),
            _pick(self.bodies, idx),
        )


class GrpcSendEncoder(SendEncoder):
    """Encodes a task's checked rows as v2 messages; message ids are `<16 random hex><16 hex counter>`."""

    def __init__(self, namespace: str = "", born_host: str | None = None) -> None:
        self.namespace = namespace
        self.born_host = born_host or _local_host()
        self._id_prefix = os.urandom(8).hex().upper().encode()
        self._seq = 0
        self._topic_fields: dict[str, bytes] = {}
        self._host = field_bytes(b"\x42", self.born_host.encode())
        self._id_key = b"\x1a\x20" + self._id_prefix  # SystemProperties.message_id: 32 characters

    def _topic_field(self, topic: str) -> bytes:
        f = self._topic_fields.get(topic)
        if f is None:
            f = self._topic_fields[topic] = resource_bytes(topic, self.namespace)
        return f

    def _ids(self, n: int) -> bytes:
        """The next `n` message-id counters as 16 upper-case hex digits each, concatenated."""
        hex_ids = np.arange(self._seq, self._seq + n, dtype=">u8").tobytes().hex().upper().encode()
        self._seq += n
        return hex_ids

    def encode(self, rows: CheckedRows) -> EncodedRows:
        hex_ids = self._ids(len(rows))
        if _plain(rows):
            return PlainEncodedRows(self, rows, hex_ids)
        return self.fragments(rows, hex_ids)

    def fragments(self, rows: CheckedRows, hex_ids: bytes) -> GrpcEncodedRows:
        """The rows as the per-message fragments `encode_request` joins (any columns), with the message-id
        counters `hex_ids` (16 hex digits per message)."""
        n = len(rows)
        bodies = rows.bodies.to_pylist()
        body_sizes = rows.body_sizes
        tags = None if rows.tags is None else _fields(b"\x0a", as_binary(rows.tags).to_pylist())
        keys = None if rows.keys is None else _keys(rows.keys)
        props = None if rows.properties is None else _properties(rows.properties)
        groups = rows.group_list
        group_f = None
        if rows.groups is not None:
            group_f = [
                b"" if g is None else b"\x8a\x01" + varint(len(g)) + g
                for g in as_binary(rows.groups).to_pylist()
            ]
        delivery_f = None
        if rows.delivery_us is not None:
            delivery_f = [
                b"" if v is None else b"\x5a" + varint(len(t := timestamp_bytes(v, "us"))) + t
                for v in rows.delivery_us.to_pylist()
            ]

        ids = [hex_ids[i : i + 16] for i in range(0, 16 * n, 16)]
        id_key = self._id_key
        born = _born_field(rows.born_ms)
        fixed = _FIXED
        if groups is None and delivery_f is None:
            types: list[bytes] | bytes = _TYPE_FIELD[_NORMAL]
        else:
            types = [
                _TYPE_FIELD[_FIFO if g is not None else _DELAY if d else _NORMAL]
                for g, d in zip(
                    groups or itertools.repeat(None, n), delivery_f or itertools.repeat(b"", n), strict=True
                )
            ]
        cores = _concat(n, [tags, keys, id_key, ids, fixed, types, born, self._host, delivery_f, group_f])
        if props is None:
            tails = [_BODY_KEYS[s] if s < _TABLE_SIZE else b"\x22" + varint(s) for s in body_sizes.tolist()]
        else:
            tails = [p + b"\x22" + varint(s) for p, s in zip(props, body_sizes.tolist(), strict=True)]
        core_sizes = np.fromiter(map(len, cores), np.int64, n)
        tail_sizes = np.fromiter(map(len, tails), np.int64, n) + body_sizes
        topic_field = self._topic_field(rows.topic)
        headers, sp_headers, sizes = message_headers(topic_field, core_sizes, tail_sizes, QUEUE_FIELD_SIZE)
        return GrpcEncodedRows(
            rows,
            topic_field,
            cores,
            tails,
            bodies,
            core_sizes,
            tail_sizes,
            headers,
            sp_headers,
            sizes,
            np.maximum(sizes, proxy_batch_sizes(rows, wrap_namespace(rows.topic, self.namespace))),
        )


def _keys(col: pa.Array) -> list[bytes]:
    """`SystemProperties.keys` fields per row, from a string or list<string> column."""
    if not (pa.types.is_list(col.type) or pa.types.is_large_list(col.type)):
        return _fields(b"\x12", as_binary(col).to_pylist())
    flat, off = list_values(col.values, col.offsets)
    kf = _fields(b"\x12", as_binary(flat).to_pylist())
    return [b"".join(kf[a:b]) if b > a else b"" for a, b in itertools.pairwise(off.tolist())]


def _properties(col: pa.Array) -> list[bytes]:
    """`Message.user_properties` map entries per row, from a map<string, string> column."""
    keys, off = list_values(col.keys, col.offsets)
    items, _ = list_values(col.items, col.offsets)
    kb, vb = as_binary(keys).to_pylist(), as_binary(items).to_pylist()
    entries = [
        b"\x12" + varint(len(e)) + e
        for e in (
            b"\x0a" + varint(len(a)) + a + b"\x12" + varint(len(b)) + b for a, b in zip(kb, vb, strict=True)
        )
    ]
    return [b"".join(entries[a:b]) if b > a else b"" for a, b in itertools.pairwise(off.tolist())]


# ------------------------------------------------------------------------------------------ plain messages
def _plain(rows: CheckedRows) -> bool:
    """Whether every message is body-only (no tag, keys, properties, message group or delivery time): then
    its encoding differs from the others' only in its id, its body and the body's length."""
    return (
        rows.tags is None
        and rows.keys is None
        and rows.properties is None
        and rows.groups is None
        and rows.delivery_us is None
    )


_VARINT_LIMITS = np.array([1 << (7 * k) for k in range(1, 10)], np.uint64)


def _varint_sizes(values: np.ndarray) -> np.ndarray:
    """Bytes of each non-negative value's varint."""
    return np.searchsorted(_VARINT_LIMITS, values.astype(np.uint64), side="right").astype(np.int64) + 1


def _varint_array(values: np.ndarray, prefix: int | None = None) -> pa.Array:
    """A binary array holding each non-negative value's varint (after the byte `prefix`, when given)."""
    n = len(values)
    vsizes = _varint_sizes(values)
    lead = 0 if prefix is None else 1
    if n and vsizes[0] == vsizes[-1] and (vsizes == vsizes[0]).all():  # one width: rows of a 2-D array
        k = int(vsizes[0])
        rows = np.empty((n, lead + k), np.uint8)
        if prefix is not None:
            rows[:, 0] = prefix
        v = values.astype(np.uint64)
        for j in range(k):
            low7 = (v >> np.uint64(7 * j)) & np.uint64(0x7F)
            rows[:, lead + j] = low7 | np.uint64(0x80) if j < k - 1 else low7
        offsets = np.arange(0, (lead + k) * (n + 1), lead + k, dtype=np.int32)
        return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(rows)])
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(vsizes + lead, out=offsets[1:])
    data = np.empty(int(offsets[-1]), np.uint8)
    pos = offsets[:-1].astype(np.int64)
    if prefix is not None:
        data[pos] = prefix
        pos = pos + 1
    v = values.astype(np.uint64)
    for k in range(int(vsizes.max()) if n else 0):
        sel = vsizes > k
        low7 = (v[sel] >> np.uint64(7 * k)) & np.uint64(0x7F)
        data[pos[sel] + k] = (low7 | ((vsizes[sel] > k + 1).astype(np.uint64) << np.uint64(7))).astype(
            np.uint8
        )
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


class PlainEncodedRows(EncodedRows):
    """Body-only messages (`_plain`) encoded with whole-array operations: every message's bytes, queue id 0,
    in one buffer (Arrow joins the per-message pieces), so a request is a slice of it with its messages'
    queue-id bytes set (in place when the buffer is our own 2-D rows: a message's queue id is then the one
    of its latest attempt). The bytes are exactly those `GrpcEncodedRows` joins (`fragments`, built on
    demand from the same message ids, gives that view and serves queue ids above 127)."""

    def __init__(self, encoder: GrpcSendEncoder, checked: CheckedRows, hex_ids: bytes) -> None:
        n = len(checked)
        self._encoder, self._hex_ids = encoder, hex_ids
        self.topic_field = topic_field = encoder._topic_field(checked.topic)
        stored = wrap_namespace(checked.topic, encoder.namespace)
        bodies = checked.bodies
        if not pa.types.is_binary(bodies.type):
            bodies = bodies.cast(pa.binary())
        body_sizes = checked.body_sizes
        # SystemProperties: message_id key and prefix, id, body_encoding, type, born, host, queue_id.
        after_id = _FIXED + _TYPE_FIELD[_NORMAL] + _born_field(checked.born_ms) + encoder._host
        sp_size = len(encoder._id_key) + 16 + len(after_id) + QUEUE_FIELD_SIZE
        head = topic_field + _SYSTEM_PROPERTIES_KEY + varint(sp_size) + encoder._id_key
        ids = pa.Array.from_buffers(
            pa.binary(),
            n,
            [None, pa.py_buffer(np.arange(0, 16 * n + 1, 16, dtype=np.int32)), pa.py_buffer(hex_ids)],
        )
        if n and body_sizes[0] == body_sizes[-1] and (body_sizes == body_sizes[0]).all():
            self._one_size(bodies, int(body_sizes[0]), head, ids, after_id)
            sizes = np.diff(self._starts)
            super().__init__(checked, sizes, np.maximum(sizes, proxy_batch_sizes(checked, stored)))
            return
        totals = (
            len(head) + 16 + len(after_id) + QUEUE_FIELD_SIZE + 1 + _varint_sizes(body_sizes) + body_sizes
        )
        headers = _varint_array(totals, prefix=_MESSAGE_KEY[0])
        joined = pc.binary_join_element_wise(
            headers,
            binary_scalar(head),
            ids,
            binary_scalar(after_id + QUEUE_ID_KEY + b"\x00"),
            _varint_array(body_sizes, prefix=0x22),
            bodies,
            binary_scalar(b""),
        )
        self._data = np.frombuffer(joined.buffers()[2], np.uint8)
        offsets = np.frombuffer(joined.buffers()[1], np.int32, n + 1, 4 * joined.offset).astype(np.int64)
        self._starts = offsets
        header_sizes = np.diff(np.frombuffer(headers.buffers()[1], np.int32, n + 1)).astype(np.int64)
        # Position of each message's queue-id value byte.
        self._queue_pos = offsets[:-1] + header_sizes + len(head) + 16 + len(after_id) + 1
        sizes = np.diff(offsets)
        super().__init__(checked, sizes, np.maximum(sizes, proxy_batch_sizes(checked, stored)))

    def _one_size(self, bodies: pa.Array, size: int, head: bytes, ids: pa.Array, after_id: bytes) -> None:
        """The same bytes for bodies of one size: every message has one width, so they are the rows of one
        2-D array (`fixed_width_rows`) rather than Arrow's element-wise join."""
        body_field = b"\x22" + varint(size)
        total = len(head) + 16 + len(after_id) + QUEUE_FIELD_SIZE + len(body_field) + size
        tail = after_id + QUEUE_ID_KEY + b"\x00" + body_field
        rows = fixed_width_rows([_MESSAGE_KEY + varint(total) + head, ids, tail, bodies], len(bodies))
        assert rows is not None  # ids are 16 bytes each, bodies `size`
        n, width = rows.shape
        self._data = rows.reshape(-1)
        self._starts = np.arange(0, width * (n + 1), width, dtype=np.int64)
        self._queue_pos = self._starts[:-1] + (width - size - len(body_field) - 1)

    def payload(self, idx: slice | list[int], queue: MessageQueue) -> bytes:
        qid = queue.queue_id
        if not 0 <= qid < 0x80:
            return self.fragments.payload(idx, queue)
        data, starts = self._data, self._starts
        # Our own rows (`_one_size`) take the queue id in place (one copy per request); Arrow's buffer is
        # read-only, so its requests get a copy with the ids set (none needed for queue 0).
        in_place = data.flags.writeable
        if in_place:
            data[self._queue_pos[idx]] = qid
        if isinstance(idx, slice):
            a, b, _ = idx.indices(len(self))
            part = data[starts[a] : starts[b]]
            if in_place or qid == 0:
                return part.tobytes()
            part = part.copy()
            part[self._queue_pos[a:b] - starts[a]] = qid
            return part.tobytes()
        out = b"".join(data[starts[i] : starts[i + 1]].tobytes() for i in idx)
        if in_place or qid == 0:
            return out
        buf = np.frombuffer(out, np.uint8).copy()
        sizes = (starts[1:] - starts[:-1])[idx]
        at = np.zeros(len(idx), np.int64)
        np.cumsum(sizes[:-1], out=at[1:])
        buf[at + (self._queue_pos[idx] - starts[idx])] = qid
        return buf.tobytes()

    @cached_property
    def fragments(self) -> GrpcEncodedRows:
        return self._encoder.fragments(self.checked, self._hex_ids)

    def __getattr__(self, name: str) -> object:
        # headers, sp_headers, cores, tails, bodies, core_sizes, tail_sizes: the fragments' view
        if name.startswith("_") or name in ("fragments", "checked", "sizes"):
            raise AttributeError(name)
        return getattr(self.fragments, name)
