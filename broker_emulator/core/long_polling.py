"""Held pull/receive requests, answered the moment a matching message is stored (RocketMQ's
PullRequestHoldService + notifyMessageArriving), or at their timeout. No polling loop anywhere."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from .filtering import MessageFilter


@dataclass(eq=False)
class _Waiter:
    future: asyncio.Future
    flt: MessageFilter
    after_offset: int  # wake only when the queue's max offset passes this (-1: any arrival)
    keys: list[tuple[str, int]] = field(default_factory=list)


class LongPollingService:
    """Waiters keyed by (topic, queue_id); queue_id -1 waits on every queue of the topic (POP)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, max_waiters: int = 100_000) -> None:
        self.loop = loop
        self.max_waiters = max_waiters
        self._waiters: dict[tuple[str, int], list[_Waiter]] = {}
        self._count = 0
        self._loop_thread: int | None = None

    @property
    def held(self) -> int:
        return self._count

    def full(self) -> bool:
        return self._count >= self.max_waiters

    async def wait(
        self, keys: Iterable[tuple[str, int]], flt: MessageFilter, after_offset: int, timeout: float
    ) -> bool:
        """Parks until a matching arrival (True) or the timeout (False)."""
        if timeout <= 0:
            return False
        self._loop_thread = threading.get_ident()
        w = _Waiter(self.loop.create_future(), flt, after_offset, list(keys))
        for k in w.keys:
            self._waiters.setdefault(k, []).append(w)
        self._count += 1
        try:
            await asyncio.wait_for(asyncio.shield(w.future), timeout)
            return True
        except TimeoutError:
            return False
        finally:
            self._count -= 1
            for k in w.keys:
                lst = self._waiters.get(k)
                if lst is not None:
                    try:
                        lst.remove(w)
                    except ValueError:
                        pass
                    if not lst:
                        del self._waiters[k]

    def notify(self, topic: str, queue_id: int, max_offset: int, tag_codes: list[int] | None) -> None:
        """Store listener: wakes waiters of this queue (and of the whole topic) whose filter can match."""
        if threading.get_ident() == self._loop_thread:
            self._notify(topic, queue_id, max_offset, tag_codes)
        else:
            self.loop.call_soon_threadsafe(self._notify, topic, queue_id, max_offset, tag_codes)

    def _notify(self, topic: str, queue_id: int, max_offset: int, tag_codes: list[int] | None) -> None:
        """tag_codes None: messages became visible again (revive), wake every waiter of the queue."""
        for key in ((topic, queue_id), (topic, -1)):
            for w in self._waiters.get(key, ()):
                if w.future.done() or (tag_codes is not None and max_offset <= w.after_offset):
                    continue
                if tag_codes is None or w.flt.matches_codes(tag_codes):
                    w.future.set_result(None)

    def wake_all(self) -> None:
        """Answers every held request now (shutdown)."""
        for lst in list(self._waiters.values()):
            for w in lst:
                if not w.future.done():
                    w.future.set_result(None)
