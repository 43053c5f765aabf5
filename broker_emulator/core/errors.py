"""Errors the broker core raises, in no protocol's terms: each front end maps them to its own codes."""

from __future__ import annotations

import enum

from rocketmq_protocol.send_rules import Violation


class ErrorKind(enum.Enum):
    ILLEGAL_TOPIC = "illegal topic"
    ILLEGAL_GROUP = "illegal group"
    TOPIC_NOT_FOUND = "topic not found"
    QUEUE_NOT_FOUND = "queue not found"
    MESSAGE_CORRUPTED = "message corrupted"
    NO_WRITE_PERMISSION = "no write permission"
    INTERNAL = "internal error"
    BAD_REQUEST = "bad request"


class BrokerError(Exception):
    """A refused request: nothing of it took effect. `kind` is an ErrorKind or a send-rule Violation."""

    def __init__(self, kind: ErrorKind | Violation, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
