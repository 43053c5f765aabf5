"""RocketMQ 5 broker emulator speaking `apache.rocketmq.v2` over gRPC (plus a bulk-pull/admin extension)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .embedded import Emulator

__all__ = ["Emulator"]


def __getattr__(name: str):
    if name == "Emulator":
        from .embedded import Emulator

        return Emulator
    raise AttributeError(name)
