"""The checks a message must pass to be sent, as RocketMQ's proxy applies them (`SendMessageActivity`,
`Validators`): one definition for the writer's pre-checks (column-wise, in `connector.sink_rows`) and for
the emulator's SendMessage (`broker_emulator.core.sending`).

Each `*_problem` function returns why a value is refused (a phrase completing "tag 'x' ...") or None.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable

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
