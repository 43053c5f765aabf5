"""Conversions between v2 protobuf messages and the broker core's columns: a SendMessageRequest read column by
column, stored rows as v2 Messages, and the SendMessageResponse built without one object per message."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

from rocketmq_protocol.arrow_values import byte_lengths
from rocketmq_protocol.grpc_v2 import definition_pb2 as d
from rocketmq_protocol.grpc_v2 import service_pb2 as s
from rocketmq_protocol.limits import RESERVED_PROPERTY_KEYS
from rocketmq_protocol.protobuf_wire import varint
from rocketmq_protocol.send_rules import proxy_record_sizes

from ..core.send_columns import SendColumns, _all

# The official Python client writes milliseconds into Timestamp.seconds; such values are taken as ms.
_SECONDS_LOOK_LIKE_MS = 100_000_000_000


def timestamp_ms(ts) -> int:
    """google.protobuf.Timestamp → epoch milliseconds (accepting the seconds-holds-ms client quirk)."""
    if ts.seconds > _SECONDS_LOOK_LIKE_MS:
        return int(ts.seconds)
    return int(ts.seconds) * 1000 + int(ts.nanos) // 1_000_000


def set_timestamp(ts, ms: int) -> None:
    ts.seconds = ms // 1000
    ts.nanos = (ms % 1000) * 1_000_000


def wrap_namespace(resource) -> str:
    """The stored name of a v2 Resource: `namespace%name` when a namespace is given (RocketMQ NamespaceUtil)."""
    ns = resource.resource_namespace
    return f"{ns}%{resource.name}" if ns else resource.name


def resource_of(stored_name: str, namespace: str = "") -> d.Resource:
    if namespace and stored_name.startswith(namespace + "%"):
        return d.Resource(resource_namespace=namespace, name=stored_name[len(namespace) + 1 :])
    return d.Resource(name=stored_name)


def table_to_messages(
    table: pa.Table, topic: str, namespace: str, broker_name: str, queue_id: int, store_host: str
) -> list[d.Message]:
    """Stored rows → v2 Messages as the proxy builds them (digest, IDENTITY encoding, attempt = reconsume+1)."""
    out = []
    topic_res = resource_of(topic, namespace)
    ts_cols = ("born_timestamp", "store_timestamp", "delivery_timestamp")
    cols = {
        name: (pc.cast(table.column(name), pa.int64()) if name in ts_cols else table.column(name)).to_pylist()
        for name in table.column_names
    }
    for i in range(table.num_rows):
        body = cols["body"][i]
        m = d.Message(topic=topic_res, body=body)
        props = cols["properties"][i]
        if props:
            # System properties a remoting producer or a send-back stored (PGROUP, RETRY_TOPIC, ...) are not
            # user properties: the proxy leaves MessageConst.STRING_HASH_SET names out (GrpcConverter).
            m.user_properties.update({k: v for k, v in props if k not in RESERVED_PROPERTY_KEYS})
        sp = m.system_properties
        tag = cols["tag"][i]
        if tag is not None:
            sp.tag = tag
        keys = cols["keys"][i]
        if keys:
            sp.keys.extend(keys)
        sp.message_id = cols["message_id"][i]
        sp.body_digest.type = d.MD5
        sp.body_digest.checksum = hashlib.md5(body).hexdigest().upper()
        sp.body_encoding = d.IDENTITY
        sp.message_type = cols["message_type"][i] or d.NORMAL
        set_timestamp(sp.born_timestamp, cols["born_timestamp"][i])
        sp.born_host = cols["born_host"][i] or ""
        set_timestamp(sp.store_timestamp, cols["store_timestamp"][i])
        sp.store_host = store_host
        if cols["delivery_timestamp"][i] is not None:
            set_timestamp(sp.delivery_timestamp, cols["delivery_timestamp"][i])
        sp.queue_id = queue_id
        sp.queue_offset = cols["queue_offset"][i]
        sp.delivery_attempt = (cols["reconsume_times"][i] or 0) + 1
        group = cols["message_group"][i]
        if group is not None:
            sp.message_group = group
        out.append(m)
    return out


# ------------------------------------------------------------------ SendMessage, column by column
# Fields of Message / SystemProperties that `send_columns` reads in bulk.
_FLAT_MESSAGE_FIELDS = ("user_properties", "body")
_FLAT_SYSTEM_FIELDS = (
    "tag",
    "keys",
    "message_id",
    "body_encoding",
    "message_type",
    "born_host",
    "delivery_timestamp",
    "queue_id",
    "message_group",
)


def _flat_classes() -> tuple[type, type]:
    """Message classes reading a serialized SendMessageRequest column by column: (request, resource).

    It has the wire layout of SendMessageRequest → Message → {Resource topic, SystemProperties →
    Timestamp born_timestamp} with two twists: the nested message fields are singular, so the parser merges
    all messages (and their topics, system properties and born timestamps) into one, and the leaf fields are
    repeated, so merging appends their values. One C-level parse thus yields, per field, the values of every
    message in message order. delivery_timestamp stays a serialized Timestamp per message (its presence
    matters) and a user property a serialized map entry. Field numbers come from the real descriptors.
    """
    fdp = descriptor_pb2.FieldDescriptorProto
    leaf_types = {
        fdp.TYPE_STRING: fdp.TYPE_STRING,
        fdp.TYPE_ENUM: fdp.TYPE_INT32,
        fdp.TYPE_INT32: fdp.TYPE_INT32,
        fdp.TYPE_INT64: fdp.TYPE_INT64,
    }
    file = descriptor_pb2.FileDescriptorProto(
        name="broker_emulator/flat_send.proto", package="broker_emulator.flat", syntax="proto3"
    )

    def add(name: str, real: Any, leaves: tuple[str, ...], nested: dict[str, str]) -> None:
        msg = file.message_type.add(name=name)
        for fname in leaves:
            f = real.fields_by_name[fname]
            msg.field.add(
                name=fname,
                number=f.number,
                label=fdp.LABEL_REPEATED,
                type=leaf_types.get(f.type, fdp.TYPE_BYTES),
            )
        for fname, type_name in nested.items():
            f = real.fields_by_name[fname]
            msg.field.add(
                name=fname,
                number=f.number,
                label=fdp.LABEL_OPTIONAL,
                type=fdp.TYPE_MESSAGE,
                type_name=f".broker_emulator.flat.{type_name}",
            )

    add("Resource", d.Resource.DESCRIPTOR, ("resource_namespace", "name"), {})
    add("Timestamp", timestamp_pb2.Timestamp.DESCRIPTOR, ("seconds", "nanos"), {})
    add(
        "SystemProperties",
        d.SystemProperties.DESCRIPTOR,
        _FLAT_SYSTEM_FIELDS,
        {"born_timestamp": "Timestamp"},
    )
    add(
        "Message",
        d.Message.DESCRIPTOR,
        _FLAT_MESSAGE_FIELDS,
        {"topic": "Resource", "system_properties": "SystemProperties"},
    )
    add("Request", s.SendMessageRequest.DESCRIPTOR, (), {"messages": "Message"})
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    request, resource = (
        message_factory.GetMessageClass(pool.FindMessageTypeByName(f"broker_emulator.flat.{name}"))
        for name in ("Request", "Resource")
    )
    return request, resource


_FlatRequest, _FlatResource = _flat_classes()


def _topics_match(merged: Any, first: Any, n: int) -> bool:
    """Whether each of the n topics merged in `merged` (a _FlatResource) is `first`.

    Compares serializations (n copies of each of first's set fields, in field order) before, if they
    differ, the values themselves.
    """
    ns, name = first.resource_namespace, first.name
    expected = _FlatResource(resource_namespace=[ns] if ns else []).SerializeToString() * n
    expected += _FlatResource(name=[name] if name else []).SerializeToString() * n
    if merged.SerializeToString() == expected:
        return True
    names, namespaces = merged.name[:], merged.resource_namespace[:]
    if len(names) != n or not _all(names, name):
        return False
    return len(namespaces) == n and _all(namespaces, ns) if ns else not namespaces


def _timestamps_ms(serialized: list[bytes]) -> list[int]:
    """Serialized Timestamps → epoch ms, each distinct value decoded once."""
    ms = {raw: timestamp_ms(timestamp_pb2.Timestamp.FromString(raw)) for raw in set(serialized)}
    return [ms[raw] for raw in serialized]


def _born_ms(seconds: list[int], nanos: list[int], n: int) -> list[int] | None:
    """`timestamp_ms` of n timestamps whose non-zero seconds and nanos are all given (or none of them)."""
    if not seconds and not nanos:
        return None
    if (not seconds or _all(seconds, seconds[0])) and (not nanos or _all(nanos, nanos[0])):
        ts = timestamp_pb2.Timestamp(seconds=seconds[0] if seconds else 0, nanos=nanos[0] if nanos else 0)
        return [timestamp_ms(ts)] * n
    secs = np.array(seconds, np.int64) if seconds else np.zeros(n, np.int64)
    ms = secs * 1000 + (np.array(nanos, np.int64) // 1_000_000 if nanos else 0)
    return np.where(secs > _SECONDS_LOOK_LIKE_MS, secs, ms).tolist()


def _compressed(encodings: list[int] | None) -> list[bool] | None:
    if encodings is None or d.GZIP not in encodings:
        return None
    return [e == d.GZIP for e in encodings]


def _aligned(flat: Any, n: int) -> bool:
    """Whether every leaf column of a flat parse has 0 or n values (each message set it once or none did)."""
    fsp = flat.system_properties
    counts = [len(getattr(flat, f)) for f in _FLAT_MESSAGE_FIELDS if f != "user_properties"]
    counts += [len(getattr(fsp, f)) for f in _FLAT_SYSTEM_FIELDS if f != "keys"]
    counts += [len(fsp.born_timestamp.seconds), len(fsp.born_timestamp.nanos)]
    return all(c in (0, n) for c in counts)


def send_columns(request, raw: bytes | None = None) -> SendColumns:
    """Reads a (non-empty) SendMessageRequest column-wise.

    The request is parsed once more as `_FlatRequest`, from its canonical serialization (each set field once
    per message, proto3 defaults omitted, optional fields exactly when set). So a field with n values is set
    by every message, one with none by no message; only a field set by some messages is read message by
    message. `raw`, the request's bytes as received, spares the re-serialization when its flat parse has 0 or
    n values in every column: a default value written on the wire reads as the same value either way (a
    list of defaults rather than None, which the core treats alike). A field written twice in one message,
    which no protobuf encoder does, would shift that column's values unless another column's count betrays
    it; the re-serialized form is used whenever a count does.
    """
    msgs = request.messages
    n = len(msgs)
    flat = None
    if raw is not None:
        flat = _FlatRequest.FromString(raw).messages
        if not _aligned(flat, n):
            flat = None
    if flat is None:
        flat = _FlatRequest.FromString(request.SerializeToString()).messages
    fsp = flat.system_properties
    sps: list = []

    def each(get: Callable[[Any], Any]) -> list:
        if not sps:
            sps.extend(m.system_properties for m in msgs)
        return [get(sp) for sp in sps]

    def column(values: Any, get: Callable[[Any], Any]) -> list | None:
        k = len(values)
        return values[:] if k == n else None if k == 0 else each(get)

    body = flat.body[:] if len(flat.body) == n else [m.body for m in msgs]
    message_id = fsp.message_id[:] if len(fsp.message_id) == n else each(lambda sp: sp.message_id)
    properties = None
    if flat.user_properties:
        properties = [list(m.user_properties.items()) for m in msgs]
    keys = each(lambda sp: list(sp.keys)) if fsp.keys else None
    seconds, nanos = fsp.born_timestamp.seconds[:], fsp.born_timestamp.nanos[:]
    if len(seconds) in (0, n) and len(nanos) in (0, n):
        born = _born_ms(seconds, nanos, n)
    else:
        born = each(lambda sp: timestamp_ms(sp.born_timestamp))
    delivery: list[int | None] | None = None
    if len(fsp.delivery_timestamp) == n:
        delivery = _timestamps_ms(fsp.delivery_timestamp[:])  # type: ignore[assignment]
    elif fsp.delivery_timestamp:
        delivery = each(
            lambda sp: timestamp_ms(sp.delivery_timestamp) if sp.HasField("delivery_timestamp") else None
        )
    return SendColumns(
        n=n,
        topics_match=_topics_match(flat.topic, msgs[0].topic, n),
        body=body,
        body_size=list(map(len, body)),
        message_id=message_id,
        tag=column(fsp.tag, lambda sp: sp.tag if sp.HasField("tag") else None),
        keys=keys,
        properties=properties,
        born_timestamp=born,
        born_host=column(fsp.born_host, lambda sp: sp.born_host),
        message_group=column(
            fsp.message_group, lambda sp: sp.message_group if sp.HasField("message_group") else None
        ),
        delivery_timestamp=delivery,
        message_type=column(fsp.message_type, lambda sp: sp.message_type),
        compressed=_compressed(column(fsp.body_encoding, lambda sp: sp.body_encoding)),
        queue_id=column(fsp.queue_id, lambda sp: sp.queue_id),
    )


# SendMessageResponse(status=OK) and SendResultEntry(status=OK) serialized: both are field 1 = Status OK.
_OK_STATUS_FIELD = s.SendResultEntry(status=d.Status(code=d.OK, message="OK")).SerializeToString()
_ENTRY_PREFIX = _OK_STATUS_FIELD + b"\x12"  # ... then SendResultEntry.message_id: field 2, length-delimited
_ENTRIES_TAG = 0x12  # SendMessageResponse.entries: field 2, length-delimited
_OFFSET_TAG = 0x20  # SendResultEntry.offset: field 4, varint
_VARINT_LIMITS = np.array([1 << (7 * k) for k in range(1, 10)], dtype=np.uint64)


def _varint_sizes(values: np.ndarray) -> np.ndarray:
    """Bytes of each (non-negative) value as a protobuf varint."""
    return np.searchsorted(_VARINT_LIMITS, values.astype(np.uint64), side="right") + 1


def _put_varints(out: np.ndarray, pos: np.ndarray, values: np.ndarray, sizes: np.ndarray) -> None:
    """Writes values[i] as a varint of sizes[i] bytes at out[pos[i]:]."""
    values = values.astype(np.uint64)
    for k in range(int(sizes.max())):
        sel = sizes > k
        low7 = (values[sel] >> np.uint64(7 * k)) & np.uint64(0x7F)
        more = (sizes[sel] > k + 1).astype(np.uint64) << np.uint64(7)
        out[pos[sel] + k] = low7 | more


def send_response_bytes(message_ids: pa.StringArray, offsets: np.ndarray) -> bytes:
    """Serialized SendMessageResponse(status=OK, entries=[SendResultEntry(status=OK, message_id, offset)]).

    Built with NumPy rather than one protobuf object per message: as rows of one 2-D array when all ids
    have one length and all offsets one varint size (the usual case), else entry by entry. Offset 0 is
    written explicitly (a protobuf encoder would omit it); parsers read both the same.
    """
    n = len(message_ids)
    id_ends = np.frombuffer(message_ids.buffers()[1], np.int32, n + 1, message_ids.offset * 4).astype(
        np.int64
    )
    id_data = np.frombuffer(message_ids.buffers()[2], np.uint8)[id_ends[0] : id_ends[-1]]
    offsets = np.asarray(offsets, dtype=np.int64)
    id_len = np.diff(id_ends)
    size = len(varint(int(offsets.max())))
    if id_len.min() == id_len.max() and len(varint(int(offsets.min()))) == size:
        return _OK_STATUS_FIELD + _uniform_entries(id_data, int(id_len[0]), offsets, size)
    return _OK_STATUS_FIELD + _entries(id_data, id_ends, offsets)


def _uniform_entries(id_data: np.ndarray, id_len: int, offsets: np.ndarray, offset_size: int) -> bytes:
    """Entries whose ids have `id_len` bytes and offsets `offset_size` varint bytes: rows of one array."""
    head = varint(id_len)
    head = (
        bytes([_ENTRIES_TAG])
        + varint(len(_ENTRY_PREFIX) + len(head) + id_len + 1 + offset_size)
        + _ENTRY_PREFIX
        + head
    )
    width = len(head) + id_len + 1 + offset_size
    rows = np.empty((len(offsets), width), np.uint8)
    rows[:, : len(head)] = np.frombuffer(head, np.uint8)
    rows[:, len(head) : len(head) + id_len] = id_data.reshape(len(offsets), id_len)
    col = len(head) + id_len
    rows[:, col] = _OFFSET_TAG
    for k in range(offset_size):
        low7 = (offsets >> (7 * k)) & 0x7F
        rows[:, col + 1 + k] = low7 | 0x80 if k < offset_size - 1 else low7
    return rows.tobytes()


def _entries(id_data: np.ndarray, id_ends: np.ndarray, offsets: np.ndarray) -> bytes:
    """Entries of any id lengths and offsets."""
    n = len(offsets)
    id_len = np.diff(id_ends)
    id_len_size, offset_size = _varint_sizes(id_len), _varint_sizes(offsets)
    prefix = np.frombuffer(_ENTRY_PREFIX, np.uint8)
    entry_len = len(prefix) + id_len_size + id_len + 1 + offset_size
    entry_len_size = _varint_sizes(entry_len)
    total = 1 + entry_len_size + entry_len
    starts = np.zeros(n, np.int64)
    np.cumsum(total[:-1], out=starts[1:])
    out = np.empty(int(total.sum()), np.uint8)
    out[starts] = _ENTRIES_TAG
    pos = starts + 1
    _put_varints(out, pos, entry_len, entry_len_size)
    pos += entry_len_size
    out[pos[:, None] + np.arange(len(prefix))] = prefix
    pos += len(prefix)
    _put_varints(out, pos, id_len, id_len_size)
    pos += id_len_size
    out[np.repeat(pos - (id_ends[:-1] - id_ends[0]), id_len) + np.arange(len(id_data))] = id_data
    pos += id_len
    out[pos] = _OFFSET_TAG
    _put_varints(out, pos + 1, offsets, offset_size)
    return out.tobytes()


# ------------------------------------------------------------------ first-request costs, paid at start
_warmed = False


def warm_up() -> None:
    """Runs one SendMessage's work (column parse, checks, store append, response) on a scratch in-memory
    cluster, once per process: the lazy imports and first-call costs it pays (pyarrow importing pandas on its
    first conversion of Python values, ~0.3 s of CPU) move from a client's first send, whose deadline they
    ate into, to the emulator's start."""
    global _warmed
    if _warmed:
        return
    from ..core.cluster import Cluster, ClusterConfig
    from ..core.sending import send

    cluster = Cluster(ClusterConfig(brokers=1, default_queues=1))
    cluster.create_topic("warm-up", 1)
    msg = d.Message(topic=d.Resource(name="warm-up"), body=b"x")
    msg.system_properties.message_id = "0" * 32
    msg.system_properties.born_host = "127.0.0.1"
    set_timestamp(msg.system_properties.born_timestamp, 1)
    raw = s.SendMessageRequest(messages=[msg]).SerializeToString()
    cols = send_columns(s.SendMessageRequest.FromString(raw), raw)
    result, _ = send(cluster, cluster.brokers[0], "warm-up", cols, explicit_queue=False, producer="warm-up")
    send_response_bytes(result.message_ids, result.offsets)
    _warmed = True


def _byte_lengths(values: list | pa.Array) -> np.ndarray:
    """UTF-8 byte length of each str/bytes of a column given as a list or an Arrow array (0 for None)."""
    if isinstance(values, pa.Array):
        return byte_lengths(values)
    return np.fromiter(
        (len(v.encode() if isinstance(v, str) else v or b"") for v in values), np.int64, len(values)
    )


def proxy_batch_bytes(cols: SendColumns, stored_topic: str, peer_host: str) -> int:
    """The body of the remoting batch a RocketMQ proxy forwards to its broker for this request's messages
    (`rocketmq_protocol.send_rules.proxy_record_sizes`), which the broker checks against its limit."""
    n = cols.n
    keys = user = group = delivery = None
    if cols.keys is not None:
        keys = np.fromiter((len(" ".join(k).encode()) if k else -1 for k in cols.keys), np.int64, n)
    if cols.properties is not None:
        user = np.fromiter(
            (sum(len(k.encode()) + len(v.encode()) + 2 for k, v in p) for p in cols.properties), np.int64, n
        )
    if cols.message_group is not None:
        group = np.fromiter((-1 if g is None else len(g.encode()) for g in cols.message_group), np.int64, n)
    if cols.delivery_timestamp is not None:
        delivery = np.fromiter((t is not None for t in cols.delivery_timestamp), bool, n)
    sizes = proxy_record_sizes(
        _byte_lengths(cols.body) if isinstance(cols.body, pa.Array) else np.asarray(cols.body_size, np.int64),
        _byte_lengths(cols.message_id),
        stored_topic,
        len(peer_host.encode()),
        tag=None if cols.tag is None else _byte_lengths(cols.tag),
        keys=keys,
        user=user,
        group=group,
        delivery=delivery,
    )
    return int(sizes.sum())
