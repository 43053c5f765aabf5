"""Which messages of an append must wait instead of going straight to their queue: delayed ones
(delivery time in the future) and transactional half messages."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rocketmq_protocol.message_schema import NORMAL, TRANSACTION

from .store.records import MessageColumns, int_values


@dataclass
class WaitingRows:
    normal: np.ndarray  # row indices stored now
    delayed: np.ndarray  # row indices parked until `due`
    due: list[int]  # delivery times (ms) of the delayed rows
    transactional: np.ndarray  # half messages, parked until EndTransaction


def waiting_rows(cols: MessageColumns, now_ms: int) -> WaitingRows | None:
    """None when every message goes straight to its queue (the common case, decided without a row loop)."""
    delivery = cols.delivery_timestamp
    types = cols.message_type
    due = int_values(delivery)
    kinds = int_values(types, NORMAL)
    tx = kinds == TRANSACTION
    delayed = (due > now_ms) & ~tx
    if not tx.any() and not delayed.any():
        return None
    normal = ~(tx | delayed)
    delayed_idx = np.flatnonzero(delayed)
    return WaitingRows(
        np.flatnonzero(normal), delayed_idx, [int(due[i]) for i in delayed_idx], np.flatnonzero(tx)
    )
