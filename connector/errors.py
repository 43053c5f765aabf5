"""Exceptions of the connector: invalid options, broker errors and client failures."""

from __future__ import annotations

import enum


class OptionError(ValueError):
    """An invalid, missing or unknown option; the message names the option, the value and what is accepted."""


class ConnectorError(RuntimeError):
    """A failure talking to RocketMQ that the connector cannot recover from (the message says where and why)."""


class ErrorKind(enum.Enum):
    """What a broker's refusal means, whatever the protocol's code for it (each client maps its codes)."""

    TOPIC_NOT_FOUND = "topic not found"
    UNAUTHORIZED = "unauthorized"  # credentials missing, unknown or wrong
    FORBIDDEN = "forbidden"  # the account lacks a permission
    OTHER = "other"


class RocketMQError(ConnectorError):
    """An error status other than OK from a broker: the protocol's code number and name, its neutral `kind`,
    the endpoint and the RPC."""

    def __init__(
        self,
        code: int,
        message: str,
        endpoint: str,
        rpc: str,
        kind: ErrorKind = ErrorKind.OTHER,
        code_name: str = "",
    ) -> None:
        self.code = code
        self.message = message
        self.endpoint = endpoint
        self.rpc = rpc
        self.kind = kind
        self._code_name = code_name or f"CODE_{code}"
        super().__init__(self._describe())

    def _describe(self) -> str:
        return f"{self.rpc} on {self.endpoint} failed: {self.code_name} ({self.code}): {self.message}"

    @property
    def code_name(self) -> str:
        return self._code_name

    def __reduce__(self):  # keeps the attributes when Spark pickles the exception
        return (type(self), (self.code, self.message, self.endpoint, self.rpc, self.kind, self._code_name))


PERMISSIONS_NEEDED = (
    "the account needs PUB on the topic to write, SUB on the topic and the consumer group to read "
    "(with RocketMQ's ACL 2.0: Pub on the topic to write; Sub and Get on the topic and on the group to read)"
)


def access_hint(kind: ErrorKind) -> str:
    """What to check after an ACL refusal of `kind` (UNAUTHORIZED: the credentials first)."""
    if kind == ErrorKind.UNAUTHORIZED:
        # Apache's 5.x proxy answers UNAUTHORIZED for a missing permission too (its message says which).
        return f"check options 'accessKey' and 'secretKey'; if they are right, {PERMISSIONS_NEEDED}"
    return PERMISSIONS_NEEDED


class AccessDeniedError(RocketMQError):
    """The endpoint refused the request: UNAUTHORIZED (credentials missing, unknown or wrong) or FORBIDDEN
    (the account lacks a permission). Never retried; the message names the endpoint, the RPC and the reason."""

    def _describe(self) -> str:
        if self.kind == ErrorKind.UNAUTHORIZED:
            what = f"rejected the credentials ({self.code_name})"
        else:
            what = f"refused the request ({self.code_name})"
        return f"endpoint {self.endpoint} {what} for {self.rpc}: {self.message} ({access_hint(self.kind)})"


def broker_error(
    kind: ErrorKind, code: int, code_name: str, message: str, endpoint: str, rpc: str
) -> RocketMQError:
    """The exception for a broker's error status: AccessDeniedError for UNAUTHORIZED / FORBIDDEN."""
    cls = AccessDeniedError if kind in (ErrorKind.UNAUTHORIZED, ErrorKind.FORBIDDEN) else RocketMQError
    return cls(code, message, endpoint, rpc, kind, code_name)


class UnsupportedEndpointError(ConnectorError):
    """The endpoint does not implement an RPC the reader needs (e.g. Apache's own gRPC proxy)."""


class RetriesExhaustedError(ConnectorError):
    """A transient failure (broker unreachable or busy, a deadline) outlasted the call's deadline."""


class DataLossError(ConnectorError):
    """Messages the query should read are gone (retention, a vanished queue, an offset reset) and
    `failOnDataLoss` is true; the message names the queue and the offsets."""


class SinkInputError(ValueError):
    """The DataFrame written to the rocketmq sink is unusable: an unknown or mistyped column, or a bad row
    (the message names the column or the row index and the problem)."""


class SendFailedError(ConnectorError):
    """A send request that still failed after its retries, or that the broker rejected."""
