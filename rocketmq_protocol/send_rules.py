"""The checks a message must pass to be sent, as RocketMQ's proxy applies them (`SendMessageActivity`,
`Validators`): one definition for the writer's pre-checks (column-wise, in `connector.sink_rows`) and for
the emulator's SendMessage (`broker_emulator.core.sending`).

Each `*_problem` function returns why a value is refused (a phrase completing "tag 'x' ...") or None.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable

import numpy as np

from .limits import (
    MAX_DELAY_MS,
    MAX_MESSAGE_GROUP_BYTES,
    MAX_PROPERTIES_BYTES,
    MAX_USER_PROPERTIES,
    RESERVED_PROPERTY_KEYS,
)

__all__ = [
    "CONTROL_CHARACTERS",
    "MAX_DELAY_MS",
    "MAX_MESSAGE_GROUP_BYTES",
    "MAX_PROPERTIES_BYTES",
    "MAX_USER_PROPERTIES",
    "RESERVED_PROPERTY_KEYS",
    "Violation",
    "group_problem",
    "has_control",
    "key_problem",
    "properties_size",
    "property_key_problem",
    "proxy_record_sizes",
    "tag_problem",
]

#: Control characters (C0, DEL, C1), a regular expression both `re` and Arrow's RE2 accept.
CONTROL_CHARACTERS = r"[\x00-\x1f\x7f-\x9f]"
_CONTROL = re.compile(CONTROL_CHARACTERS)


class Violation(enum.Enum):
    """Why a message is refused; each protocol front end maps it to its own code."""

    EMPTY_BODY = "body is empty"
    BODY_TOO_LARGE = "body too large"
    TOO_MANY_PROPERTIES = "too many properties"
    PROPERTIES_TOO_LARGE = "properties too large"
    ILLEGAL_PROPERTY_KEY = "illegal property key"
    ILLEGAL_TAG = "illegal tag"
    ILLEGAL_KEY = "illegal key"
    ILLEGAL_MESSAGE_ID = "illegal message id"
    ILLEGAL_MESSAGE_GROUP = "illegal message group"
    ILLEGAL_DELIVERY_TIME = "illegal delivery time"
    TYPE_CONFLICT = "message type conflicts with the topic's"


def has_control(text: str) -> bool:
    return _CONTROL.search(text) is not None


def tag_problem(tag: str) -> str | None:
    """A tag may not be blank, hold control characters or '|' (subscriptions separate tags with '||')."""
    if not tag.strip():
        return "is blank"
    if has_control(tag):
        return "contains control characters"
    if "|" in tag:
        return "contains '|' (RocketMQ separates tags with '||' in subscriptions)"
    return None


def key_problem(key: str) -> str | None:
    if not key.strip():
        return "is blank"
    if has_control(key):
        return "contains control characters"
    return None


def group_problem(group: str) -> str | None:
    """A message group is not blank, has no control characters and fewer than 64 UTF-8 bytes."""
    if not group.strip():
        return "is blank"
    if has_control(group):
        return "contains control characters"
    size = len(group.encode("utf-8"))
    if size >= MAX_MESSAGE_GROUP_BYTES:
        return f"is {size} bytes long (the limit is {MAX_MESSAGE_GROUP_BYTES - 1})"
    return None


def property_key_problem(key: str) -> str | None:
    if not key:
        return "is empty"
    if key in RESERVED_PROPERTY_KEYS:
        return "is a reserved system property"
    if has_control(key):
        return "contains control characters"
    return None


def properties_size(tag: str | None, keys: Iterable[str], properties: Iterable[tuple[str, str]]) -> int:
    """What the 16 KiB limit counts: the characters of the tag, the keys and every property name and value
    (whether or not the message has user properties)."""
    total = len(tag or "") + sum(map(len, keys))
    return total + sum(len(k) + len(v) for k, v in properties)


# ------------------------------------------------------------------------------------------ proxy batches
#: A RocketMQ proxy forwards a v2 SendMessageRequest of several messages to its broker as one remoting
#: batch: per message a record of 20 bytes of fixed fields, the body, a 2-byte properties length and the
#: properties the proxy writes (apache/rocketmq `proxy/.../producer/SendMessageActivity.buildMessageProperty`;
#: 5.5.0 also writes the born timestamp and host, and TAGS even when empty). The broker refuses a batch body
#: over its maxMessageSize ("message body size exceeded"), and these records are larger than the v2
#: messages: a writer sizes its requests by them, the emulator refuses what the broker would.
BATCH_RECORD_FIXED = 22
#: The born host the proxy writes is the client's address as it sees it; a client reserves IPv6's longest.
BORN_HOST_RESERVED = 47
_MS_DIGITS = 13  # epoch milliseconds, until the year 2286
_PROXY_PROPERTIES = sum(  # name, \x01, value, \x02: the properties every message gets, values' fixed part
    len(name) + 2 + size
    for name, size in (
        ("RECONSUME_TIME", 1),
        ("BORN_TIMESTAMP", _MS_DIGITS),
        ("__BORNHOST", 0),
        ("UNIQ_KEY", 0),
        ("PGROUP", 0),
        ("TAGS", 0),
    )
)


def proxy_record_sizes(
    body: np.ndarray,
    message_id: np.ndarray | int,
    stored_topic: str,
    born_host_bytes: int,
    tag: np.ndarray | None = None,
    keys: np.ndarray | None = None,
    user: np.ndarray | None = None,
    group: np.ndarray | None = None,
    delivery: np.ndarray | None = None,
) -> np.ndarray:
    """Each message's record in the batch a proxy forwards: byte lengths per message of the body, the
    message id, the tag (0: none), the keys joined by spaces (-1: no key), the user properties as name and
    value bytes + 2 per property, the message group (-1: none); `delivery` True where a delivery time is
    set. `stored_topic` is the topic's name on the broker (with its namespace)."""
    props = _PROXY_PROPERTIES + len(stored_topic.encode()) + born_host_bytes + message_id
    if tag is not None:
        props = props + tag
    if keys is not None:
        props = props + np.where(keys >= 0, keys + len("KEYS") + 2, 0)
    if user is not None:
        props = props + user
    if group is not None:
        props = props + np.where(group >= 0, group + len("__SHARDINGKEY") + 2, 0)
    if delivery is not None:
        props = props + np.where(delivery, len("TIMER_DELIVER_MS") + 2 + _MS_DIGITS, 0)
    return BATCH_RECORD_FIXED + np.asarray(body, np.int64) + props
