"""Exceptions of the remoting codec: each names what was wrong so a server can log it and close the channel."""

from __future__ import annotations

__all__ = [
    "BatchDecodeError",
    "FrameError",
    "FrameTooLargeError",
    "HeaderError",
    "JsonBodyError",
    "MessageDecodeError",
    "MissingFieldError",
    "RemotingCodecError",
]


class RemotingCodecError(ValueError):
    """Base class: bytes that do not follow the remoting wire format."""


class FrameError(RemotingCodecError):
    """A frame's length prefix or header length is impossible; the byte stream cannot be resynchronised."""


class FrameTooLargeError(FrameError):
    """A frame announces more than the maximum frame length (16 MiB by default, like Netty's decoder)."""


class HeaderError(FrameError):
    """A frame's header (JSON or ROCKETMQ binary) cannot be decoded."""


class MissingFieldError(RemotingCodecError):
    """A custom header lacks a required field or has a value of the wrong type."""

    def __init__(self, header: str, field: str, problem: str = "is missing") -> None:
        super().__init__(f"{header}: the custom field <{field}> {problem}")
        self.header = header
        self.field = field


class MessageDecodeError(RemotingCodecError):
    """A stored-message body (pull response) is malformed: bad TOTALSIZE, magic code or field lengths."""


class BatchDecodeError(RemotingCodecError):
    """A SEND_BATCH_MESSAGE body is malformed."""


class JsonBodyError(RemotingCodecError):
    """A fastjson body (route, cluster info, admin tables) cannot be parsed."""
