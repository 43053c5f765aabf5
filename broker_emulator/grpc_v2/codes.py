"""The v2 in-band codes of the broker core's errors and pull results."""

from __future__ import annotations

from rocketmq_protocol.grpc_v2 import definition_pb2 as d
from rocketmq_protocol.send_rules import Violation

from ..core.acl import Denial, Denied
from ..core.errors import BrokerError, ErrorKind
from ..core.store.message_store import FOUND, NO_MATCHED_MSG, NO_NEW_MSG, OFFSET_ILLEGAL, GetResult

CODES = {
    Denial.UNAUTHORIZED: d.UNAUTHORIZED,
    Denial.FORBIDDEN: d.FORBIDDEN,
    ErrorKind.ILLEGAL_TOPIC: d.ILLEGAL_TOPIC,
    ErrorKind.ILLEGAL_GROUP: d.ILLEGAL_CONSUMER_GROUP,
    ErrorKind.TOPIC_NOT_FOUND: d.TOPIC_NOT_FOUND,
    ErrorKind.QUEUE_NOT_FOUND: d.BAD_REQUEST,
    ErrorKind.MESSAGE_CORRUPTED: d.MESSAGE_CORRUPTED,
    ErrorKind.NO_WRITE_PERMISSION: d.FORBIDDEN,
    ErrorKind.INTERNAL: d.INTERNAL_SERVER_ERROR,
    ErrorKind.BAD_REQUEST: d.BAD_REQUEST,
    Violation.EMPTY_BODY: d.MESSAGE_BODY_EMPTY,
    Violation.BODY_TOO_LARGE: d.MESSAGE_BODY_TOO_LARGE,
    Violation.TOO_MANY_PROPERTIES: d.MESSAGE_PROPERTIES_TOO_LARGE,
    Violation.PROPERTIES_TOO_LARGE: d.MESSAGE_PROPERTIES_TOO_LARGE,
    Violation.ILLEGAL_PROPERTY_KEY: d.ILLEGAL_MESSAGE_PROPERTY_KEY,
    Violation.ILLEGAL_TAG: d.ILLEGAL_MESSAGE_TAG,
    Violation.ILLEGAL_KEY: d.ILLEGAL_MESSAGE_KEY,
    Violation.ILLEGAL_MESSAGE_ID: d.ILLEGAL_MESSAGE_ID,
    Violation.ILLEGAL_MESSAGE_GROUP: d.ILLEGAL_MESSAGE_GROUP,
    Violation.ILLEGAL_DELIVERY_TIME: d.ILLEGAL_DELIVERY_TIME,
    Violation.TYPE_CONFLICT: d.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
}


def code_of(error: BrokerError | Denied) -> int:
    return CODES[error.kind]


def pull_status(result: GetResult) -> tuple[int, str]:
    """GetMessageStatus → v2 code (what apache/rocketmq's proxy answers for `GetMessageStatus`)."""
    if result.status == FOUND:
        return d.OK, "OK"
    if result.status == NO_NEW_MSG:
        return d.MESSAGE_NOT_FOUND, "no new message"
    if result.status == NO_MATCHED_MSG:
        return d.MESSAGE_NOT_FOUND, "no matched message"
    if result.status == OFFSET_ILLEGAL:
        return d.ILLEGAL_OFFSET, (
            f"offset is outside [{result.min_offset}, {result.max_offset}]; next offset {result.next_offset}"
        )
    return d.INTERNAL_SERVER_ERROR, result.status
