"""What in-process calls of the emulator's v2 handlers need in place of a gRPC servicer context."""

from __future__ import annotations


class V2Context:
    """A servicer context carrying a client id and the explicit-queue header (`explicit`: each message names
    its queue, as the connector's writer sends them)."""

    def __init__(self, explicit: bool = True) -> None:
        self.md = (("x-mq-client-id", "c"), ("x-mq-queue-id-explicit", "true" if explicit else "false"))

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self.md

    def time_remaining(self) -> float:
        return 10.0

    def peer(self) -> str:
        return "ipv4:127.0.0.1:50000"
