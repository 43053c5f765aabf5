"""Remoting response codes of the broker core's errors and pull results (one table, as `grpc_v2/codes.py`)."""

from __future__ import annotations

from rocketmq_protocol.remoting.codes import ResponseCode as R
from rocketmq_protocol.send_rules import Violation

from ..core.acl import Denial, Denied
from ..core.errors import BrokerError, ErrorKind
from ..core.store.message_store import FOUND, NO_MATCHED_MSG, NO_NEW_MSG, OFFSET_ILLEGAL, GetResult

# What apache/rocketmq's broker answers for the same refusal (`AbstractSendMessageProcessor.msgCheck`,
# `SendMessageProcessor`, `PullMessageProcessor`; an empty body fails in the 5.x store: SYSTEM_ERROR). The
# proxy's message rules are not applied to remoting sends (`sending.send(proxy_checks=False)`); should one
# be, MESSAGE_ILLEGAL is the broker's code for a message it will not store.
CODES: dict[object, int] = {
    Denial.UNAUTHORIZED: R.NO_PERMISSION,
    Denial.FORBIDDEN: R.NO_PERMISSION,
    ErrorKind.ILLEGAL_TOPIC: R.INVALID_PARAMETER,
    ErrorKind.ILLEGAL_GROUP: R.INVALID_PARAMETER,
    ErrorKind.TOPIC_NOT_FOUND: R.TOPIC_NOT_EXIST,
    ErrorKind.QUEUE_NOT_FOUND: R.INVALID_PARAMETER,
    ErrorKind.MESSAGE_CORRUPTED: R.MESSAGE_ILLEGAL,
    ErrorKind.NO_WRITE_PERMISSION: R.NO_PERMISSION,
    ErrorKind.INTERNAL: R.SYSTEM_ERROR,
    ErrorKind.BAD_REQUEST: R.SYSTEM_ERROR,
    Violation.EMPTY_BODY: R.SYSTEM_ERROR,
    Violation.BODY_TOO_LARGE: R.MESSAGE_ILLEGAL,
    Violation.TOO_MANY_PROPERTIES: R.MESSAGE_ILLEGAL,
    Violation.PROPERTIES_TOO_LARGE: R.MESSAGE_ILLEGAL,
    Violation.ILLEGAL_PROPERTY_KEY: R.MESSAGE_ILLEGAL,
    Violation.ILLEGAL_TAG: R.MESSAGE_ILLEGAL,
    Violation.ILLEGAL_KEY: R.MESSAGE_ILLEGAL,
    Violation.ILLEGAL_MESSAGE_ID: R.MESSAGE_ILLEGAL,
    Violation.ILLEGAL_MESSAGE_GROUP: R.MESSAGE_ILLEGAL,
    Violation.ILLEGAL_DELIVERY_TIME: R.MESSAGE_ILLEGAL,
    Violation.TYPE_CONFLICT: R.MESSAGE_ILLEGAL,
}


def code_of(error: BrokerError | Denied) -> int:
    return int(CODES[error.kind])


def pull_code(result: GetResult, offset: int) -> int:
    """GetMessageStatus → response code (`PullMessageProcessor`, master broker): an empty or missing queue
    pulled from 0 is PULL_NOT_FOUND, from elsewhere PULL_OFFSET_MOVED."""
    if result.status == FOUND:
        return int(R.SUCCESS)
    if result.status == NO_NEW_MSG:
        return int(R.PULL_NOT_FOUND)
    if result.status == NO_MATCHED_MSG:
        return int(R.PULL_RETRY_IMMEDIATELY)
    if result.status == OFFSET_ILLEGAL:
        return int(R.PULL_OFFSET_MOVED)
    return int(R.SYSTEM_ERROR)
