"""Admission control of the stream reader: apache/spark `KafkaMicroBatchStream`'s `maxOffsetsPerTrigger`
proration (`rate_limit`) and `minOffsetsPerTrigger` wait (`delay_batch`)."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from typing import TypeVar

K = TypeVar("K", bound=Hashable)


def rate_limit(
    limit: int,
    start: Mapping[K, int],
    latest: Mapping[K, int],
    new_start: Mapping[K, int] | None = None,
) -> dict[K, int]:
    """Kafka's `rateLimit` for `maxMessagesPerTrigger`: the end offset per queue of `latest`.

    The `limit` is split in proportion to each queue's backlog (`latest - start`): a share below 1 is
    rounded up (so small queues are not starved), others down; no end passes `latest`. Queues without a
    backlog end at `latest`. Queues absent from `start` begin at `new_start` (default 0). Because of the
    rounding up, the total can exceed `limit` when fewer messages than queues with a backlog are allowed.
    """
    if limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    new_start = new_start or {}

    def begin(key: K) -> int:
        return start[key] if key in start else new_start.get(key, 0)

    sizes = {k: end - begin(k) for k, end in latest.items() if end - begin(k) > 0}
    total = sum(sizes.values())
    if total < 1:
        return dict(latest)
    out: dict[K, int] = {}
    for key, end in latest.items():
        size = sizes.get(key)
        if size is None:
            out[key] = end
            continue
        prorate = limit * (size / total)
        share = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        out[key] = min(end, begin(key) + share)
    return out


def delay_batch(
    min_messages: int,
    available: int,
    now_ms: int,
    last_trigger_ms: int,
    max_trigger_delay_ms: int,
) -> bool:
    """Kafka's `delayBatch`: skip this trigger while fewer than `min_messages` wait and the delay is not over.

    The caller resets its `last_trigger_ms` to `now_ms` whenever this returns False (a batch runs).
    """
    if now_ms - last_trigger_ms >= max_trigger_delay_ms:
        return False
    return available < min_messages
