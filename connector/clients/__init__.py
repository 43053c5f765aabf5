"""The connector's RocketMQ clients: the protocol-neutral interface (`base`) and its implementations.

Two implementations: `remoting.RemotingClient` (RocketMQ's TCP remoting protocol through name servers, every
4.x/5.x cluster), chosen when `ClientConfig.name_server` is set (option `nameServer`), and
`grpc_v2.GrpcClient` (`apache.rocketmq.v2` over gRPC, with the emulator's BulkPull extension), chosen when
`ClientConfig.endpoints` is set. `get_client(config)` creates a client
lazily per process and config (clients hold connections and are never pickled) and reuses it across the
tasks of a reused Python worker.
"""

from __future__ import annotations

import os
import threading

from ..config import ClientConfig
from .base import (
    DEFAULT_TIMEOUT_MS,
    EncodedRows,
    PullResult,
    PullStatus,
    RocketMQClient,
    SendEncoder,
    SendFuture,
    SendOutcome,
    SendStatus,
)

__all__ = [
    "DEFAULT_TIMEOUT_MS",
    "EncodedRows",
    "PullResult",
    "PullStatus",
    "RocketMQClient",
    "SendEncoder",
    "SendFuture",
    "SendOutcome",
    "SendStatus",
    "close_clients",
    "get_client",
    "new_client",
]


def new_client(config: ClientConfig) -> RocketMQClient:
    """A new client of the implementation `config` calls for (not cached; the caller closes it)."""
    if config.name_server:
        from .remoting import RemotingClient

        return RemotingClient(config)
    from .grpc_v2 import GrpcClient

    return GrpcClient(config)


# ------------------------------------------------------------------------------------------ per-process cache
_clients: dict[ClientConfig, RocketMQClient] = {}
_clients_pid = os.getpid()
_clients_lock = threading.Lock()


def get_client(config: ClientConfig) -> RocketMQClient:
    """The process's client for `config`, created on first use (a forked child gets fresh ones)."""
    global _clients_pid
    with _clients_lock:
        if _clients_pid != os.getpid():
            _clients.clear()  # connections inherited over fork are unusable; drop them without closing
            _clients_pid = os.getpid()
        client = _clients.get(config)
        if client is None:
            client = _clients[config] = new_client(config)
        return client


def close_clients() -> None:
    """Closes and forgets every cached client of this process (tests, shutdown)."""
    with _clients_lock:
        clients = list(_clients.values())
        _clients.clear()
    for c in clients:
        c.close()
