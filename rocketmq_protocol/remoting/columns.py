"""numpy/pyarrow building blocks of the columnar codecs: unaligned gathers, byte-range views, hex, hosts.

The codecs never loop over messages in Python except to follow TOTALSIZE from record to record; every
other step is a whole-array operation built from these helpers.
"""

from __future__ import annotations

import ipaddress

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..arrow_values import (
    binary_scalar,
    fixed_width,
    from_numpy,
    int64_values,
    repeat_scalar,
    string_array,
    value_offsets,
)

__all__ = [
    "PAD",
    "as_u8",
    "even_step",
    "fixed_width",
    "fold_rows",
    "gather",
    "hex_upper",
    "host_strings",
    "parse_hosts",
    "rows_at",
    "rows_view",
    "uniform_value",
    "value_offsets",
    "view_array",
]

#: Zero bytes added after the buffers the codecs build themselves, so 8-byte reads near their end stay inside.
PAD = 16

#: Byte value → its two upper-case hex characters, as one uint16 (their bytes in memory order).
_HEX_PAIRS = np.frombuffer(b"".join(b"%02X" % i for i in range(256)), dtype=np.uint16)
_INT32_MAX = 2**31 - 1
_SHORT_COPY = 24  # values up to this many bytes are copied by fixed-width rows rather than through views
_WORD_MASKS = np.array([0, 0xFF, 0xFFFF, 0xFFFFFF, 0xFFFFFFFF], dtype=np.uint32)  # [bytes kept] → mask


def as_u8(data: bytes | bytearray | memoryview | np.ndarray) -> np.ndarray:
    if isinstance(data, np.ndarray):
        return data.view(np.uint8).reshape(-1)
    return np.frombuffer(data, dtype=np.uint8)


def gather(buf: np.ndarray, positions: np.ndarray, dtype: str) -> np.ndarray:
    """The `dtype` values (e.g. '>i4', '>i8', '<u8') at arbitrary byte positions of `buf`, native-endian.

    Values at evenly stepped positions are read through a strided view (`rows_view`) in one pass; others
    are gathered with one memcpy per row, then reinterpreted.
    """
    dt = np.dtype(dtype)
    raw = rows_view(buf, positions, dt.itemsize)
    # a strided view is read-only and shares `buf`: copy it even when no byte swap is needed
    return raw.view(dt).reshape(len(positions)).astype(dt.newbyteorder("="), copy=not raw.flags.writeable)


def _words(src: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Little-endian uint32 at each byte position; bytes past the end of `src` read as zero."""
    limit = len(src) - 3
    if len(pos) == 0 or int(pos.max()) < limit:
        return gather(src, pos, "<u4")
    out = (
        gather(src, np.minimum(pos, max(limit - 1, 0)), "<u4") if limit > 0 else np.zeros(len(pos), np.uint32)
    )
    for i in np.flatnonzero(pos >= limit).tolist():  # values ending within 3 bytes of the buffer's end
        p = int(pos[i])
        out[i] = int.from_bytes(src[p : p + 4].tobytes().ljust(4, b"\0"), "little")
    return out


def uniform_value(arr: pa.Array) -> bytes | None:
    """The bytes every row of a non-empty string/binary array holds, or None when the rows differ or one is
    null: one byte comparison instead of hashing each value (a pull's rows mostly share their hosts)."""
    n = len(arr)
    if n == 0 or arr.null_count or not (pa.types.is_string(arr.type) or pa.types.is_binary(arr.type)):
        return None
    offsets = value_offsets(arr)
    width = fixed_width(offsets)
    if width is None:
        return None
    data = np.frombuffer(arr.buffers()[2] or b"", dtype=np.uint8)[offsets[0] : offsets[-1]].reshape(n, width)
    if width and (data != data[0]).any():
        return None
    return data[0].tobytes() if width else b""


def even_step(positions: np.ndarray) -> int | None:
    """The constant distance between consecutive positions (≥ 1), or None when they do not step evenly
    (fixed-size records do: their fields sit at one stride from each other)."""
    n = len(positions)
    if n < 2:
        return None
    step = int(positions[1]) - int(positions[0])
    if step < 1 or int(positions[-1]) - int(positions[0]) != step * (n - 1):
        return None
    return step if (np.diff(positions) == step).all() else None


def _stepped(buf: np.ndarray, positions: np.ndarray, width: int) -> tuple[int, int] | None:
    """(first position, step) when the positions step evenly and every row lies inside `buf`, else None."""
    step = even_step(positions)
    if step is None:
        return None
    first, last = int(positions[0]), int(positions[-1])
    return (first, step) if first >= 0 and last + width <= len(buf) else None


def _gathered(buf: np.ndarray, positions: np.ndarray, width: int) -> np.ndarray:
    """The `width` bytes at each position, copied with one memcpy per row."""
    count = max(len(buf) - width + 1, 0)
    items = np.ndarray(shape=(count,), dtype=np.dtype((np.void, width)), buffer=buf, offset=0, strides=(1,))
    return items[positions].view(np.uint8).reshape(len(positions), width)


def rows_view(buf: np.ndarray, positions: np.ndarray, width: int) -> np.ndarray:
    """The `width` bytes at each position as a (k, width) uint8 array: a read-only strided view of `buf`
    when the positions step evenly (no copy), else a copy gathered with one memcpy per row."""
    stepped = _stepped(buf, positions, width)
    if stepped is None:
        return _gathered(buf, positions, width)
    first, step = stepped
    return np.lib.stride_tricks.as_strided(
        buf[first:], shape=(len(positions), width), strides=(step, 1), writeable=False
    )


def rows_at(buf: np.ndarray, positions: np.ndarray, width: int) -> np.ndarray:
    """The `width` bytes at each position, as a contiguous (k, width) uint8 array of its own."""
    stepped = _stepped(buf, positions, width)
    if stepped is None:
        return _gathered(buf, positions, width)
    if width == 0:
        return np.empty((len(positions), 0), np.uint8)
    # evenly stepped rows copied as one `width`-byte item each: about twice as fast as a 2-D copy
    first, step = stepped
    items = np.ndarray((len(positions),), np.dtype((np.void, width)), buf, first, (step,))
    return items.copy().view(np.uint8).reshape(len(positions), width)


def fold_rows(rows: np.ndarray, op: np.ufunc) -> np.ndarray:
    """`op` (e.g. np.maximum) over the rows of a (k ≥ 1, width) array, column by column: halves combined
    pairwise, so each step is one long loop over contiguous memory (`reduce(axis=0)` loops per row)."""
    while len(rows) > 1:
        half = len(rows) // 2
        folded = op(rows[:half], rows[half : 2 * half])
        if len(rows) % 2:
            op(folded[0], rows[-1], out=folded[0])
        rows = folded
    return rows[0]


def view_array(
    typ: pa.DataType,
    buffers: list[np.ndarray],
    starts: np.ndarray,
    lengths: np.ndarray,
    buffer_index: np.ndarray | None = None,
    valid: np.ndarray | None = None,
) -> pa.Array:
    """A `binary`/`string` array whose i-th value is `buffers[buffer_index[i]][starts[i]:starts[i]+lengths[i]]`.

    Values of one length (UNIQ_KEYs, same-size bodies) are copied with one 2-D gather. Otherwise the
    array is built as an Arrow binary_view/string_view (16-byte views pointing into the buffers, no copy)
    and cast to `typ` (binary or string), which copies each value once. Null where `valid` is False.
    """
    n = len(starts)
    if n == 0:
        return pa.nulls(0, typ)
    lengths = lengths.astype(np.int64, copy=False)
    validity = None
    null_count = 0
    if valid is not None and not valid.all():
        validity = pa.py_buffer(np.packbits(valid, bitorder="little"))
        null_count = int(n - np.count_nonzero(valid))
        lengths = np.where(valid, lengths, 0)
    rows = np.flatnonzero(valid) if null_count else None
    present = lengths if rows is None else lengths[rows]
    if len(buffers) == 1 and len(present) and (present == present[0]).all() and 0 < present[0] <= 4096:
        width = int(present[0])
        picked = starts if rows is None else starts[rows]
        data = rows_at(buffers[0], picked, width)
        offsets = np.zeros(n + 1, dtype=np.int32)
        np.cumsum(lengths, out=offsets[1:])
        return pa.Array.from_buffers(
            typ, n, [validity, pa.py_buffer(offsets), pa.py_buffer(data)], null_count=null_count
        )
    if len(buffers) == 1 and len(present):
        widest = int(present.max())
        picked = starts if rows is None else starts[rows]
        if widest <= _SHORT_COPY and int(picked.max()) + widest <= len(buffers[0]):
            # Short values of mixed lengths: copy a fixed-width row each, then keep each row's first bytes.
            data = rows_at(buffers[0], picked, widest)[np.arange(widest) < present[:, None]]
            offsets = np.zeros(n + 1, dtype=np.int32)
            np.cumsum(lengths, out=offsets[1:])
            return pa.Array.from_buffers(
                typ, n, [validity, pa.py_buffer(offsets), pa.py_buffer(data)], null_count=null_count
            )
    view_type = pa.string_view() if pa.types.is_string(typ) else pa.binary_view()
    views = np.empty((n, 4), dtype=np.uint32)
    views[:, 0] = lengths
    index = np.zeros(n, dtype=np.int64) if buffer_index is None else buffer_index
    groups = (
        [(0, None)] if len(buffers) == 1 else [(b, np.flatnonzero(index == b)) for b in range(len(buffers))]
    )
    for b, sel in groups:
        src = buffers[b]
        if len(src) > _INT32_MAX:
            raise ValueError("a view buffer exceeds 2 GiB; decode fewer bytes at a time")
        pos = starts if sel is None else starts[sel]
        ln = lengths if sel is None else lengths[sel]
        short = ln <= 12
        first = _words(src, pos)
        if short.any():
            out = views if sel is None else np.empty((len(pos), 4), dtype=np.uint32)
            out[:, 1] = first & _WORD_MASKS[np.clip(ln, 0, 4)]
            out[:, 2] = b
            out[:, 3] = pos
            rows = slice(None) if short.all() else np.flatnonzero(short)
            p, k = pos[rows], ln[rows]
            out[rows, 2] = _words(src, p + 4) & _WORD_MASKS[np.clip(k - 4, 0, 4)]
            out[rows, 3] = _words(src, p + 8) & _WORD_MASKS[np.clip(k - 8, 0, 4)]
            if sel is not None:
                views[sel, 1:] = out[:, 1:]
        elif sel is None:
            views[:, 1] = first
            views[:, 2] = b
            views[:, 3] = pos
        else:
            views[sel, 1] = first
            views[sel, 2] = b
            views[sel, 3] = pos
    arr = pa.Array.from_buffers(
        view_type,
        n,
        [validity, pa.py_buffer(views), *[pa.py_buffer(b) for b in buffers]],
        null_count=null_count,
    )
    return arr.cast(typ)


def hex_upper(raw: np.ndarray) -> np.ndarray:
    """Rows of bytes (n, k) → rows of upper-case hex ASCII (n, 2k): one table lookup per byte, of its two
    characters at once."""
    pairs = np.take(_HEX_PAIRS, raw)
    return pairs.view(np.uint8).reshape(raw.shape[0], raw.shape[1] * 2)


def _format_host(ip: bytes, port: int | None) -> str:
    addr = ipaddress.ip_address(ip)
    if port is None:
        return str(addr)
    return f"{addr}:{port}" if addr.version == 4 else f"[{addr}]:{port}"


def host_strings(ip_rows: np.ndarray, ports: np.ndarray | None) -> pa.Array:
    """ "ip:port" strings ("[v6]:port" for IPv6) from rows of 4 or 16 address bytes and int ports; without
    `ports`, the address alone ("ip", IPv6 compressed without brackets).

    Hosts repeat (one broker, a few producers), so each distinct host is formatted once in Python and
    the column is a `take` of those strings.
    """
    n = len(ip_rows)
    if n == 0:
        return pa.nulls(0, pa.string())
    width, with_port = ip_rows.shape[1], ports is not None
    port_col = ports if ports is not None else np.zeros(n, np.int32)

    def text(key: bytes) -> str:  # address bytes, then the big-endian port
        return _format_host(
            key[:width], int.from_bytes(key[width:], "big", signed=True) if with_port else None
        )

    if width == 4:  # the usual case: compare 32-bit words before building anything
        ip32 = (ip_rows if ip_rows.strides[1] == 1 else np.ascontiguousarray(ip_rows)).view("<u4")[:, 0]
        if (ip32 == ip32[0]).all() and (port_col == port_col[0]).all():
            key = bytes(ip_rows[0]) + int(port_col[0]).to_bytes(4, "big", signed=True)
            return repeat_scalar(binary_scalar(text(key), pa.string()), n)
    keyed = np.empty((n, width + 4), dtype=np.uint8)
    keyed[:, :width] = ip_rows
    keyed[:, width:] = port_col.astype(">i4").view(np.uint8).reshape(n, 4)
    if (keyed == keyed[0]).all():
        return repeat_scalar(binary_scalar(text(keyed[0].tobytes()), pa.string()), n)
    if width == 4:
        keys = from_numpy(keyed.view("<u8").ravel())
    else:  # IPv6: 20-byte keys
        keys = pa.FixedSizeBinaryArray.from_buffers(pa.binary(width + 4), n, [None, pa.py_buffer(keyed)])
    enc = pc.dictionary_encode(keys)
    strings = [text(u.to_bytes(8, "little") if isinstance(u, int) else u) for u in enc.dictionary.to_pylist()]
    return pc.take(string_array(strings), enc.indices)


def parse_hosts(hosts: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ "ip:port" strings → (is_ipv6 bool[n], ip rows uint8[n, 16] (IPv4 in the first 4), ports int32[n]).

    Accepts "a.b.c.d:port", "[v6]:port" and bare "v6:port"; each distinct host is parsed once.
    """
    enc = pc.dictionary_encode(hosts.cast(pa.string()))
    idx = int64_values(enc.indices)
    uniq = enc.dictionary.to_pylist()
    is6 = np.zeros(len(uniq), dtype=bool)
    ips = np.zeros((len(uniq), 16), dtype=np.uint8)
    ports = np.zeros(len(uniq), dtype=np.int32)
    for i, h in enumerate(uniq):
        host, sep, port = h.rpartition(":")
        if not sep:
            raise ValueError(f"host {h!r} is not ip:port")
        addr = ipaddress.ip_address(host.strip("[]"))
        packed = addr.packed
        ips[i, : len(packed)] = np.frombuffer(packed, dtype=np.uint8)
        is6[i] = addr.version == 6
        ports[i] = int(port)
    return is6[idx], ips[idx], ports[idx]
