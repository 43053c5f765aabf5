"""Append-only commit log of one broker: fixed-size files of CRC-checked records, group-commit flushing.

A record holds one append to one (topic, queue): an inner batch of messages serialized as Arrow IPC
(RocketMQ 5 stores auto-batched messages as one commit-log entry the same way). Other durable state (POP,
delayed and half messages, offsets) lives in journaled tables beside it (`journal.py`). Recovery replays
records in order and truncates a torn tail.
"""

from __future__ import annotations

import asyncio
import logging
import os
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import IntEnum

log = logging.getLogger(__name__)

MAGIC = 0x524D5131  # "RMQ1"
_HEADER = struct.Struct(
    "<IIIHqiiH"
)  # magic, payload_len, crc32, kind, base_offset, count, queue_id, topic_len
DEFAULT_FILE_SIZE = 128 * 1024 * 1024


class RecordKind(IntEnum):
    MESSAGES = 1  # Arrow IPC batch appended to a consume queue (the only kind written so far)


@dataclass(frozen=True)
class Record:
    kind: int
    topic: str
    queue_id: int
    base_offset: int
    count: int
    payload: bytes
    position: int  # physical offset of the record in the whole log
    size: int


class CommitLog:
    """One broker's commit log. `directory=None` keeps only the physical position counter (in-memory mode)."""

    def __init__(
        self,
        directory: str | None,
        *,
        file_size: int = DEFAULT_FILE_SIZE,
        flush: str = "sync",
        flush_interval_ms: int = 200,
    ) -> None:
        if flush not in ("sync", "async"):
            raise ValueError(f"flush must be 'sync' or 'async', got {flush!r}")
        self.directory = directory
        self.file_size = file_size
        self.flush_mode = flush
        self.flush_interval_ms = flush_interval_ms
        self._lock = threading.Lock()
        self._position = 0  # next physical offset
        self._fd: int | None = None
        self._file_base = 0
        self._pending: list[bytes] = []  # async mode: acknowledged but not yet written
        self._written = 0  # physical offset written to the OS
        self._flushed = 0  # physical offset fsync'ed
        self._waiters: list[tuple[int, asyncio.Future, asyncio.AbstractEventLoop]] = []
        self._cond = threading.Condition(self._lock)
        self._closed = False
        self._flusher: threading.Thread | None = None
        self.file_contents: dict[
            int, dict[tuple[str, int], int]
        ] = {}  # file base -> (topic, queue) -> end offset
        if directory is not None:
            os.makedirs(directory, exist_ok=True)

    # ---------------------------------------------------------------- files
    def _file_path(self, base: int) -> str:
        assert self.directory is not None
        return os.path.join(self.directory, f"{base:020d}")

    def _file_bases(self) -> list[int]:
        if self.directory is None:
            return []
        return sorted(int(n) for n in os.listdir(self.directory) if n.isdigit() and len(n) == 20)

    def recover(self) -> Iterator[Record]:
        """Yields every intact record in order, truncating a torn or corrupt tail, and opens the log."""
        if self.directory is None:
            return
        bases = self._file_bases()
        end = 0
        last_base = None
        for i, base in enumerate(bases):
            last_base = base
            path = self._file_path(base)
            with open(path, "rb") as f:
                data = f.read()
            pos = 0
            contents: dict[tuple[str, int], int] = {}
            while pos + _HEADER.size <= len(data):
                magic, plen, crc, kind, base_offset, count, queue_id, tlen = _HEADER.unpack_from(data, pos)
                if magic != MAGIC:
                    break
                start = pos + _HEADER.size
                if start + tlen + plen > len(data):
                    break
                topic = data[start : start + tlen].decode("utf-8")
                payload = data[start + tlen : start + tlen + plen]
                if zlib.crc32(payload) != crc:
                    break
                size = _HEADER.size + tlen + plen
                if kind == RecordKind.MESSAGES:
                    contents[(topic, queue_id)] = base_offset + count
                yield Record(kind, topic, queue_id, base_offset, count, payload, base + pos, size)
                pos += size
            self.file_contents[base] = contents
            if pos < len(data):
                log.warning(
                    "commit log %s: truncating %d torn/corrupt bytes at %d", path, len(data) - pos, pos
                )
                with open(path, "r+b") as f:
                    f.truncate(pos)
                for later in bases[i + 1 :]:
                    log.warning("commit log: removing %s after a torn record", self._file_path(later))
                    os.remove(self._file_path(later))
                end = base + pos
                break
            end = base + pos
        self._position = self._written = self._flushed = end
        if last_base is not None:
            self._file_base = last_base
            self._fd = os.open(
                self._file_path(self._file_base), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644
            )

    # ---------------------------------------------------------------- append
    def reserve(self, size: int) -> int:
        """In-memory mode: advances the physical position as if a record of `size` bytes was written."""
        with self._lock:
            pos = self._position
            self._position += size
            self._written = self._flushed = self._position
            return pos

    def append(
        self, kind: int, topic: str, queue_id: int, base_offset: int, count: int, payload: bytes
    ) -> tuple[int, int]:
        """Appends one record; returns (physical position, size). Durable once `wait_durable` resolves."""
        tb = topic.encode("utf-8")
        header = _HEADER.pack(
            MAGIC, len(payload), zlib.crc32(payload), kind, base_offset, count, queue_id, len(tb)
        )
        size = len(header) + len(tb) + len(payload)
        with self._lock:
            if self.directory is None:
                pos = self._position
                self._position += size
                self._written = self._flushed = self._position
                return pos, size
            used = self._position - self._file_base
            if self._fd is None or (used + size > self.file_size and used > 0):
                self._roll()
            pos = self._position
            self._position += size
            contents = self.file_contents.setdefault(self._file_base, {})
            if kind == RecordKind.MESSAGES:
                contents[(topic, queue_id)] = base_offset + count
            record = b"".join((header, tb, payload))
            if self.flush_mode == "sync":
                os.write(self._fd, record)  # in the OS before the ack: survives kill -9
                self._written = self._position
                self._cond.notify_all()
            else:
                self._pending.append(record)
            self._ensure_flusher()
            return pos, size

    def _roll(self) -> None:
        self._drain_pending_locked()
        if self._fd is not None:
            os.fsync(self._fd)
            os.close(self._fd)
        self._file_base = self._position
        self._fd = os.open(self._file_path(self._file_base), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def _drain_pending_locked(self) -> None:
        if self._pending and self._fd is not None:
            os.write(self._fd, b"".join(self._pending))
            self._pending.clear()
            self._written = self._position

    # ---------------------------------------------------------------- flushing
    def _ensure_flusher(self) -> None:
        if self._flusher is None:
            self._flusher = threading.Thread(target=self._flush_loop, name="commitlog-flush", daemon=True)
            self._flusher.start()

    def _flush_loop(self) -> None:
        interval = self.flush_interval_ms / 1000.0
        while True:
            with self._lock:
                if self.flush_mode == "sync":
                    while not self._closed and self._flushed >= self._written:
                        self._cond.wait(1.0)
                else:
                    self._cond.wait(interval)
                    self._drain_pending_locked()
                if self._closed and self._flushed >= self._written and not self._pending:
                    return
                fd, target = self._fd, self._written
            if fd is not None and target > self._flushed:
                try:
                    os.fdatasync(fd)
                except OSError:  # file rolled and closed meanwhile: roll() fsynced it
                    pass
            with self._lock:
                self._flushed = max(self._flushed, target)
                ready = [w for w in self._waiters if w[0] <= self._flushed]
                self._waiters = [w for w in self._waiters if w[0] > self._flushed]
            for _, fut, loop in ready:
                loop.call_soon_threadsafe(_resolve, fut)
            if self._closed:
                with self._lock:
                    if self._flushed >= self._written and not self._pending:
                        return

    async def wait_durable(self, end_position: int) -> None:
        """Waits until everything before `end_position` is flushed (sync mode); returns at once otherwise."""
        if self.directory is None or self.flush_mode != "sync":
            return
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        with self._lock:
            if self._flushed >= end_position:
                return
            self._waiters.append((end_position, fut, loop))
            self._cond.notify_all()
        await fut

    @property
    def position(self) -> int:
        return self._position

    def delete_files(self, keep: Callable[[dict[tuple[str, int], int]], bool]) -> list[int]:
        """Deletes closed files for which `keep(contents)` is false; returns the deleted file bases."""
        if self.directory is None:
            return []
        deleted = []
        with self._lock:
            for base in sorted(self.file_contents):
                if base == self._file_base:
                    continue
                if not keep(self.file_contents[base]):
                    try:
                        os.remove(self._file_path(base))
                    except FileNotFoundError:
                        pass
                    del self.file_contents[base]
                    deleted.append(base)
        return deleted

    def close(self) -> None:
        """Flushes everything and closes the active file."""
        with self._lock:
            self._drain_pending_locked()
            self._closed = True
            self._cond.notify_all()
        if self._flusher is not None:
            self._flusher.join(timeout=10)
        with self._lock:
            if self._fd is not None:
                os.fsync(self._fd)
                os.close(self._fd)
                self._fd = None


def _resolve(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)


def now_ms() -> int:
    return int(time.time() * 1000)
