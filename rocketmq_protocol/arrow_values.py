"""Arrow columns as NumPy arrays read from their buffers.

`pyarrow.Array.to_numpy` (and `pa.array`/`pa.scalar` on Python values) import pandas on first use: ~0.4 s
of CPU in each fresh Spark Python worker, which otherwise never loads it. Worker-side code reads fixed-width
columns through these instead."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa


def int64_values(col: pa.Array | pa.ChunkedArray, null: int = 0) -> np.ndarray:
    """An integer or timestamp column as int64 NumPy values, nulls as `null`."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if pa.types.is_timestamp(col.type) or pa.types.is_date64(col.type):
        col = col.view(pa.int64())
    elif col.type != pa.int64():
        col = col.cast(pa.int64())
    if col.null_count == len(col):  # also no rows; an all-null array may have no data buffer
        return np.full(len(col), null, np.int64)
    values = np.frombuffer(col.buffers()[1], np.int64, len(col), 8 * col.offset)  # offset in bytes
    if col.null_count:
        values = np.where(bool_values(col.is_valid()), values, null)
    return values


def bool_values(col: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A boolean column as a NumPy bool array, nulls as False."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    n = len(col)
    if col.null_count == n:  # also no rows; an all-null array may have no data buffer
        return np.zeros(n, bool)
    bits = np.frombuffer(col.buffers()[1], np.uint8)
    values = np.unpackbits(bits, bitorder="little", count=col.offset + n)[col.offset :].astype(bool)
    if col.null_count:
        valid = np.unpackbits(
            np.frombuffer(col.buffers()[0], np.uint8), bitorder="little", count=col.offset + n
        )
        values &= valid[col.offset :].astype(bool)
    return values


_BINARY = pa.binary()
_INT32 = pa.int32()


def binary_scalar(value: str | bytes, type_: pa.DataType = _BINARY) -> pa.Scalar:
    """A string or binary scalar of `value`, made from buffers."""
    data = value.encode() if isinstance(value, str) else value
    offsets = np.array([0, len(data)], np.int32)
    return pa.Array.from_buffers(type_, 1, [None, pa.py_buffer(offsets), pa.py_buffer(data)])[0]


def repeat_scalar(value: pa.Scalar, n: int) -> pa.Array:
    """`pa.repeat(value, n)`; a string or binary value's data made by one bytes multiplication (~5x faster
    than `pa.repeat` for a pull's 32,768 rows of one topic or host)."""
    t = value.type
    if value.is_valid and (pa.types.is_string(t) or pa.types.is_binary(t)):
        data = value.as_buffer().to_pybytes()
        k = len(data)
        if k * n < 2**31:
            offsets = np.arange(0, k * (n + 1), k, dtype=np.int32) if k else np.zeros(n + 1, np.int32)
            return pa.Array.from_buffers(t, n, [None, pa.py_buffer(offsets), pa.py_buffer(data * n)])
    return pa.repeat(value, n)


def int_scalar(value: int, type_: pa.DataType = _INT32) -> pa.Scalar:
    """An integer scalar of `value`, made from a buffer."""
    data = np.array([value], np.dtype(f"i{type_.bit_width // 8}"))
    return pa.Array.from_buffers(type_, 1, [None, pa.py_buffer(data)])[0]


def empty_scalar(type_: pa.ListType | pa.MapType) -> pa.Scalar:
    """An empty list or map scalar (not null) of `type_`."""
    offsets = pa.Array.from_buffers(pa.int32(), 2, [None, pa.py_buffer(np.zeros(2, np.int32))])
    if isinstance(type_, pa.MapType):
        return pa.MapArray.from_arrays(
            offsets, pa.nulls(0, type_.key_type), pa.nulls(0, type_.item_type), type=type_
        )[0]
    return pa.ListArray.from_arrays(offsets, pa.nulls(0, type_.value_type), type=type_)[0]


def from_numpy(values: np.ndarray, type_: pa.DataType | None = None) -> pa.Array:
    """A NumPy bool or integer array as an Arrow array (no nulls), of `type_` (a signed integer or timestamp
    type) when given, else of the array's own type; over the same bytes when no conversion is needed (bools
    packed)."""
    n = len(values)
    if values.dtype == bool:
        return pa.Array.from_buffers(
            pa.bool_(), n, [None, pa.py_buffer(np.packbits(values, bitorder="little"))]
        )
    if type_ is None:
        type_ = pa.from_numpy_dtype(values.dtype)
    else:
        values = values.astype(f"=i{type_.bit_width // 8}", copy=False)
    return pa.Array.from_buffers(type_, n, [None, pa.py_buffer(np.ascontiguousarray(values))])


def string_array(values: list[str]) -> pa.Array:
    """A string array of `values` (no nulls), made from buffers."""
    data = [v.encode() for v in values]
    offsets = np.zeros(len(data) + 1, np.int32)
    np.cumsum([len(d) for d in data], out=offsets[1:])
    return pa.Array.from_buffers(
        pa.string(), len(data), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(data))]
    )


def value_offsets(arr: pa.Array) -> np.ndarray:
    """The int32 value offsets of a string/binary array, its slice applied (len(arr) + 1 of them)."""
    return np.frombuffer(arr.buffers()[1], dtype=np.int32)[arr.offset : arr.offset + len(arr) + 1]


def byte_lengths(arr: pa.Array) -> np.ndarray:
    """The byte length of each value of a string/binary array as int64, 0 for a null."""
    if arr.null_count == len(arr):  # also no rows; an all-null array may have no offsets buffer
        return np.zeros(len(arr), np.int64)
    if pa.types.is_large_binary(arr.type) or pa.types.is_large_string(arr.type):
        offsets = np.frombuffer(arr.buffers()[1], np.int64)[arr.offset : arr.offset + len(arr) + 1]
    else:
        offsets = value_offsets(arr)
    lengths = np.diff(offsets).astype(np.int64)
    if arr.null_count:
        lengths[~bool_values(arr.is_valid())] = 0
    return lengths


def fixed_width(offsets: np.ndarray) -> int | None:
    """The length every value has, from their offsets; None when the lengths differ or there is no value."""
    if len(offsets) < 2:
        return None
    width = int(offsets[1] - offsets[0])
    if int(offsets[-1] - offsets[0]) != width * (len(offsets) - 1) or (np.diff(offsets) != width).any():
        return None
    return width


def fixed_width_rows(pieces: list[pa.Array | bytes], n: int) -> np.ndarray | None:
    """Row i of every piece back to back, as the rows of an (n, width) uint8 array, when each string/binary
    array piece's values all have one length (no nulls); bytes are the same in every row. One copy per
    piece, several times faster than Arrow's element-wise join; None when a piece's lengths vary.

    The rows are written as records of a packed structured dtype, one field per piece: NumPy copies each
    field's values whole (~3× faster here than assigning column ranges of a 2-D uint8 array, whose short
    rows each pay the inner loop's overhead), block by block (`fill_fields`)."""
    widths = []
    for p in pieces:
        if isinstance(p, bytes):
            widths.append(len(p))
            continue
        if p.null_count or not (pa.types.is_binary(p.type) or pa.types.is_string(p.type)):
            return None
        width = fixed_width(value_offsets(p))
        if width is None:
            return None
        widths.append(width)
    used = [(i, p, w) for i, (p, w) in enumerate(zip(pieces, widths, strict=True)) if w]
    total = sum(widths)
    if not used:
        return np.empty((n, 0), np.uint8)
    records = np.empty(n, np.dtype([(f"f{i}", f"V{w}") for i, _, w in used]))
    fill_fields(
        records,
        [
            (
                f"f{i}",
                np.frombuffer(p, f"V{w}")[0]
                if isinstance(p, bytes)
                else np.frombuffer(p.buffers()[2], f"V{w}", n, int(value_offsets(p)[0])),
            )
            for i, p, w in used
        ],
    )
    return records.view(np.uint8).reshape(n, total)


#: Bytes of records `fill_fields` writes at a time: a block that stays in the CPU's cache while each of its
#: fields is written, where a pass of each field over megabytes of records goes to memory. Best of 15 here,
#: 32,768 records of 319 bytes (4 pieces): 108-116 ns per record in 256 KiB-1 MiB blocks, 159-196 ns field
#: by field over all of them; 1.4 MB of records: the same either way; 4 MB of 1 KB rows: 329-341 ns unblocked,
#: 345-353 blocked.
FILL_BLOCK_BYTES = 512 << 10


def fill_fields(records: np.ndarray, values: list[tuple[str, Any]]) -> None:
    """`records[name] = value` for each (name, value), block by block of FILL_BLOCK_BYTES. A value is an
    array of one entry per record or a scalar written into every record."""
    n = len(records)
    step = max(1, FILL_BLOCK_BYTES // max(records.dtype.itemsize, 1))
    per_row = [(name, value, isinstance(value, np.ndarray) and value.ndim > 0) for name, value in values]
    for start in range(0, n, step):
        block = records[start : start + step]
        for name, value, rows in per_row:
            block[name] = value[start : start + step] if rows else value
