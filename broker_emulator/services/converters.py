"""Conversions between v2 protobuf messages and the stored column layout."""

from __future__ import annotations

import gzip
import hashlib
import zlib

import pyarrow as pa
import pyarrow.compute as pc
from rocketmq.grpc_protocol import definition_pb2 as d

from ..hashing import java_string_hash
from ..store.records import MessageColumns

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


def decode_body(body: bytes, encoding: int) -> bytes:
    if encoding == d.GZIP:
        if body[:2] == b"\x1f\x8b":
            return gzip.decompress(body)
        return zlib.decompress(body)
    return body


def derive_message_type(sp) -> int:
    if sp.message_type:
        return sp.message_type
    if sp.HasField("message_group"):
        return d.FIFO
    if sp.HasField("delivery_timestamp"):
        return d.DELAY
    return d.NORMAL


def add_message(
    cols: MessageColumns, m, sp, body: bytes, delivery_ms: int | None, reconsume_times: int = 0
) -> None:
    """Appends one validated v2 message to the columns of its queue."""
    tag = sp.tag if sp.HasField("tag") else None
    cols.append(
        message_id=sp.message_id,
        tag=tag,
        keys=list(sp.keys),
        body=body,
        properties=list(m.user_properties.items()),
        born_timestamp=timestamp_ms(sp.born_timestamp),
        born_host=sp.born_host,
        reconsume_times=reconsume_times,
        message_group=sp.message_group if sp.HasField("message_group") else None,
        delivery_timestamp=delivery_ms,
        message_type=derive_message_type(sp),
        tag_code=java_string_hash(tag) if tag else 0,
    )


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
            m.user_properties.update(dict(props))
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
