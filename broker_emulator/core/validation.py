"""SendMessage checks in the proxy's order (apache/rocketmq `SendMessageActivity`, `Validators`), over the
rules of `rocketmq_protocol.send_rules`: `columns_valid` judges a whole request column by column (the fast
path), `check_message` names the first failing check of one message."""

from __future__ import annotations

from itertools import chain

from rocketmq_protocol.message_schema import MESSAGE_TYPE_NAMES, NORMAL
from rocketmq_protocol.send_rules import (
    MAX_DELAY_MS,
    MAX_PROPERTIES_BYTES,
    MAX_USER_PROPERTIES,
    Violation,
    group_problem,
    has_control,
    key_problem,
    properties_size,
    property_key_problem,
    tag_problem,
)

from .errors import BrokerError
from .send_columns import SendColumns, all_present, value_at


def check_body(i: int, size: int, max_body_size: int) -> None:
    """Raises BrokerError when message `i` has no body or one above `max_body_size` bytes: the check a
    broker makes itself (`AbstractSendMessageProcessor.msgCheck`, the store) as well as the proxy."""
    if size == 0:
        raise BrokerError(Violation.EMPTY_BODY, f"message #{i}: body is empty")
    if size > max_body_size:
        raise BrokerError(
            Violation.BODY_TOO_LARGE,
            f"message #{i}: body of {size} bytes exceeds the limit of {max_body_size}",
        )


def check_message(cols: SendColumns, i: int, max_body_size: int, now_ms: int) -> None:
    """Raises BrokerError naming message `i`'s first failing check."""
    check_body(i, cols.body_size[i], max_body_size)
    tag = cols.tag[i] if cols.tag is not None else None
    keys = cols.keys[i] if cols.keys is not None else []
    props = (cols.properties[i] if cols.properties is not None else None) or []
    if len(props) > MAX_USER_PROPERTIES:
        raise BrokerError(
            Violation.TOO_MANY_PROPERTIES,
            f"message #{i}: {len(props)} user properties exceed the limit of {MAX_USER_PROPERTIES}",
        )
    for k, v in props:
        problem = property_key_problem(k) or (
            "has a value with control characters" if has_control(v) else None
        )
        if problem:
            raise BrokerError(Violation.ILLEGAL_PROPERTY_KEY, f"message #{i}: user property {k!r} {problem}")
    total = properties_size(tag, keys, props)
    if total > MAX_PROPERTIES_BYTES:
        raise BrokerError(
            Violation.PROPERTIES_TOO_LARGE,
            f"message #{i}: properties, tag and keys of {total} characters exceed the limit of "
            f"{MAX_PROPERTIES_BYTES}",
        )
    if tag is not None and (problem := tag_problem(tag)):
        raise BrokerError(Violation.ILLEGAL_TAG, f"message #{i}: tag {tag!r} {problem}")
    for key in keys:
        if problem := key_problem(key):
            raise BrokerError(Violation.ILLEGAL_KEY, f"message #{i}: key {key!r} {problem}")
    if not value_at(cols.message_id, i).strip():
        raise BrokerError(Violation.ILLEGAL_MESSAGE_ID, f"message #{i}: message id is blank")
    group = cols.message_group[i] if cols.message_group is not None else None
    if group is not None and (problem := group_problem(group)):
        raise BrokerError(Violation.ILLEGAL_MESSAGE_GROUP, f"message #{i}: message group {group!r} {problem}")
    when = cols.delivery_timestamp[i] if cols.delivery_timestamp is not None else None
    if when is not None and when > now_ms + MAX_DELAY_MS:
        raise BrokerError(
            Violation.ILLEGAL_DELIVERY_TIME, f"message #{i}: delivery time {when} is more than 1 day ahead"
        )


def check_type(index: int, message_type: int, topic: str, topic_type: str) -> None:
    """Message type must equal the topic's `message.type` unless the topic is MIXED."""
    name = MESSAGE_TYPE_NAMES.get(message_type, "NORMAL")
    if topic_type != "MIXED" and name != topic_type:
        raise BrokerError(
            Violation.TYPE_CONFLICT,
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
        if len(items) > MAX_USER_PROPERTIES or properties_size(tag, msg_keys, items) > MAX_PROPERTIES_BYTES:
            return False
        names.update(k for k, _ in items)
        values.update(v for _, v in items)
    return not any(map(property_key_problem, names)) and not any(map(has_control, values))


def columns_valid(
    cols: SendColumns, message_types: list[int] | None, max_body_size: int, now_ms: int, topic_type: str
) -> bool:
    """Whether every message passes `check_message` and `check_type`, judged column by column.

    Distinct tags, keys, property names and values and message groups are checked once each, body sizes by
    their min and max. False means some message may fail: the caller then runs the per-message checks.
    """
    sizes = cols.body_size
    lo, hi = (sizes[0], sizes[0]) if sizes.count(sizes[0]) == len(sizes) else (min(sizes), max(sizes))
    if lo == 0 or hi > max_body_size:
        return False
    if cols.properties is not None and not _properties_ok(cols):
        return False
    if cols.tag is not None and any(tag_problem(t) for t in _distinct(cols.tag) if t is not None):
        return False
    if cols.keys is not None and any(map(key_problem, set(chain.from_iterable(cols.keys)))):
        return False
    if cols.properties is None and (cols.tag is not None or cols.keys is not None):
        longest_tag = (
            max((len(t) for t in _distinct(cols.tag) if t is not None), default=0) if cols.tag else 0
        )
        longest_keys = max((sum(map(len, k)) for k in cols.keys), default=0) if cols.keys else 0
        if longest_tag + longest_keys > MAX_PROPERTIES_BYTES:
            return False  # the per-message checks decide (tag and keys count toward the limit)
    if not all_present(cols.message_id):
        return False
    groups = cols.message_group
    if groups is not None and any(group_problem(g) for g in _distinct(groups) if g is not None):
        return False
    if cols.delivery_timestamp is not None:
        latest = max((w for w in cols.delivery_timestamp if w is not None), default=0)
        if latest > now_ms + MAX_DELAY_MS:
            return False
    if topic_type != "MIXED":
        types = {NORMAL} if message_types is None else _distinct(message_types)
        return all(MESSAGE_TYPE_NAMES.get(t, "NORMAL") == topic_type for t in types)
    return True


def first_violation(
    cols: SendColumns,
    message_types: list[int] | None,
    max_body_size: int,
    now_ms: int,
    topic: str,
    topic_type: str,
) -> None:
    """Raises BrokerError for the first message failing a check (in message order), if any does."""
    for i in range(cols.n):
        check_message(cols, i, max_body_size, now_ms)
        check_type(i, message_types[i] if message_types is not None else NORMAL, topic, topic_type)


def accept_message_types(topic_type: str) -> list[int]:
    """The message types a topic of `topic_type` accepts."""
    if topic_type == "MIXED":
        return list(MESSAGE_TYPE_NAMES)
    return [t for t, name in MESSAGE_TYPE_NAMES.items() if name == topic_type]
