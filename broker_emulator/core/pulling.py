"""The pull path shared by PullMessage and bulk pull: store read plus long polling on NO_NEW_MSG."""

from __future__ import annotations

import asyncio

from .filtering import MessageFilter
from .long_polling import LongPollingService
from .store.message_store import NO_NEW_MSG, GetResult, MessageStore


async def pull(
    store: MessageStore,
    polling: LongPollingService,
    topic: str,
    queue_id: int,
    offset: int,
    max_messages: int,
    max_bytes: int | None,
    flt: MessageFilter,
    timeout_s: float,
    whole_segments: bool = False,
) -> GetResult:
    """Reads; when the queue has nothing new, holds the request until an arrival or the timeout
    (`whole_segments`: see `ConsumeQueue.read`)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        result = store.get(topic, queue_id, offset, max_messages, max_bytes, flt, whole_segments)
        if result.status != NO_NEW_MSG:
            return result
        remaining = deadline - loop.time()
        if remaining <= 0 or polling.full():
            return result
        await polling.wait([(topic, queue_id)], flt, offset, remaining)
