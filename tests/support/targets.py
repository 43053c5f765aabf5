"""What the reader's and writer's tests connect to: the emulator over gRPC v2 (`endpoints`) or over RocketMQ's
remoting protocol (`nameServer`), as one string so helpers taking an endpoints string take either.

`NameServer` marks a name-server address; `connect_options` and `client_config` turn a target into the
connector's option or `ClientConfig`. The `protocol` / `target` fixtures (tests/conftest.py) run a test
once per protocol.
"""

from __future__ import annotations

from typing import Any

import pytest

from connector.config import ClientConfig

PROTOCOLS = ("grpc", "remoting")


class NameServer(str):
    """A name-server address (`host:port`): the remoting protocol, where tests take an endpoints string."""

    __slots__ = ()


def connect_options(target: str) -> dict[str, str]:
    """The connector's connection option of a target: `nameServer` or `endpoints`."""
    return {"nameServer": str(target)} if isinstance(target, NameServer) else {"endpoints": str(target)}


def client_config(target: str, **kwargs: Any) -> ClientConfig:
    """A ClientConfig of a target (kwargs: the other ClientConfig fields)."""
    if isinstance(target, NameServer):
        kwargs.pop("pull_protocol", None)
        return ClientConfig(name_server=str(target), **kwargs)
    return ClientConfig(str(target), **kwargs)


def target_of(emulator: Any, protocol: str) -> str:
    """The emulator's gRPC endpoints, or its name server (skips when this emulator has no remoting front end)."""
    if protocol == "grpc":
        return emulator.endpoints
    name_server = getattr(emulator, "name_server", None)
    if not name_server:
        pytest.skip("the emulator has no remoting front end (Emulator.name_server) in this build")
    return NameServer(name_server)
