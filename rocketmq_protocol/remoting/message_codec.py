"""Columnar codecs of message bodies: stored messages (pull responses) and producer batches.

Stored layout (apache/rocketmq `MessageDecoder.decode`/`encode`, the broker's `MessageExtEncoder`):
TOTALSIZE, MAGICCODE (V1 0xDAA320A7: 1-byte topic length; V2 0xDAA320AB: 2 bytes), BODYCRC, QUEUEID, FLAG,
QUEUEOFFSET, PHYSICALOFFSET, SYSFLAG, BORNTIMESTAMP, BORNHOST (IPv4 4+4 or IPv6 16+4 bytes by sysflag bit 4),
STORETIMESTAMP, STOREHOST (bit 5), RECONSUMETIMES, PREPARED TRANSACTION OFFSET, BODYLEN+BODY,
TOPICLEN+TOPIC, PROPLEN (int16)+PROPERTIES. Batch layout (`MessageDecoder.encodeMessage`): TOTALSIZE,
MAGICCODE 0, BODYCRC 0, FLAG, BODYLEN+BODY, PROPLEN+PROPERTIES.

Both directions work on whole columns (numpy / pyarrow): only the walk from one TOTALSIZE to the next is a
Python loop. Decoding yields a `pyarrow.RecordBatch` (`STORED_SCHEMA`, `BATCH_SCHEMA`). Stored messages of
the common layout (IPv4 hosts, bodies not compressed) are first read by the C scan (`_stored_scan.c`,
built by setup.py where a compiler is present) in one walk, which also parses their properties when the
caller reads the parsed ones and not the strings; the numpy path takes every other pull, raises every
decoding error, and is the whole decoder where the scan is not built.
"""

from __future__ import annotations

import functools
import itertools
import struct
import zlib
from collections.abc import Collection, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..arrow_values import (
    binary_scalar,
    bool_values,
    fill_fields,
    fixed_width_rows,
    from_numpy,
    int64_values,
    repeat_scalar,
)
from .columns import (
    PAD,
    as_u8,
    gather,
    hex_upper,
    host_strings,
    parse_hosts,
    rows_at,
    value_offsets,
    view_array,
)
from .errors import BatchDecodeError, MessageDecodeError
from .flags import CompressionType, MessageSysFlag, compression_type
from .properties import (
    HIDDEN_FROM_READER,
    KEYS,
    SHARDING_KEY,
    START_DELIVER_TIME,
    TAGS,
    TIMER_DELIVER_MS,
    TIMER_OUT_MS,
    UNIQ_KEY,
    WELL_KNOWN,
    PropertyColumns,
    parse_properties_column,
    parse_property_rows,
)

try:  # the C scan of the common layout (setup.py builds it where a compiler is present)
    from . import _stored_scan
except ImportError:
    _stored_scan = None


__all__ = [
    "BATCH_SCHEMA",
    "MAGIC_V1",
    "MAGIC_V2",
    "STORED_SCHEMA",
    "decode_batch",
    "decode_stored",
    "encode_batch",
    "encode_stored",
    "encode_stored_records",
    "record_starts",
]

MAGIC_V1 = -626843481  # 0xDAA320A7, MessageDecoder.MESSAGE_MAGIC_CODE
MAGIC_V2 = -626843477  # 0xDAA320AB, MESSAGE_MAGIC_CODE_V2: 2-byte topic length
MAX_V1_TOPIC_BYTES = 127  # longer topics are stored as V2 (the broker's autoMessageVersionOnTopicLen)
_MIN_STORED = 91  # a V1 record with IPv4 hosts and empty body, topic and properties
_MIN_BATCHED = 22
_I32 = struct.Struct(">i")

_TS = pa.timestamp("ms")
#: Columns of `decode_stored`. Timestamps are the wire's epoch milliseconds.
STORED_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("queue_id", pa.int32()),
        ("queue_offset", pa.int64()),
        ("commitlog_offset", pa.int64()),
        ("sysflag", pa.int32()),
        ("flag", pa.int32()),
        ("body_crc", pa.int32()),
        ("born_timestamp", _TS),
        ("born_host", pa.string()),
        ("store_timestamp", _TS),
        ("store_host", pa.string()),
        ("reconsume_times", pa.int32()),
        ("prepared_transaction_offset", pa.int64()),
        ("body", pa.binary()),
        ("raw_properties", pa.string()),
        # derived from the properties and hosts:
        ("message_id", pa.string()),
        ("tags", pa.string()),
        ("keys", pa.list_(pa.string())),
        ("message_group", pa.string()),
        ("delivery_timestamp", _TS),
        ("properties", pa.map_(pa.string(), pa.string())),
    ]
)

#: Columns of `decode_batch` (a SEND_BATCH_MESSAGE body, server side).
BATCH_SCHEMA = pa.schema([("flag", pa.int32()), ("body", pa.binary()), ("raw_properties", pa.string())])


def _host_dtype(v6: bool) -> list[tuple[str, str]]:
    return [("ip", "V16" if v6 else "V4"), ("port", ">i4")]


def _tail_dtype(born_v6: bool, store_v6: bool) -> np.dtype:
    """The record from offset 0 to BODYLEN inclusive, for one combination of host widths."""
    return np.dtype(
        [
            ("size", ">i4"),
            ("magic", ">i4"),
            ("crc", ">i4"),
            ("queue_id", ">i4"),
            ("flag", ">i4"),
            ("queue_offset", ">i8"),
            ("commitlog_offset", ">i8"),
            ("sysflag", ">i4"),
            ("born_ts", ">i8"),
            ("born_ip", "V16" if born_v6 else "V4"),
            ("born_port", ">i4"),
            ("store_ts", ">i8"),
            ("store_ip", "V16" if store_v6 else "V4"),
            ("store_port", ">i4"),
            ("reconsume", ">i4"),
            ("prepared", ">i8"),
            ("body_len", ">i4"),
        ]
    )


_LAYOUTS = {(b6, s6): _tail_dtype(b6, s6) for b6 in (False, True) for s6 in (False, True)}


# ------------------------------------------------------------------------------------------------ boundaries


def record_starts(
    data: bytes | bytearray | memoryview | np.ndarray, spans: Sequence[tuple[int, int]], minimum: int
) -> np.ndarray:
    """Byte offsets of the records in each (start, end) span of `data`, following TOTALSIZE.

    Spans whose records all have the first one's size (fixed-size messages: same body size and property
    layout) are recognised with one vectorised check (`_uniform_starts`), all together when they can be.
    Many spans (a real broker's answers of 32 messages each) are walked in lockstep, one vectorised step
    per record of a span (`_lockstep_starts`). Records of a few large spans (the emulator's answers) are
    found by their magic codes when those chain exactly (`_chained_starts`: about a third less than the
    walk); otherwise they, and the spans still open once few are left in lockstep, are walked record by
    record.
    Raises MessageDecodeError when a size is below `minimum` or runs past its span.
    """
    whole = _uniform_starts(data, spans, minimum)
    if whole is not None:
        return whole
    if len(spans) >= LOCKSTEP_MIN_SPANS:
        return _lockstep_starts(data, spans, minimum)
    whole = _chained_starts(data, spans, minimum)
    if whole is not None:
        return whole
    parts: list[np.ndarray] = []
    for first, end in spans:
        same = _uniform_starts(data, [(first, end)], minimum) if len(spans) > 1 else None
        if same is not None:
            parts.append(same)
            continue
        out: list[int] = []
        _walk(data, first, end, minimum, out)
        parts.append(np.array(out, dtype=np.int64))
    if not parts:
        return np.zeros(0, dtype=np.int64)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


#: Spans walked together (`_lockstep_starts`) while at least this many are open: one step costs a few
#: whole-array operations, worth it over the per-record loop only when it advances many spans at once.
LOCKSTEP_MIN_SPANS = 16


def _walk(
    data: bytes | bytearray | memoryview | np.ndarray, pos: int, end: int, minimum: int, out: list[int]
) -> None:
    """Appends the starts of the records from `pos` to `end` to `out`, one record at a time."""
    unpack = _I32.unpack_from
    try:
        while pos < end:  # the only per-message Python loop: keep it to one unpack and one test
            out.append(pos)
            size = unpack(data, pos)[0]
            if size < minimum:
                raise _size_below(pos, size, minimum)
            pos += size
    except struct.error:
        raise _trailing_bytes(pos, end) from None
    if pos != end:
        raise _size_past_end(out[-1], pos - out[-1], end)


def _size_below(pos: int, size: int, minimum: int) -> MessageDecodeError:
    return MessageDecodeError(f"record at offset {pos} has TOTALSIZE {size} (minimum {minimum})")


def _size_past_end(pos: int, size: int, end: int) -> MessageDecodeError:
    return MessageDecodeError(f"record at offset {pos} has TOTALSIZE {size}; only {end - pos} bytes remain")


def _trailing_bytes(pos: int, end: int) -> MessageDecodeError:
    return MessageDecodeError(f"{end - pos} trailing bytes at offset {pos} cannot hold a TOTALSIZE")


def _lockstep_starts(
    data: bytes | bytearray | memoryview | np.ndarray, spans: Sequence[tuple[int, int]], minimum: int
) -> np.ndarray:
    """`record_starts` of many spans (in buffer order, not overlapping): each step reads the next record's
    TOTALSIZE of every open span at once, so the steps number the records of the longest span."""
    buf = data if isinstance(data, np.ndarray) else as_u8(data)
    bounds = np.array(spans, dtype=np.int64).reshape(-1, 2)
    pos, ends = bounds[:, 0].copy(), bounds[:, 1]
    open_ = np.flatnonzero(pos < ends)
    steps: list[np.ndarray] = []  # per step, every span's record start (-1: the span was closed)
    while len(open_) >= LOCKSTEP_MIN_SPANS:
        at, end = pos[open_], ends[open_]
        short = np.flatnonzero(at + 4 > end)
        if len(short):
            i = int(short[0])
            raise _trailing_bytes(int(at[i]), int(end[i]))
        size = gather(buf, at, ">i4").astype(np.int64)
        small = np.flatnonzero(size < minimum)
        if len(small):
            i = int(small[0])
            raise _size_below(int(at[i]), int(size[i]), minimum)
        row = np.full(len(pos), -1, dtype=np.int64)
        row[open_] = at
        steps.append(row)
        nxt = at + size
        past = np.flatnonzero(nxt > end)
        if len(past):
            i = int(past[0])
            raise _size_past_end(int(at[i]), int(size[i]), int(end[i]))
        pos[open_] = nxt
        open_ = open_[nxt < end]
    found = np.stack(steps, axis=1).ravel() if steps else np.zeros(0, dtype=np.int64)
    found = found[found >= 0]  # span by span, each in record order: buffer order
    if not len(open_):
        return found
    rest: list[int] = []  # the spans still open, finished one record at a time
    for i in open_.tolist():
        _walk(data, int(pos[i]), int(ends[i]), minimum, rest)
    return np.sort(np.concatenate([found, np.array(rest, dtype=np.int64)]))


def _uniform_starts(
    data: bytes | bytearray | memoryview | np.ndarray, spans: Sequence[tuple[int, int]], minimum: int
) -> np.ndarray | None:
    """`record_starts` in one vectorised check when the spans follow each other (one buffer of many pull
    answers, e.g. a real broker's 32-message answers) and every record has the first one's size; else None."""
    if not spans or spans[0][1] - spans[0][0] < 8:
        return None
    first, end = spans[0][0], spans[-1][1]
    size0 = _I32.unpack_from(data, first)[0]
    if size0 < minimum:
        return None
    bounds = np.array(spans, dtype=np.int64)
    if (bounds[1:, 0] != bounds[:-1, 1]).any() or ((bounds[:, 1] - bounds[:, 0]) % size0).any():
        return None
    cand = np.arange(first, end, size0, dtype=np.int64)
    buf = data if isinstance(data, np.ndarray) else as_u8(data)
    return cand if (gather(buf, cand, ">i4") == size0).all() else None


_MAGIC_FIRST = 0xDA  # the first byte of both magic codes (big-endian); the next two are A3 20
_MAGIC_LAST = (MAGIC_V1 & 0xFF, MAGIC_V2 & 0xFF)


def _chained_starts(
    data: bytes | bytearray | memoryview | np.ndarray, spans: Sequence[tuple[int, int]], minimum: int
) -> np.ndarray | None:
    """`record_starts` of spans that follow each other, without a per-record step: every position followed
    by a magic code is a candidate record start, and when the candidates chain exactly (each TOTALSIZE
    leads to the next candidate, the last to the end, and every span starts at one) they are the records.
    None otherwise (a body holding a magic code's bytes, malformed data): the caller walks them."""
    if not spans:
        return None
    bounds = np.array(spans, dtype=np.int64).reshape(-1, 2)
    first, end = int(bounds[0, 0]), int(bounds[-1, 1])
    if end - first < minimum or (bounds[1:, 0] != bounds[:-1, 1]).any():
        return None
    buf = data if isinstance(data, np.ndarray) else as_u8(data)
    magic = buf[first + 4 : end]  # record i's magic sits 4 bytes after its start
    hits = np.flatnonzero(magic[: max(len(magic) - 3, 0)] == _MAGIC_FIRST)
    last = magic[hits + 3]
    hits = hits[
        (magic[hits + 1] == 0xA3)
        & (magic[hits + 2] == 0x20)
        & ((last == _MAGIC_LAST[0]) | (last == _MAGIC_LAST[1]))
    ]
    if not len(hits) or hits[0] != 0:
        return None
    starts = hits + first
    nxt = starts + gather(buf, starts, ">i4")
    if (nxt[:-1] != starts[1:]).any() or nxt[-1] != end or (nxt - starts < minimum).any():
        return None
    opened = bounds[bounds[:, 0] < bounds[:, 1], 0]  # every non-empty span starts at a record
    at = np.searchsorted(starts, opened)
    if (at >= len(starts)).any() or (starts[np.minimum(at, len(starts) - 1)] != opened).any():
        return None
    return starts


def _concat(
    bodies: bytes | bytearray | memoryview | Sequence[bytes | bytearray | memoryview],
) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """One uint8 array over all bodies (no copy for a single body) and each body's (start, end)."""
    if isinstance(bodies, bytes | bytearray | memoryview):
        bodies = [bodies]
    if len(bodies) == 1:
        buf = as_u8(bodies[0])
        return buf, [(0, len(buf))]
    spans = list(itertools.pairwise(itertools.accumulate(map(len, bodies), initial=0)))
    return np.frombuffer(b"".join(bodies), dtype=np.uint8), spans


# ------------------------------------------------------------------------------------------------ decode


def decode_stored(
    bodies: bytes | bytearray | memoryview | Sequence[bytes | bytearray | memoryview],
    *,
    decompress: bool = True,
    derive: bool = True,
    extra_properties: Sequence[str] = (),
    raw_properties: bool = True,
    columns: Collection[str] | None = None,
    host_ports: bool = True,
) -> pa.RecordBatch:
    """Pull-response bodies (each a run of stored messages) → one RecordBatch of `STORED_SCHEMA`.

    `decompress`: inflate COMPRESSED bodies (zlib; zstd if the `zstandard` package is present) and clear
    the flag, as Java clients do. `derive=False` skips the property-derived columns (they come back null
    or empty, message_id is the offset id), for callers that only need the raw fields.
    `extra_properties`: property names whose values (null where absent) follow the schema's columns as
    string columns of those names, read in the same pass over the properties (hidden names included).
    `raw_properties=False`: the raw_properties column may come back null (callers that only read the
    parsed columns), which spares a copy of every property string when they have one layout.
    `columns`: only these of the schema's columns are decoded and returned (in schema order, followed by
    the extra properties); a reader that drops the others spares their decoding (the default: all).
    `host_ports=False`: born_host and store_host hold the address alone ("ip", IPv6 without brackets).

    Derived columns: message_id = UNIQ_KEY, else the offset message id (store host + commit-log offset);
    tags = TAGS; keys = KEYS split on spaces (empty tokens dropped); message_group = __SHARDINGKEY;
    delivery_timestamp = TIMER_DELIVER_MS, else TIMER_OUT_MS (what the broker computed for TIMER_DELAY_*),
    else __STARTDELIVERTIME; properties = every property except `properties.HIDDEN_FROM_READER`. A
    repeated property's last value wins, as in Java (brokers up to 5.3.3 append the batch-level
    properties to every message of a batch). Hosts are "ip:port", IPv6 as "[addr]:port" (compressed).

    Differences from Java's `MessageDecoder`: a V1 topic length byte is read unsigned (Java reads it
    signed and fails past 127); inner-batch records (sysflag INNER_BATCH) are not unwrapped; any
    malformed record raises MessageDecodeError instead of silently dropping the rest of the body.
    """
    wanted = STORED_SCHEMA.names if columns is None else list(columns)
    unknown = sorted(set(wanted) - set(STORED_SCHEMA.names))
    if unknown:
        raise ValueError(f"decode_stored: no column {unknown}; the columns are {STORED_SCHEMA.names}")
    buf, spans = _concat(bodies)
    extra_names = tuple(extra_properties)
    # Properties parsed in the scan: when they are read at all and their strings are not asked for.
    parse = (derive and bool(_DERIVED.intersection(wanted))) or bool(extra_names)
    keep_raw = raw_properties and "raw_properties" in wanted
    names = _property_names(extra_names) if parse and not keep_raw else None
    records = _scanned(buf, spans, names) or _NumpyRecords(buf, record_starts(buf, spans, _MIN_STORED))
    return _decode_records(
        records,
        decompress=decompress,
        derive=derive,
        extra_names=extra_names,
        raw_properties=raw_properties,
        wanted=frozenset(wanted),
        host_ports=host_ports,
    )


#: Schema columns copied from one head field (`_tail_dtype`): the field, its Arrow storage, the column's type.
_FIELD_COLUMNS = {
    "queue_id": ("queue_id", pa.int32(), pa.int32()),
    "queue_offset": ("queue_offset", pa.int64(), pa.int64()),
    "commitlog_offset": ("commitlog_offset", pa.int64(), pa.int64()),
    "flag": ("flag", pa.int32(), pa.int32()),
    "body_crc": ("crc", pa.int32(), pa.int32()),
    "born_timestamp": ("born_ts", pa.int64(), _TS),
    "store_timestamp": ("store_ts", pa.int64(), _TS),
    "reconsume_times": ("reconsume", pa.int32(), pa.int32()),
    "prepared_transaction_offset": ("prepared", pa.int64(), pa.int64()),
}
_DERIVED = frozenset(("message_id", "tags", "keys", "message_group", "delivery_timestamp", "properties"))


class _Heads:
    """The records' fixed-width heads: one compact copy in the IPv4 layout, records with an IPv6 host read
    again in theirs; each field converted to a native integer column once, when first asked for."""

    def __init__(self, buf: np.ndarray, starts: np.ndarray) -> None:
        v4 = _LAYOUTS[(False, False)]
        # Every record is at least _MIN_STORED bytes, so the IPv4 layout's 88 bytes can be read for all of
        # them. One pass copies the heads; fields are read from that copy (reading each through a strided view
        # of the whole buffer costs one cache miss per record per field).
        raw = rows_at(buf, starts, v4.itemsize)
        self.rec = raw.view(v4).reshape(-1)
        self.magic = self.rec["magic"].astype(np.int32)
        bad = np.flatnonzero((self.magic != MAGIC_V1) & (self.magic != MAGIC_V2))
        if len(bad):
            i = int(bad[0])
            raise MessageDecodeError(
                f"record {i} at offset {int(starts[i])} has magic code {int(self.magic[i]) & 0xFFFFFFFF:#x}"
            )
        self.sysflag = self.rec["sysflag"].astype(np.int32)
        self.born_ip, self.store_ip = raw[:, 48:52], raw[:, 64:68]  # 4 wide while no host is IPv6
        self.head_len = np.full(len(starts), v4.itemsize, dtype=np.int64)
        self._fields: dict[str, np.ndarray] = {}
        self._v6: list[tuple[np.ndarray, np.ndarray]] = []  # (rows, their heads) per IPv6 layout
        layout = ((self.sysflag >> 4) & 1) | ((self.sysflag >> 4) & 2)  # bit 0 born v6, bit 1 store v6
        if not layout.any():
            return
        self.born_ip, self.store_ip = _widened(self.born_ip), _widened(self.store_ip)
        sizes = self.field("size")
        for code in (1, 2, 3):
            rows = np.flatnonzero(layout == code)
            if not len(rows):
                continue
            b6, s6 = bool(code & 1), bool(code & 2)
            dt = _LAYOUTS[(b6, s6)]
            short = rows[sizes[rows] < dt.itemsize + 3]
            if len(short):
                _layout_error(
                    short,
                    starts,
                    f"TOTALSIZE too small for its host fields (sysflag {int(self.sysflag[short[0]]):#x})",
                )
            raw6 = rows_at(buf, starts[rows], dt.itemsize)
            self._v6.append((rows, raw6.view(dt).reshape(-1)))
            bw, sw = (16 if b6 else 4), (16 if s6 else 4)
            self.born_ip[rows, :bw] = raw6[:, 48 : 48 + bw]
            self.store_ip[rows, :sw] = raw6[:, 60 + bw : 60 + bw + sw]
            self.head_len[rows] = dt.itemsize
        for name in self._fields:
            self._patch(name)

    def field(self, name: str) -> np.ndarray:
        """One head field of every record, native-endian."""
        col = self._fields.get(name)
        if col is None:
            col = self._fields[name] = self.rec[name].astype(self.rec.dtype[name].newbyteorder("="))
            self._patch(name)
        return col

    def _patch(self, name: str) -> None:
        for rows, rec6 in self._v6:
            self._fields[name][rows] = rec6[name]


class _NumpyRecords:
    """The records at `starts` of `buf`, located and checked with whole-array operations (any layout):
    what `_decode_records` reads of them."""

    def __init__(self, buf: np.ndarray, starts: np.ndarray) -> None:
        self.n = len(starts)
        heads = _Heads(buf, starts)
        self.field = heads.field
        self.sysflag, self.born_ip, self.store_ip = heads.sysflag, heads.born_ip, heads.store_ip
        self._buf = buf
        body_len = heads.field("body_len").astype(np.int64)
        self._body_start = starts + heads.head_len
        self._body_len = body_len
        record_end = starts + heads.field("size")
        topic_pos = self._body_start + body_len
        v2 = heads.magic == MAGIC_V2
        bad = np.flatnonzero((body_len < 0) | (topic_pos + 1 + v2 + 2 > record_end))
        if len(bad):
            _layout_error(bad, starts, "BODYLEN runs past the record")
        # Topic and properties: read from one compact copy of the records' tails when they have one length
        # (one producer's messages), else in place. `tail` is that buffer; positions from here on index it.
        tail, topic_pos, record_end = _tails(buf, topic_pos, record_end)
        topic_len = tail[topic_pos].astype(np.int64)
        if v2.any():
            topic_len = np.where(v2, gather(tail, topic_pos, ">i2"), topic_len)
        topic_start = topic_pos + 1 + v2
        props_pos = topic_start + topic_len
        bad = np.flatnonzero((topic_len < 0) | (props_pos + 2 > record_end))
        if len(bad):
            _layout_error(bad, starts, "TOPICLEN runs past the record")
        props_len = gather(tail, props_pos, ">i2").astype(np.int64)
        props_start = props_pos + 2
        bad = np.flatnonzero((props_len < 0) | (props_start + props_len != record_end))
        if len(bad):
            _layout_error(bad, starts, "PROPLEN does not end at TOTALSIZE")
        self._tail, self._topic_start, self._topic_len = tail, topic_start, topic_len
        self._props_start, self._props_len = props_start, props_len

    def body(self, decompress: bool) -> pa.Array:
        return _bodies(self._buf, self._body_start, self._body_len, self.sysflag if decompress else None)

    def topic(self) -> pa.Array:
        return _repeated_or_views(self._tail, self._topic_start, self._topic_len)

    def property_rows(self) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray] | None] | None:
        """The property strings as rows of one width, when they have one length, with each byte column's
        highest and lowest value if already known (`parse_property_rows`'s `folded`); else None."""
        width = self._props_len
        if not (width == width[0]).all():
            return None
        return rows_at(self._tail, self._props_start, int(width[0])), None

    def raw_properties(self) -> pa.Array:
        return view_array(pa.string(), [self._tail], self._props_start, self._props_len)

    def parsed_properties(self) -> PropertyColumns | None:
        return None


#: The columns `_stored_scan.scan_stored` returns, in its order (its I32_AT and I64_AT): int32 fields, then int64.
_SCANNED_I32 = ("queue_id", "flag", "crc", "sysflag", "born_port", "store_port", "reconsume")
_SCANNED_I64 = ("queue_offset", "commitlog_offset", "born_ts", "store_ts", "prepared")


class _ScannedRecords:
    """The records as `_stored_scan.scan_stored` found them (common layout only: IPv4 hosts, bodies not
    compressed): every column already gathered, in native order."""

    def __init__(self, scanned: tuple, names: tuple[str, ...] | None = None) -> None:
        n, self._props_width, i32, i64, born_ip, store_ip, *self._parts, self._parsed = scanned
        self._names = names  # what the scan parsed the properties for, if it did
        self.n = n
        a32 = np.frombuffer(i32, np.int32).reshape(len(_SCANNED_I32), n)
        a64 = np.frombuffer(i64, np.int64).reshape(len(_SCANNED_I64), n)
        self._fields = {
            **dict(zip(_SCANNED_I32, a32, strict=True)),
            **dict(zip(_SCANNED_I64, a64, strict=True)),
        }
        self.sysflag = self._fields["sysflag"]
        self.born_ip = np.frombuffer(born_ip, np.uint8).reshape(n, 4)
        self.store_ip = np.frombuffer(store_ip, np.uint8).reshape(n, 4)

    def field(self, name: str) -> np.ndarray:
        return self._fields[name]

    def _strings(self, typ: pa.DataType, part: int) -> pa.Array:
        offsets, data = self._parts[2 * part], self._parts[2 * part + 1]
        return pa.Array.from_buffers(typ, self.n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])

    def body(self, decompress: bool) -> pa.Array:  # scan_stored leaves COMPRESSED pulls to _NumpyRecords
        return self._strings(pa.binary(), 0)

    def topic(self) -> pa.Array:
        return self._strings(pa.string(), 1)

    def property_rows(self) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray] | None] | None:
        if self._props_width < 0:
            return None
        rows = np.frombuffer(self._parts[5], np.uint8).reshape(self.n, self._props_width)
        return rows, (np.frombuffer(self._parts[6], np.uint8), np.frombuffer(self._parts[7], np.uint8))

    def raw_properties(self) -> pa.Array:
        if self._parsed is not None:
            raise RuntimeError("the scan parsed the properties: their strings were not kept")
        return self._strings(pa.string(), 2)

    def parsed_properties(self) -> PropertyColumns | None:
        """The properties as the scan parsed them (`parse_properties_column`'s result for the names it was
        given), or None when it was not asked to."""
        if self._parsed is None or self._names is None:
            return None
        n = self.n
        per_name, map_offsets, key_offsets, keys, value_offsets, values = self._parsed
        columns: dict[str, pa.Array] = {}
        for name, column in zip(self._names, per_name, strict=True):
            if column is None:  # no message has it
                columns[name] = pa.nulls(n, pa.string())
                continue
            offsets, data, valid, nulls = column
            bits = None if valid is None else np.packbits(np.frombuffer(valid, np.bool_), bitorder="little")
            buffers = [
                None if bits is None else pa.py_buffer(bits),
                pa.py_buffer(offsets),
                pa.py_buffer(data),
            ]
            columns[name] = pa.Array.from_buffers(pa.string(), n, buffers, null_count=nulls)
        items = len(key_offsets) // 4 - 1
        others = pa.MapArray.from_arrays(
            pa.Array.from_buffers(pa.int32(), n + 1, [None, pa.py_buffer(map_offsets)]),
            pa.Array.from_buffers(pa.string(), items, [None, pa.py_buffer(key_offsets), pa.py_buffer(keys)]),
            pa.Array.from_buffers(
                pa.string(), items, [None, pa.py_buffer(value_offsets), pa.py_buffer(values)]
            ),
        )
        return PropertyColumns(columns, others)


def _scanned(
    buf: np.ndarray, spans: Sequence[tuple[int, int]], names: tuple[str, ...] | None = None
) -> _ScannedRecords | None:
    """The records of `buf`'s spans through the C scan, when it is built and they have the common layout;
    with `names`, their properties parsed in the scan (those names' values, the others not hidden from a
    reader as a map) instead of copied."""
    if _stored_scan is None or not len(buf):
        return None
    bounds = np.array(spans, dtype=np.int64).reshape(-1)
    if names is not None and len(names) > _SCAN_NAMES:
        names = None
    if names is None:
        scanned = _stored_scan.scan_stored(buf, bounds)
    else:
        scanned = _stored_scan.scan_stored(buf, bounds, _encoded(names), _HIDDEN)
    return None if scanned is None or not scanned[0] else _ScannedRecords(scanned, names)


#: The most property names the scan parses values of (its MAX_WANTED); more are left to numpy's parse.
_SCAN_NAMES = 32
#: HIDDEN_FROM_READER as the scan takes it.
_HIDDEN = tuple(sorted(name.encode() for name in HIDDEN_FROM_READER))


@functools.lru_cache(maxsize=64)
def _encoded(names: tuple[str, ...]) -> tuple[bytes, ...]:
    return tuple(name.encode() for name in names)


def _property_names(extra_names: tuple[str, ...]) -> tuple[str, ...]:
    """The properties a decode reads: the well-known ones, then the caller's extra ones."""
    return (*WELL_KNOWN, *(name for name in extra_names if name not in WELL_KNOWN))


def _decode_records(
    records: _NumpyRecords | _ScannedRecords,
    *,
    decompress: bool,
    derive: bool,
    extra_names: tuple[str, ...] = (),
    raw_properties: bool = True,
    wanted: frozenset[str] = frozenset(STORED_SCHEMA.names),
    host_ports: bool = True,
) -> pa.RecordBatch:
    n = records.n
    schema = pa.schema([f for f in STORED_SCHEMA if f.name in wanted])
    for name in extra_names:
        schema = schema.append(pa.field(name, pa.string()))
    if n == 0:
        return pa.RecordBatch.from_pylist([], schema=schema)
    sysflag, field = records.sysflag, records.field

    arrays: dict[str, pa.Array] = {}
    if "body" in wanted:
        arrays["body"] = records.body(decompress)
    if "topic" in wanted:
        arrays["topic"] = records.topic()
    for column, (name, storage, typ) in _FIELD_COLUMNS.items():
        if column in wanted:
            arrays[column] = from_numpy(field(name), storage).view(typ)
    if "sysflag" in wanted:  # inflated bodies are no longer COMPRESSED
        out_sysflag = sysflag & ~np.int32(MessageSysFlag.COMPRESSED) if decompress else sysflag
        arrays["sysflag"] = from_numpy(out_sysflag, pa.int32())

    derived = derive and bool(wanted & _DERIVED)
    parsed = None
    property_names = _property_names(extra_names)
    keep_raw = raw_properties and "raw_properties" in wanted
    if (derived or extra_names) and not keep_raw:
        parsed = records.parsed_properties()
        uniform = records.property_rows() if parsed is None else None
        if uniform is not None:  # one property layout: parsed as rows of one width
            parsed = parse_property_rows(uniform[0], property_names, folded=uniform[1])
    raw_props = None
    if keep_raw or ((derived or extra_names) and parsed is None):
        raw_props = records.raw_properties()
    if "raw_properties" in wanted:
        arrays["raw_properties"] = raw_props if raw_props is not None else pa.nulls(n, pa.string())
    store_v6 = (sysflag & MessageSysFlag.STOREHOST_V6) != 0
    if "born_host" in wanted:
        born_v6 = (sysflag & MessageSysFlag.BORNHOST_V6) != 0
        arrays["born_host"] = _hosts(records.born_ip, field("born_port") if host_ports else None, born_v6)
    if "store_host" in wanted:
        ports = field("store_port") if host_ports else None
        arrays["store_host"] = _hosts(records.store_ip, ports, store_v6)

    def offset_ids(rows: np.ndarray | None = None) -> pa.Array:
        sel = slice(None) if rows is None else rows
        return _offset_ids(
            records.store_ip[sel],
            field("store_port")[sel],
            field("commitlog_offset")[sel],
            store_v6[sel],
        )

    if derived or extra_names:
        if parsed is None:
            assert raw_props is not None
            parsed = parse_properties_column(raw_props, names=property_names)
        for name in extra_names:
            arrays[name] = parsed.values[name]
    if derived:
        assert parsed is not None
        v = parsed.values
        if "message_id" in wanted:
            uniq = v[UNIQ_KEY]
            if uniq.null_count:  # offset message ids only where a message has no UNIQ_KEY
                present_mask = bool_values(uniq.is_valid())
                missing = np.flatnonzero(~present_mask)
                ids = pa.concat_arrays([uniq.drop_null(), offset_ids(missing)])
                present = np.flatnonzero(present_mask)
                uniq = pc.take(ids, np.argsort(np.concatenate([present, missing]), kind="stable"))
            arrays["message_id"] = uniq
        arrays["tags"] = v[TAGS]
        arrays["message_group"] = v[SHARDING_KEY]
        if "keys" in wanted:
            arrays["keys"] = _split_keys(v[KEYS])
        if "delivery_timestamp" in wanted:
            arrays["delivery_timestamp"] = _delivery(
                v[TIMER_DELIVER_MS], v[TIMER_OUT_MS], v[START_DELIVER_TIME]
            )
        arrays["properties"] = parsed.others
    else:
        if "message_id" in wanted:
            arrays["message_id"] = offset_ids()
        arrays["tags"] = arrays["message_group"] = pa.nulls(n, pa.string())
        arrays["keys"] = pa.ListArray.from_arrays(
            from_numpy(np.zeros(n + 1, np.int32)), pa.nulls(0, pa.string())
        )
        arrays["delivery_timestamp"] = pa.nulls(n, _TS)
        arrays["properties"] = pa.MapArray.from_arrays(
            from_numpy(np.zeros(n + 1, np.int32)), pa.nulls(0, pa.string()), pa.nulls(0, pa.string())
        )
    return pa.RecordBatch.from_arrays([arrays[f.name] for f in schema], schema=schema)


def _bodies(buf: np.ndarray, start: np.ndarray, length: np.ndarray, sysflag: np.ndarray | None) -> pa.Array:
    """The body column: views into the input; with `sysflag`, COMPRESSED bodies inflated into a buffer of
    their own."""
    zipped = np.flatnonzero(sysflag & MessageSysFlag.COMPRESSED) if sysflag is not None else ()
    if not len(zipped):
        return view_array(pa.binary(), [buf], start, length)
    assert sysflag is not None
    inflated = [_inflate(buf, int(start[i]), int(length[i]), int(sysflag[i]), int(i)) for i in zipped]
    extra = np.zeros(sum(map(len, inflated)) + PAD, dtype=np.uint8)
    lengths = np.array([len(x) for x in inflated], dtype=np.int64)
    offs = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    for o, x in zip(offs, inflated, strict=True):
        extra[o : o + len(x)] = np.frombuffer(x, dtype=np.uint8)
    index = np.zeros(len(start), dtype=np.int32)
    index[zipped] = 1
    start, length = start.copy(), length.copy()
    start[zipped] = offs
    length[zipped] = lengths
    return view_array(pa.binary(), [buf, extra], start, length, index)


def _widened(ip: np.ndarray) -> np.ndarray:
    """Rows of 4 address bytes → rows of 16 (the IPv4 address first), to take IPv6 addresses too."""
    out = np.zeros((len(ip), 16), dtype=np.uint8)
    out[:, :4] = ip
    return out


def _tails(buf: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The records' tails (`start` to `end`) as (buffer, starts, ends): a compact copy of them all when they
    have one length, else `buf` and the given positions."""
    width = end - start
    if len(start) < 2 or (width != width[0]).any():
        return buf, start, end
    k = int(width[0])
    copy = rows_at(buf, start, k).reshape(-1)
    starts = np.arange(0, k * len(start), k, dtype=np.int64)
    return copy, starts, starts + k


def _layout_error(bad: np.ndarray, starts: np.ndarray, what: str) -> None:
    i = int(bad[0])
    raise MessageDecodeError(f"record {i} at offset {int(starts[i])}: {what}")


def _inflate(buf: np.ndarray, start: int, length: int, sysflag: int, index: int) -> bytes:
    raw = buf[start : start + length].tobytes()
    try:
        kind = compression_type(sysflag)
        if kind == CompressionType.ZLIB:
            return zlib.decompress(raw)
        if kind == CompressionType.ZSTD:
            import zstandard  # optional: only for ZSTD-compressed bodies

            return zstandard.ZstdDecompressor().decompress(raw, max_output_size=64 * 1024 * 1024)
    except (ValueError, zlib.error, ImportError) as e:
        raise MessageDecodeError(f"record {index}: cannot decompress its body ({e})") from None
    raise MessageDecodeError(f"record {index}: {kind.name} bodies are not supported (sysflag {sysflag:#x})")


def _repeated_or_views(buf: np.ndarray, start: np.ndarray, length: np.ndarray) -> pa.Array:
    """Strings that are usually all equal (a pull holds one topic): one scalar repeated when they are."""
    n = len(start)
    if n and (length == length[0]).all() and length[0] <= 255:
        k = int(length[0])
        if k == 0:
            return repeat_scalar(binary_scalar("", pa.string()), n)
        window = rows_at(buf, start, k)
        if (window == window[0]).all():
            return repeat_scalar(
                binary_scalar(window[0].tobytes().decode("utf-8", "replace"), pa.string()), n
            )
    return view_array(pa.string(), [buf], start, length)


def _hosts(ip: np.ndarray, port: np.ndarray | None, v6: np.ndarray) -> pa.Array:
    """Host strings of rows of address bytes; without `port`, the address alone."""
    if not v6.any():
        return host_strings(ip[:, :4], port)
    if v6.all():
        return host_strings(ip, port)
    four, six = np.flatnonzero(~v6), np.flatnonzero(v6)
    parts = [
        host_strings(ip[rows, :width], None if port is None else port[rows])
        for rows, width in ((four, 4), (six, 16))
    ]
    return pc.take(pa.concat_arrays(parts), np.argsort(np.concatenate([four, six]), kind="stable"))


def _offset_ids(ip: np.ndarray, port: np.ndarray, offset: np.ndarray, v6: np.ndarray) -> pa.Array:
    """`MessageDecoder.createMessageId`: hex of store IP + port + commit-log offset, per row."""
    n = len(port)
    port_b = port.astype(">i4").view(np.uint8).reshape(n, 4)
    off_b = offset.astype(">i8").view(np.uint8).reshape(n, 8)
    buffers: list[np.ndarray] = []
    starts = np.zeros(n, dtype=np.int64)
    index = v6.astype(np.int32)
    for is6 in (False, True):
        rows = np.flatnonzero(v6 == is6)
        width = 16 if is6 else 4
        text = hex_upper(np.concatenate([ip[rows, :width], port_b[rows], off_b[rows]], axis=1))
        buf = np.zeros(text.size + PAD, dtype=np.uint8)
        buf[: text.size] = text.reshape(-1)
        starts[rows] = np.arange(len(rows), dtype=np.int64) * text.shape[1]
        buffers.append(buf)
    return view_array(pa.string(), buffers, starts, np.where(v6, 56, 32), index)


def _split_keys(keys: pa.Array) -> pa.Array:
    if keys.null_count == len(keys):  # no message has KEYS: empty lists without a split
        return pa.ListArray.from_arrays(
            from_numpy(np.zeros(len(keys) + 1, np.int32)), pa.nulls(0, pa.string())
        )
    lists = pc.split_pattern(pc.fill_null(keys, ""), " ")
    flat = lists.flatten()
    if len(flat) and pc.any(pc.equal(flat, "")).as_py():
        lengths = int64_values(pc.list_value_length(lists))
        keep = bool_values(pc.not_equal(flat, ""))
        row = np.repeat(np.arange(len(lists)), lengths)
        offsets = np.zeros(len(lists) + 1, dtype=np.int32)
        np.cumsum(np.bincount(row[keep], minlength=len(lists)), out=offsets[1:])
        return pa.ListArray.from_arrays(from_numpy(offsets), flat.filter(from_numpy(keep)))
    return lists


def _delivery(*candidates: pa.Array) -> pa.Array:
    """The first candidate holding a decimal integer, as a timestamp; null when none does."""
    out = None
    for c in candidates:
        if c.null_count == len(c):
            continue
        ok = pc.match_substring_regex(c, r"^-?[0-9]{1,18}$")
        values = pc.cast(pc.if_else(ok, c, pa.nulls(len(c), pa.string())), pa.int64()).view(_TS)
        out = values if out is None else pc.coalesce(out, values)
    return pa.nulls(len(candidates[0]), _TS) if out is None else out


# ------------------------------------------------------------------------------------------------ encode


def _as_array(
    value: pa.Array | np.ndarray | Sequence | int | str | bytes, n: int, typ: pa.DataType
) -> pa.Array:
    if isinstance(value, pa.ChunkedArray):
        value = value.combine_chunks()
    if isinstance(value, pa.Array):
        return value if value.type == typ else value.cast(typ)
    if isinstance(value, int | str | bytes):
        return pa.repeat(pa.scalar(value, typ), n)
    return pa.array(value, typ)


def _int_col(value: pa.Array | np.ndarray | Sequence[int] | int, n: int, dtype: str) -> np.ndarray:
    if isinstance(value, int):
        return np.full(n, value, dtype=dtype)
    if isinstance(value, pa.ChunkedArray):
        value = value.combine_chunks()
    if isinstance(value, pa.Array):
        if pa.types.is_timestamp(value.type):
            value = value.cast(pa.timestamp("ms")).view(pa.int64())
        value = value.fill_null(0).to_numpy(zero_copy_only=False)
    return np.asarray(value).astype(dtype, copy=False)


def _fixed_rows(rows: np.ndarray) -> pa.Array:
    """A binary array whose i-th value is row i of a 2-D uint8 (or structured) array."""
    n = len(rows)
    flat = np.ascontiguousarray(rows).view(np.uint8).reshape(-1)
    width = flat.size // n if n else 0
    offsets = np.arange(0, width * (n + 1), width, dtype=np.int32) if n else np.zeros(1, np.int32)
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(flat)])


def _join_buffer(pieces: Sequence[pa.Array | bytes]) -> pa.Buffer:
    """Row i of every piece (bytes: the same in every row), concatenated, for all rows:
    binary_join_element_wise's data, not copied. At least one piece is an array."""
    merged: list[pa.Array | bytes] = []
    for p in pieces:
        if isinstance(p, bytes) and merged and isinstance(merged[-1], bytes):
            merged[-1] += p
        elif not (isinstance(p, bytes) and not p):
            merged.append(p)
    arrays = [p for p in merged if not isinstance(p, bytes)]
    n = len(arrays[0])
    total = sum(_data_size(a) for a in arrays) + n * sum(len(p) for p in merged if isinstance(p, bytes))
    if n and total < 2**31 - 1:
        rows = fixed_width_rows(merged, n)
        if rows is not None:
            return pa.py_buffer(rows.reshape(-1))
    typ = pa.binary() if total < 2**31 - 1 else pa.large_binary()
    args = [pa.scalar(p, typ) if isinstance(p, bytes) else _as_binary(p, typ) for p in merged]
    joined = pc.binary_join_element_wise(*args, pa.scalar(b"", typ))
    data = joined.buffers()[2]
    if data is None or not len(joined):
        return pa.py_buffer(b"")
    width = np.int32 if typ == pa.binary() else np.int64
    offsets = np.frombuffer(joined.buffers()[1], dtype=width)
    first, last = int(offsets[joined.offset]), int(offsets[joined.offset + len(joined)])
    return data.slice(first, last - first)


def _data_size(arr: pa.Array) -> int:
    """Bytes of an array's values (string or binary, either offset width)."""
    if not len(arr):
        return 0
    width = np.int64 if pa.types.is_large_binary(arr.type) or pa.types.is_large_string(arr.type) else np.int32
    offsets = np.frombuffer(arr.buffers()[1], dtype=width)
    return int(offsets[arr.offset + len(arr)] - offsets[arr.offset])


def _as_binary(arr: pa.Array, typ: pa.DataType) -> pa.Array:
    """`arr` (string or binary) as `typ`, nulls as empty values; strings are viewed, not copied."""
    if arr.null_count:
        arr = pc.fill_null(
            arr,
            pa.scalar(
                b"" if pa.types.is_binary(arr.type) or pa.types.is_large_binary(arr.type) else "", arr.type
            ),
        )
    if pa.types.is_string(arr.type):
        arr = arr.view(pa.binary())
    elif pa.types.is_large_string(arr.type):
        arr = arr.view(pa.large_binary())
    return arr if arr.type == typ else arr.cast(typ)


def _join_bytes(pieces: list[pa.Array]) -> bytes:
    """Row i of every piece, concatenated, for all rows, as bytes."""
    return _join_buffer(pieces).to_pybytes()


def encode_stored(**columns: Any) -> bytes:
    """Stored-message records from columns (a pull-response body); the inverse of `decode_stored`. Takes
    the keywords of `encode_stored_records`."""
    data, _ = encode_stored_records(**columns)
    return data.to_pybytes()


def encode_stored_records(
    *,
    topic: pa.Array | str,
    queue_id: pa.Array | np.ndarray | int,
    queue_offset: pa.Array | np.ndarray,
    commitlog_offset: pa.Array | np.ndarray,
    body: pa.Array | Sequence[bytes],
    properties: pa.Array | Sequence[str] | str = "",
    born_timestamp: pa.Array | np.ndarray | int = 0,
    store_timestamp: pa.Array | np.ndarray | int = 0,
    born_host: pa.Array | str = "127.0.0.1:0",
    store_host: pa.Array | str = "127.0.0.1:10911",
    sysflag: pa.Array | np.ndarray | int = 0,
    flag: pa.Array | np.ndarray | int = 0,
    reconsume_times: pa.Array | np.ndarray | int = 0,
    prepared_transaction_offset: pa.Array | np.ndarray | int = 0,
    body_crc: pa.Array | np.ndarray | None = None,
    property_pieces: Sequence[pa.Array | str] | None = None,
) -> tuple[pa.Buffer, np.ndarray]:
    """Stored-message records from columns, back to back, and where each starts (int64, one more than the
    records: the last is the end), so callers can keep the records and cut runs of them out later.

    `body` is written as given (already compressed if sysflag says COMPRESSED). The IPv6 host bits of
    `sysflag` are set from the hosts; a topic over 127 bytes gets MAGIC_V2. `body_crc` (crc32 & 0x7FFFFFFF
    of the body) is computed when not given — a per-message zlib.crc32 call, so pass it if you have it.
    `properties` are raw property strings (see `properties.build_properties_column`); `property_pieces`,
    when given instead, are their pieces not yet joined (`properties.property_pieces`: a str is the same in
    every row), joined straight into the records.
    """
    body_arr = _as_array(body, 0, pa.binary())
    n = len(body_arr)
    topic_arr = _as_array(topic, n, pa.string())
    prop_parts = [
        p.encode("utf-8") if isinstance(p, str) else _as_array(p, n, pa.string())
        for p in (property_pieces if property_pieces is not None else [properties])
    ]
    b6, born_ip, born_port = _host_cols(born_host, n)
    s6, store_ip, store_port = _host_cols(store_host, n)
    flags = _int_col(sysflag, n, np.int32) & ~np.int32(
        MessageSysFlag.BORNHOST_V6 | MessageSysFlag.STOREHOST_V6
    )
    flags |= np.where(b6, np.int32(MessageSysFlag.BORNHOST_V6), 0).astype(np.int32)
    flags |= np.where(s6, np.int32(MessageSysFlag.STOREHOST_V6), 0).astype(np.int32)
    body_len = _lengths(body_arr)
    topic_len = _lengths(topic_arr)
    props_len = np.zeros(n, dtype=np.int64)
    for p in prop_parts:
        props_len += len(p) if isinstance(p, bytes) else _lengths(p)
    if (props_len > 32767).any():
        raise ValueError("a message's properties exceed 32767 bytes (PROPLEN is an int16)")
    if (topic_len > 32767).any():
        raise ValueError("a topic exceeds 32767 bytes")
    v2 = topic_len > MAX_V1_TOPIC_BYTES
    if body_crc is None:
        crc = np.fromiter(
            (zlib.crc32(b) & 0x7FFFFFFF for b in _iter_bytes(body_arr)), dtype=np.int32, count=n
        )
    else:
        crc = _int_col(body_crc, n, np.int32)
    layout = b6.astype(np.int64) | (s6.astype(np.int64) << 1)
    head_len = 88 + 12 * b6 + 12 * s6
    size = head_len + body_len + 1 + v2 + topic_len + 2 + props_len
    if (size > 2**31 - 1).any():
        raise ValueError("a record exceeds 2 GiB")

    header_offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(head_len, out=header_offsets[1:])
    header_data = np.empty(int(header_offsets[-1]), dtype=np.uint8)
    fields = {
        "size": size, "magic": np.where(v2, MAGIC_V2, MAGIC_V1), "crc": crc,
        "queue_id": _int_col(queue_id, n, np.int32), "flag": _int_col(flag, n, np.int32),
        "queue_offset": _int_col(queue_offset, n, np.int64), "commitlog_offset": _int_col(commitlog_offset, n, np.int64),
        "sysflag": flags, "born_ts": _int_col(born_timestamp, n, np.int64), "born_port": born_port,
        "store_ts": _int_col(store_timestamp, n, np.int64), "store_port": store_port,
        "reconsume": _int_col(reconsume_times, n, np.int32),
        "prepared": _int_col(prepared_transaction_offset, n, np.int64), "body_len": body_len,
    }  # fmt: skip
    codes = [] if not n else [int(layout[0])] if layout.min() == layout.max() else np.unique(layout).tolist()
    for code in codes:
        bv6, sv6 = bool(code & 1), bool(code & 2)
        dt = _LAYOUTS[(bv6, sv6)]
        uniform = len(codes) == 1  # every record has this layout: no row selection, no scatter
        rows = slice(None) if uniform else np.flatnonzero(layout == code)
        rec = np.zeros(n if uniform else len(rows), dtype=dt)
        fill_fields(rec, [(name, col[rows]) for name, col in fields.items()])
        raw = rec.view(np.uint8).reshape(len(rec), dt.itemsize)
        bw, sw = (16 if bv6 else 4), (16 if sv6 else 4)
        raw[:, 48 : 48 + bw] = born_ip[rows, :bw]
        raw[:, 60 + bw : 60 + bw + sw] = store_ip[rows, :sw]
        if uniform:
            header_data = raw.reshape(-1)
            break
        target = np.lib.stride_tricks.as_strided(
            header_data,
            shape=(max(len(header_data) - dt.itemsize + 1, 0), dt.itemsize),
            strides=(1, 1),
            writeable=True,
        )
        target[header_offsets[rows]] = raw
    headers = pa.Array.from_buffers(
        pa.binary(), n, [None, pa.py_buffer(header_offsets.astype(np.int32)), pa.py_buffer(header_data)]
    )
    if isinstance(topic, str):
        name = topic.encode("utf-8")
        topic_parts: list[pa.Array | bytes] = [len(name).to_bytes(2 if v2[:1].any() else 1, "big") + name]
    else:
        topic_prefix = np.where(v2, 2, 1)
        tlen_bytes = np.zeros((n, 2), dtype=np.uint8)
        tl = topic_len.astype(">u2").view(np.uint8).reshape(n, 2)
        tlen_bytes[v2] = tl[v2]
        tlen_bytes[~v2, 0] = tl[~v2, 1]
        topic_parts = [_variable_rows(tlen_bytes, topic_prefix), topic_arr]
    if n and (props_len == props_len[0]).all():
        plen: pa.Array | bytes = int(props_len[0]).to_bytes(2, "big")
    else:
        plen = _fixed_rows(props_len.astype(">u2").view(np.uint8).reshape(n, 2))
    starts = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(size, out=starts[1:])
    return _join_buffer([headers, body_arr, *topic_parts, plen, *prop_parts]), starts


def _variable_rows(rows: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """Binary values rows[i, :lengths[i]]."""
    n = len(lengths)
    if n and (lengths == lengths[0]).all():
        return _fixed_rows(rows[:, : int(lengths[0])])
    buf = np.zeros(rows.size + PAD, dtype=np.uint8)
    buf[: rows.size] = rows.reshape(-1)
    return view_array(pa.binary(), [buf], np.arange(n, dtype=np.int64) * rows.shape[1], lengths)


def _lengths(arr: pa.Array) -> np.ndarray:
    if arr.null_count:
        arr = arr.fill_null(b"" if pa.types.is_binary(arr.type) else "")
    return np.diff(value_offsets(arr)).astype(np.int64)


def _iter_bytes(arr: pa.Array):
    """Each value of a binary array as a memoryview slice of its data buffer (no per-value copy)."""
    offsets = value_offsets(arr).tolist()
    data = memoryview(arr.buffers()[2]) if arr.buffers()[2] is not None else memoryview(b"")
    for a, b in itertools.pairwise(offsets):
        yield data[a:b]


def _host_cols(hosts: pa.Array | str, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if isinstance(hosts, str):
        is6, ip, port = _one_host(hosts)
        return np.full(n, is6), np.broadcast_to(ip, (n, 16)), np.full(n, port, np.int32)
    return parse_hosts(_as_array(hosts, n, pa.string()))


@functools.lru_cache(maxsize=64)
def _one_host(host: str) -> tuple[bool, np.ndarray, int]:
    """One "ip:port" parsed (the broker's own host, a pull's single producer host): cached."""
    is6, ip, port = parse_hosts(pa.array([host]))
    ip = ip[0].copy()
    ip.flags.writeable = False
    return bool(is6[0]), ip, int(port[0])


# ------------------------------------------------------------------------------------------------ batch


def encode_batch(
    body: pa.Array | Sequence[bytes],
    properties: pa.Array | Sequence[str] | str,
    flag: pa.Array | np.ndarray | int = 0,
) -> bytes:
    """A SEND_BATCH_MESSAGE body (`MessageBatch.encode`): every message with MAGICCODE and BODYCRC 0.

    `properties` are each message's own property strings (its UNIQ_KEY, TAGS, KEYS, ...): see
    `properties.build_properties_column`. Bodies are never compressed in a batch.
    """
    body_arr = _as_array(body, 0, pa.binary())
    n = len(body_arr)
    props_arr = _as_array(properties, n, pa.string())
    body_len = _lengths(body_arr)
    props_len = _lengths(props_arr)
    if (props_len > 32767).any():
        raise ValueError("a message's properties exceed 32767 bytes (PROPLEN is an int16)")
    head = np.zeros(
        n, dtype=[("size", ">i4"), ("magic", ">i4"), ("crc", ">i4"), ("flag", ">i4"), ("body_len", ">i4")]
    )
    head["size"] = 20 + body_len + 2 + props_len
    head["flag"] = _int_col(flag, n, np.int32)
    head["body_len"] = body_len
    plen = props_len.astype(">i2").view(np.uint8).reshape(n, 2)
    return _join_bytes([_fixed_rows(head), body_arr, _fixed_rows(plen), props_arr])


def decode_batch(data: bytes | bytearray | memoryview) -> pa.RecordBatch:
    """A SEND_BATCH_MESSAGE body → RecordBatch of `BATCH_SCHEMA` (flag, body, raw_properties).

    Raises BatchDecodeError for a bad TOTALSIZE, body length or properties length.
    """
    buf, spans = _concat(data)
    try:
        starts = record_starts(buf, spans, _MIN_BATCHED)
        if len(starts) == 0:
            return pa.RecordBatch.from_pylist([], schema=BATCH_SCHEMA)
    except MessageDecodeError as e:
        raise BatchDecodeError(str(e)) from None
    size = gather(buf, starts, ">i4").astype(np.int64)
    flag = gather(buf, starts + 12, ">i4")
    body_len = gather(buf, starts + 16, ">i4").astype(np.int64)
    end = starts + size
    body_start = starts + 20
    bad = np.flatnonzero((body_len < 0) | (body_start + body_len + 2 > end))
    if len(bad):
        raise BatchDecodeError(f"batched message {int(bad[0])}: BODYLEN runs past its TOTALSIZE")
    props_len = gather(buf, body_start + body_len, ">i2").astype(np.int64)
    props_start = body_start + body_len + 2
    bad = np.flatnonzero((props_len < 0) | (props_start + props_len != end))
    if len(bad):
        raise BatchDecodeError(f"batched message {int(bad[0])}: PROPLEN does not end at its TOTALSIZE")
    return pa.RecordBatch.from_arrays(
        [
            pa.array(flag, pa.int32()),
            view_array(pa.binary(), [buf], body_start, body_len),
            view_array(pa.string(), [buf], props_start, props_len),
        ],
        schema=BATCH_SCHEMA,
    )
