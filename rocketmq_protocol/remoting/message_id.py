"""Message ids: the offset message id (store host + commit-log offset) and the client id UNIQ_KEY.

apache/rocketmq `MessageDecoder.createMessageId` / `decodeMessageId` and `MessageClientIDSetter`.
"""

from __future__ import annotations

import calendar
import ipaddress
import itertools
import os
import random
import socket
import struct
import threading
import time
from dataclasses import dataclass

import numpy as np

from .columns import hex_upper

__all__ = [
    "OffsetMessageId",
    "UniqIdGenerator",
    "UniqKeyInfo",
    "create_offset_message_id",
    "create_uniq_id",
    "decode_offset_message_id",
    "join_offset_message_ids",
    "parse_uniq_id",
]


@dataclass(frozen=True, slots=True)
class OffsetMessageId:
    """A decoded offset message id."""

    host: str  # IP address, IPv6 compressed
    port: int
    commit_log_offset: int


def create_offset_message_id(host: str, port: int, commit_log_offset: int) -> str:
    """Upper-case hex of IP (4 or 16 bytes) + port (int32) + commit-log offset (int64): 32 or 56 chars."""
    ip = ipaddress.ip_address(host).packed
    return (ip + struct.pack(">iq", port, commit_log_offset)).hex().upper()


def join_offset_message_ids(host: str, port: int, commit_log_offsets: np.ndarray) -> str:
    """`create_offset_message_id` of each offset, joined by commas (a batch send's `msgId`), column-wise."""
    offsets = np.asarray(commit_log_offsets, dtype=np.int64)
    n = len(offsets)
    if not n:
        return ""
    prefix = ipaddress.ip_address(host).packed + struct.pack(">i", port)
    raw = np.empty((n, len(prefix) + 8), dtype=np.uint8)
    raw[:, : len(prefix)] = np.frombuffer(prefix, dtype=np.uint8)
    raw[:, len(prefix) :] = offsets.astype(">i8").view(np.uint8).reshape(n, 8)
    text = np.full((n, raw.shape[1] * 2 + 1), ord(","), dtype=np.uint8)
    text[:, :-1] = hex_upper(raw)
    return text.tobytes()[:-1].decode("ascii")


def decode_offset_message_id(msg_id: str) -> OffsetMessageId:
    """The store host and commit-log offset of an offset message id (32 hex chars IPv4, 56 IPv6)."""
    if len(msg_id) not in (32, 56):
        raise ValueError(f"offset message id must have 32 or 56 hex chars, not {len(msg_id)}: {msg_id!r}")
    raw = bytes.fromhex(msg_id)
    iplen = 4 if len(raw) == 16 else 16
    port, offset = struct.unpack_from(">iq", raw, iplen)
    return OffsetMessageId(str(ipaddress.ip_address(raw[:iplen])), port, offset)


@dataclass(frozen=True, slots=True)
class UniqKeyInfo:
    """What a UNIQ_KEY tells: client IP, pid (low 16 bits), ms since its month started, counter."""

    ip: str
    pid: int
    class_loader_hash: int
    ms_in_month: int
    counter: int

    def approximate_time_ms(self, now_ms: int | None = None) -> int:
        """The creation time: the latest month start (UTC) such that the time is not after `now_ms`.

        Java (`getNearlyTimeFromID`) uses local time and steps back a month when the result is *equal* to
        now as well; here UTC and only strictly later times step back.
        """
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        start = _month_start_ms(now_ms)
        if start + self.ms_in_month > now_ms:
            start = _month_start_ms(start - 1)
        return start + self.ms_in_month


def parse_uniq_id(uniq_id: str) -> UniqKeyInfo:
    """Splits a UNIQ_KEY (32 hex chars for an IPv4 client, 56 for IPv6)."""
    if len(uniq_id) not in (32, 56):
        raise ValueError(f"UNIQ_KEY must have 32 or 56 hex chars, not {len(uniq_id)}: {uniq_id!r}")
    raw = bytes.fromhex(uniq_id)
    iplen = len(raw) - 12
    pid, loader, span, counter = struct.unpack_from(">HiiH", raw, iplen)
    return UniqKeyInfo(str(ipaddress.ip_address(raw[:iplen])), pid, loader, span & 0xFFFFFFFF, counter)


def _month_start_ms(ms: int) -> int:
    t = time.gmtime(ms // 1000)
    return calendar.timegm((t.tm_year, t.tm_mon, 1, 0, 0, 0)) * 1000


def _local_ip() -> bytes:
    """This host's IPv4 address as its name resolves, else a fake one from the clock (`createFakeIP`)."""
    try:
        return socket.inet_aton(socket.gethostbyname(socket.gethostname()))
    except OSError:
        return struct.pack(">q", int(time.time() * 1000))[4:]


class UniqIdGenerator:
    """Creates UNIQ_KEYs like `MessageClientIDSetter.createUniqID`: fixed prefix + ms-in-month + counter.

    Thread-safe. The month start is UTC (Java uses the local calendar; only uniqueness matters).
    """

    def __init__(self, ip: bytes | None = None, pid: int | None = None) -> None:
        ip = _local_ip() if ip is None else ip
        pid = os.getpid() if pid is None else pid
        self._prefix = (ip + struct.pack(">Hi", pid & 0xFFFF, random.getrandbits(31))).hex().upper()
        self._counter = itertools.count(random.getrandbits(16))
        self._lock = threading.Lock()
        self._start = 0
        self._next_start = 0

    def __call__(self) -> str:
        now = int(time.time() * 1000)
        with self._lock:
            if now >= self._next_start or now < self._start:
                self._start = _month_start_ms(now)
                t = time.gmtime(self._start // 1000)
                year, month = (t.tm_year + 1, 1) if t.tm_mon == 12 else (t.tm_year, t.tm_mon + 1)
                self._next_start = calendar.timegm((year, month, 1, 0, 0, 0)) * 1000
            start = self._start
            counter = next(self._counter) & 0xFFFF
        return f"{self._prefix}{(now - start) & 0xFFFFFFFF:08X}{counter:04X}"

    def many(self, n: int) -> np.ndarray:
        """`n` ids at once as a numpy array of fixed-width ASCII (`S32`, or `S56` for IPv6 hosts).

        They share the time part and take `n` consecutive counters (wrapping at 16 bits like Java's).
        """
        head = self()  # refreshes the month and takes the first counter
        if n <= 0:
            return np.empty(0, dtype=f"S{len(head)}")
        with self._lock:
            first = next(self._counter)
            self._counter = itertools.count(first + n - 1)
        fixed = np.frombuffer(head[:-4].encode("ascii"), dtype=np.uint8)
        counters = (np.arange(first - 1, first + n - 1, dtype=np.int64) & 0xFFFF).astype(">u2")
        counters[0] = int(head[-4:], 16)
        nibbles = counters.view(np.uint8).reshape(n, 2)
        out = np.empty((n, len(head)), dtype=np.uint8)
        out[:, : len(fixed)] = fixed
        out[:, -4::2] = _HEX[nibbles >> 4]
        out[:, -3::2] = _HEX[nibbles & 0xF]
        return out.view(f"S{len(head)}").ravel()


_HEX = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)
_default: UniqIdGenerator | None = None
_default_lock = threading.Lock()


def create_uniq_id() -> str:
    """A new UNIQ_KEY from the process's generator (created on first use, again after a fork)."""
    global _default
    with _default_lock:
        if _default is None or _default_pid != os.getpid():
            _set_default()
        gen = _default
    assert gen is not None
    return gen()


_default_pid = -1


def _set_default() -> None:
    global _default, _default_pid
    _default = UniqIdGenerator()
    _default_pid = os.getpid()
