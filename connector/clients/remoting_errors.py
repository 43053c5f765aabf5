"""Remoting response codes as the connector's errors: code names, and which answers are ACL refusals.

Brokers refuse an account in two ways: ACL 2.0 (RocketMQ 5.3+) answers NO_PERMISSION, ACL 1.0 (4.x to 5.2)
SYSTEM_ERROR carrying the `AclException`'s text; both become `AccessDeniedError` (reads) or a send rejected
without retry (writes), never a transient failure.
"""

from __future__ import annotations

import re

from rocketmq_protocol.remoting.codes import RequestCode, ResponseCode

from ..errors import ErrorKind, RocketMQError, broker_error

__all__ = ["access_kind", "code_name", "code_name_of_request", "remoting_error"]

_R = ResponseCode


def code_name(code: int) -> str:
    """The apache/rocketmq `ResponseCode` name of a number (`CODE_<n>` when unknown)."""
    try:
        return ResponseCode(code).name
    except ValueError:
        return f"CODE_{code}"


def code_name_of_request(code: int) -> str:
    try:
        return RequestCode(code).name
    except ValueError:
        return f"request {code}"


_FORBIDDEN_WORDS = (
    "authoriz",
    "denied",
    "deny",
    "lacks",
    "no permission",
    "not permitted",
    "forbidden",
    "perm",
)
_UNAUTHORIZED_WORDS = ("signature", "accesskey", "access key", "authenticat", "user", "credential")
# Java names in a remark ("org.apache.rocketmq.acl.plain.PlainPermissionManager.validate(Plain...java:683)"):
# not words of the reason ("Permission" there would read as a missing permission).
_JAVA_NAMES = re.compile(r"\b(?:[a-z_$][\w$]*\.)+[A-Z][\w$]*(?:\.[\w$<>]+)*(?:\([^)]*\))?")


def access_kind(code: int, remark: str | None) -> ErrorKind | None:
    """UNAUTHORIZED / FORBIDDEN for an ACL refusal: ACL 2.0 answers NO_PERMISSION (5.3+; `[authorization]`
    or `[authentication]` in the remark), ACL 1.0 (4.x to 5.2) SYSTEM_ERROR with the AclException's text.
    A missing permission wins over words about the credentials ("access key 'x' lacks SUB ...")."""
    raw = (remark or "").lower()
    text = _JAVA_NAMES.sub("", remark or "").lower()
    if code == _R.NO_PERMISSION:
        if any(w in text for w in _FORBIDDEN_WORDS):
            return ErrorKind.FORBIDDEN
        if any(w in text for w in _UNAUTHORIZED_WORDS):
            return ErrorKind.UNAUTHORIZED
        return ErrorKind.FORBIDDEN
    if code == _R.SYSTEM_ERROR and ("acl" in raw or "signature" in raw or "accesskey" in raw):
        if any(w in text for w in _FORBIDDEN_WORDS):
            return ErrorKind.FORBIDDEN
        return ErrorKind.UNAUTHORIZED
    return None


def remoting_error(code: int, remark: str | None, address: str, rpc: str) -> RocketMQError:
    """The exception for an error response, with its neutral kind."""
    kind = access_kind(code, remark)
    if kind is None:
        kind = ErrorKind.TOPIC_NOT_FOUND if code == _R.TOPIC_NOT_EXIST else ErrorKind.OTHER
    return broker_error(kind, code, code_name(code), remark or "", address, rpc)
