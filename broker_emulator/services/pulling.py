"""The pull path shared by PullMessage and bulk pull: store read plus long polling on NO_NEW_MSG."""

from __future__ import annotations

import asyncio

from rocketmq_protocol.grpc_v2 import definition_pb2 as d

from ..filtering import MessageFilter
from ..long_polling import LongPollingService
from ..store.message_store import FOUND, NO_MATCHED_MSG, NO_NEW_MSG, OFFSET_ILLEGAL, GetResult, MessageStore


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
) -> GetResult:
    """Reads; when the queue has nothing new, holds the request until an arrival or the timeout."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        result = store.get(topic, queue_id, offset, max_messages, max_bytes, flt)
        if result.status != NO_NEW_MSG:
            return result
        remaining = deadline - loop.time()
        if remaining <= 0 or polling.full():
            return result
        await polling.wait([(topic, queue_id)], flt, offset, remaining)


def pull_status(result: GetResult) -> tuple[int, str]:
    """GetMessageStatus → v2 code (reference §7.2 'suggested emulator semantics')."""
    if result.status == FOUND:
        return d.OK, "OK"
    if result.status == NO_NEW_MSG:
        return d.MESSAGE_NOT_FOUND, "no new message"
    if result.status == NO_MATCHED_MSG:
        return d.MESSAGE_NOT_FOUND, "no matched message"
    if result.status == OFFSET_ILLEGAL:
        return d.ILLEGAL_OFFSET, (
            f"offset is outside [{result.min_offset}, {result.max_offset}]; next offset {result.next_offset}"
        )
    return d.INTERNAL_SERVER_ERROR, result.status
