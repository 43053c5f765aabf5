"""Transactional messages (apache/rocketmq `TransactionalMessageServiceImpl`): half messages are parked in
`RMQ_SYS_TRANS_HALF_TOPIC`, invisible until the transaction ends with COMMIT (then appended to their queue)
or ROLLBACK (dropped). A half message still unresolved after the check interval is offered to the front
ends' check-back hooks, which ask a producer of its topic over their protocol; after `max_checks`
unanswered checks it is rolled back."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from .parked import Parked, ParkedMessages
from .store.message_store import MessageStore
from .store.records import MessageColumns

log = logging.getLogger(__name__)

HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
DEFAULT_CHECK_INTERVAL_MS = 6_000  # RocketMQ transactionTimeOut
DEFAULT_MAX_CHECKS = 15  # transactionCheckMax

# A front end's check-back: asks a producer of the parked message's topic (preferring the one that sent it,
# `Parked.producer`) whether to commit; True when the question was sent.
CheckBack = Callable[[str, Parked], bool]


class TransactionService:
    def __init__(
        self,
        store: MessageStore,
        data_dir: str | None,
        check_interval_ms: int = DEFAULT_CHECK_INTERVAL_MS,
        max_checks: int = DEFAULT_MAX_CHECKS,
    ) -> None:
        self.parked = ParkedMessages(store, data_dir, HALF_TOPIC, "transactionPending")
        self.check_interval_ms = check_interval_ms
        self.max_checks = max_checks
        self.check_backs: list[CheckBack] = []
        self.committed = self.rolled_back = self.checks_sent = 0

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.parked.start(loop, self._check)

    def prepare(
        self, topic: str, queue_id: int, cols: MessageColumns, producer: str
    ) -> tuple[list[str], int, int]:
        """Parks half messages; returns (transaction ids, half-topic base offset, durable end)."""
        # The id names the half message's place: unique per broker, and the same for the same sends.
        _, next_offset = self.parked.store.min_max(HALF_TOPIC, 0)
        ids = [f"{self.parked.store.broker_name}-{next_offset + i:016X}" for i in range(len(cols))]
        due = int(time.time() * 1000) + self.check_interval_ms
        base, end = self.parked.park(cols, topic, queue_id, ids, [due] * len(ids), producer)
        for tx in ids:
            self.parked.schedule(self.parked.pending[tx])
        return ids, base, end

    def end(self, transaction_id: str, commit: bool) -> Parked | None:
        """Resolves a transaction; None when the id is unknown (already resolved or never prepared)."""
        p = self.parked.pending.get(transaction_id)
        if p is None:
            return None
        self.parked.cancel(transaction_id)
        if commit:
            self.parked.release(p)  # appended before the record goes: a crash re-commits, never loses
            self.committed += 1
        else:
            self.rolled_back += 1
        self.parked.take(transaction_id)
        return p

    def _check(self, key: str) -> None:
        p = self.parked.pending.get(key)
        if p is None:
            return
        if p.checks >= self.max_checks:
            log.info("transaction %s unresolved after %d checks: rolled back", key, p.checks)
            self.end(key, commit=False)
            return
        p.checks += 1
        p.due_ms = int(time.time() * 1000) + self.check_interval_ms
        self.parked.update(p)
        if any(ask(key, p) for ask in self.check_backs):
            self.checks_sent += 1
        self.parked.schedule(p)

    @property
    def pending(self) -> int:
        return len(self.parked.pending)

    def close(self) -> None:
        self.parked.close()
