"""The connector's queue types: a queue's identity, its route entry and an offset range of it.

* `MessageQueue(topic, broker, queue_id)`: which queue (RocketMQ's `MessageQueue`); the key of offsets,
  of the producer's queue selection and of FIFO routing.
* `RouteEntry(queue, endpoint, readable, writable)`: a queue as a route lists it, with the address of its
  (master) broker and its permissions; what a client needs to talk to the queue.
* `OffsetRange(queue, start, end)`: the offsets `[start, end)` of one queue that one Spark partition reads.

All three are immutable and picklable (they travel in Spark partitions). Queues sort in
`MessageQueue.compareTo` order (topic, broker name, queue id); Java compares strings by UTF-16 code units,
which `java_string_key` encodes exactly (it differs from Python's code-point order only for characters
above U+FFFF, which legal topic and broker names never contain).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

__all__ = ["MessageQueue", "OffsetRange", "RouteEntry", "java_string_key", "queue_sort_key", "sort_queues"]


class MessageQueue(NamedTuple):
    """One message queue: (topic, broker name, queue id), as RocketMQ's `MessageQueue`."""

    topic: str
    broker: str
    queue_id: int

    def __str__(self) -> str:
        return f"{self.topic}/{self.broker}/{self.queue_id}"


class RouteEntry(NamedTuple):
    """A queue of a topic's route: the endpoint (`host:port`) of its master broker and its permissions."""

    queue: MessageQueue
    endpoint: str
    readable: bool = True
    writable: bool = True

    # shortcuts to the queue's identity
    @property
    def topic(self) -> str:
        return self.queue.topic

    @property
    def broker(self) -> str:
        return self.queue.broker

    @property
    def queue_id(self) -> int:
        return self.queue.queue_id


class OffsetRange(NamedTuple):
    """The offsets `[start, end)` of one queue."""

    queue: MessageQueue
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def java_string_key(s: str) -> bytes:
    """A sort key ordering strings as Java's `String.compareTo` (UTF-16 code units)."""
    return s.encode("utf-16-be", "surrogatepass")


def queue_sort_key(queue: MessageQueue) -> tuple[bytes, bytes, int]:
    return (java_string_key(queue.topic), java_string_key(queue.broker), queue.queue_id)


def sort_queues(queues: Iterable[MessageQueue]) -> list[MessageQueue]:
    """Queues in `MessageQueue.compareTo` order: topic, broker name, queue id."""
    return sorted(queues, key=queue_sort_key)
