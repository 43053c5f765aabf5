"""Bit flags carried in headers and stored messages: pull sysFlag, message sysFlag, permissions, compression.

Values are those of apache/rocketmq `PullSysFlag`, `MessageSysFlag`, `PermName` and `CompressionType`.
"""

from __future__ import annotations

from enum import IntEnum, IntFlag

__all__ = ["CompressionType", "MessageSysFlag", "Perm", "PullSysFlag", "compression_type"]


class PullSysFlag(IntFlag):
    """`sysFlag` of PULL_MESSAGE / LITE_PULL_MESSAGE requests."""

    COMMIT_OFFSET = 0x1
    SUSPEND = 0x2
    SUBSCRIPTION = 0x4
    CLASS_FILTER = 0x8
    LITE_PULL = 0x10


class MessageSysFlag(IntFlag):
    """`SYSFLAG` of a stored message and `sysFlag` of a send request."""

    COMPRESSED = 0x1
    MULTI_TAGS = 0x2
    TRANSACTION_PREPARED = 0x4
    TRANSACTION_COMMIT = 0x8
    TRANSACTION_ROLLBACK = 0xC  # the 2-bit transaction field; NOT = 0
    BORNHOST_V6 = 0x10
    STOREHOST_V6 = 0x20
    NEED_UNWRAP = 0x40
    INNER_BATCH = 0x80
    COMPRESSION_LZ4 = 0x100
    COMPRESSION_ZSTD = 0x200
    COMPRESSION_ZLIB = 0x300
    COMPRESSION_TYPE_MASK = 0x700


class CompressionType(IntEnum):
    """Bits 8-10 of the message sysFlag; 0 is read as ZLIB (messages of clients older than 5.x)."""

    LZ4 = 1
    ZSTD = 2
    ZLIB = 3


def compression_type(sysflag: int) -> CompressionType:
    """The compression of a COMPRESSED message's body (`MessageSysFlag.getCompressionType`)."""
    value = (sysflag & MessageSysFlag.COMPRESSION_TYPE_MASK) >> 8
    if value == 0:
        return CompressionType.ZLIB
    if value > 3:
        raise ValueError(f"unknown compression type {value} in sysflag {sysflag:#x}")
    return CompressionType(value)


class Perm(IntFlag):
    """`perm` of QueueData / topic configs (`PermName`); 6 = read + write."""

    INHERIT = 0x1
    WRITE = 0x2
    READ = 0x4
    PRIORITY = 0x8
