"""Delayed delivery (docs/protocols.md, 'SendMessage checks'): a message whose `delivery_timestamp` is in the future is parked in
`rmq_sys_wheel_timer` and appended to its real queue at that time (the append wakes held consumers)."""

from __future__ import annotations

import asyncio
import logging

from .parked import ParkedMessages
from .store.message_store import MessageStore
from .store.records import MessageColumns, column_values

log = logging.getLogger(__name__)

TIMER_TOPIC = "rmq_sys_wheel_timer"


class DelayService:
    def __init__(self, store: MessageStore, data_dir: str | None) -> None:
        self.parked = ParkedMessages(store, data_dir, TIMER_TOPIC, "timerPending")
        self.delivered = 0

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Schedules every pending delayed message (including those recovered from disk)."""
        self.parked.start(loop, self._deliver)

    def schedule(self, topic: str, queue_id: int, cols: MessageColumns, due_ms: list[int]) -> tuple[int, int]:
        """Parks messages until their delivery times; returns (timer-queue base offset, durable end)."""
        keys = [
            f"{topic}\t{queue_id}\t{mid}\t{due}"
            for mid, due in zip(column_values(cols.message_id), due_ms, strict=True)
        ]
        base, end = self.parked.park(cols, topic, queue_id, keys, due_ms)
        for k in keys:
            self.parked.schedule(self.parked.pending[k])
        return base, end

    def _deliver(self, key: str) -> None:
        p = self.parked.pending.get(key)
        if p is None:
            return
        released = self.parked.release(p)  # appended before the record goes: a crash re-delivers, never loses
        self.parked.take(key)
        if released is not None:
            self.delivered += 1

    @property
    def pending(self) -> int:
        return len(self.parked.pending)

    def close(self) -> None:
        self.parked.close()
