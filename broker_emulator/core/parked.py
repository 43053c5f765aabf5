"""Messages parked in a system topic until released into their real queue: delayed messages
(`rmq_sys_wheel_timer`) and transactional half messages (`RMQ_SYS_TRANS_HALF_TOPIC`), as RocketMQ does.

The parked copy is stored (and so durable) like any message; a journaled table remembers which
parked offsets are still pending and where they go, so a restart resumes exactly.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import pyarrow as pa

from .store.journal import JournaledTable
from .store.message_store import MessageStore
from .store.records import MessageColumns, column_values

log = logging.getLogger(__name__)


@dataclass
class Parked:
    key: str
    topic: str  # real topic
    queue_id: int  # real queue
    offset: int  # offset in the system topic
    due_ms: int = 0  # delay: delivery time; transactions: when to check back
    producer: str = ""  # transactions: the sending client id
    message_id: str = ""
    checks: int = 0


class ParkedMessages:
    """A system topic (one queue) of parked messages, the table of those still pending, and a timer per
    pending message calling `on_due(key)` at its `due_ms`."""

    def __init__(self, store: MessageStore, data_dir: str | None, system_topic: str, table_name: str) -> None:
        self.store = store
        self.system_topic = system_topic
        self.table = JournaledTable(data_dir, table_name)
        self.pending: dict[str, Parked] = {k: Parked(**v) for k, v in self.table.data.items()}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._on_due: Callable[[str], None] | None = None
        self._timers: dict[str, asyncio.TimerHandle] = {}

    def start(self, loop: asyncio.AbstractEventLoop, on_due: Callable[[str], None]) -> None:
        """Arms a timer for every pending message, including those recovered from disk."""
        self._loop, self._on_due = loop, on_due
        for p in list(self.pending.values()):
            self.schedule(p)

    def schedule(self, p: Parked) -> None:
        """(Re)arms the timer of a pending message for its `due_ms`."""
        if self._loop is None or self._on_due is None:
            return
        self.cancel(p.key)
        delay = max(p.due_ms / 1000.0 - time.time(), 0.0)
        self._timers[p.key] = self._loop.call_later(delay, self._fire, p.key)

    def cancel(self, key: str) -> None:
        t = self._timers.pop(key, None)
        if t is not None:
            t.cancel()

    def _fire(self, key: str) -> None:
        self._timers.pop(key, None)
        if self._on_due is not None:
            self._on_due(key)

    def park(
        self,
        cols: MessageColumns,
        topic: str,
        queue_id: int,
        keys: list[str],
        due: list[int],
        producer: str = "",
    ) -> tuple[int, int]:
        """Stores the messages in the system topic; returns (base offset, durable end position)."""
        if self.system_topic not in self.store.topics:
            self.store.create_topic(self.system_topic, 1, perm=6, message_type="MIXED")
        base, end = self.store.append(self.system_topic, 0, cols)
        ids = column_values(cols.message_id)
        for i, key in enumerate(keys):
            p = Parked(key, topic, queue_id, base + i, due[i], producer, ids[i])
            self.pending[key] = p
            self.table.set(key, asdict(p))
        return base, end

    def update(self, p: Parked) -> None:
        self.table.set(p.key, asdict(p))

    def take(self, key: str) -> Parked | None:
        p = self.pending.pop(key, None)
        if p is not None:
            self.table.delete(key)
        return p

    def release(self, p: Parked) -> int | None:
        """Appends the parked message to its real queue; returns its offset there (None if it is gone)."""
        r = self.store.get(self.system_topic, 0, p.offset, 1)
        if r.table is None or not r.count:
            log.warning("parked message %s at %s:%d is gone", p.key, self.system_topic, p.offset)
            return None
        base, _ = self.store.append(p.topic, p.queue_id, columns_of(r.table))
        return base

    def close(self) -> None:
        for t in self._timers.values():
            t.cancel()
        self._timers.clear()
        self.table.close()


def columns_of(
    rows: pa.Table, reconsume_times: int | None = None, props: dict[str, str | None] | None = None
) -> MessageColumns:
    """Stored rows as a new append: same id, body, tag, keys; optionally new attempts and properties."""
    cols = MessageColumns()
    born = rows.column("born_timestamp").cast(pa.int64()).to_pylist()
    deliver = rows.column("delivery_timestamp").cast(pa.int64()).to_pylist()
    for i, row in enumerate(rows.to_pylist()):
        p = dict(row["properties"] or [])
        for k, v in (props or {}).items():
            if v is None:
                p.pop(k, None)
            else:
                p.setdefault(k, v)
        cols.append(
            message_id=row["message_id"],
            tag=row["tag"],
            keys=row["keys"] or [],
            body=row["body"],
            properties=list(p.items()),
            born_timestamp=born[i],
            born_host=row["born_host"],
            reconsume_times=row["reconsume_times"] if reconsume_times is None else reconsume_times,
            message_group=row["message_group"],
            delivery_timestamp=deliver[i],
            message_type=row["message_type"],
            tag_code=row["tag_code"],
        )
    return cols
