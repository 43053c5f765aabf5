"""SendMessage checks in the proxy's order (reference §7.2): each failure maps to one in-band code."""

from __future__ import annotations

from rocketmq.grpc_protocol import definition_pb2 as d

from .converters import timestamp_ms

MAX_USER_PROPERTIES = 128
MAX_PROPERTIES_BYTES = 16 * 1024
MAX_MESSAGE_GROUP_BYTES = 64
MAX_DELAY_MS = 24 * 3600 * 1000  # proxy maxDelayTimeMills: 1 day

RESERVED_PROPERTY_KEYS = frozenset(
    """KEYS TAGS WAIT DELAY RETRY_TOPIC REAL_TOPIC REAL_QID TRAN_MSG PGROUP MIN_OFFSET MAX_OFFSET BUYER_ID
    ORIGIN_MESSAGE_ID TRANSFER_FLAG CORRECTION_FLAG MQ2_FLAG RECONSUME_TIME MSG_REGION TRACE_ON UNIQ_KEY
    MAX_RECONSUME_TIMES CONSUME_START_TIME POP_CK POP_CK_OFFSET 1ST_POP_TIME TRAN_PREPARED_QUEUE_OFFSET
    DUP_INFO EXTEND_UNIQ_INFO INSTANCE_ID CORRELATION_ID REPLY_TO_CLIENT TTL ARRIVE_TIME PUSH_REPLY_TIME
    CLUSTER MSG_TYPE INNER_MULTI_QUEUE_OFFSET TRACE_CONTEXT TIMER_DELAY_SEC TIMER_DELIVER_MS TIMER_ENQUEUE_MS
    TIMER_DEQUEUE_MS TIMER_ROLL_TIMES TIMER_OUT_MS TIMER_DEL_UNIQKEY TIMER_DELAY_LEVEL TIMER_DELAY_MS
    __SHARDINGKEY __BORNHOST BORN_TIMESTAMP DLQ_ORIGIN_TOPIC DLQ_ORIGIN_MESSAGE_ID""".split()
)


class SendRejected(Exception):
    """A request-level rejection: nothing of the request is stored."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _has_control(s: str) -> bool:
    return any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in s)


def check_message(index: int, m, sp, max_body_size: int, now_ms: int) -> int | None:
    """Validates message `index`; returns its delivery time (ms) or None; raises SendRejected."""
    body_len = len(m.body)
    if body_len == 0:
        raise SendRejected(d.MESSAGE_BODY_EMPTY, f"message #{index}: body is empty")
    if body_len > max_body_size:
        raise SendRejected(
            d.MESSAGE_BODY_TOO_LARGE,
            f"message #{index}: body of {body_len} bytes exceeds the limit of {max_body_size}",
        )
    props = m.user_properties
    if props:
        if len(props) > MAX_USER_PROPERTIES:
            raise SendRejected(
                d.MESSAGE_PROPERTIES_TOO_LARGE,
                f"message #{index}: {len(props)} user properties exceed the limit of {MAX_USER_PROPERTIES}",
            )
        total = 0
        for k, v in props.items():
            total += len(k) + len(v)
            if not k or k in RESERVED_PROPERTY_KEYS or _has_control(k) or _has_control(v):
                raise SendRejected(
                    d.ILLEGAL_MESSAGE_PROPERTY_KEY,
                    f"message #{index}: user property {k!r} is reserved, blank or contains control characters",
                )
        total += len(sp.tag) + sum(len(k) for k in sp.keys)
        if total > MAX_PROPERTIES_BYTES:
            raise SendRejected(
                d.MESSAGE_PROPERTIES_TOO_LARGE,
                f"message #{index}: properties of {total} bytes exceed the limit of {MAX_PROPERTIES_BYTES}",
            )
    if sp.HasField("tag"):
        tag = sp.tag
        if not tag.strip() or "|" in tag or _has_control(tag):
            raise SendRejected(
                d.ILLEGAL_MESSAGE_TAG,
                f"message #{index}: tag {tag!r} is blank or contains '|' or control characters",
            )
    for key in sp.keys:
        if not key.strip() or _has_control(key):
            raise SendRejected(
                d.ILLEGAL_MESSAGE_KEY, f"message #{index}: key {key!r} is blank or has control characters"
            )
    if not sp.message_id.strip():
        raise SendRejected(d.ILLEGAL_MESSAGE_ID, f"message #{index}: message_id is blank")
    if sp.HasField("message_group"):
        g = sp.message_group
        if not g.strip() or len(g.encode("utf-8")) >= MAX_MESSAGE_GROUP_BYTES or _has_control(g):
            raise SendRejected(
                d.ILLEGAL_MESSAGE_GROUP,
                f"message #{index}: message_group {g!r} is blank, control characters or >= {MAX_MESSAGE_GROUP_BYTES} bytes",
            )
    if sp.HasField("delivery_timestamp"):
        when = timestamp_ms(sp.delivery_timestamp)
        if when > now_ms + MAX_DELAY_MS:
            raise SendRejected(
                d.ILLEGAL_DELIVERY_TIME, f"message #{index}: delivery time {when} is more than 1 day ahead"
            )
        return when
    return None


_TYPE_NAMES = {d.NORMAL: "NORMAL", d.FIFO: "FIFO", d.DELAY: "DELAY", d.TRANSACTION: "TRANSACTION"}


def check_type(index: int, message_type: int, topic: str, topic_type: str) -> None:
    """Message type must equal the topic's `message.type` unless the topic is MIXED."""
    name = _TYPE_NAMES.get(message_type, "NORMAL")
    if topic_type != "MIXED" and name != topic_type:
        raise SendRejected(
            d.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
            f"message #{index}: {name} message cannot be sent to {topic_type} topic {topic}",
        )


def accept_message_types(topic_type: str) -> list[int]:
    if topic_type == "MIXED":
        return [d.NORMAL, d.FIFO, d.DELAY, d.TRANSACTION]
    return [{v: k for k, v in _TYPE_NAMES.items()}[topic_type]]
