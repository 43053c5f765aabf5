"""Which messages of an append must wait instead of going straight to their queue: delayed ones
(delivery time in the future) and transactional half messages."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketmq_protocol.message_schema import NORMAL, TRANSACTION

from .store.records import MessageColumns


@dataclass
class WaitingRows:
    normal: np.ndarray  # row indices stored now
    delayed: np.ndarray  # row indices parked until `due`
    due: list[int]  # delivery times (ms) of the delayed rows
    transactional: np.ndarray  # half messages, parked until EndTransaction


def _ints(col, n: int, null: int) -> np.ndarray:
    if isinstance(col, pa.Array):
        if col.null_count == n:
            return np.full(n, null, np.int64)
        return np.asarray(col.cast(pa.int64()).fill_null(null).to_numpy(zero_copy_only=False))
    if isinstance(col, np.ndarray):
        return col.astype(np.int64)
    return np.fromiter((null if v is None else int(v) for v in col), np.int64, count=n)


def waiting_rows(cols: MessageColumns, now_ms: int) -> WaitingRows | None:
    """None when every message goes straight to its queue (the common case, decided without a row loop)."""
    n = len(cols)
    delivery = cols.delivery_timestamp
    types = cols.message_type
    if isinstance(delivery, pa.Array) and delivery.null_count == n and isinstance(types, pa.Array):
        if types.null_count == n:
            return None
        if not types.null_count and pa.types.is_integer(types.type):
            if not (types.to_numpy() == TRANSACTION).any():
                return None
        elif pc.all(pc.not_equal(types, TRANSACTION)).as_py():
            return None
    due = _ints(delivery, n, 0)
    kinds = _ints(types, n, NORMAL)
    tx = kinds == TRANSACTION
    delayed = (due > now_ms) & ~tx
    if not tx.any() and not delayed.any():
        return None
    normal = ~(tx | delayed)
    delayed_idx = np.flatnonzero(delayed)
    return WaitingRows(
        np.flatnonzero(normal), delayed_idx, [int(due[i]) for i in delayed_idx], np.flatnonzero(tx)
    )
