"""Exceptions of the connector: invalid options, broker errors and client failures."""

from __future__ import annotations


class OptionError(ValueError):
    """An invalid, missing or unknown option; the message names the option, the value and what is accepted."""


class ConnectorError(RuntimeError):
    """A failure talking to RocketMQ that the connector cannot recover from (the message says where and why)."""


class RocketMQError(ConnectorError):
    """An in-band `Status` other than OK from an RPC: the v2 `Code` number and name, the endpoint and the RPC."""

    def __init__(self, code: int, message: str, endpoint: str, rpc: str) -> None:
        self.code = code
        self.message = message
        self.endpoint = endpoint
        self.rpc = rpc
        super().__init__(self._describe())

    def _describe(self) -> str:
        return f"{self.rpc} on {self.endpoint} failed: {code_name(self.code)} ({self.code}): {self.message}"

    @property
    def code_name(self) -> str:
        return code_name(self.code)

    def __reduce__(self):  # keeps the attributes when Spark pickles the exception
        return (type(self), (self.code, self.message, self.endpoint, self.rpc))


UNAUTHORIZED, FORBIDDEN = 40100, 40300  # apache.rocketmq.v2 Code


class AccessDeniedError(RocketMQError):
    """The endpoint refused the request: UNAUTHORIZED (credentials missing, unknown or wrong) or FORBIDDEN
    (the account lacks a permission). Never retried; the message names the endpoint, the RPC and the reason."""

    def _describe(self) -> str:
        if self.code == UNAUTHORIZED:
            what = "rejected the credentials (UNAUTHORIZED)"
            hint = "check options 'accessKey' and 'secretKey'"
        else:
            what = "refused the request (FORBIDDEN)"
            hint = (
                "the account needs PUB on the topic to write, SUB on the topic and the consumer group to read"
            )
        return f"endpoint {self.endpoint} {what} for {self.rpc}: {self.message} ({hint})"


def broker_error(code: int, message: str, endpoint: str, rpc: str) -> RocketMQError:
    """The exception for an in-band error status: AccessDeniedError for UNAUTHORIZED / FORBIDDEN."""
    cls = AccessDeniedError if code in (UNAUTHORIZED, FORBIDDEN) else RocketMQError
    return cls(code, message, endpoint, rpc)


class UnsupportedEndpointError(ConnectorError):
    """The endpoint answers gRPC UNIMPLEMENTED for an RPC the reader needs (e.g. Apache's own proxy)."""


class RetriesExhaustedError(ConnectorError):
    """A transient failure (UNAVAILABLE, deadline, TOO_MANY_REQUESTS, ...) outlasted the call's deadline."""


def code_name(code: int) -> str:
    """The apache.rocketmq.v2 `Code` name of a number (`CODE_<n>` when unknown)."""
    from rocketmq_protocol.grpc_v2 import definition_pb2

    try:
        return definition_pb2.Code.Name(code)
    except ValueError:
        return f"CODE_{code}"


class DataLossError(ConnectorError):
    """Messages the query should read are gone (retention, a vanished queue, an offset reset) and
    `failOnDataLoss` is true; the message names the queue and the offsets."""


class SinkInputError(ValueError):
    """The DataFrame written to the rocketmq sink is unusable: an unknown or mistyped column, or a bad row
    (the message names the column or the row index and the problem)."""


class SendFailedError(ConnectorError):
    """A SendMessage request that still failed after its retries, or failed with a non-retryable code."""
