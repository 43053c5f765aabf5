"""Arrow columns as NumPy arrays read from their buffers.

`pyarrow.Array.to_numpy` (and `pa.array`/`pa.scalar` on Python values) import pandas on first use: ~0.4 s
of CPU in each fresh Spark Python worker, which otherwise never loads it. Worker-side code reads fixed-width
columns through these instead."""

from __future__ import annotations

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
