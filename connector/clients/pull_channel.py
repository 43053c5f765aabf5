"""BulkPull and SendMessage over the emulator's pull channel (`rocketmq_protocol.extension.pull_channel`): the
same requests and replies as over gRPC, carried in remoting frames over plain TCP, which costs both ends a
fraction of gRPC's CPU per byte. An endpoint's channel address is asked once (PullChannel); an endpoint
without one, or whose channel cannot be reached or refuses, is pulled from and sent to over gRPC from then
on."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future

from rocketmq_protocol.extension.bulk_pull_wire import BulkPullReply, decode_response
from rocketmq_protocol.extension.pull_channel import BULK_PULL_CODE, SEND_MESSAGE_CODE
from rocketmq_protocol.grpc_v2 import service_pb2 as s
from rocketmq_protocol.grpc_v2.send_status import decode_send_response
from rocketmq_protocol.remoting.frames import RemotingCommand

from .base import SendOutcome, SendStatus
from .remoting_connection import ConnectionLost, ConnectionPool, RequestSendCall, fail_after
from .retrying import Transient

log = logging.getLogger(__name__)

_SUCCESS = 0  # the remoting response code SUCCESS
# The server's hold on a long poll ends this long before the client stops waiting for the answer.
POLL_MARGIN_S = 0.2


class PullChannels:
    """The pull channels of one client's endpoints; thread-safe. `enabled=False` (TLS or credentials, which
    the channel carries neither of) leaves every pull to gRPC."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._addresses: dict[str, str | None] = {}  # endpoint → its channel, None: pull over gRPC
        self._pool: ConnectionPool | None = None
        self._lock = threading.Lock()

    def address(self, endpoint: str, ask: Callable[[], str]) -> str | None:
        """The endpoint's channel address, asking `ask()` (PullChannel) the first time; None for gRPC.
        Exceptions of `ask` propagate and leave the endpoint to be asked again."""
        if not self.enabled:
            return None
        if endpoint in self._addresses:
            return self._addresses[endpoint]
        address = ask() or None
        self._addresses[endpoint] = address
        if address is not None:
            log.debug("%s pulls over its channel %s", endpoint, address)
        return address

    def no_channel(self, endpoint: str) -> None:
        """Pulls of `endpoint` go over gRPC from now on (its server does not answer PullChannel)."""
        self._addresses[endpoint] = None

    def pull(self, endpoint: str, address: str, request: bytes, timeout_s: float) -> BulkPullReply | None:
        """The reply to a serialized BulkPullRequest sent over the channel, or None when this attempt must go
        over gRPC: the channel is unreachable or refused (then for good) or its connection was lost.
        Raises `Transient` when no answer came within `timeout_s`, as gRPC's deadline would."""
        pool = self._connections()
        try:
            conn = pool.get(address)
        except OSError as e:
            log.info("%s: its pull channel %s is unreachable (%s); pulling over gRPC", endpoint, address, e)
            self._addresses[endpoint] = None
            return None
        try:
            fut = conn.request(BULK_PULL_CODE, {}, request, timeout_s)
            cmd = fut.result(timeout_s)
        except TimeoutError:
            conn.forget(fut)
            raise Transient(f"pull channel {address}: no answer within {timeout_s:.1f} s") from None
        except (ConnectionLost, OSError) as e:
            pool.drop(address, conn)
            log.info("%s: pull channel %s lost (%s); this pull goes over gRPC", endpoint, address, e)
            return None
        if cmd.code != _SUCCESS:
            log.info(
                "%s: pull channel %s refused (code %d: %s); pulling over gRPC",
                endpoint,
                address,
                cmd.code,
                cmd.remark,
            )
            self._addresses[endpoint] = None
            return None
        return decode_response(cmd.body)

    def send(
        self,
        endpoint: str,
        address: str,
        request: bytes,
        metadata: dict[str, str],
        count: int,
        timeout_s: float,
        outcome: Callable[[s.SendMessageResponse, int], SendOutcome],
    ) -> ChannelSend | None:
        """A serialized SendMessageRequest of `count` messages sent over the channel with the call's
        `metadata`, in flight; None when the channel is unreachable (then for good): send over gRPC.
        `outcome` reads the SendMessageResponse as gRPC's answer is read."""
        pool = self._connections()
        try:
            conn = pool.get(address, min(timeout_s, 3.0))
        except OSError as e:
            log.info("%s: its pull channel %s is unreachable (%s); sending over gRPC", endpoint, address, e)
            self._addresses[endpoint] = None
            return None
        try:
            fut = conn.request(SEND_MESSAGE_CODE, metadata, request, timeout_s)
        except ConnectionLost:
            pool.drop(address, conn)
            return None
        fail_after(conn, fut, timeout_s)
        return ChannelSend(self, endpoint, fut, count, outcome)

    def _connections(self) -> ConnectionPool:
        pool = self._pool
        if pool is None:
            with self._lock:
                if self._pool is None:
                    self._pool = ConnectionPool()
                pool = self._pool
        return pool

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()


class ChannelSend(RequestSendCall):
    """A SendMessage in flight over a pull channel (`connector.clients.base.SendFuture`). A lost connection or
    no answer in time is retryable, named as gRPC names them; a refusal (an ACL turned on, an emulator
    without the channel's SendMessage) is retried over gRPC, where the endpoint's sends go from then on."""

    __slots__ = ("_channels", "_count", "_endpoint", "_outcome")
    timeout_label = "DEADLINE_EXCEEDED"

    def __init__(
        self,
        channels: PullChannels,
        endpoint: str,
        fut: Future,
        count: int,
        outcome: Callable[[s.SendMessageResponse, int], SendOutcome],
    ) -> None:
        super().__init__(fut)
        self._channels, self._endpoint = channels, endpoint
        self._count, self._outcome = count, outcome

    def answered(self, resp: RemotingCommand) -> SendOutcome:
        if resp.code != _SUCCESS:
            self._channels.no_channel(self._endpoint)
            reason = f"the pull channel refused the send (code {resp.code}: {resp.remark}); retried over gRPC"
            log.info("%s: %s", self._endpoint, reason)
            return SendOutcome(SendStatus.RETRYABLE, reason, "CHANNEL_REFUSED")
        return self._outcome(decode_send_response(resp.body or b""), self._count)  # type: ignore[arg-type]
