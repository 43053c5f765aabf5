"""The interface between the connector and a RocketMQ protocol: what the reader and the writer ask of a client.

The reader asks for routes, queue bounds, offsets by time, group offsets and pulls that yield an Arrow
table of `rocketmq_protocol.message_schema.MESSAGE_SCHEMA`; the writer asks for routes, an encoder that
turns checked rows (`connector.sink_rows.CheckedRows`) into the protocol's send requests, and an
asynchronous send whose outcome is protocol-neutral (`SendOutcome`). Queue selection, batching, retries,
FIFO ordering and fault latency stay in `connector.producer`; pull chunking, range ends and data loss in
`connector.read_task`. Nothing here names a wire code: each implementation maps its own codes to
`PullStatus`, `SendOutcome` and `connector.errors.ErrorKind`.

Clients hold connections, so they are never pickled: `connector.clients.get_client(config)` creates one
per process and `ClientConfig`.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Protocol

import numpy as np
import pyarrow as pa

from ..config import ClientConfig, FilterSpec
from ..queues import MessageQueue, RouteEntry

if TYPE_CHECKING:
    from ..sink_rows import CheckedRows

__all__ = [
    "DEFAULT_TIMEOUT_MS",
    "EncodedRows",
    "PullResult",
    "PullStatus",
    "RocketMQClient",
    "SendEncoder",
    "SendFuture",
    "SendOutcome",
    "SendStatus",
]

DEFAULT_TIMEOUT_MS = 30_000


# ------------------------------------------------------------------------------------------ pull
class PullStatus(enum.StrEnum):
    """RocketMQ's `PullStatus` (apache/rocketmq `org.apache.rocketmq.client.consumer.PullStatus`)."""

    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"  # at the queue's max offset (next_offset == offset)
    NO_MATCHED_MSG = "NO_MATCHED_MSG"  # scanned entries all filtered out (next_offset past them)
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"  # below min / above max offset; next_offset is the corrected one


@dataclass(frozen=True)
class PullResult:
    """One pull: status, the next offset to ask for, the messages (a MESSAGE_SCHEMA table) and which of the
    client's pull variants served it (e.g. `bulk` or `standard` for the gRPC client).

    `min_offset`/`max_offset` are the queue's bounds when the pull reported them, else None.
    """

    status: PullStatus
    next_offset: int
    min_offset: int | None
    max_offset: int | None
    table: pa.Table
    protocol: str = ""


# ------------------------------------------------------------------------------------------ send
class SendStatus(enum.Enum):
    OK = "ok"
    PARTIAL = "partial"  # per-message outcomes differ: see SendOutcome.messages
    RETRYABLE = "retryable"  # worth another attempt (on another broker)
    REJECTED = "rejected"  # the broker refused the messages: retrying would not help


@dataclass(frozen=True, slots=True)
class SendOutcome:
    """The result of one send request (or, in `messages`, of one of its messages).

    `reason` is what the broker or the transport said (code name, number and message), `label` a short name
    of the failure for the writer's counters (`UNAVAILABLE`, `INTERNAL_SERVER_ERROR`), `backoff` asks for a
    pause before the retry (the broker is throttling). `messages` holds one outcome per message of the
    request, in order, when the broker reported them (always for PARTIAL); otherwise the outcome is the
    request's and the client cannot tell which message caused it.
    """

    status: SendStatus
    reason: str = ""
    label: str = ""
    backoff: bool = False
    messages: tuple[SendOutcome, ...] | None = None


SEND_OK = SendOutcome(SendStatus.OK)


class SendFuture(Protocol):
    """An asynchronous send request."""

    def add_done_callback(self, fn: Callable[[], None]) -> None:
        """Calls `fn()` (from any thread) once the request completed, failed or was cancelled."""

    def cancel(self) -> bool: ...

    def outcome(self) -> SendOutcome | None:
        """The outcome of a completed request; None when it was cancelled."""


class EncodedRows(ABC):
    """`CheckedRows` encoded for one protocol: the encoded size of each message, the size it counts for
    against `batchBytes`, and the request payload of any subset of the messages for a given queue.

    `batch_sizes` (default: `sizes`) is a message's size in the batch the broker checks against its
    maxMessageSize, where that is larger than its encoding in the request (a RocketMQ proxy re-encodes a
    v2 request as a remoting batch). `alone` marks (bool per message, or None for none) the messages the
    protocol can only send in a request of their own (e.g. delayed messages over remoting, which brokers
    do not schedule inside a batch).
    """

    alone: np.ndarray | None = None

    def __init__(
        self, checked: CheckedRows, sizes: np.ndarray, batch_sizes: np.ndarray | None = None
    ) -> None:
        self.checked = checked
        self.sizes = sizes
        self.batch_sizes = sizes if batch_sizes is None else batch_sizes

    def __len__(self) -> int:
        return len(self.checked)

    @property
    def topic(self) -> str:
        return self.checked.topic

    @property
    def rows(self) -> np.ndarray:
        return self.checked.rows

    @cached_property
    def groups(self) -> list[str | None] | None:
        """Each message's FIFO message group, or None when no message has one."""
        return self.checked.group_list

    @abstractmethod
    def payload(self, idx: slice | list[int], queue: MessageQueue) -> object:
        """The send request carrying messages `idx` (positions in these rows) to `queue`, in the form the
        client's `send_async` takes (serialized bytes for gRPC; opaque to the producer)."""


class SendEncoder(ABC):
    """Encodes a task's checked rows; stateful (message ids), one per task."""

    @abstractmethod
    def encode(self, rows: CheckedRows) -> EncodedRows: ...


# ------------------------------------------------------------------------------------------ the client
class RocketMQClient(ABC):
    """A thread-safe client of one cluster; obtain it with `connector.clients.get_client(config)`.

    Queue calls take the `RouteEntry` that `route` returned (its endpoint is where the queue lives), so a
    task needs no route lookup of its own. Failures raise `connector.errors` exceptions: `RocketMQError`
    (with a neutral `kind`) for a broker's error status, `RetriesExhaustedError` when transient failures
    outlast `timeout_ms`, `UnsupportedEndpointError` for a server lacking an RPC.
    """

    config: ClientConfig

    def __reduce__(self):
        raise TypeError(
            f"{type(self).__name__} holds connections and is not picklable; pickle its ClientConfig"
        )

    # ------------------------------------------------------------------ reader and writer
    @abstractmethod
    def route(self, topic: str, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> list[RouteEntry]:
        """Every master queue of `topic`, in queue order."""

    # ------------------------------------------------------------------ reader
    @abstractmethod
    def min_offset(self, queue: RouteEntry, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> int:
        """The queue's earliest available offset."""

    @abstractmethod
    def max_offset(self, queue: RouteEntry, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> int:
        """The queue's next offset to be written."""

    def broker_bounds(
        self, queues: Sequence[RouteEntry], timeout_ms: int = DEFAULT_TIMEOUT_MS
    ) -> dict[MessageQueue, tuple[int, int]] | None:
        """(min, max) offset of `queues` (one topic on one broker) in one request, or None when the broker has
        no such request. Queues missing from the answer are left to `min_offset`/`max_offset`."""
        return None

    @abstractmethod
    def offset_for_timestamp(
        self, queue: RouteEntry, ts_ms: int, timeout_ms: int = DEFAULT_TIMEOUT_MS
    ) -> int:
        """The first offset stored at or after `ts_ms` (the max offset when none is)."""

    @abstractmethod
    def get_committed(
        self, group: str, queue: RouteEntry, timeout_ms: int = DEFAULT_TIMEOUT_MS
    ) -> int | None:
        """The group's committed offset of the queue; None when it has none."""

    @abstractmethod
    def commit(
        self, group: str, queue: RouteEntry, offset: int, timeout_ms: int = DEFAULT_TIMEOUT_MS
    ) -> None:
        """Stores `offset` (the next one to consume) as the group's offset of the queue."""

    @abstractmethod
    def pull(
        self,
        queue: RouteEntry,
        offset: int,
        max_messages: int,
        *,
        group: str,
        filter: FilterSpec | None = None,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        long_polling_ms: int = 0,
        max_bytes: int = 0,
    ) -> PullResult:
        """Up to `max_messages` (and about `max_bytes`, 0: no limit) from `offset` of `queue` as a
        MESSAGE_SCHEMA table, filtered on the broker by `filter`; waits up to `long_polling_ms` for messages
        at the queue's end. Transient errors are retried within `timeout_ms`."""

    # ------------------------------------------------------------------ writer
    @abstractmethod
    def send_encoder(self, producer_group: str | None = None) -> SendEncoder:
        """A new encoder of this client's send requests (one per writer task); `producer_group` is option
        `producerGroup` (for the protocols whose requests carry one)."""

    @abstractmethod
    def send_async(self, endpoint: str, payload: object, count: int, timeout_s: float) -> SendFuture:
        """Sends one encoded request of `count` messages to the broker at `endpoint` (no retries here: the
        producer retries, possibly on another queue)."""

    # ------------------------------------------------------------------ lifecycle
    @abstractmethod
    def close(self) -> None: ...
