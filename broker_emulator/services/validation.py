"""SendMessage checks in the proxy's order (reference §7.2): each failure maps to one in-band code."""

from __future__ import annotations

from itertools import chain

from rocketmq_protocol.grpc_v2 import definition_pb2 as d
from rocketmq_protocol.limits import (
    MAX_DELAY_MS,
    MAX_MESSAGE_GROUP_BYTES,
    MAX_PROPERTIES_BYTES,
    MAX_USER_PROPERTIES,
    RESERVED_PROPERTY_KEYS,
)

from .converters import SendColumns, timestamp_ms


class SendRejected(Exception):
    """A request-level rejection: nothing of the request is stored."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _has_control(s: str) -> bool:
    return any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in s)


# The value checks `check_message` and `columns_valid` share.
def _tag_ok(tag: str) -> bool:
    return bool(tag.strip()) and "|" not in tag and not _has_control(tag)


def _key_ok(key: str) -> bool:
    return bool(key.strip()) and not _has_control(key)


def _group_ok(group: str) -> bool:
    return (
        bool(group.strip())
        and len(group.encode("utf-8")) < MAX_MESSAGE_GROUP_BYTES
        and not _has_control(group)
    )


def _property_key_ok(key: str) -> bool:
    return bool(key) and key not in RESERVED_PROPERTY_KEYS and not _has_control(key)


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
    total = len(sp.tag) + sum(len(k) for k in sp.keys)  # the proxy counts tag and keys with the properties
    if props:
        if len(props) > MAX_USER_PROPERTIES:
            raise SendRejected(
                d.MESSAGE_PROPERTIES_TOO_LARGE,
                f"message #{index}: {len(props)} user properties exceed the limit of {MAX_USER_PROPERTIES}",
            )
        for k, v in props.items():
            total += len(k) + len(v)
            if not _property_key_ok(k) or _has_control(v):
                raise SendRejected(
                    d.ILLEGAL_MESSAGE_PROPERTY_KEY,
                    f"message #{index}: user property {k!r} is reserved, blank or contains control characters",
                )
    if total > MAX_PROPERTIES_BYTES:
        raise SendRejected(
            d.MESSAGE_PROPERTIES_TOO_LARGE,
            f"message #{index}: properties of {total} bytes exceed the limit of {MAX_PROPERTIES_BYTES}",
        )
    if sp.HasField("tag"):
        tag = sp.tag
        if not _tag_ok(tag):
            raise SendRejected(
                d.ILLEGAL_MESSAGE_TAG,
                f"message #{index}: tag {tag!r} is blank or contains '|' or control characters",
            )
    for key in sp.keys:
        if not _key_ok(key):
            raise SendRejected(
                d.ILLEGAL_MESSAGE_KEY, f"message #{index}: key {key!r} is blank or has control characters"
            )
    if not sp.message_id.strip():
        raise SendRejected(d.ILLEGAL_MESSAGE_ID, f"message #{index}: message_id is blank")
    if sp.HasField("message_group"):
        g = sp.message_group
        if not _group_ok(g):
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


def _distinct(values: list) -> set:
    """set(values), without hashing every item when they are all equal (the usual case)."""
    return {values[0]} if values.count(values[0]) == len(values) else set(values)


def _properties_ok(cols: SendColumns) -> bool:
    """The user-property checks of `check_message` for every message of `cols` (which has properties)."""
    tags = cols.tag or [None] * cols.n
    keys = cols.keys or [[]] * cols.n
    names: set[str] = set()
    values: set[str] = set()
    for items, tag, msg_keys in zip(cols.properties or [[]] * cols.n, tags, keys, strict=True):
        items = items or []
        if len(items) > MAX_USER_PROPERTIES:
            return False
        total = sum(len(k) + len(v) for k, v in items) + len(tag or "") + sum(map(len, msg_keys))
        if total > MAX_PROPERTIES_BYTES:
            return False
        names.update(k for k, _ in items)
        values.update(v for _, v in items)
    return all(map(_property_key_ok, names)) and not any(map(_has_control, values))


def columns_valid(
    cols: SendColumns, message_types: list[int] | None, max_body_size: int, now_ms: int, topic_type: str
) -> bool:
    """Whether every message passes `check_message` and `check_type`, judged column by column.

    Distinct tags, keys, property names and values and message groups are checked once each, body sizes by
    their min and max. False means some message fails (the caller then runs the per-message checks, which
    name the first failing message and its first failing check); True that all pass.
    """
    sizes = cols.body_size
    lo, hi = (sizes[0], sizes[0]) if sizes.count(sizes[0]) == len(sizes) else (min(sizes), max(sizes))
    if lo == 0 or hi > max_body_size:
        return False
    if cols.properties is not None and not _properties_ok(cols):
        return False
    if cols.tag is not None and not all(_tag_ok(t) for t in _distinct(cols.tag) if t is not None):
        return False
    if cols.keys is not None and not all(map(_key_ok, set(chain.from_iterable(cols.keys)))):
        return False
    if cols.properties is None and (cols.tag is not None or cols.keys is not None):
        longest_tag = (
            max((len(t) for t in _distinct(cols.tag) if t is not None), default=0) if cols.tag else 0
        )
        longest_keys = max((sum(map(len, k)) for k in cols.keys), default=0) if cols.keys else 0
        if longest_tag + longest_keys > MAX_PROPERTIES_BYTES:
            return False  # the per-message checks decide (tag and keys count toward the limit)
    if not all(map(str.strip, cols.message_id)):
        return False
    groups = cols.message_group
    if groups is not None and not all(_group_ok(g) for g in _distinct(groups) if g is not None):
        return False
    if cols.delivery_timestamp is not None:
        latest = max((w for w in cols.delivery_timestamp if w is not None), default=0)
        if latest > now_ms + MAX_DELAY_MS:
            return False
    if topic_type != "MIXED":
        types = {d.NORMAL} if message_types is None else _distinct(message_types)
        return all(_TYPE_NAMES.get(t, "NORMAL") == topic_type for t in types)
    return True


def accept_message_types(topic_type: str) -> list[int]:
    if topic_type == "MIXED":
        return [d.NORMAL, d.FIFO, d.DELAY, d.TRANSACTION]
    return [{v: k for k, v in _TYPE_NAMES.items()}[topic_type]]
