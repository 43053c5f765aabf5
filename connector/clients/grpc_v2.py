"""The gRPC implementation of `RocketMQClient`: `apache.rocketmq.v2` (routes, queue and group offsets, pulls,
sends) plus the emulator's BulkPull extension.

Pulls use BulkPull (one Arrow IPC payload per call) when `ClientConfig.pull_protocol` allows and the endpoint
serves it, else the standard PullMessage stream, converted to the same `MESSAGE_SCHEMA` table. Sends take
requests `grpc_v2_send` encoded and answer neutral `SendOutcome`s. Every call carries the client's headers
and, with credentials, the `MQv2-HMAC-SHA1` signature; TLS is optional. This module is the one place that
maps v2 codes and gRPC statuses to the connector's neutral ones (`PullStatus`, `SendOutcome`, `ErrorKind`).
"""

from __future__ import annotations

import gzip
import logging
import os
import socket
import threading
import uuid
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

import grpc
import pyarrow as pa

from rocketmq_protocol.extension import pb
from rocketmq_protocol.extension.bulk_pull_wire import BulkPullReply, decode_response
from rocketmq_protocol.grpc_v2 import definition_pb2 as d
from rocketmq_protocol.grpc_v2 import service_pb2 as s
from rocketmq_protocol.grpc_v2 import service_pb2_grpc
from rocketmq_protocol.grpc_v2.headers import (
    CLIENT_ID_HEADER,
    EXPLICIT_QUEUE_HEADER,
    LANGUAGE_HEADER,
    NAMESPACE_HEADER,
    PROTOCOL_HEADER,
    REQUEST_ID_HEADER,
)
from rocketmq_protocol.grpc_v2.send_status import decode_send_response
from rocketmq_protocol.hashing import java_string_hash
from rocketmq_protocol.message_schema import MESSAGE_SCHEMA, ipc_to_table
from rocketmq_protocol.signature import AUTHORIZATION_HEADER, DATE_TIME_HEADER, authorization, date_time_now

from ..config import FILTER_SQL, PULL_AUTO, PULL_BULK, PULL_PROTOCOLS, PULL_STANDARD, ClientConfig, FilterSpec
from ..errors import (
    ConnectorError,
    ErrorKind,
    RocketMQError,
    UnsupportedEndpointError,
    broker_error,
)
from ..queues import MessageQueue, RouteEntry, queue_sort_key
from .base import (
    DEFAULT_TIMEOUT_MS,
    SEND_OK,
    PullResult,
    PullStatus,
    RocketMQClient,
    SendFuture,
    SendOutcome,
    SendStatus,
)
from .grpc_v2_send import GrpcSendEncoder
from .pull_channel import POLL_MARGIN_S, PullChannels
from .retrying import Transient, call_with_retries, tls_handshake_message

log = logging.getLogger(__name__)

__all__ = ["EXPLICIT_QUEUE_HEADER", "GrpcClient", "code_name", "messages_to_table", "v2_error"]

MAX_GRPC_MESSAGE_BYTES = 256 * 1024 * 1024
# gRPC codes and in-band v2 codes worth another attempt before the call's deadline.
TRANSIENT_GRPC = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
TRANSIENT_CODES = frozenset({d.TOO_MANY_REQUESTS, d.INTERNAL_SERVER_ERROR, d.PROXY_TIMEOUT})
# In-band codes of a failed send worth another attempt (on another broker).
RETRYABLE_SEND_CODES = frozenset(
    {
        d.INTERNAL_SERVER_ERROR,
        d.INTERNAL_ERROR,
        d.TOO_MANY_REQUESTS,
        d.PROXY_TIMEOUT,
        d.HA_NOT_AVAILABLE,
        d.MASTER_PERSISTENCE_TIMEOUT,
        d.SLAVE_PERSISTENCE_TIMEOUT,
    }
)
# gRPC statuses a server may refuse access with (instead of the in-band codes), as those codes.
ACCESS_GRPC = {
    grpc.StatusCode.UNAUTHENTICATED: d.UNAUTHORIZED,
    grpc.StatusCode.PERMISSION_DENIED: d.FORBIDDEN,
}
ERROR_KINDS = {
    d.TOPIC_NOT_FOUND: ErrorKind.TOPIC_NOT_FOUND,
    d.UNAUTHORIZED: ErrorKind.UNAUTHORIZED,
    d.FORBIDDEN: ErrorKind.FORBIDDEN,
}
READER_RPCS = "PullMessage, GetOffset, UpdateOffset and QueryOffset"
SEND_MESSAGE_METHOD = "/apache.rocketmq.v2.MessagingService/SendMessage"
BULK_PULL_METHOD = "/rocketmq_emulator.v1.EmulatorService/BulkPull"
QUEUE_OFFSETS_METHOD = "/rocketmq_emulator.v1.EmulatorService/QueueOffsets"
PULL_CHANNEL_METHOD = "/rocketmq_emulator.v1.EmulatorService/PullChannel"

R = TypeVar("R")


def code_name(code: int) -> str:
    """The apache.rocketmq.v2 `Code` name of a number (`CODE_<n>` when unknown)."""
    try:
        return d.Code.Name(code)
    except ValueError:
        return f"CODE_{code}"


def v2_error(code: int, message: str, endpoint: str, rpc: str) -> RocketMQError:
    """The exception for an in-band v2 error status, with its neutral kind."""
    return broker_error(ERROR_KINDS.get(code, ErrorKind.OTHER), code, code_name(code), message, endpoint, rpc)


class _Stubs(NamedTuple):
    channel: grpc.Channel
    v2: service_pb2_grpc.MessagingServiceStub
    bulk_pull: grpc.UnaryUnaryMultiCallable  # BulkPull answering a BulkPullReply (payload read in place)
    send: grpc.UnaryUnaryMultiCallable  # SendMessage taking a serialized request (the writer encodes its own)
    queue_offsets: grpc.UnaryUnaryMultiCallable  # the extension's QueueOffsets
    pull_channel: grpc.UnaryUnaryMultiCallable  # the extension's PullChannel


def _client_id() -> str:
    return f"{socket.gethostname()}@{os.getpid()}@{uuid.uuid4().hex}"


def _millis(ts: Any) -> int:
    return ts.seconds * 1000 + ts.nanos // 1_000_000


def _endpoint_of(broker: Any, fallback: str) -> str:
    addresses = broker.endpoints.addresses
    if not addresses:
        return fallback
    host, port = addresses[0].host, addresses[0].port
    return f"[{host}]:{port}" if broker.endpoints.scheme == d.IPv6 else f"{host}:{port}"


class GrpcClient(RocketMQClient):
    """A thread-safe v2 client of one cluster; obtain it with `connector.clients.get_client(config)`."""

    def __init__(self, config: ClientConfig) -> None:
        if config.pull_protocol not in PULL_PROTOCOLS:
            raise ValueError(
                f"unknown pull protocol {config.pull_protocol!r}; expected {', '.join(PULL_PROTOCOLS)}"
            )
        self.config = config
        self.client_id = _client_id()
        self._stubs: dict[str, _Stubs] = {}
        self._lock = threading.Lock()
        self._no_bulk: set[str] = set()  # endpoints that answered UNIMPLEMENTED to BulkPull
        self._no_queue_offsets: set[str] = set()  # ... and to QueueOffsets
        # BulkPull over the emulator's pull channel: plaintext and unsigned, so never with TLS or credentials
        self._pull_channels = PullChannels(
            config.pull_channel and not config.tls and config.access_key is None
        )

    # ------------------------------------------------------------------ plumbing
    def _channel(self, endpoint: str) -> _Stubs:
        stubs = self._stubs.get(endpoint)
        if stubs is not None:
            return stubs
        with self._lock:
            stubs = self._stubs.get(endpoint)
            if stubs is None:
                options = [
                    ("grpc.max_receive_message_length", MAX_GRPC_MESSAGE_BYTES),
                    ("grpc.max_send_message_length", MAX_GRPC_MESSAGE_BYTES),
                    # reconnect quickly after an outage: our own retries are bounded by the call's deadline
                    ("grpc.initial_reconnect_backoff_ms", 100),
                    ("grpc.min_reconnect_backoff_ms", 100),
                    ("grpc.max_reconnect_backoff_ms", 1000),
                ]
                if self.config.tls:
                    creds = grpc.ssl_channel_credentials(root_certificates=self.config.tls_ca_pem)
                    channel = grpc.secure_channel(endpoint, creds, options=options)
                else:
                    channel = grpc.insecure_channel(endpoint, options=options)
                stubs = _Stubs(
                    channel,
                    service_pb2_grpc.MessagingServiceStub(channel),
                    channel.unary_unary(
                        BULK_PULL_METHOD,
                        request_serializer=pb.BulkPullRequest.SerializeToString,
                        response_deserializer=decode_response,
                    ),
                    channel.unary_unary(
                        SEND_MESSAGE_METHOD,
                        request_serializer=None,
                        response_deserializer=decode_send_response,
                    ),
                    channel.unary_unary(
                        QUEUE_OFFSETS_METHOD,
                        request_serializer=pb.QueueOffsetsRequest.SerializeToString,
                        response_deserializer=pb.QueueOffsetsResponse.FromString,
                    ),
                    channel.unary_unary(
                        PULL_CHANNEL_METHOD,
                        request_serializer=pb.PullChannelRequest.SerializeToString,
                        response_deserializer=pb.PullChannelResponse.FromString,
                    ),
                )
                self._stubs[endpoint] = stubs
        return stubs

    def metadata(self) -> list[tuple[str, str]]:
        """The headers of one call: client identity, date, request id, namespace and the signature."""
        date_time = date_time_now()
        md = [
            (CLIENT_ID_HEADER, self.client_id),
            (LANGUAGE_HEADER, "PYTHON"),
            (PROTOCOL_HEADER, "v2"),
            (DATE_TIME_HEADER, date_time),
            (REQUEST_ID_HEADER, str(uuid.uuid4())),
        ]
        if self.config.namespace:
            md.append((NAMESPACE_HEADER, self.config.namespace))
        if self.config.access_key is not None and self.config.secret_key is not None:
            md.append(
                (
                    AUTHORIZATION_HEADER,
                    authorization(self.config.access_key, self.config.secret_key, date_time),
                )
            )
        return md

    def _invoke(
        self,
        endpoints: Sequence[str],
        rpc: str,
        attempt: Callable[[_Stubs, float, list[tuple[str, str]]], R],
        timeout_ms: int,
        *,
        extra_wait_s: float = 0.0,
        on_unimplemented: Callable[[str], Exception] | None = None,
    ) -> tuple[R, str]:
        """Runs `attempt` on the endpoints under the shared retry rule (`retrying.call_with_retries`).
        Transient failures (gRPC UNAVAILABLE / DEADLINE_EXCEEDED, in-band codes raised as `Transient`) are
        retried; other gRPC errors fail at once. Returns the result and its endpoint."""
        if not endpoints:
            raise ConnectorError(f"{rpc}: no endpoint to call (ClientConfig.endpoints is empty)")

        def one(endpoint: str, seconds: float) -> R:
            try:
                return attempt(self._channel(endpoint), seconds, self.metadata())
            except Transient as e:
                raise Transient(f"{endpoint}: {e}") from None
            except grpc.RpcError as e:
                code, details = e.code(), e.details()  # type: ignore[attr-defined]
                if code == grpc.StatusCode.UNIMPLEMENTED and on_unimplemented is not None:
                    raise on_unimplemented(endpoint) from None
                if code in ACCESS_GRPC:
                    raise v2_error(ACCESS_GRPC[code], details, endpoint, rpc) from None
                if code not in TRANSIENT_GRPC:
                    raise ConnectorError(f"{rpc} on {endpoint} failed: gRPC {code.name}: {details}") from None
                if "handshake failed" in (details or "").lower():
                    raise ConnectorError(
                        tls_handshake_message(rpc, endpoint, details, self.config.tls)
                    ) from None
                raise Transient(f"{endpoint}: gRPC {code.name}: {details}") from None

        def hint(last: str) -> str:
            if not self.config.tls and "socket closed" in last.lower():
                return " (if the endpoint serves TLS, set option 'tls' to 'true')"
            return ""

        return call_with_retries(
            rpc, lambda: endpoints, one, timeout_ms, extra_wait_s=extra_wait_s, exhausted_hint=hint
        )

    @staticmethod
    def _check_transient(code: int, message: str) -> None:
        if code in TRANSIENT_CODES:
            raise Transient(f"{code_name(code)} ({code}): {message}")

    def _unsupported(self, rpc: str) -> Callable[[str], Exception]:
        def make(endpoint: str) -> Exception:
            return UnsupportedEndpointError(
                f"endpoint {endpoint} does not implement {rpc} (gRPC UNIMPLEMENTED). The rocketmq reader needs "
                f"{READER_RPCS} of apache.rocketmq.v2, which Apache RocketMQ's own proxy (through 5.3.3) "
                "does not serve; point 'endpoints' at a server that implements them, such as the bundled "
                "broker emulator. (The writer needs only QueryRoute and SendMessage.)"
            )

        return make

    def _resource(self, name: str) -> d.Resource:
        return d.Resource(name=name, resource_namespace=self.config.namespace)

    def _wrapped(self, name: str) -> str:
        """The stored name of a resource: `namespace%name` with a namespace (the extension takes it raw)."""
        return f"{self.config.namespace}%{name}" if self.config.namespace else name

    def _queue(self, entry: RouteEntry) -> d.MessageQueue:
        q = entry.queue
        return d.MessageQueue(
            topic=self._resource(q.topic), id=q.queue_id, broker=d.Broker(name=q.broker, id=0)
        )

    def _unary(self, queue: RouteEntry, rpc: str, request: Any, timeout_ms: int) -> Any:
        """One unary v2 call on the queue's broker; the response once its status is OK (else RocketMQError),
        except OFFSET_NOT_FOUND, which GetOffset's caller handles."""

        def attempt(stubs: _Stubs, timeout: float, md: list[tuple[str, str]]) -> Any:
            resp = getattr(stubs.v2, rpc)(request, timeout=timeout, metadata=md)
            self._check_transient(resp.status.code, resp.status.message)
            return resp

        resp, endpoint = self._invoke(
            [queue.endpoint],
            rpc,
            attempt,
            timeout_ms,
            on_unimplemented=self._unsupported(rpc),
        )
        if resp.status.code not in (d.OK, d.OFFSET_NOT_FOUND):
            raise v2_error(resp.status.code, resp.status.message, endpoint, rpc)
        return resp

    # ------------------------------------------------------------------ route
    def route(self, topic: str, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> list[RouteEntry]:
        """Every master queue of `topic` in queue order (QueryRoute on the configured endpoints in turn)."""

        def attempt(stubs: _Stubs, timeout: float, md: list[tuple[str, str]]) -> s.QueryRouteResponse:
            req = s.QueryRouteRequest(topic=self._resource(topic))
            resp = stubs.v2.QueryRoute(req, timeout=timeout, metadata=md)
            self._check_transient(resp.status.code, resp.status.message)
            return resp

        resp, endpoint = self._invoke(self.config.endpoint_list, "QueryRoute", attempt, timeout_ms)
        if resp.status.code != d.OK:
            raise v2_error(resp.status.code, resp.status.message, endpoint, f"QueryRoute({topic})")
        queues: dict[MessageQueue, RouteEntry] = {}
        for mq in resp.message_queues:
            if mq.broker.id != 0:
                continue
            q = MessageQueue(topic, mq.broker.name, mq.id)
            queues[q] = RouteEntry(
                q,
                _endpoint_of(mq.broker, endpoint),
                readable=mq.permission in (d.READ, d.READ_WRITE),
                writable=mq.permission in (d.WRITE, d.READ_WRITE),
            )
        return [queues[k] for k in sorted(queues, key=queue_sort_key)]

    # ------------------------------------------------------------------ queue offsets
    def _query_offset(self, queue: RouteEntry, policy: int, timeout_ms: int, ts_ms: int | None = None) -> int:
        req = s.QueryOffsetRequest(message_queue=self._queue(queue), query_offset_policy=policy)
        if ts_ms is not None:
            req.timestamp.FromMilliseconds(ts_ms)
        return self._unary(queue, "QueryOffset", req, timeout_ms).offset

    def min_offset(self, queue: RouteEntry, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> int:
        """The queue's earliest available offset (QueryOffset BEGINNING)."""
        return self._query_offset(queue, d.BEGINNING, timeout_ms)

    def max_offset(self, queue: RouteEntry, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> int:
        """The queue's next offset to be written (QueryOffset END)."""
        return self._query_offset(queue, d.END, timeout_ms)

    def broker_bounds(
        self, queues: Sequence[RouteEntry], timeout_ms: int = DEFAULT_TIMEOUT_MS
    ) -> dict[MessageQueue, tuple[int, int]] | None:
        """Every queue's bounds from the extension's QueueOffsets (one call, not a QueryOffset per queue and
        bound); None when the endpoint does not serve it (remembered) or refuses it."""
        endpoint = queues[0].endpoint
        if endpoint in self._no_queue_offsets:
            return None
        topic, broker = queues[0].queue.topic, queues[0].queue.broker
        req = pb.QueueOffsetsRequest(topic=self._wrapped(topic))

        def attempt(stubs: _Stubs, timeout: float, md: list[tuple[str, str]]) -> Any:
            resp = stubs.queue_offsets(req, timeout=timeout, metadata=md)
            self._check_transient(resp.code, resp.message)
            return resp

        try:
            resp, _ = self._invoke(
                [endpoint], "QueueOffsets", attempt, timeout_ms, on_unimplemented=_ExtensionUnimplemented
            )
        except _ExtensionUnimplemented:
            log.info("%s has no QueueOffsets extension; querying offsets queue by queue", endpoint)
            self._no_queue_offsets.add(endpoint)
            return None
        if resp.code != d.OK:
            return None  # e.g. a topic this broker no longer serves: QueryOffset per queue says what is wrong
        return {MessageQueue(topic, broker, q.queue_id): (q.min_offset, q.max_offset) for q in resp.queues}

    def offset_for_timestamp(
        self, queue: RouteEntry, ts_ms: int, timeout_ms: int = DEFAULT_TIMEOUT_MS
    ) -> int:
        """The first offset stored at or after `ts_ms` (the max offset when none is; QueryOffset TIMESTAMP)."""
        return self._query_offset(queue, d.TIMESTAMP, timeout_ms, ts_ms)

    # ------------------------------------------------------------------ group offsets
    def get_committed(
        self, group: str, queue: RouteEntry, timeout_ms: int = DEFAULT_TIMEOUT_MS
    ) -> int | None:
        """The group's committed offset of the queue (GetOffset); None when it has none."""
        req = s.GetOffsetRequest(group=self._resource(group), message_queue=self._queue(queue))
        resp = self._unary(queue, "GetOffset", req, timeout_ms)
        return None if resp.status.code == d.OFFSET_NOT_FOUND else resp.offset

    def commit(
        self, group: str, queue: RouteEntry, offset: int, timeout_ms: int = DEFAULT_TIMEOUT_MS
    ) -> None:
        """Stores `offset` (the next one to consume) as the group's offset of the queue (UpdateOffset)."""
        req = s.UpdateOffsetRequest(
            group=self._resource(group), message_queue=self._queue(queue), offset=offset
        )
        self._unary(queue, "UpdateOffset", req, timeout_ms)

    # ------------------------------------------------------------------ pull
    def pull(
        self,
        queue: RouteEntry,
        offset: int,
        max_messages: int,
        *,
        group: str,
        filter: FilterSpec | None = None,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        long_polling_ms: int = 0,
        max_bytes: int = 0,
        protocol: str | None = None,
    ) -> PullResult:
        """Up to `max_messages` from `offset` of `queue`, as a MESSAGE_SCHEMA table.

        `protocol` (default: `ClientConfig.pull_protocol`): `bulk` (BulkPull only), `standard` (PullMessage
        only) or `auto` (BulkPull unless the endpoint answered UNIMPLEMENTED to it before). Transient errors
        are retried within `timeout_ms`.
        """
        protocol = protocol or self.config.pull_protocol
        if protocol not in PULL_PROTOCOLS:
            raise ValueError(f"unknown pull protocol {protocol!r}; expected {', '.join(PULL_PROTOCOLS)}")
        use_bulk = protocol == PULL_BULK or (protocol == PULL_AUTO and queue.endpoint not in self._no_bulk)
        if use_bulk:
            try:
                return self._bulk_pull(
                    queue, offset, max_messages, group, filter, timeout_ms, long_polling_ms, max_bytes
                )
            except _ExtensionUnimplemented:
                if protocol == PULL_BULK:
                    raise UnsupportedEndpointError(
                        f"endpoint {queue.endpoint} does not serve the bulk-pull extension "
                        "(rocketmq_emulator.v1.EmulatorService/BulkPull answered UNIMPLEMENTED); "
                        "set option 'pullProtocol' to 'auto' or 'standard' to use PullMessage"
                    ) from None
                log.info("%s has no BulkPull extension; pulling with PullMessage", queue.endpoint)
                self._no_bulk.add(queue.endpoint)
        return self._standard_pull(queue, offset, max_messages, group, filter, timeout_ms, long_polling_ms)

    def _bulk_pull(
        self,
        queue: RouteEntry,
        offset: int,
        max_messages: int,
        group: str,
        flt: FilterSpec | None,
        timeout_ms: int,
        long_polling_ms: int,
        max_bytes: int,
    ) -> PullResult:
        req = pb.BulkPullRequest(
            group=self._wrapped(group),
            topic=self._wrapped(queue.queue.topic),
            queue_id=queue.queue.queue_id,
            offset=offset,
            max_messages=max_messages,
            max_bytes=max_bytes,
            long_polling_timeout_ms=long_polling_ms,
        )
        if flt is not None and not flt.matches_all:
            req.filter.CopyFrom(pb.PullFilter(type=_filter_type(flt), expression=flt.expression))

        endpoint = queue.endpoint

        def attempt(stubs: _Stubs, timeout: float, md: list[tuple[str, str]]) -> BulkPullReply:
            resp = None
            address = self._pull_channels.address(
                endpoint, lambda: self._ask_pull_channel(stubs, timeout, md)
            )
            if address is not None:
                # the server's hold ends before this attempt stops waiting, as gRPC's deadline makes it
                hold_ms = min(long_polling_ms, max(0, int((timeout - POLL_MARGIN_S) * 1000)))
                req.long_polling_timeout_ms = hold_ms
                resp = self._pull_channels.pull(endpoint, address, req.SerializeToString(), timeout)
                req.long_polling_timeout_ms = long_polling_ms
            if resp is None:
                resp = stubs.bulk_pull(req, timeout=timeout, metadata=md)
            self._check_transient(resp.code, resp.message)
            return resp

        resp, endpoint = self._invoke(
            [queue.endpoint],
            "BulkPull",
            attempt,
            timeout_ms,
            extra_wait_s=long_polling_ms / 1000.0,
            on_unimplemented=_ExtensionUnimplemented,
        )
        status = _pull_status(resp.code, resp.message, offset, resp.next_offset, endpoint, "BulkPull")
        table = ipc_to_table(resp.arrow_ipc) if resp.arrow_ipc else MESSAGE_SCHEMA.empty_table()
        return PullResult(status, resp.next_offset, resp.min_offset, resp.max_offset, table, PULL_BULK)

    def _ask_pull_channel(self, stubs: _Stubs, timeout: float, md: list[tuple[str, str]]) -> str:
        """The endpoint's pull-channel address (PullChannel); "" when it offers none or does not know the RPC
        (an emulator from before it); other gRPC errors propagate to the pull's retry rule."""
        try:
            resp = stubs.pull_channel(pb.PullChannelRequest(), timeout=timeout, metadata=md)
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.UNIMPLEMENTED:  # type: ignore[attr-defined]
                return ""
            raise
        return resp.address if resp.code == d.OK else ""

    def _standard_pull(
        self,
        queue: RouteEntry,
        offset: int,
        max_messages: int,
        group: str,
        flt: FilterSpec | None,
        timeout_ms: int,
        long_polling_ms: int,
    ) -> PullResult:
        req = s.PullMessageRequest(
            group=self._resource(group),
            message_queue=self._queue(queue),
            offset=offset,
            batch_size=max_messages,
        )
        req.long_polling_timeout.FromMilliseconds(long_polling_ms)
        if flt is not None and not flt.matches_all:
            req.filter_expression.CopyFrom(
                d.FilterExpression(type=_filter_type(flt), expression=flt.expression)
            )

        def attempt(stubs: _Stubs, timeout: float, md: list[tuple[str, str]]) -> _Frames:
            frames = _Frames()
            for frame in stubs.v2.PullMessage(req, timeout=timeout, metadata=md):
                kind = frame.WhichOneof("content")
                if kind == "status":
                    frames.status = frame.status
                elif kind == "message":
                    frames.messages.append(frame.message)
                elif kind == "next_offset":
                    frames.next_offset = frame.next_offset
            if frames.status is not None:
                self._check_transient(frames.status.code, frames.status.message)
            return frames

        frames, endpoint = self._invoke(
            [queue.endpoint],
            "PullMessage",
            attempt,
            timeout_ms,
            extra_wait_s=long_polling_ms / 1000.0,
            on_unimplemented=self._unsupported("PullMessage"),
        )
        if frames.status is None:
            raise ConnectorError(f"PullMessage on {endpoint} answered without a status frame")
        code, message = frames.status.code, frames.status.message
        next_offset = frames.next_offset
        if next_offset is None and code == d.OK and frames.messages:
            next_offset = frames.messages[-1].system_properties.queue_offset + 1
        elif next_offset is None and code == d.MESSAGE_NOT_FOUND:
            next_offset = offset
        elif next_offset is None and code in (d.OK, d.ILLEGAL_OFFSET):
            raise ConnectorError(
                f"PullMessage on {endpoint} answered {code_name(code)} without a next_offset"
            )
        status = _pull_status(code, message, offset, next_offset or 0, endpoint, "PullMessage")
        return PullResult(
            status, next_offset or 0, None, None, messages_to_table(frames.messages), PULL_STANDARD
        )

    # ------------------------------------------------------------------ send
    def send_encoder(self, producer_group: str | None = None) -> GrpcSendEncoder:
        return GrpcSendEncoder(self.config.namespace)  # v2 SendMessage carries no producer group

    def send_async(self, endpoint: str, payload: object, count: int, timeout_s: float) -> SendFuture:
        """SendMessage of a request `GrpcSendEncoder` encoded, with the explicit-queue header (each message
        names its queue)."""
        metadata = self.metadata()
        metadata.append((EXPLICIT_QUEUE_HEADER, "true"))
        stubs = self._channel(endpoint)
        try:
            address = self._pull_channels.address(
                endpoint, lambda: self._ask_pull_channel(stubs, timeout_s, metadata)
            )
        except grpc.RpcError:
            address = None  # asked again at the next send; this one meets the endpoint's error over gRPC
        if address is not None:
            call = self._pull_channels.send(
                endpoint,
                address,
                payload,  # type: ignore[arg-type]  # GrpcSendEncoder's requests are bytes
                dict(metadata),
                count,
                timeout_s,
                send_outcome,
            )
            if call is not None:
                return call
        return _SendCall(stubs.send.future(payload, timeout=timeout_s, metadata=metadata), count)

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        with self._lock:
            stubs, self._stubs = list(self._stubs.values()), {}
        for st in stubs:
            st.channel.close()
        self._pull_channels.close()


class _SendCall:
    """A SendMessage in flight (`connector.clients.base.SendFuture`)."""

    __slots__ = ("_call", "_count")

    def __init__(self, call: grpc.Future, count: int) -> None:
        self._call = call
        self._count = count

    def add_done_callback(self, fn: Callable[[], None]) -> None:
        self._call.add_done_callback(lambda _call: fn())

    def cancel(self) -> bool:
        return self._call.cancel()

    def outcome(self) -> SendOutcome | None:
        try:
            resp = self._call.result()
        except grpc.FutureCancelledError:
            return None
        except grpc.RpcError as e:
            code = e.code()  # type: ignore[attr-defined]
            reason = f"gRPC {code.name}: {e.details()}"  # type: ignore[attr-defined]
            status = SendStatus.RETRYABLE if code in TRANSIENT_GRPC else SendStatus.REJECTED
            return SendOutcome(status, reason, code.name)
        return send_outcome(resp, self._count)


def _entry_outcome(status: Any) -> SendOutcome:
    code = status.code
    if code == d.OK:
        return SEND_OK
    kind = SendStatus.RETRYABLE if code in RETRYABLE_SEND_CODES else SendStatus.REJECTED
    name = code_name(code)
    return SendOutcome(kind, f"{name} ({code}): {status.message}", name)


def send_outcome(resp: s.SendMessageResponse, count: int) -> SendOutcome:
    """A SendMessageResponse of a request of `count` messages as a neutral outcome: OK; PARTIAL (v2
    MULTIPLE_RESULTS, one entry per message); RETRYABLE (TOO_MANY_REQUESTS with a backoff); REJECTED. A
    failure keeps the per-message entries when the response has one per message."""
    code = resp.status.code
    if code == d.OK:
        return SEND_OK
    entries = resp.entries
    messages = tuple(_entry_outcome(e.status) for e in entries) if len(entries) == count else None
    if code == d.MULTIPLE_RESULTS and messages is not None:
        return SendOutcome(SendStatus.PARTIAL, messages=messages)
    name = code_name(code)
    reason = f"{name} ({code}): {resp.status.message}"
    if code in RETRYABLE_SEND_CODES:
        return SendOutcome(SendStatus.RETRYABLE, reason, name, backoff=code == d.TOO_MANY_REQUESTS)
    return SendOutcome(SendStatus.REJECTED, reason, name, messages=messages)


class _ExtensionUnimplemented(Exception):
    """An extension RPC answered UNIMPLEMENTED (internal signal for the fallback)."""


@dataclass
class _Frames:
    """What one PullMessage stream carried (frames may come in any order)."""

    status: Any = None
    next_offset: int | None = None
    messages: list[d.Message] = field(default_factory=list)


def _filter_type(flt: FilterSpec) -> int:
    return d.SQL if flt.kind == FILTER_SQL else d.TAG


def _pull_status(
    code: int, message: str, offset: int, next_offset: int, endpoint: str, rpc: str
) -> PullStatus:
    if code == d.OK:
        return PullStatus.FOUND
    if code == d.MESSAGE_NOT_FOUND:
        return PullStatus.NO_MATCHED_MSG if next_offset > offset else PullStatus.NO_NEW_MSG
    if code == d.ILLEGAL_OFFSET:
        return PullStatus.OFFSET_ILLEGAL
    raise v2_error(code, message, endpoint, rpc)


def _body(m: d.Message) -> bytes:
    if m.system_properties.body_encoding == d.GZIP:
        body = m.body
        return gzip.decompress(body) if body[:2] == b"\x1f\x8b" else zlib.decompress(body)
    return m.body


def messages_to_table(messages: Sequence[d.Message]) -> pa.Table:
    """v2 Messages (PullMessage frames) → a table of the bulk-pull MESSAGE_SCHEMA."""
    cols: dict[str, list[Any]] = {name: [] for name in MESSAGE_SCHEMA.names}
    for m in messages:
        sp = m.system_properties
        tag = sp.tag if sp.HasField("tag") else None
        cols["queue_offset"].append(sp.queue_offset)
        cols["message_id"].append(sp.message_id)
        cols["tag"].append(tag)
        cols["keys"].append(list(sp.keys))
        cols["body"].append(_body(m))
        cols["properties"].append(list(m.user_properties.items()))
        cols["born_timestamp"].append(_millis(sp.born_timestamp) if sp.HasField("born_timestamp") else None)
        cols["store_timestamp"].append(
            _millis(sp.store_timestamp) if sp.HasField("store_timestamp") else None
        )
        cols["born_host"].append(sp.born_host or None)
        cols["reconsume_times"].append(max(sp.delivery_attempt - 1, 0))
        cols["message_group"].append(sp.message_group if sp.HasField("message_group") else None)
        cols["delivery_timestamp"].append(
            _millis(sp.delivery_timestamp) if sp.HasField("delivery_timestamp") else None
        )
        cols["message_type"].append(sp.message_type)
        cols["tag_code"].append(java_string_hash(tag) if tag else 0)
    return pa.Table.from_pydict(cols, schema=MESSAGE_SCHEMA)
