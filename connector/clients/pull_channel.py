"""BulkPull over the emulator's pull channel (`rocketmq_protocol.extension.pull_channel`): the same request and
reply as gRPC's BulkPull, carried in remoting frames over plain TCP, which costs the reader a fraction of
gRPC's CPU per byte. An endpoint's channel address is asked once (PullChannel); an endpoint without one, or
whose channel cannot be reached or refuses, is pulled over gRPC from then on."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from rocketmq_protocol.extension.bulk_pull_wire import BulkPullReply, decode_response
from rocketmq_protocol.extension.pull_channel import BULK_PULL_CODE

from .remoting_connection import ConnectionLost, ConnectionPool
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
            fut = conn.request(BULK_PULL_CODE, {}, request)
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
