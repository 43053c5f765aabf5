"""The remoting client's send path: checked rows → SEND_BATCH_MESSAGE / SEND_MESSAGE_V2 requests, and the
outcome of a request in flight.

`RemotingSendEncoder.encode` builds every message's property string column-wise
(`properties.build_properties_column`: UNIQ_KEY from `UniqIdGenerator.many`, TAGS, KEYS, the user
properties, `__SHARDINGKEY` for a message group, as the 5.x proxy stores gRPC message groups) and encodes
all messages at once with the codec's `encode_batch` (`MessageDecoder.encodeMessage` layout); a request of
consecutive messages is then a slice of that buffer, sent without a copy. A request of one message is a
SEND_MESSAGE_V2 (its properties in header `i`, its body as the body), as apache/rocketmq's
`DefaultMQProducer` sends single messages.

Delayed messages travel alone (brokers store a batch's messages at once, without scheduling them): to a
5.x broker with TIMER_DELIVER_MS (the timer wheel), to a 4.x broker with the smallest delay level at or
after the requested time (4.x has no timer; its `messageDelayLevel`, read with GET_BROKER_CONFIG, by
default 1s 5s 10s 30s 1m ... 2h).

Outcomes (`MQClientAPIImpl.processSendResponse`): SUCCESS and the three "stored but not confirmed" codes
FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT and SLAVE_NOT_AVAILABLE are OK; SYSTEM_ERROR, SYSTEM_BUSY,
SERVICE_NOT_AVAILABLE, GO_AWAY, FLOW_CONTROL and the transport's failures are retryable (`DefaultMQProducer`
`retryResponseCodes`, without TOPIC_NOT_EXIST and NO_PERMISSION: an unknown topic or a refused account
fails fast, as does ACL 1.0's SYSTEM_ERROR refusal); anything else (MESSAGE_ILLEGAL, INVALID_PARAMETER,
...) rejects the request.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketmq_protocol.remoting.codes import RequestCode, ResponseCode
from rocketmq_protocol.remoting.frames import RemotingCommand
from rocketmq_protocol.remoting.headers import SendMessageRequestHeaderV2
from rocketmq_protocol.remoting.message_codec import encode_batch
from rocketmq_protocol.remoting.message_id import UniqIdGenerator
from rocketmq_protocol.remoting.properties import (
    DELAY,
    SHARDING_KEY,
    TIMER_DELIVER_MS,
    WAIT,
    build_properties_column,
)

from ..errors import access_hint
from ..queues import MessageQueue
from ..sink_rows import CheckedRows
from .base import SEND_OK, EncodedRows, SendEncoder, SendOutcome, SendStatus
from .remoting_connection import ConnectionLost, RequestSendCall, fail_after
from .remoting_errors import access_kind, code_name

if TYPE_CHECKING:
    from .remoting import RemotingClient

log = logging.getLogger(__name__)

__all__ = ["RemotingEncodedRows", "RemotingPayload", "RemotingSendEncoder", "SendCall", "delay_level"]

_R = ResponseCode
OK_CODES = frozenset({_R.SUCCESS, _R.FLUSH_DISK_TIMEOUT, _R.FLUSH_SLAVE_TIMEOUT, _R.SLAVE_NOT_AVAILABLE})
RETRYABLE_CODES = frozenset(
    {_R.SYSTEM_ERROR, _R.SYSTEM_BUSY, _R.SERVICE_NOT_AVAILABLE, _R.GO_AWAY, _R.FLOW_CONTROL,
     _R.NO_BUYER_ID, _R.NOT_IN_CURRENT_UNIT}
)  # fmt: skip
BACKOFF_CODES = frozenset({_R.SYSTEM_BUSY, _R.FLOW_CONTROL})
DEFAULT_TOPIC = "TBW102"
DEFAULT_TOPIC_QUEUE_NUMS = 4
BATCH_PROPERTIES = (
    f"{WAIT}\x01true\x02"  # batch-level: no UNIQ_KEY (brokers ≤ 5.3.3 copy it to every message)
)
#: Delay levels of a default broker (`MessageStoreConfig.messageDelayLevel`), in ms.
DELAY_LEVELS_MS = tuple(
    s * 1000 for s in (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)
)


_LIST = pa.list_(pa.string())
_MAP = pa.map_(pa.string(), pa.string())


def _is_list(arr: pa.Array) -> bool:
    return pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)


def _plain(arr: pa.Array | None, typ: pa.DataType) -> pa.Array | None:
    """`arr` as `typ` (nullable children: Spark's columns have non-null ones) and unsliced, which the
    codec's column builders expect."""
    if arr is None:
        return None
    if arr.type != typ:
        arr = arr.cast(typ)
    return pa.concat_arrays([arr]) if arr.offset else arr


def delay_level(delay_ms: int, levels_ms: tuple[int, ...] = DELAY_LEVELS_MS) -> int:
    """The smallest delay level (1..n) whose delay is at least `delay_ms` (the last one beyond; 0: none)."""
    if delay_ms <= 0:
        return 0
    for i, level_ms in enumerate(levels_ms):
        if level_ms >= delay_ms:
            return i + 1
    return len(levels_ms)


_UNITS_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_delay_levels(text: str) -> tuple[int, ...] | None:
    """`messageDelayLevel` ("1s 5s 10s 30s 1m ... 2h") → ms per level; None when unreadable."""
    out = []
    for token in text.split():
        unit = _UNITS_MS.get(token[-1:])
        if unit is None or not token[:-1].isdigit():
            return None
        out.append(int(token[:-1]) * unit)
    return tuple(out) or None


@dataclass(frozen=True, slots=True)
class RemotingPayload:
    """One send request: its code, ext fields (signed) and body."""

    code: int
    ext_fields: dict[str, str]
    body: bytes | memoryview


class RemotingEncodedRows(EncodedRows):
    """One topic's messages encoded as one batch body (`encoded`, with each message's byte range); requests
    take slices of it. `delivery_ms` (epoch ms, 0 = none) marks the delayed messages, which travel alone."""

    def __init__(
        self,
        checked: CheckedRows,
        encoder: RemotingSendEncoder,
        encoded: memoryview,
        starts: np.ndarray,
        sizes: np.ndarray,
        properties: pa.Array,
        delivery_ms: np.ndarray | None,
    ) -> None:
        super().__init__(checked, sizes)
        self.encoder = encoder
        self.encoded = encoded
        self.starts = starts
        self.properties = properties
        self.delivery_ms = delivery_ms
        self.alone = None if delivery_ms is None else delivery_ms > 0

    def _body_of(self, i: int) -> memoryview:
        start = int(self.starts[i])
        body_len = int.from_bytes(self.encoded[start + 16 : start + 20], "big")
        return self.encoded[start + 20 : start + 20 + body_len]

    def payload(self, idx: slice | list[int], queue: MessageQueue) -> RemotingPayload:  # type: ignore[override]
        enc = self.encoder
        positions = range(idx.start, idx.stop) if isinstance(idx, slice) else idx
        if len(positions) == 1:
            i = positions[0]
            props = self.properties[i].as_py() or ""
            props += BATCH_PROPERTIES
            if self.delivery_ms is not None and self.delivery_ms[i] > 0:
                props += enc.delay_property(queue, int(self.delivery_ms[i]))
            return enc.request(RequestCode.SEND_MESSAGE_V2, queue, props, self._body_of(i), batch=False)
        if isinstance(idx, slice):
            a, b = int(self.starts[idx.start]), int(self.starts[idx.stop - 1] + self.sizes[idx.stop - 1])
            body: bytes | memoryview = self.encoded[a:b]
        else:
            body = b"".join(
                self.encoded[int(self.starts[i]) : int(self.starts[i] + self.sizes[i])] for i in idx
            )
        return enc.request(RequestCode.SEND_BATCH_MESSAGE, queue, BATCH_PROPERTIES, body, batch=True)


class RemotingSendEncoder(SendEncoder):
    """Encodes a task's checked rows for SEND_BATCH_MESSAGE / SEND_MESSAGE_V2; one per task."""

    def __init__(self, client: RemotingClient, producer_group: str = "spark-rocketmq-producer") -> None:
        self.client = client
        self.producer_group = client._wrap(producer_group)
        self._ids = UniqIdGenerator()
        self._born_ms = int(time.time() * 1000)

    def encode(self, rows: CheckedRows) -> RemotingEncodedRows:
        n = len(rows)
        self._born_ms = rows.born_ms
        props = build_properties_column(
            n,
            uniq_keys=self._ids.many(n),
            tags=_plain(rows.tags, pa.string()),
            keys=_plain(rows.keys, _LIST if rows.keys is not None and _is_list(rows.keys) else pa.string()),
            user=_plain(rows.properties, _MAP),
        )
        if rows.groups is not None:
            groups = pc.fill_null(
                pc.binary_join_element_wise(f"{SHARDING_KEY}\x01", rows.groups.cast(pa.string()), "\x02", ""),
                "",
            )
            props = pc.binary_join_element_wise(props, groups, "")
        delivery_ms = None
        if rows.delivery_us is not None:
            delivery_ms = pc.fill_null(rows.delivery_us, 0).to_numpy(zero_copy_only=False) // 1000
            if not (delivery_ms > 0).any():
                delivery_ms = None
        body = rows.bodies
        if pa.types.is_large_binary(body.type):
            body = body.cast(pa.binary())
        encoded = memoryview(encode_batch(body, props))
        prop_len = pc.binary_length(props).to_numpy(zero_copy_only=False).astype(np.int64)
        sizes = 22 + rows.body_sizes + prop_len
        starts = np.zeros(n, dtype=np.int64)
        if n > 1:
            np.cumsum(sizes[:-1], out=starts[1:])
        return RemotingEncodedRows(rows, self, encoded, starts, sizes, props, delivery_ms)

    def delay_property(self, queue: MessageQueue, deliver_ms: int) -> str:
        """TIMER_DELIVER_MS for a 5.x broker, the nearest delay level at or after it for a 4.x broker."""
        address = self.client._brokers.get(queue.broker, "")
        if not address or self.client.timer_supported(address):
            return f"{TIMER_DELIVER_MS}\x01{deliver_ms}\x02"
        levels = self.client.delay_levels(address)
        wait_ms = deliver_ms - int(time.time() * 1000)
        level = delay_level(wait_ms, levels)
        if wait_ms > levels[-1]:
            log.warning(
                "broker %s (RocketMQ 4.x) delays at most %d s (delay level %d); a message due at %d ms is sent "
                "with that level",
                queue.broker,
                levels[-1] // 1000,
                len(levels),
                deliver_ms,
            )
        return f"{DELAY}\x01{level}\x02" if level else ""

    def request(
        self, code: int, queue: MessageQueue, properties: str, body: bytes | memoryview, *, batch: bool
    ) -> RemotingPayload:
        header = SendMessageRequestHeaderV2(
            producer_group=self.producer_group,
            topic=self.client._wrap(queue.topic),
            default_topic=DEFAULT_TOPIC,
            default_topic_queue_nums=DEFAULT_TOPIC_QUEUE_NUMS,
            queue_id=queue.queue_id,
            sys_flag=0,
            born_timestamp=self._born_ms,
            flag=0,
            properties=properties,
            reconsume_times=0,
            unit_mode=False,
            batch=batch if batch else None,
            broker_name=queue.broker,
        )
        ext = header.to_ext_fields()
        return RemotingPayload(code, self.client._sign(ext, body), body)


# ------------------------------------------------------------------------------------------ in flight
class SendCall(RequestSendCall):
    """A send request in flight (`connector.clients.base.SendFuture`)."""

    __slots__ = ("_count", "address")

    def __init__(self, fut: Future, count: int, address: str) -> None:
        super().__init__(fut)
        self._count = count
        self.address = address

    @classmethod
    def start(
        cls, client: RemotingClient, endpoint: str, payload: object, count: int, timeout_s: float
    ) -> SendCall:
        assert isinstance(payload, RemotingPayload), type(payload)
        address = endpoint
        try:
            conn = client.connection(address, min(timeout_s, 3.0))
            fut = conn.request(payload.code, payload.ext_fields, payload.body, timeout_s)
        except (OSError, ConnectionLost) as e:
            fut = Future()
            fut.set_exception(ConnectionLost(f"{address}: {e}"))
            return cls(fut, count, address)

        fail_after(conn, fut, timeout_s)
        call = cls(fut, count, address)
        fut.add_done_callback(lambda f: client._versions.__setitem__(address, f.result().version)
                              if not f.cancelled() and f.exception() is None else None)  # fmt: skip
        return call

    def answered(self, resp: RemotingCommand) -> SendOutcome:
        return send_outcome(resp.code, resp.remark)


def send_outcome(code: int, remark: str | None) -> SendOutcome:
    """A send response code as a neutral outcome; an ACL refusal (also ACL 1.0's SYSTEM_ERROR) is rejected
    with what to check, not retried."""
    if code in OK_CODES:
        return SEND_OK
    name = code_name(code)
    reason = f"{name} ({code}): {remark or ''}"
    kind = access_kind(code, remark)
    if kind is not None:
        return SendOutcome(SendStatus.REJECTED, f"{reason} ({access_hint(kind)})", name)
    if code in RETRYABLE_CODES:
        return SendOutcome(SendStatus.RETRYABLE, reason, name, backoff=code in BACKOFF_CODES)
    return SendOutcome(SendStatus.REJECTED, reason, name)
