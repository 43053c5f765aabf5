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
        super().__init__(f"{rpc} on {endpoint} failed: {code_name(code)} ({code}): {message}")

    @property
    def code_name(self) -> str:
        return code_name(self.code)

    def __reduce__(self):  # keeps the attributes when Spark pickles the exception
        return (type(self), (self.code, self.message, self.endpoint, self.rpc))


class UnsupportedEndpointError(ConnectorError):
    """The endpoint answers gRPC UNIMPLEMENTED for an RPC the reader needs (e.g. Apache's own proxy)."""


class RetriesExhaustedError(ConnectorError):
    """A transient failure (UNAVAILABLE, deadline, TOO_MANY_REQUESTS, ...) outlasted the call's deadline."""


def code_name(code: int) -> str:
    """The apache.rocketmq.v2 `Code` name of a number (`CODE_<n>` when unknown)."""
    from .protocol.v2 import definition_pb2

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
