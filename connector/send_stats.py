"""What a producer sent (`SendStats`): a task's commit message carries it to the driver, so it lives apart
from the producer and unpickling it in Spark's commit process imports nothing heavy."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["SendStats", "add_count"]


def add_count(counts: dict[str, int], key: str, n: int = 1) -> None:
    """Adds `n` to `counts[key]`."""
    counts[key] = counts.get(key, 0) + n


@dataclass
class SendStats:
    """What a producer sent: acknowledged messages per broker and queue, attempts, retries, isolations."""

    messages: int = 0
    bytes: int = 0
    requests: int = 0
    attempts: int = 0
    retries: int = 0
    isolations: dict[str, int] = field(default_factory=dict)  # broker → isolations its sends caused
    failures: dict[str, int] = field(default_factory=dict)  # "broker: reason" → failed attempts
    per_broker: dict[str, int] = field(default_factory=dict)
    per_queue: dict[str, int] = field(default_factory=dict)  # "topic/broker/queueId" → messages
    better_half_picks: int = 0
    round_robin_fallbacks: int = 0

    def merge(self, other: SendStats) -> None:
        """Adds `other`'s counts to these."""
        for name in ("messages", "bytes", "requests", "attempts", "retries"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.better_half_picks += other.better_half_picks
        self.round_robin_fallbacks += other.round_robin_fallbacks
        for mine, theirs in (
            (self.isolations, other.isolations),
            (self.failures, other.failures),
            (self.per_broker, other.per_broker),
            (self.per_queue, other.per_queue),
        ):
            for k, v in theirs.items():
                add_count(mine, k, v)
