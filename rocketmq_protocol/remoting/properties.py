"""Message properties: the `name \\x01 value \\x02` string of stored and sent messages, and the known names.

Rules of apache/rocketmq `MessageDecoder.messageProperties2String` / `string2messageProperties`; names of
`MessageConst`. \\x01 and \\x02 never occur inside a multi-byte UTF-8 sequence, so splitting the bytes
gives the same result as Java splitting the decoded string.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..arrow_values import from_numpy
from .columns import PAD, fixed_width, fold_rows, gather, rows_at, value_offsets, view_array

__all__ = [
    "CLUSTER",
    "CONSUME_START_TIME",
    "DELAY",
    "HIDDEN_FROM_READER",
    "KEYS",
    "KEY_SEPARATOR",
    "MAX_OFFSET",
    "MAX_PROPERTIES_BYTES",
    "MIN_OFFSET",
    "NAME_VALUE_SEPARATOR",
    "PGROUP",
    "PROPERTY_SEPARATOR",
    "REAL_QID",
    "REAL_TOPIC",
    "RECONSUME_TIME",
    "RETRY_TOPIC",
    "SHARDING_KEY",
    "START_DELIVER_TIME",
    "SYSTEM_PROPERTY_NAMES",
    "TAGS",
    "TIMER_DELAY_MS",
    "TIMER_DELAY_SEC",
    "TIMER_DELIVER_MS",
    "TIMER_OUT_MS",
    "TRAN_MSG",
    "UNIQ_KEY",
    "WAIT",
    "WELL_KNOWN",
    "PropertyColumns",
    "build_properties_column",
    "decode_properties",
    "encode_properties",
    "join_pieces",
    "parse_properties_column",
    "parse_property_rows",
    "property_pieces",
]

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
KEY_SEPARATOR = " "  # between the keys of KEYS
MAX_PROPERTIES_BYTES = 32767  # the int16 length of stored and batched messages

TAGS = "TAGS"
KEYS = "KEYS"
UNIQ_KEY = "UNIQ_KEY"  # the client message id
WAIT = "WAIT"  # wait for store OK
DELAY = "DELAY"  # delay level 1..18
TIMER_DELIVER_MS = "TIMER_DELIVER_MS"  # absolute delivery time (5.x timer)
TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
TIMER_DELAY_MS = "TIMER_DELAY_MS"
TIMER_OUT_MS = "TIMER_OUT_MS"  # the delivery time the broker computed, on delivered timer messages
START_DELIVER_TIME = (
    "__STARTDELIVERTIME"  # legacy (Aliyun) delivery time; open-source 5.x does not schedule it
)
SHARDING_KEY = "__SHARDINGKEY"  # message group of FIFO messages (gRPC messageGroup)
TRAN_MSG = "TRAN_MSG"
PGROUP = "PGROUP"
RETRY_TOPIC = "RETRY_TOPIC"
RECONSUME_TIME = "RECONSUME_TIME"
REAL_TOPIC = "REAL_TOPIC"
REAL_QID = "REAL_QID"
MIN_OFFSET = "MIN_OFFSET"
MAX_OFFSET = "MAX_OFFSET"
CONSUME_START_TIME = "CONSUME_START_TIME"
CLUSTER = "CLUSTER"

#: `MessageConst.STRING_HASH_SET` of apache/rocketmq 5.5.0: the names a user property cannot take, and the
#: ones the 5.x proxy leaves out of a gRPC message's user properties (`GrpcConverter.buildUserAttributes`).
SYSTEM_PROPERTY_NAMES: frozenset[str] = frozenset(
    {
        "TRACE_ON", "MSG_REGION", "KEYS", "TAGS", "WAIT", "DELAY", "RETRY_TOPIC", "ORIGIN_GROUP",
        "REAL_TOPIC", "REAL_QID", "TRAN_MSG", "PGROUP", "MIN_OFFSET", "MAX_OFFSET", "BUYER_ID",
        "ORIGIN_MESSAGE_ID", "TRANSFER_FLAG", "CORRECTION_FLAG", "MQ2_FLAG", "RECONSUME_TIME", "UNIQ_KEY",
        "MAX_RECONSUME_TIMES", "CONSUME_START_TIME", "POP_CK", "POP_CK_OFFSET", "1ST_POP_TIME",
        "TRAN_PREPARED_QUEUE_OFFSET", "DUP_INFO", "EXTEND_UNIQ_INFO", "INSTANCE_ID", "CORRELATION_ID",
        "REPLY_TO_CLIENT", "TTL", "ARRIVE_TIME", "PUSH_REPLY_TIME", "CLUSTER", "MSG_TYPE",
        "INNER_MULTI_QUEUE_OFFSET", "TIMER_DELAY_MS", "TIMER_DELAY_SEC", "TIMER_DELIVER_MS",
        "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS", "TIMER_ROLL_TIMES", "TIMER_OUT_MS", "TIMER_DEL_UNIQKEY",
        "TIMER_DELAY_LEVEL", "__BORNHOST", "BORN_TIMESTAMP", "DLQ_ORIGIN_TOPIC", "DLQ_ORIGIN_MESSAGE_ID",
        "__CRC32#", "_SYS_MSG_PRIORITY_", "__LITE_TOPIC",
    }
)  # fmt: skip

#: What the reader's `properties` map leaves out: the system names above (as Apache's proxy does for gRPC
#: consumers, so both protocols give the same map) plus the two the reader already shows as columns
#: (`__SHARDINGKEY` → messageGroup, `__STARTDELIVERTIME` → deliveryTimestamp) and the legacy INNER_* batch
#: bookkeeping. Everything else a producer set is kept.
HIDDEN_FROM_READER: frozenset[str] = SYSTEM_PROPERTY_NAMES | {
    SHARDING_KEY,
    START_DELIVER_TIME,
    "INNER_NUM",
    "INNER_BASE",
}


def encode_properties(properties: Mapping[str, str | None]) -> str:
    """`messageProperties2String`: every pair as name \\x01 value \\x02 (None values skipped), in order."""
    parts = []
    for name, value in properties.items():
        if value is None:
            continue
        if "\x01" in name or "\x02" in name or "\x01" in value or "\x02" in value:
            raise ValueError(f"property {name!r} contains a \\x01 or \\x02 separator")
        parts.append(f"{name}\x01{value}\x02")
    return "".join(parts)


def decode_properties(data: str | bytes | bytearray | memoryview) -> dict[str, str]:
    """`string2messageProperties`: split on \\x02, name before the first \\x01; later duplicates win.

    Segments with an empty name, an empty value or no \\x01 are skipped, as in Java.
    """
    text = data if isinstance(data, str) else bytes(data).decode("utf-8", errors="replace")
    out: dict[str, str] = {}
    for item in text.split("\x02"):
        name, sep, value = item.partition("\x01")
        if sep and name and value:
            out[name] = value
    return out


# ------------------------------------------------------------------------------------------------ columnar

#: The properties `parse_properties_column` returns as columns of their own by default.
WELL_KNOWN: tuple[str, ...] = (
    TAGS,
    KEYS,
    UNIQ_KEY,
    SHARDING_KEY,
    TIMER_DELIVER_MS,
    TIMER_OUT_MS,
    START_DELIVER_TIME,
)

_GOLD = np.uint64(0x9E3779B97F4A7C15)
_MASKS = np.array([(1 << (8 * k)) - 1 if k < 8 else (1 << 64) - 1 for k in range(9)], dtype=np.uint64)


def _name_hash(first: np.ndarray, length: np.ndarray) -> np.ndarray:
    """A key for a name: its first 8 bytes (zero beyond its length) mixed with its length."""
    return first ^ (length.astype(np.uint64) * _GOLD)


def _python_hash(name: str) -> int:
    raw = name.encode("utf-8")
    first = np.array([int.from_bytes(raw[:8].ljust(8, b"\0"), "little")], dtype=np.uint64)
    return int(_name_hash(first, np.array([len(raw)]))[0])


@dataclass(frozen=True)
class _NameTable:
    hashes: np.ndarray  # sorted distinct hashes of the names
    first_name: np.ndarray  # per hash: index of its (first) name
    verify: np.ndarray  # per hash: compare the bytes (a name over 8 bytes, or two names on one hash)
    slot_names: list[list[int]]  # per hash: indexes of its names
    raw: list[bytes]  # per name: UTF-8
    wanted: np.ndarray  # per name (+ trailing -1): position in `names`, or -1
    hidden: np.ndarray  # per name (+ trailing False): left out of the map
    lut: np.ndarray  # top _LUT_BITS of hash * lut_mul → slot (no two slots share an entry)
    lut_mul: np.uint64


_LUT_BITS = 14
# `parse_properties_column` tries `_parse_uniform` first (a switch for tests comparing it with the general path).
UNIFORM_FAST_PATH = True


@cache
def _name_table(names: tuple[str, ...], hidden: frozenset[str]) -> _NameTable:
    all_names = sorted(set(names) | set(hidden))
    raw = [t.encode("utf-8") for t in all_names]
    keyed = np.array([_python_hash(t) for t in all_names], dtype=np.uint64)
    hashes = np.unique(keyed)
    slot_names: list[list[int]] = [[] for _ in hashes]
    for i, k in enumerate(keyed):
        slot_names[int(np.searchsorted(hashes, k))].append(i)
    for mul in (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93):
        top = (hashes * np.uint64(mul)) >> np.uint64(64 - _LUT_BITS)
        if len(np.unique(top)) == len(top):
            break
    else:  # pragma: no cover - the names are fixed; one of the multipliers separates them
        raise AssertionError("no collision-free lookup table for the property names")
    lut = np.zeros(1 << _LUT_BITS, dtype=np.int16)
    lut[top.astype(np.int64)] = np.arange(len(hashes), dtype=np.int16)
    return _NameTable(
        lut=lut,
        lut_mul=np.uint64(mul),
        hashes=hashes,
        first_name=np.array([s[0] for s in slot_names], dtype=np.int64),
        verify=np.array([len(s) > 1 or len(raw[s[0]]) > 8 for s in slot_names], dtype=bool),
        slot_names=slot_names,
        raw=raw,
        wanted=np.array([names.index(t) if t in names else -1 for t in all_names] + [-1], dtype=np.int64),
        hidden=np.array([t in hidden for t in all_names] + [False], dtype=bool),
    )


@dataclass(frozen=True)
class PropertyColumns:
    """`parse_properties_column`'s result: chosen properties as columns, the rest as a map."""

    values: dict[str, pa.Array]  # name → string column, null where the message lacks it (last one wins)
    others: pa.MapArray  # map<string,string>: every property not in `hidden`, in wire order


def _uniform_items(row: bytes) -> list[tuple[int, int, int, int]] | None:
    """(key start, key length, value start, value length) of each item of one property string, as
    `parse_properties_column` reads them (empty names or values skipped)."""
    items = []
    pos = 0
    for part in row.split(b"\x02"):
        k = part.find(b"\x01")
        if 0 < k < len(part) - 1:
            items.append((pos, k, pos + k + 1, len(part) - k - 1))
        pos += len(part) + 1
    return items


def _fixed_strings(data: np.ndarray, n: int) -> pa.Array:
    """A string array of `n` values cut from the contiguous bytes `data` (n × width)."""
    width = data.size // n if n else 0
    offsets = np.arange(0, width * (n + 1), width, dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _parse_uniform(arr: pa.Array, names: Sequence[str], hidden: frozenset[str]) -> PropertyColumns | None:
    """`parse_properties_column` for strings of one length that differ only inside values (one producer's
    messages: only UNIQ_KEY's value changes), read off the first row; None when they do not."""
    n = len(arr)
    if n < 2 or arr.null_count:
        return None
    offsets = value_offsets(arr)
    width = fixed_width(offsets)
    if not width:
        return None
    data = np.frombuffer(arr.buffers()[2], dtype=np.uint8)[offsets[0] : offsets[-1]]
    return parse_property_rows(data.reshape(n, width), names, hidden)


def parse_property_rows(
    rows: np.ndarray,
    names: Sequence[str] = WELL_KNOWN,
    hidden: frozenset[str] = HIDDEN_FROM_READER,
    folded: tuple[np.ndarray, np.ndarray] | None = None,
) -> PropertyColumns | None:
    """`parse_properties_column` of property strings given as the rows of a (n, width) uint8 array (may be
    a strided view into the records that hold them), when they differ only inside values; else None.
    `folded`: each byte column's highest and lowest value, when the caller already has them."""
    n, width = rows.shape
    if n < 2 or not width or not UNIFORM_FAST_PATH:
        return None
    if folded is None:
        rows = np.ascontiguousarray(rows)  # folding a strided view of the records loops per row
        high, low = fold_rows(rows, np.maximum), fold_rows(rows, np.minimum)
    else:
        high, low = folded
    varies = high != low  # per byte column: where the rows differ
    items = _uniform_items(rows[0].tobytes())
    inside = np.zeros(width, dtype=bool)
    for _, _, vs, vl in items:
        inside[vs : vs + vl] = True
    if (varies & ~inside).any():
        return None
    if (varies & (low <= 2)).any():  # where a value varies, no row may hold a separator byte
        return None
    head = rows[0].tobytes()
    keyed = [(head[ks : ks + kl].decode("utf-8", "replace"), ks, kl, vs, vl) for ks, kl, vs, vl in items]
    last = {name: (vs, vl) for name, _, _, vs, vl in keyed}
    values: dict[str, pa.Array] = {}
    absent = None
    for name in names:
        if name in last:
            vs, vl = last[name]
            values[name] = _fixed_strings(np.ascontiguousarray(rows[:, vs : vs + vl]).reshape(-1), n)
        else:
            absent = pa.nulls(n, pa.string()) if absent is None else absent  # one array for every absent name
            values[name] = absent
    user = [item for item in keyed if item[0] not in hidden]
    k = len(user)
    key_bytes = b"".join(head[ks : ks + kl] for _, ks, kl, _, _ in user)
    key_len = np.array([kl for _, _, kl, _, _ in user], np.int32)
    val_len = np.array([vl for _, _, _, _, vl in user], np.int32)
    key_offsets = np.zeros(n * k + 1, dtype=np.int32)
    np.cumsum(np.tile(key_len, n), out=key_offsets[1:])
    val_offsets = np.zeros(n * k + 1, dtype=np.int32)
    np.cumsum(np.tile(val_len, n), out=val_offsets[1:])
    key_data = np.tile(np.frombuffer(key_bytes, dtype=np.uint8), n)
    val_data = (
        np.concatenate([rows[:, vs : vs + vl] for _, _, _, vs, vl in user], axis=1).reshape(-1)
        if k
        else np.zeros(0, np.uint8)
    )
    keys = pa.Array.from_buffers(
        pa.string(), n * k, [None, pa.py_buffer(key_offsets), pa.py_buffer(key_data)]
    )
    vals = pa.Array.from_buffers(
        pa.string(), n * k, [None, pa.py_buffer(val_offsets), pa.py_buffer(val_data)]
    )
    map_offsets = from_numpy(np.arange(0, k * (n + 1), k, dtype=np.int32) if k else np.zeros(n + 1, np.int32))
    return PropertyColumns(values, pa.MapArray.from_arrays(map_offsets, keys, vals))


def parse_properties_column(
    raw: pa.Array, names: Sequence[str] = WELL_KNOWN, hidden: frozenset[str] = HIDDEN_FROM_READER
) -> PropertyColumns:
    """Parses a column of property strings (string or binary; null = none) without a per-message loop.

    Follows `string2messageProperties`: items split on \\x02 (the end of each string counts as one),
    name before the first \\x01, items with an empty name or value skipped, a repeated name's last value
    wins for `values`; `others` keeps repeats in order (a dict built from it also ends on the last).
    """
    n = len(raw)
    arr = raw.view(pa.binary()) if pa.types.is_string(raw.type) else raw.cast(pa.binary())
    uniform = _parse_uniform(arr, names, hidden) if UNIFORM_FAST_PATH else None
    if uniform is not None:
        return uniform
    if arr.null_count:
        arr = pc.fill_null(arr, b"")
    offsets_buf, data_buf = arr.buffers()[1], arr.buffers()[2]
    offsets = np.frombuffer(offsets_buf, dtype=np.int32)[arr.offset : arr.offset + n + 1]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    base = offsets[0] if n else 0
    rel = offsets - base
    props = data[base : offsets[-1]] if n else data[:0]
    nonempty = np.flatnonzero(rel[1:] > rel[:-1])
    if len(nonempty) and (props[rel[nonempty + 1] - 1] == 2).all():
        joined = props  # every string ends with \x02, as Java writes them: items end at each \x02
    else:
        # Add one \x02 after each string, so every item (the last included) ends with a separator.
        joined = np.insert(props, rel[1:], np.uint8(2))
        rel = rel + np.arange(n + 1, dtype=np.int32)
    buf = np.zeros(len(joined) + PAD, dtype=np.uint8)
    buf[: len(joined)] = joined
    marks = np.flatnonzero(joined <= 2).astype(np.int32)  # one pass finds both separators
    kinds = joined[marks]
    if len(kinds) % 2 == 0 and (kinds[0::2] == 1).all() and (kinds[1::2] == 2).all():
        seps, ends = marks[0::2], marks[1::2]  # name \x01 value \x02, item after item: the usual case
    else:
        ends = marks[kinds == 2]
        seps = marks[kinds == 1]
    starts = np.empty_like(ends)
    if len(ends):
        starts[0] = 0
        starts[1:] = ends[:-1] + 1
    first_item = np.searchsorted(ends, rel)  # items of row i: first_item[i] .. first_item[i+1]
    item_row = np.repeat(np.arange(n, dtype=np.int32), np.diff(first_item))
    ok = None
    if len(seps) == len(ends):  # usually exactly one \x01 inside each item
        kv = seps
        ok = (kv > starts) & (kv < ends - 1)
    if ok is None or not ok.all():
        if len(seps):
            fi = np.searchsorted(seps, starts)
            kv = seps[np.minimum(fi, len(seps) - 1)]
            kv = np.where(fi < len(seps), kv, starts)
        else:
            kv = starts
        ok = (kv > starts) & (kv < ends - 1)
    if ok.all():
        key_start, key_len, val_start = starts, kv - starts, kv + 1
        val_len, rows = ends - kv - 1, item_row
    else:
        keep = np.flatnonzero(ok)
        key_start = starts[keep]
        key_len = kv[keep] - key_start
        val_start = kv[keep] + 1
        val_len = ends[keep] - val_start
        rows = item_row[keep]

    # Name of each item: its first 8 bytes and length, looked up among the names we care about; names
    # longer than 8 bytes are then compared in full.
    table = _name_table(tuple(names), hidden)
    first = gather(buf, key_start, "<u8") & _MASKS[np.minimum(key_len, 8)]
    h = _name_hash(first, key_len)
    pos = table.lut[(h * table.lut_mul) >> np.uint64(64 - _LUT_BITS)]  # candidate slot; a miss points at 0
    hit = table.hashes[pos] == h
    name_id = np.where(hit, table.first_name[pos], -1)
    check = np.flatnonzero(hit & table.verify[pos])  # names over 8 bytes, or sharing 8 bytes and a length
    if len(check):
        slots = pos[check]
        for slot in np.unique(slots).tolist():
            cand = check[slots == slot]
            name_id[cand] = -1
            for i in table.slot_names[slot]:
                raw_name = table.raw[i]
                match = (
                    rows_at(buf, key_start[cand], len(raw_name)) == np.frombuffer(raw_name, np.uint8)
                ).all(axis=1)
                name_id[cand[match]] = i

    values: dict[str, pa.Array] = {}
    wanted = table.wanted[name_id]  # position in `names`, or -1 (name_id -1 indexes the trailing -1)
    w_items = np.flatnonzero(wanted >= 0)
    k = len(names)
    # Last item of each (row, name): one scatter into a rows × names table; later items overwrite.
    last = np.full(n * k, -1, dtype=np.int32)
    last[rows[w_items].astype(np.int64) * k + wanted[w_items]] = w_items
    last = last.reshape(n, k)
    seen = np.bincount(wanted[w_items], minlength=k) if len(w_items) else np.zeros(k, dtype=np.int64)
    for j, name in enumerate(names):
        if not seen[j]:
            values[name] = pa.nulls(n, pa.string())
            continue
        col = last[:, j]
        present = col >= 0
        pick = np.maximum(col, 0)
        values[name] = view_array(
            pa.string(), [buf], val_start[pick], np.where(present, val_len[pick], 0), valid=present
        )

    user = np.flatnonzero(~table.hidden[name_id])  # name_id -1 indexes the trailing False
    counts = np.bincount(rows[user], minlength=n) if n else np.zeros(0, dtype=np.int64)
    map_offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(counts, out=map_offsets[1:])
    keys = view_array(pa.string(), [buf], key_start[user], key_len[user])
    vals = view_array(pa.string(), [buf], val_start[user], val_len[user])
    others = pa.MapArray.from_arrays(pa.array(map_offsets, pa.int32()), keys, vals)
    return PropertyColumns(values, others)


def build_properties_column(n: int, **columns: Any) -> pa.StringArray:
    """Property strings for `n` messages, built column-wise (the producer side of `parse_properties_column`);
    `columns` are `property_pieces`' keywords."""
    return join_pieces(n, property_pieces(n, **columns))


def join_pieces(n: int, pieces: Sequence[pa.Array | str]) -> pa.StringArray:
    """Row i of every piece (a string is the same in every row), concatenated."""
    if all(isinstance(p, str) for p in pieces):
        return pa.repeat(pa.scalar("".join(p for p in pieces if isinstance(p, str)), pa.string()), n)
    return pc.binary_join_element_wise(*pieces, "")


def property_pieces(
    n: int,
    *,
    uniq_keys: pa.Array | np.ndarray | None = None,
    tags: pa.Array | None = None,
    keys: pa.Array | None = None,
    user: pa.MapArray | None = None,
    constant: Mapping[str, str] | None = None,
) -> list[pa.Array | str]:
    """`build_properties_column`'s strings as pieces not yet joined (a str is the same in every row), for a
    caller that joins them into something larger, such as whole stored records, in one pass.

    Order: UNIQ_KEY, the `constant` pairs (e.g. WAIT=true), TAGS, KEYS (list<string> joined by spaces, or
    a string), then the `user` map. Null or empty tags/keys are left out.
    """
    pieces: list[pa.Array | str] = []
    if uniq_keys is not None:
        if isinstance(uniq_keys, np.ndarray):
            width = uniq_keys.dtype.itemsize
            uniq_keys = pa.Array.from_buffers(
                pa.string(), n, [None, pa.py_buffer(np.arange(0, width * (n + 1), width, dtype=np.int32)),
                                  pa.py_buffer(uniq_keys)],
            )  # fmt: skip
        pieces += [f"{UNIQ_KEY}\x01", uniq_keys, "\x02"]
    if constant:
        pieces.append(encode_properties(constant))
    if tags is not None and tags.null_count < len(tags):
        tags = pc.if_else(pc.equal(tags, ""), pa.scalar(None, pa.string()), tags)
        pieces.append(pc.fill_null(pc.binary_join_element_wise(f"{TAGS}\x01", tags, "\x02", ""), ""))
    if keys is not None and (pa.types.is_string(keys.type) or len(keys.flatten())):
        joined = keys if pa.types.is_string(keys.type) else pc.binary_join(keys, " ")
        joined = pc.if_else(pc.equal(joined, ""), pa.scalar(None, pa.string()), joined)
        pieces.append(pc.fill_null(pc.binary_join_element_wise(f"{KEYS}\x01", joined, "\x02", ""), ""))
    if user is not None and len(user.keys):
        entries = pc.binary_join_element_wise(user.keys, "\x01", user.items, "\x02", "")
        offsets = user.offsets
        lists = pa.ListArray.from_arrays(offsets, entries)
        pieces.append(pc.fill_null(pc.binary_join(lists, ""), ""))
    return pieces
