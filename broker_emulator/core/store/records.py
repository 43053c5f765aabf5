"""Column layout of stored messages: the Arrow schema of consume-queue segments and of bulk-pull payloads."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
import pyarrow as pa

from rocketmq_protocol.arrow_values import from_numpy, int64_values
from rocketmq_protocol.message_schema import MESSAGE_SCHEMA

# Stored segments use the bulk-pull wire schema, so a pull slices them and sends them as they are.
_COLUMNS = MESSAGE_SCHEMA.names


# A stored column as handed to `MessageColumns`: per-row Python values, a NumPy array or an Arrow array.
Column = list[Any] | np.ndarray | pa.Array

# MESSAGE_SCHEMA fields a MessageColumns carries (queue_offset and store_timestamp are set by the store).
_CARRIED_FIELDS = [f for f in MESSAGE_SCHEMA if f.name not in ("queue_offset", "store_timestamp")]


@lru_cache(maxsize=64)
def _empty_nested(type_: pa.DataType, n: int) -> pa.Array:
    """n empty lists / maps (pa.repeat is slow for nested types)."""
    offsets = pa.array(np.zeros(n + 1, np.int32))
    if isinstance(type_, pa.MapType):
        return pa.MapArray.from_arrays(
            offsets, pa.array([], type_.key_type), pa.array([], type_.item_type), type=type_
        )
    return pa.ListArray.from_arrays(offsets, pa.array([], type_.value_type), type=type_)


@lru_cache(maxsize=256)
def _repeated_scalar(value: Any, n: int, type_: pa.DataType) -> pa.Array:
    return pa.nulls(n, type_) if value is None else pa.repeat(pa.scalar(value, type_), n)


def repeated(value: Any, n: int, type_: pa.DataType) -> pa.Array:
    """A column holding `value` (None: null) in each of n rows, built without per-row Python work.

    Arrays are immutable, so recent ones are reused (batches then share their buffers).
    """
    if isinstance(type_, pa.ListType | pa.MapType):
        if not value:
            return _empty_nested(type_, n)
        try:
            return _repeated_nested(tuple(value), n, type_)
        except TypeError:  # unhashable items (lists for pairs): converted row by row
            return pa.array([value] * n, type_)
    return _repeated_scalar(value, n, type_)


@lru_cache(maxsize=64)
def _repeated_nested(value: tuple, n: int, type_: pa.DataType) -> pa.Array:
    """One list / map row repeated n times: its items tiled, the offsets stepped (no per-row conversion)."""
    k = len(value)
    offsets = pa.array(np.arange(n + 1, dtype=np.int32) * np.int32(k))
    index = pa.array(np.tile(np.arange(k, dtype=np.int32), n))
    if isinstance(type_, pa.MapType):
        keys = pa.array([kv[0] for kv in value], type_.key_type).take(index)
        items = pa.array([kv[1] for kv in value], type_.item_type).take(index)
        return pa.MapArray.from_arrays(offsets, keys, items, type=type_)
    return pa.ListArray.from_arrays(offsets, pa.array(list(value), type_.value_type).take(index), type=type_)


def int_values(col: Column | pa.ChunkedArray, null: int = 0) -> np.ndarray:
    """An integer or timestamp column (Arrow, NumPy or a list) as int64 NumPy, nulls as `null` (Arrow columns
    through `rocketmq_protocol.arrow_values.int64_values`)."""
    if isinstance(col, pa.Array | pa.ChunkedArray):
        return int64_values(col, null)
    if isinstance(col, np.ndarray):
        return col.astype(np.int64, copy=False)
    return np.fromiter((null if v is None else int(v) for v in col), np.int64, count=len(col))


def column_values(col: Column) -> list[Any]:
    """A MessageColumns column as a Python list, whatever its representation."""
    if isinstance(col, pa.Array):
        return col.to_pylist()
    return col.tolist() if isinstance(col, np.ndarray) else list(col)


def _as_array(col: Column, type_: pa.DataType) -> pa.Array:
    if isinstance(col, pa.Array):
        return col
    if isinstance(col, np.ndarray) and (pa.types.is_integer(type_) or pa.types.is_timestamp(type_)):
        return from_numpy(col, type_)
    return pa.array(col, type_)


@dataclass
class MessageColumns:
    """Messages of one (topic, queue) append, held column-wise so a batch is built without per-row objects.

    Either filled row by row with `append` (every column a list), or built whole with each column a list,
    an ndarray or an Arrow array of MESSAGE_SCHEMA's type (e.g. `repeated(...)` for a value every row shares).
    `tag_code` is never an Arrow array: the store hands it to arrival listeners, which iterate it as ints.
    """

    message_id: Column = field(default_factory=list)
    tag: Column = field(default_factory=list)
    keys: Column = field(default_factory=list)
    body: Column = field(default_factory=list)
    properties: Column = field(default_factory=list)
    born_timestamp: Column = field(default_factory=list)
    born_host: Column = field(default_factory=list)
    reconsume_times: Column = field(default_factory=list)
    message_group: Column = field(default_factory=list)
    delivery_timestamp: Column = field(default_factory=list)
    message_type: Column = field(default_factory=list)
    tag_code: list[int] | np.ndarray = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.body)

    def append(
        self,
        *,
        message_id: str,
        tag: str | None,
        keys: list[str],
        body: bytes,
        properties: list[tuple[str, str]],
        born_timestamp: int,
        born_host: str,
        reconsume_times: int,
        message_group: str | None,
        delivery_timestamp: int | None,
        message_type: int,
        tag_code: int,
    ) -> None:
        """Adds one row (only while every column is a list)."""
        self.message_id.append(message_id)
        self.tag.append(tag)
        self.keys.append(keys)
        self.body.append(body)
        self.properties.append(properties)
        self.born_timestamp.append(born_timestamp)
        self.born_host.append(born_host)
        self.reconsume_times.append(reconsume_times)
        self.message_group.append(message_group)
        self.delivery_timestamp.append(delivery_timestamp)
        self.message_type.append(message_type)
        self.tag_code.append(tag_code)

    def take(self, indices: list[int] | np.ndarray) -> MessageColumns:
        """The rows at `indices`, in that order."""
        idx = np.asarray(indices, dtype=np.int64)
        out: dict[str, Column] = {}
        for f in _CARRIED_FIELDS:
            col = getattr(self, f.name)
            if isinstance(col, pa.Array):
                out[f.name] = col.take(pa.array(idx))
            elif isinstance(col, np.ndarray):
                out[f.name] = col[idx]
            else:
                out[f.name] = [col[i] for i in indices]
        return MessageColumns(**out)

    def to_batch(self, base_offset: int, store_timestamp: int) -> pa.RecordBatch:
        """Builds the stored batch: offsets base..base+n-1, one store timestamp for the whole append."""
        n = len(self)
        arrays = {f.name: _as_array(getattr(self, f.name), f.type) for f in _CARRIED_FIELDS}
        arrays["queue_offset"] = from_numpy(np.arange(base_offset, base_offset + n), pa.int64())
        arrays["store_timestamp"] = from_numpy(np.full(n, store_timestamp), pa.timestamp("ms"))
        return pa.RecordBatch.from_arrays([arrays[name] for name in _COLUMNS], schema=MESSAGE_SCHEMA)
