"""The connector's gRPC client: routes, queue offsets, group offsets and pulls over `apache.rocketmq.v2`.

Pulls use the emulator's BulkPull extension (one Arrow IPC payload per call) when `protocol` allows and
the endpoint serves it, else the standard PullMessage stream, converted to the same `MESSAGE_SCHEMA` table.
Clients hold gRPC channels, so they are never pickled: `get_client(config)` creates one lazily per process
(keyed by the picklable `ClientConfig`) and reuses it across tasks of a reused Python worker.
"""

from __future__ import annotations

import gzip
import logging
import os
import random
import socket
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NamedTuple, TypeVar

import grpc
import pyarrow as pa

from rocketmq_protocol.extension import pb, pb_grpc
from rocketmq_protocol.grpc_v2 import definition_pb2 as d
from rocketmq_protocol.grpc_v2 import service_pb2 as s
from rocketmq_protocol.grpc_v2 import service_pb2_grpc
from rocketmq_protocol.hashing import java_string_hash
from rocketmq_protocol.message_schema import MESSAGE_SCHEMA, ipc_to_table
from rocketmq_protocol.signature import AUTHORIZATION_HEADER, DATE_TIME_HEADER, authorization, date_time_now

from .config import FILTER_SQL, ClientConfig, FilterSpec
from .errors import (
    FORBIDDEN,
    UNAUTHORIZED,
    ConnectorError,
    RetriesExhaustedError,
    UnsupportedEndpointError,
    broker_error,
    code_name,
)
from .offsets import QueueKey, queue_sort_key

log = logging.getLogger(__name__)

__all__ = [
    "ClientConfig",
    "PullResult",
    "PullStatus",
    "QueueInfo",
    "RocketMQClient",
    "close_clients",
    "get_client",
]

PROTOCOL_AUTO, PROTOCOL_BULK, PROTOCOL_STANDARD = "auto", "bulk", "standard"
DEFAULT_TIMEOUT_MS = 30_000
MAX_GRPC_MESSAGE_BYTES = 256 * 1024 * 1024
BACKOFF_INITIAL_S = 0.05
BACKOFF_MAX_S = 1.0
# gRPC codes and in-band v2 codes worth another attempt before the call's deadline.
TRANSIENT_GRPC = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
TRANSIENT_CODES = frozenset({d.TOO_MANY_REQUESTS, d.INTERNAL_SERVER_ERROR, d.PROXY_TIMEOUT})
# gRPC statuses a server may refuse access with (instead of the in-band codes), as those codes.
ACCESS_GRPC = {grpc.StatusCode.UNAUTHENTICATED: UNAUTHORIZED, grpc.StatusCode.PERMISSION_DENIED: FORBIDDEN}
READER_RPCS = "PullMessage, GetOffset, UpdateOffset and QueryOffset"
SEND_MESSAGE_METHOD = "/apache.rocketmq.v2.MessagingService/SendMessage"

R = TypeVar("R")


class QueueInfo(NamedTuple):
    """A message queue from the route, with the endpoint of its (master) broker and its v2 Permission."""

    topic: str
    broker: str
    queue_id: int
    endpoint: str
    permission: int = d.READ_WRITE

    @property
    def key(self) -> QueueKey:
        return QueueKey(self.topic, self.broker, self.queue_id)

    @property
    def readable(self) -> bool:
        return self.permission in (d.READ, d.READ_WRITE)

    @property
    def writable(self) -> bool:
        return self.permission in (d.WRITE, d.READ_WRITE)


class PullStatus(StrEnum):
    """RocketMQ's PullStatus (reference §4.1) as the client sees it."""

    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"  # at the queue's max offset (next_offset == offset)
    NO_MATCHED_MSG = "NO_MATCHED_MSG"  # scanned entries all filtered out (next_offset past them)
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"  # below min / above max offset; next_offset is the corrected one


@dataclass(frozen=True)
class PullResult:
    """One pull: status, the next offset to ask for, the messages (MESSAGE_SCHEMA) and the protocol used.

    `min_offset`/`max_offset` come with bulk pulls; PullMessage does not report them (None).
    """

    status: PullStatus
    next_offset: int
    min_offset: int | None
    max_offset: int | None
    table: pa.Table
    protocol: str


class _Stubs(NamedTuple):
    channel: grpc.Channel
    v2: service_pb2_grpc.MessagingServiceStub
    ext: pb_grpc.EmulatorServiceStub


class _Transient(Exception):
    """An attempt failed in a way worth retrying; carries a description of the cause."""


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


class RocketMQClient:
    """A thread-safe client of one cluster; obtain it with `get_client(config)` rather than directly."""

    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        self.client_id = _client_id()
        self._stubs: dict[str, _Stubs] = {}
        self._lock = threading.Lock()
        self._no_bulk: set[str] = set()  # endpoints that answered UNIMPLEMENTED to BulkPull

    def __reduce__(self):
        raise TypeError("RocketMQClient holds gRPC channels and is not picklable; pickle its ClientConfig")

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
                    pb_grpc.EmulatorServiceStub(channel),
                )
                self._stubs[endpoint] = stubs
        return stubs

    def metadata(self) -> list[tuple[str, str]]:
        """The headers of one call: client identity, date, request id, namespace and the signature."""
        date_time = date_time_now()
        md = [
            ("x-mq-client-id", self.client_id),
            ("x-mq-language", "PYTHON"),
            ("x-mq-protocol", "v2"),
            (DATE_TIME_HEADER, date_time),
            ("x-mq-request-id", str(uuid.uuid4())),
        ]
        if self.config.namespace:
            md.append(("x-mq-namespace", self.config.namespace))
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
        """Runs `attempt` on the endpoints in turn (backing off after each full round) until it returns or
        the deadline passes. Transient failures (gRPC UNAVAILABLE / DEADLINE_EXCEEDED, in-band codes raised
        as `_Transient`) are retried; other gRPC errors fail at once. Returns the result and its endpoint."""
        if not endpoints:
            raise ConnectorError(f"{rpc}: no endpoint to call (ClientConfig.endpoints is empty)")
        total_s = timeout_ms / 1000.0
        deadline = time.monotonic() + total_s
        backoff = BACKOFF_INITIAL_S
        attempts = 0
        last = "no attempt was made"
        while True:
            for endpoint in endpoints:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    hint = ""
                    if not self.config.tls and "socket closed" in last.lower():
                        hint = " (if the endpoint serves TLS, set option 'tls' to 'true')"
                    raise RetriesExhaustedError(
                        f"{rpc} on {', '.join(endpoints)} did not succeed within {timeout_ms} ms "
                        f"({attempts} attempts); last error: {last}{hint}"
                    )
                per_attempt = min(remaining, max(1.0, total_s / 3) + extra_wait_s)
                attempts += 1
                try:
                    return attempt(self._channel(endpoint), per_attempt, self.metadata()), endpoint
                except _Transient as e:
                    last = f"{endpoint}: {e}"
                except grpc.RpcError as e:
                    code, details = e.code(), e.details()  # type: ignore[attr-defined]
                    if code == grpc.StatusCode.UNIMPLEMENTED and on_unimplemented is not None:
                        raise on_unimplemented(endpoint) from None
                    if code in ACCESS_GRPC:
                        raise broker_error(ACCESS_GRPC[code], details, endpoint, rpc) from None
                    if code not in TRANSIENT_GRPC:
                        raise ConnectorError(
                            f"{rpc} on {endpoint} failed: gRPC {code.name}: {details}"
                        ) from None
                    if "handshake failed" in (details or "").lower():
                        raise ConnectorError(self._tls_hint(endpoint, rpc, details)) from None
                    last = f"{endpoint}: gRPC {code.name}: {details}"
                log.debug("%s attempt %d failed (%s); retrying", rpc, attempts, last)
            sleep = min(backoff * random.uniform(0.8, 1.2), max(deadline - time.monotonic(), 0.0))
            time.sleep(sleep)
            backoff = min(backoff * 2, BACKOFF_MAX_S)

    def _tls_hint(self, endpoint: str, rpc: str, details: str) -> str:
        """The message of a failed TLS handshake: a configuration error, not worth retrying."""
        if self.config.tls:
            advice = (
                "the endpoint may not serve TLS (then set option 'tls' to 'false'), or its certificate is not "
                "trusted (set option 'tlsCaFile' to the PEM file of its CA) or does not name the host"
            )
        else:
            advice = "the endpoint expects TLS: set option 'tls' to 'true'"
        return f"{rpc} on {endpoint} failed: the TLS handshake failed ({details}); {advice}"

    @staticmethod
    def _check_transient(code: int, message: str) -> None:
        if code in TRANSIENT_CODES:
            raise _Transient(f"{code_name(code)} ({code}): {message}")

    def _unsupported(self, rpc: str) -> Callable[[str], Exception]:
        def make(endpoint: str) -> Exception:
            return UnsupportedEndpointError(
                f"endpoint {endpoint} does not implement {rpc} (gRPC UNIMPLEMENTED). The rocketmq reader needs "
                f"{READER_RPCS} of apache.rocketmq.v2, which Apache RocketMQ's own proxy (through 5.3.3) "
                "does not serve; point 'endpoints' at a server that implements them, such as the bundled "
                "broker emulator. (The writer needs only QueryRoute and SendMessage.)"
            )

        return make

    def send_message_raw(self, endpoint: str) -> grpc.UnaryUnaryMultiCallable:
        """SendMessage on `endpoint` taking an already serialized SendMessageRequest (bytes), answering a parsed
        SendMessageResponse: the writer encodes its requests itself (`connector.send_encoding`)."""
        return self._channel(endpoint).channel.unary_unary(
            SEND_MESSAGE_METHOD,
            request_serializer=None,
            response_deserializer=s.SendMessageResponse.FromString,
        )

    def _resource(self, name: str) -> d.Resource:
        return d.Resource(name=name, resource_namespace=self.config.namespace)

    def _wrapped(self, name: str) -> str:
        """The stored name of a resource: `namespace%name` with a namespace (the extension takes it raw)."""
        return f"{self.config.namespace}%{name}" if self.config.namespace else name

    def _queue(self, queue: QueueInfo) -> d.MessageQueue:
        return d.MessageQueue(
            topic=self._resource(queue.topic), id=queue.queue_id, broker=d.Broker(name=queue.broker, id=0)
        )

    def _unary(self, queue: QueueInfo, rpc: str, request: Any, timeout_ms: int) -> Any:
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
            raise broker_error(resp.status.code, resp.status.message, endpoint, rpc)
        return resp

    # ------------------------------------------------------------------ route
    def route(self, topic: str, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> list[QueueInfo]:
        """Every master queue of `topic` in queue order (QueryRoute on the configured endpoints in turn)."""

        def attempt(stubs: _Stubs, timeout: float, md: list[tuple[str, str]]) -> s.QueryRouteResponse:
            req = s.QueryRouteRequest(topic=self._resource(topic))
            resp = stubs.v2.QueryRoute(req, timeout=timeout, metadata=md)
            self._check_transient(resp.status.code, resp.status.message)
            return resp

        resp, endpoint = self._invoke(self.config.endpoint_list, "QueryRoute", attempt, timeout_ms)
        if resp.status.code != d.OK:
            raise broker_error(resp.status.code, resp.status.message, endpoint, f"QueryRoute({topic})")
        queues: dict[QueueKey, QueueInfo] = {}
        for mq in resp.message_queues:
            if mq.broker.id != 0:
                continue
            info = QueueInfo(topic, mq.broker.name, mq.id, _endpoint_of(mq.broker, endpoint), mq.permission)
            queues[info.key] = info
        return [queues[k] for k in sorted(queues, key=queue_sort_key)]

    # ------------------------------------------------------------------ queue offsets
    def _query_offset(self, queue: QueueInfo, policy: int, timeout_ms: int, ts_ms: int | None = None) -> int:
        req = s.QueryOffsetRequest(message_queue=self._queue(queue), query_offset_policy=policy)
        if ts_ms is not None:
            req.timestamp.FromMilliseconds(ts_ms)
        return self._unary(queue, "QueryOffset", req, timeout_ms).offset

    def min_offset(self, queue: QueueInfo, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> int:
        """The queue's earliest available offset (QueryOffset BEGINNING)."""
        return self._query_offset(queue, d.BEGINNING, timeout_ms)

    def max_offset(self, queue: QueueInfo, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> int:
        """The queue's next offset to be written (QueryOffset END)."""
        return self._query_offset(queue, d.END, timeout_ms)

    def offset_for_timestamp(self, queue: QueueInfo, ts_ms: int, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> int:
        """The first offset stored at or after `ts_ms` (the max offset when none is; QueryOffset TIMESTAMP)."""
        return self._query_offset(queue, d.TIMESTAMP, timeout_ms, ts_ms)

    # ------------------------------------------------------------------ group offsets
    def get_committed(self, group: str, queue: QueueInfo, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> int | None:
        """The group's committed offset of the queue (GetOffset); None when it has none."""
        req = s.GetOffsetRequest(group=self._resource(group), message_queue=self._queue(queue))
        resp = self._unary(queue, "GetOffset", req, timeout_ms)
        return None if resp.status.code == d.OFFSET_NOT_FOUND else resp.offset

    def commit(self, group: str, queue: QueueInfo, offset: int, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> None:
        """Stores `offset` (the next one to consume) as the group's offset of the queue (UpdateOffset)."""
        req = s.UpdateOffsetRequest(
            group=self._resource(group), message_queue=self._queue(queue), offset=offset
        )
        self._unary(queue, "UpdateOffset", req, timeout_ms)

    # ------------------------------------------------------------------ pull
    def pull(
        self,
        queue: QueueInfo,
        offset: int,
        max_messages: int,
        *,
        group: str,
        filter: FilterSpec | None = None,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        protocol: str = PROTOCOL_AUTO,
        long_polling_ms: int = 0,
        max_bytes: int = 0,
    ) -> PullResult:
        """Up to `max_messages` from `offset` of `queue`, as a MESSAGE_SCHEMA table.

        `protocol`: `bulk` (BulkPull only), `standard` (PullMessage only) or `auto` (BulkPull unless the
        endpoint answered UNIMPLEMENTED to it before). Transient errors are retried within `timeout_ms`.
        """
        if protocol not in (PROTOCOL_AUTO, PROTOCOL_BULK, PROTOCOL_STANDARD):
            raise ValueError(f"unknown pull protocol {protocol!r}; expected auto, bulk or standard")
        use_bulk = protocol == PROTOCOL_BULK or (
            protocol == PROTOCOL_AUTO and queue.endpoint not in self._no_bulk
        )
        if use_bulk:
            try:
                return self._bulk_pull(
                    queue, offset, max_messages, group, filter, timeout_ms, long_polling_ms, max_bytes
                )
            except _BulkUnimplemented:
                if protocol == PROTOCOL_BULK:
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
        queue: QueueInfo,
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
            topic=self._wrapped(queue.topic),
            queue_id=queue.queue_id,
            offset=offset,
            max_messages=max_messages,
            max_bytes=max_bytes,
            long_polling_timeout_ms=long_polling_ms,
        )
        if flt is not None and not flt.matches_all:
            req.filter.CopyFrom(pb.PullFilter(type=_filter_type(flt), expression=flt.expression))

        def attempt(stubs: _Stubs, timeout: float, md: list[tuple[str, str]]) -> pb.BulkPullResponse:
            resp = stubs.ext.BulkPull(req, timeout=timeout, metadata=md)
            self._check_transient(resp.code, resp.message)
            return resp

        def unimplemented(endpoint: str) -> Exception:
            return _BulkUnimplemented(endpoint)

        resp, endpoint = self._invoke(
            [queue.endpoint],
            "BulkPull",
            attempt,
            timeout_ms,
            extra_wait_s=long_polling_ms / 1000.0,
            on_unimplemented=unimplemented,
        )
        status = _pull_status(resp.code, resp.message, offset, resp.next_offset, endpoint, "BulkPull")
        table = ipc_to_table(resp.arrow_ipc) if resp.arrow_ipc else MESSAGE_SCHEMA.empty_table()
        return PullResult(status, resp.next_offset, resp.min_offset, resp.max_offset, table, PROTOCOL_BULK)

    def _standard_pull(
        self,
        queue: QueueInfo,
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
            status, next_offset or 0, None, None, messages_to_table(frames.messages), PROTOCOL_STANDARD
        )

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        with self._lock:
            stubs, self._stubs = list(self._stubs.values()), {}
        for st in stubs:
            st.channel.close()


class _BulkUnimplemented(Exception):
    """BulkPull answered UNIMPLEMENTED (internal signal for the fallback)."""


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
    raise broker_error(code, message, endpoint, rpc)


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


# ------------------------------------------------------------------------------------------ per-process cache
_clients: dict[ClientConfig, RocketMQClient] = {}
_clients_pid = os.getpid()
_clients_lock = threading.Lock()


def get_client(config: ClientConfig) -> RocketMQClient:
    """The process's client for `config`, created on first use (a forked child gets fresh ones)."""
    global _clients_pid
    with _clients_lock:
        if _clients_pid != os.getpid():
            _clients.clear()  # channels inherited over fork are unusable; drop them without closing
            _clients_pid = os.getpid()
        client = _clients.get(config)
        if client is None:
            client = _clients[config] = RocketMQClient(config)
        return client


def close_clients() -> None:
    """Closes and forgets every cached client of this process (tests, shutdown)."""
    with _clients_lock:
        clients = list(_clients.values())
        _clients.clear()
    for c in clients:
        c.close()
