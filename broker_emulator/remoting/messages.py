"""Remoting messages ↔ the broker core: a send request's body and properties → `SendColumns`, stored rows →
the stored-message records of a pull response (apache/rocketmq `MessageDecoder`, `MessageExtEncoder`)."""

from __future__ import annotations

import re
import time
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketmq_protocol.limits import RESERVED_PROPERTY_KEYS
from rocketmq_protocol.message_schema import TRANSACTION
from rocketmq_protocol.remoting.columns import uniform_value, value_offsets
from rocketmq_protocol.remoting.flags import MessageSysFlag
from rocketmq_protocol.remoting.headers import SendMessageRequestHeader
from rocketmq_protocol.remoting.message_codec import decode_batch, encode_stored, encode_stored_records
from rocketmq_protocol.remoting.message_id import create_uniq_id
from rocketmq_protocol.remoting.properties import (
    CLUSTER,
    DELAY,
    KEYS,
    SHARDING_KEY,
    TAGS,
    TIMER_DELAY_MS,
    TIMER_DELAY_SEC,
    TIMER_DELIVER_MS,
    TRAN_MSG,
    UNIQ_KEY,
    decode_properties,
    join_pieces,
    parse_properties_column,
    property_pieces,
)

from ..core.cluster import Broker
from ..core.errors import BrokerError, ErrorKind
from ..core.retry import delay_ms
from ..core.send_columns import SendColumns, all_present
from ..core.store.records import int_values

# A single message sent without a UNIQ_KEY gets one from the broker (5.x `SendMessageProcessor`), but a
# batch's messages without one (Apache's Go client sets none: its SendResult.MsgID is then empty) are
# stored without: the core still needs an id per message, so the emulator makes one up, marked with "~"
# (client ids are hex), and pull responses leave it out; the client then takes the offset message id as
# MsgId, as against a real 5.5.0 or 4.9.7 broker (tests/real/test_real_go_client.py).
MADE_UP_ID = "~"
# What a 5.x broker adds to every message it stores (`SendMessageProcessor`: region, trace switch, cluster).
MSG_REGION, TRACE_ON = "MSG_REGION", "TRACE_ON"
# Properties that become columns of their own (or only steer the send) instead of stored properties; the
# other reserved ones (WAIT, DELAY, PGROUP, ...) are stored as the broker stores them.
_CONSUMED = frozenset(
    {TAGS, KEYS, UNIQ_KEY, SHARDING_KEY, TIMER_DELIVER_MS, TIMER_DELAY_SEC, TIMER_DELAY_MS,
     CLUSTER, MSG_REGION, TRACE_ON, "MIN_OFFSET", "MAX_OFFSET", "CONSUME_START_TIME"}
)  # fmt: skip
_IPV4_HOST = re.compile(r"[0-9]{1,3}(\.[0-9]{1,3}){3}:[0-9]{1,5}", re.ASCII)
_IPV4_ADDRESS = re.compile(r"[0-9]{1,3}(\.[0-9]{1,3}){3}", re.ASCII)


def _delivery_ms(props: dict[str, str], levels: list[int], now: int) -> int | None:
    """When a message becomes visible: a DELAY level wins over the 5.x timer properties."""
    try:
        if DELAY in props:
            wait = delay_ms(levels, int(props[DELAY]))
            return now + wait if wait > 0 else None
        if TIMER_DELIVER_MS in props:
            return int(props[TIMER_DELIVER_MS])
        if TIMER_DELAY_SEC in props:
            return now + int(props[TIMER_DELAY_SEC]) * 1000
        if TIMER_DELAY_MS in props:
            return now + int(props[TIMER_DELAY_MS])
    except ValueError as e:
        raise BrokerError(ErrorKind.MESSAGE_CORRUPTED, f"bad delay or timer property: {e}") from None
    return None


def send_columns(
    header: SendMessageRequestHeader,
    body: bytes,
    *,
    batch: bool,
    born_host: str,
    delay_levels: list[int],
) -> SendColumns:
    """The messages of a SEND_MESSAGE(_V2) or SEND_BATCH_MESSAGE request, as the core takes them.

    A batch's own (inner) properties win over the batch-level ones of header `i` (apache/rocketmq
    develop since [ISSUE #9416]; brokers up to 5.3.3 let the batch's UNIQ_KEY override every message's).
    """
    now = int(time.time() * 1000)
    outer = decode_properties(header.properties or "")
    if batch:
        rows = decode_batch(body)
        fast = _uniform_batch(header, rows, outer, born_host)
        if fast is not None:
            return fast
        bodies = rows.column("body").to_pylist()
        raw = rows.column("raw_properties").to_pylist()
        props_list = [{**outer, **decode_properties(r or "")} for r in raw]
        compressed = None
    else:
        bodies = [body]
        props_list = [outer]
        compressed = [True] if header.sys_flag & MessageSysFlag.COMPRESSED else None
    n = len(bodies)
    if not n:
        raise BrokerError(ErrorKind.MESSAGE_CORRUPTED, "the batch holds no message")
    prepared = bool(header.sys_flag & MessageSysFlag.TRANSACTION_PREPARED)
    tags: list[str | None] = []
    keys: list[list[str]] = []
    ids: list[str] = []
    groups: list[str | None] = []
    delivery: list[int | None] = []
    user: list[list[tuple[str, str]]] = []
    system: list[list[tuple[str, str]]] = []
    types: list[int] = []
    for props in props_list:
        tags.append(props.get(TAGS))
        keys.append([k for k in props.get(KEYS, "").split(" ") if k])
        ids.append(props.get(UNIQ_KEY) or (MADE_UP_ID if batch else "") + create_uniq_id())
        groups.append(props.get(SHARDING_KEY))
        delivery.append(_delivery_ms(props, delay_levels, now))
        u, s = [], []
        for k, v in props.items():
            if k in _CONSUMED:
                continue
            (s if k in RESERVED_PROPERTY_KEYS else u).append((k, v))
        user.append(u)
        system.append(s)
        types.append(TRANSACTION if prepared or props.get(TRAN_MSG) == "true" else 0)
    return SendColumns(
        n=n,
        topics_match=True,
        body=bodies,
        body_size=list(map(len, bodies)),
        message_id=ids,
        tag=tags if any(t is not None for t in tags) else None,
        keys=keys if any(keys) else None,
        properties=user if any(user) else None,
        born_timestamp=[header.born_timestamp] * n,
        born_host=[born_host] * n,
        message_group=groups if any(g is not None for g in groups) else None,
        delivery_timestamp=delivery if any(d is not None for d in delivery) else None,
        message_type=types if any(types) else None,
        compressed=compressed,
        queue_id=None,
        system_properties=system if any(system) else None,
    )


# What `_uniform_batch` reads as columns; any other property must be the same list in every message.
_BATCH_COLUMNS = (UNIQ_KEY, TAGS, KEYS, SHARDING_KEY, DELAY, TIMER_DELIVER_MS, TIMER_DELAY_SEC, TIMER_DELAY_MS,
                  TRAN_MSG)  # fmt: skip
_BATCH_HIDDEN = frozenset({UNIQ_KEY, TAGS, KEYS, SHARDING_KEY})


def _uniform_batch(
    header: SendMessageRequestHeader, rows: pa.RecordBatch, outer: dict[str, str], born_host: str
) -> SendColumns | None:
    """`send_columns` of a batch, column-wise, for the usual batch: no delay, timer or transaction property,
    batch-level properties (header `i`, e.g. WAIT) none of the column ones, and the same other properties
    in every message. The
    properties are parsed with `parse_properties_column` (the semantics of `decode_properties`: a repeated
    name's last value wins, empty names and values are skipped). None when the batch is not like that (or
    not valid UTF-8): `send_columns` then goes message by message."""
    n = rows.num_rows
    if (
        not n
        or header.sys_flag & MessageSysFlag.TRANSACTION_PREPARED
        or not outer.keys().isdisjoint(_BATCH_COLUMNS)
    ):
        return None
    try:
        parsed = parse_properties_column(rows.column("raw_properties"), _BATCH_COLUMNS, _BATCH_HIDDEN)
        v = parsed.values
        if any(v[name].null_count < n for name in (DELAY, TIMER_DELIVER_MS, TIMER_DELAY_SEC, TIMER_DELAY_MS)):
            return None
        if v[TRAN_MSG].null_count < n:
            return None
        others = parsed.others
        lengths = np.diff(np.asarray(others.offsets, dtype=np.int64))
        k = int(lengths[0])
        if (lengths != k).any():
            return None
        pairs: list[tuple[str, str]] = []
        if k:
            keys, items = others.keys, others.items
            first_keys, first_items = keys.slice(0, k).to_pylist(), items.slice(0, k).to_pylist()
            if len(set(first_keys)) != k:
                return None  # a repeated name: its position follows dict rules, left to the slow path
            tile = pa.array(np.tile(np.arange(k, dtype=np.int64), n))
            same = pc.and_(
                pc.equal(keys, keys.slice(0, k).take(tile)), pc.equal(items, items.slice(0, k).take(tile))
            )
            if not pc.all(same).as_py():
                return None
            pairs = list(zip(first_keys, first_items, strict=True))
        pairs = list({**outer, **dict(pairs)}.items())  # as each message's {**outer, **inner}
        ids = v[UNIQ_KEY]
        tags = _uniform_or_list(v[TAGS])
        keys_col = v[KEYS]
        groups_col = v[SHARDING_KEY]
    except (pa.ArrowException, UnicodeDecodeError):
        return None
    if ids.null_count or not all_present(ids):
        ids = [i or MADE_UP_ID + create_uniq_id() for i in ids.to_pylist()]  # as the message-by-message path
    keys_list = None
    if keys_col.null_count < n:
        keys_list = [[k for k in (x or "").split(" ") if k] for x in keys_col.to_pylist()]
    user = [(a, b) for a, b in pairs if a not in _CONSUMED and a not in RESERVED_PROPERTY_KEYS]
    system = [(a, b) for a, b in pairs if a not in _CONSUMED and a in RESERVED_PROPERTY_KEYS]
    bodies = rows.column("body")
    return SendColumns(
        n=n,
        topics_match=True,
        body=bodies,
        body_size=np.diff(value_offsets(bodies)).tolist(),
        message_id=ids,
        tag=tags if v[TAGS].null_count < n else None,
        keys=keys_list if keys_list is not None and any(keys_list) else None,
        properties=[user] * n if user else None,
        born_timestamp=[header.born_timestamp] * n,
        born_host=[born_host] * n,
        message_group=groups_col.to_pylist() if groups_col.null_count < n else None,
        delivery_timestamp=None,
        message_type=None,
        compressed=None,
        queue_id=None,
        system_properties=[system] * n if system else None,
    )


def _uniform_or_list(values: pa.Array) -> list:
    """A string column as a list: one value repeated (no per-row conversion) when every row holds it."""
    same = uniform_value(values)
    return values.to_pylist() if same is None else [same.decode()] * len(values)


def _prop_piece(name: str, values: pa.Array) -> pa.Array:
    """`name \\x01 value \\x02` per row ('' where the value is null or empty)."""
    values = pc.if_else(pc.equal(values, ""), pa.scalar(None, pa.string()), values)
    return pc.fill_null(pc.binary_join_element_wise(f"{name}\x01", values, "\x02", ""), "")


def property_strings(table: pa.Table, cluster_name: str) -> pa.Array:
    """The stored property string of each row (`stored_property_pieces`, joined)."""
    return join_pieces(table.num_rows, stored_property_pieces(table, cluster_name))


def stored_property_pieces(table: pa.Table, cluster_name: str) -> list[pa.Array | str]:
    """The pieces of each row's stored property string: UNIQ_KEY, CLUSTER, MSG_REGION, TRACE_ON, TAGS, KEYS,
    the stored properties, then __SHARDINGKEY and TIMER_DELIVER_MS from the message group and delivery time.
    A str piece is the same in every row."""
    n = table.num_rows

    def col(name: str) -> pa.Array:
        return table.column(name).combine_chunks()

    ids = col("message_id")
    made_up = pc.starts_with(ids, MADE_UP_ID)
    pieces: list[pa.Array | str] = []
    if pc.any(made_up).as_py():  # no UNIQ_KEY where the sender gave none (MADE_UP_ID)
        uniq = pc.if_else(made_up, pa.scalar(None, pa.string()), ids)
        pieces.append(pc.fill_null(pc.binary_join_element_wise("UNIQ_KEY\x01", uniq, "\x02", ""), ""))
        ids = None
    pieces += property_pieces(
        n,
        uniq_keys=ids,
        tags=col("tag"),
        keys=col("keys"),
        user=col("properties"),
        constant={CLUSTER: cluster_name, MSG_REGION: "DefaultRegion", TRACE_ON: "true"},
    )
    group = col("message_group")
    if group.null_count < n:
        pieces.append(_prop_piece(SHARDING_KEY, group))
    deliver = col("delivery_timestamp")
    if deliver.null_count < n:
        pieces.append(_prop_piece(TIMER_DELIVER_MS, pc.cast(deliver.cast(pa.int64()), pa.string())))
    return pieces


def stored_records(
    table: pa.Table,
    topic: str,
    queue_id: int,
    broker: Broker,
    cluster_name: str,
    commit: list[int] | np.ndarray | None = None,
) -> bytes:
    """Stored rows of one queue → the records of a pull response, column by column. `commit`: the rows'
    commit-log offsets when they are not those of (topic, queue_id) (a half message shown as its real topic)."""
    return encode_stored(**_stored_columns(table, topic, queue_id, broker, cluster_name, commit))


def stored_record_buffer(
    table: pa.Table, topic: str, queue_id: int, broker: Broker, cluster_name: str
) -> tuple[pa.Buffer, np.ndarray]:
    """`stored_records` as one buffer, and where each record starts (one more entry: the end)."""
    return encode_stored_records(**_stored_columns(table, topic, queue_id, broker, cluster_name, None))


def _normal_host(host: str | None) -> str:
    """`ip:port` as stored; a bare address (gRPC producers give "10.0.0.5") gets port 0, anything else
    (null, a host name) 127.0.0.1:0."""
    if host is None:
        return "127.0.0.1:0"
    if _IPV4_HOST.fullmatch(host):
        return host
    return f"{host}:0" if _IPV4_ADDRESS.fullmatch(host) else "127.0.0.1:0"


def _born_hosts(col: pa.ChunkedArray) -> pa.Array | str:
    """The BORNHOST of each row, normalised once per distinct value (a pull's rows mostly share one
    producer host: then one string, which the codec repeats)."""
    arr = col.combine_chunks()
    same = uniform_value(arr)
    if same is not None:
        return _normal_host(same.decode("utf-8", "replace"))
    encoded = pc.dictionary_encode(arr)
    fixed = pa.array([_normal_host(h) for h in encoded.dictionary.to_pylist()], pa.string())
    return pc.fill_null(fixed.take(encoded.indices), "127.0.0.1:0")


def store_host(broker: Broker) -> str:
    """The STOREHOST of the broker's records: its remoting address."""
    return f"{broker.host}:{broker.remoting_port}"


def _stored_columns(
    table: pa.Table,
    topic: str,
    queue_id: int,
    broker: Broker,
    cluster_name: str,
    commit: list[int] | np.ndarray | None,
) -> dict[str, Any]:
    qoff = int_values(table.column("queue_offset"))
    if commit is None:
        commit = broker.store.commit_offsets(topic, queue_id, qoff)
    born_host = _born_hosts(table.column("born_host"))
    n = table.num_rows
    sysflag = np.where(
        int_values(table.column("message_type")) == TRANSACTION,  # a null type reads 0: not a transaction
        np.int32(MessageSysFlag.TRANSACTION_COMMIT),
        np.int32(0),
    )
    return dict(
        topic=topic,
        queue_id=queue_id,
        queue_offset=qoff,
        commitlog_offset=commit,
        body=table.column("body").combine_chunks(),
        property_pieces=stored_property_pieces(table, cluster_name),
        born_timestamp=int_values(table.column("born_timestamp")),
        store_timestamp=int_values(table.column("store_timestamp")),
        born_host=born_host,
        store_host=store_host(broker),
        sysflag=sysflag,
        reconsume_times=int_values(table.column("reconsume_times")),
        # Clients do not check BODYCRC (MessageDecoder is called with checkCRC=false): it is left 0 rather
        # than paying a Python crc32 call per message (docs/deviations.md, "Remoting").
        body_crc=np.zeros(n, np.int32),
    )
