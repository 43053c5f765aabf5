"""Topic and group name rules, as RocketMQ's `TopicValidator` and the proxy's group checks apply them."""

from __future__ import annotations

import re

NAME_PATTERN = re.compile(r"^[%a-zA-Z0-9_|-]+$")  # the character set of topic and group names
NAME_CHARACTERS = "[a-zA-Z0-9_%|-]"
TOPIC_MAX_LENGTH = 127
GROUP_MAX_LENGTH = 120
RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
SYSTEM_TOPICS = frozenset(
    {
        "TBW102",
        "SCHEDULE_TOPIC_XXXX",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "BenchmarkTest",
        "OFFSET_MOVED_EVENT",
        "SELF_TEST_TOPIC",
        "RMQ_SYS_TRACE_TOPIC",
    }
)
SYSTEM_GROUP_PREFIX = "CID_RMQ_SYS_"


def is_name(text: str, max_length: int) -> bool:
    """Whether `text` is a legal name of at most `max_length` characters (no system-name check)."""
    return bool(text) and len(text) <= max_length and NAME_PATTERN.match(text) is not None


def topic_error(name: str) -> str | None:
    """Why a topic name is illegal for a client request, or None."""
    if not name or not name.strip():
        return "topic name is blank"
    if len(name) > TOPIC_MAX_LENGTH and not name.startswith((RETRY_PREFIX, DLQ_PREFIX)):
        return f"topic name is longer than {TOPIC_MAX_LENGTH} characters"
    if not NAME_PATTERN.match(name):
        return f"topic name {name!r} contains characters other than {NAME_CHARACTERS}"
    if name in SYSTEM_TOPICS or name.startswith("rmq_sys_"):
        return f"topic {name!r} is a system topic"
    return None


def group_error(name: str) -> str | None:
    """Why a consumer group name is illegal, or None."""
    if not name or not name.strip():
        return "consumer group is blank"
    if len(name) > GROUP_MAX_LENGTH:
        return f"consumer group is longer than {GROUP_MAX_LENGTH} characters"
    if not NAME_PATTERN.match(name):
        return f"consumer group {name!r} contains characters other than {NAME_CHARACTERS}"
    if name.startswith(SYSTEM_GROUP_PREFIX):
        return f"consumer group {name!r} is a system group"
    return None


def wrap_namespace(name: str, namespace: str) -> str:
    """The stored name of a resource: `namespace%name` when a namespace is given (RocketMQ `NamespaceUtil`)."""
    return f"{namespace}%{name}" if namespace else name


def unwrap_namespace(stored: str, namespace: str) -> str:
    """The name a client of `namespace` knows a stored resource by."""
    return stored[len(namespace) + 1 :] if namespace and stored.startswith(namespace + "%") else stored
