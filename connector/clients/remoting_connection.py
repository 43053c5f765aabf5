"""A multiplexed remoting connection: one TCP (optionally TLS) socket per broker or name server, many
requests in flight, responses matched to their requests by `opaque` whatever order they come back in.

As apache/rocketmq `NettyRemotingAbstract` (the `responseTable` of opaque → `ResponseFuture`) and
rocketmq-client-go `internal/remote` (one connection per address, a reader goroutine): each connection has
one reader thread that reads whole frames (a 4-byte length, then `recv_into` one buffer of that length) and
completes the request's `concurrent.futures.Future` (a pipelined pull's: a lighter `Reply`); a response's
body is a `memoryview` into that buffer, so a pull's stored messages reach the decoder without a copy. Writers share the socket under a lock; a
request is the encoded header and the body, sent without joining them, and within the request's timeout: a
peer that stops reading fails the connection at that deadline instead of blocking the caller (Netty's
writes are asynchronous, so a Java client's caller is not held either). Requests the server sends us
(RocketMQ's broker → client calls) are answered REQUEST_CODE_NOT_SUPPORTED unless they are oneway.

A connection that fails (reset, closed, a malformed frame) fails every request in flight with
`ConnectionLost` and is replaced on the next request (`ConnectionPool`). Idle connections are closed by
the servers after 120 s; the pool reconnects lazily.
"""

from __future__ import annotations

import contextlib
import functools
import heapq
import io
import itertools
import json
import logging
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import CancelledError, Future
from typing import TypeVar

import numpy as np

from rocketmq_protocol.remoting.codes import CURRENT_VERSION, LanguageCode, ResponseCode, SerializeType
from rocketmq_protocol.remoting.errors import FrameError, RemotingCodecError
from rocketmq_protocol.remoting.frames import (
    MAX_FRAME_LENGTH,
    ONEWAY_FLAG,
    RESPONSE_FLAG,
    RemotingCommand,
    decode_header,
    encode_header,
)

from .base import SendOutcome, SendStatus

log = logging.getLogger(__name__)

__all__ = [
    "WRITE_TIMEOUT_S",
    "ConnectionLost",
    "ConnectionPool",
    "HeaderTemplate",
    "RemotingConnection",
    "Reply",
    "RequestSendCall",
    "encode_request",
    "fail_after",
    "split_address",
]

_PREFIX = struct.Struct(">iI")
T = TypeVar("T")
_VERSION = int(CURRENT_VERSION)
_JSON = json.JSONEncoder(separators=(",", ":"))
_I32 = struct.Struct(">i")
CONNECT_TIMEOUT_S = 3.0
#: How long a write without a deadline of its own (an answer to a server's request, a TLS record the reader
#: thread answers with) may wait for the peer to take its bytes.
WRITE_TIMEOUT_S = 30.0


class WriteTimeout(TimeoutError):
    """The peer did not take a request's bytes before its deadline (it stopped reading)."""


def send_until(sock: socket.socket, data: bytes | memoryview, deadline: float) -> None:
    """`sock.sendall(data)` that gives up at `deadline` (monotonic) with `WriteTimeout`: each send waits at
    most the time left (SO_SNDTIMEO), so a peer that stops reading cannot hold the caller past it."""
    view = memoryview(data).cast("B")
    while len(view):
        left = deadline - time.monotonic()
        sent = 0
        if left > 0:
            sec = int(left)
            sock.setsockopt(
                socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", sec, max(int((left - sec) * 1e6), 1))
            )
            with contextlib.suppress(BlockingIOError):  # SO_SNDTIMEO ran out with nothing sent
                sent = sock.send(view)
        if not sent:
            raise WriteTimeout(f"{len(view)} bytes not taken")
        view = view[sent:]


class ConnectionLost(ConnectionError):
    """The connection failed before the response came (the request may or may not have been processed)."""


class TlsStream:
    """TLS over a blocking socket through an in-memory `ssl.SSLObject`, so that the reader thread can wait
    for data while other threads send: an `ssl.SSLSocket` must not be read and written at once (OpenSSL's
    SSL objects are not thread-safe; python/cpython#143756). Every SSLObject call holds one short lock; the
    socket is read and written outside it, and TLS records leave in the order they were made. The handshake
    runs within the socket's timeout."""

    def __init__(self, sock: socket.socket, context: ssl.SSLContext, host: str) -> None:
        self._sock = sock
        self._incoming, self._outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._incoming, self._outgoing, server_hostname=host)
        self._lock = threading.Lock()  # the SSLObject and its BIOs
        self._send_lock = threading.Lock()  # held from taking TLS bytes out of the BIO to sending them
        while True:
            try:
                self._tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._flush()
                data = sock.recv(65536)
                if not data:
                    raise ConnectionLost(f"{host} closed the connection during the TLS handshake") from None
                self._incoming.write(data)
        self._flush()

    def _flush(self) -> None:
        """Sends the TLS bytes of the handshake or of a reply to the peer's records within WRITE_TIMEOUT_S."""
        with self._send_lock:
            with self._lock:
                data = self._outgoing.read()
            if data:
                send_until(self._sock, data, time.monotonic() + WRITE_TIMEOUT_S)

    def send_until(self, data: bytes | memoryview, deadline: float) -> None:
        """Encrypts `data` and sends its records by `deadline`. They leave the BIO in the same locked step
        that makes them, so the reader thread (flushing a TLS reply) never sends them on another deadline."""
        if not self._send_lock.acquire(timeout=max(deadline - time.monotonic(), 0)):
            raise WriteTimeout("the reader thread's TLS reply was still not taken")
        try:
            with self._lock:
                self._tls.write(data)
                records = self._outgoing.read()
            send_until(self._sock, records, deadline)
        finally:
            self._send_lock.release()

    def recv_into(self, buffer: memoryview) -> int:
        """Reads decrypted bytes into `buffer` (one reader thread); 0 at the end of the stream."""
        while True:
            with self._lock:
                try:
                    got: int | None = self._tls.read(len(buffer), buffer)
                except ssl.SSLWantReadError:
                    got = None
                except ssl.SSLZeroReturnError:
                    got = 0
                answer = self._outgoing.pending  # e.g. a TLS 1.3 key update's reply
            if answer:
                self._flush()
            if got is not None:
                return got
            data = self._sock.recv(256 * 1024)
            if not data:
                return 0
            with self._lock:
                self._incoming.write(data)


class _TlsReader(io.RawIOBase):
    """A `TlsStream`'s decrypted bytes as a raw stream, for a buffered reader."""

    def __init__(self, stream: TlsStream) -> None:
        self._stream = stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def, override]
        return self._stream.recv_into(memoryview(buffer).cast("B"))


def split_address(address: str) -> tuple[str, int]:
    """`host:port` or `[v6]:port` → (host, port)."""
    host, _, port = address.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


def encode_request(
    code: int, ext_fields: dict[str, str], body: bytes | memoryview = b"", opaque: int = 0, flag: int = 0
) -> bytes:
    """A request's length prefix and JSON header (the body follows on the wire).

    The header is `RemotingCommand`'s JSON as Java writes it, encoded by the C JSON encoder (the remoting
    servers parse any key order; non-ASCII goes as \\u escapes, which fastjson reads)."""
    header = _JSON.encode(
        {
            "code": code,
            "extFields": ext_fields,
            "flag": flag,
            "language": "PYTHON",
            "opaque": opaque,
            "serializeTypeCurrentRPC": "JSON",
            "version": _VERSION,
        }
    ).encode()
    return _PREFIX.pack(4 + len(header) + len(body), len(header)) + header


class HeaderTemplate:
    """The frame head (length prefix and JSON header) of bodiless requests that differ only in a few
    integer ext fields and the opaque: one bytes %-format around the values (pipelined pulls, where
    encoding each header's dict costs several µs). The variable fields come last in `extFields`."""

    def __init__(self, code: int, fixed: dict[str, str], variable: tuple[str, ...]) -> None:
        if set(fixed) & set(variable):
            raise ValueError(f"fields {sorted(set(fixed) & set(variable))} are both fixed and variable")
        ext = _JSON.encode(fixed)[:-1].replace("%", "%%")  # without its closing brace
        slots = ",".join(_JSON.encode(k).replace("%", "%%") + ':"%d"' for k in variable)
        self._format = (
            f'{{"code":{code},"extFields":{ext}{"," if fixed and variable else ""}{slots}}},"flag":0,'
            f'"language":"PYTHON","opaque":%d,"serializeTypeCurrentRPC":"JSON","version":{_VERSION}}}'
        ).encode()
        self._arity = len(variable)

    def frame_head(self, values: tuple[int, ...], opaque: int) -> bytes:
        """The head of one request with these values (ints, in `variable`'s order) and `opaque`."""
        if len(values) != self._arity:
            raise ValueError(f"{len(values)} values for {self._arity} variable fields")
        header = self._format % (*values, opaque)
        return _PREFIX.pack(4 + len(header), len(header)) + header


class Reply:
    """The response slot of one pipelined request: a lock released once its response or failure is in.
    Lighter than a `Future` (a pull pipeline creates thousands a second); one waiter, no callbacks."""

    __slots__ = ("_error", "_lock", "_value")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()
        self._value: RemotingCommand | None = None
        self._error: BaseException | None = None

    def done(self) -> bool:
        return self._value is not None or self._error is not None

    def set_result(self, value: RemotingCommand) -> None:
        if self._value is None and self._error is None:
            self._value = value
            self._lock.release()

    def set_exception(self, error: BaseException) -> None:
        if not self.done():
            self._error = error
            self._lock.release()

    def result(self, timeout: float) -> RemotingCommand:
        """The response; raises the failure, or TimeoutError after `timeout` seconds."""
        if not self.done():
            if not self._lock.acquire(timeout=timeout):
                raise TimeoutError(f"no response within {timeout:.3f} s")
            self._lock.release()
        if self._error is not None:
            raise self._error
        assert self._value is not None
        return self._value


class RemotingConnection:
    """One socket to `address`; thread-safe. `request()` returns a Future of the response command."""

    def __init__(
        self,
        address: str,
        tls: ssl.SSLContext | None = None,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
    ) -> None:
        self.address = address
        host, port = split_address(address)
        sock = socket.create_connection((host, port), timeout=connect_timeout_s)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            stream = None if tls is None else TlsStream(sock, tls, host)
            sock.settimeout(None)
        except BaseException:
            sock.close()
            raise
        self._sock = sock
        if stream is None:
            self._send_until: Callable[[bytes | memoryview, float], None] = functools.partial(
                send_until, sock
            )
            self._file = sock.makefile("rb", buffering=256 * 1024)
        else:
            self._send_until = stream.send_until
            self._file = io.BufferedReader(_TlsReader(stream), 256 * 1024)
        self._write_lock = threading.Lock()
        self._pending: dict[int, Future[RemotingCommand] | Reply] = {}
        self._pending_lock = threading.Lock()
        self._opaques = itertools.count(1)
        self._closed: BaseException | None = None
        self.last_read = time.monotonic()  # when the last frame arrived (a silent peer may be gone)
        self._reader = threading.Thread(
            target=self._read_loop, name=f"rocketmq-remoting-{address}", daemon=True
        )
        self._reader.start()

    # ------------------------------------------------------------------ public
    @property
    def closed(self) -> bool:
        return self._closed is not None

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    def request(
        self,
        code: int,
        ext_fields: dict[str, str],
        body: bytes | memoryview = b"",
        timeout_s: float = WRITE_TIMEOUT_S,
    ) -> Future[RemotingCommand]:
        """Sends a request; the Future completes with the response, or fails with ConnectionLost (also
        when the peer has not taken the request's bytes within `timeout_s`: the caller is not held past
        its deadline by a broker that stopped reading)."""
        fut: Future[RemotingCommand] = Future()
        opaque = next(self._opaques) & 0x7FFFFFFF
        head = encode_request(code, ext_fields, body, opaque)
        with self._pending_lock:
            if self._closed is not None:
                raise ConnectionLost(f"connection to {self.address} is closed ({self._closed})")
            self._pending[opaque] = fut
        fut.add_done_callback(lambda f, o=opaque: self._forget(o) if f.cancelled() else None)
        self._write((head, body), timeout_s, ((opaque, fut),))
        return fut

    def request_many(
        self, items: Sequence[T], head: Callable[[T, int], bytes], timeout_s: float = WRITE_TIMEOUT_S
    ) -> list[Reply]:
        """Several requests without bodies in one write (pipelined pulls); one `Reply` each. `head(item,
        opaque)` is an item's frame head: `HeaderTemplate.frame_head`, or `encode_request` of its fields."""
        replies: list[Reply] = []
        heads: list[bytes] = []
        sent: list[tuple[int, Reply]] = []
        with self._pending_lock:
            if self._closed is not None:
                raise ConnectionLost(f"connection to {self.address} is closed ({self._closed})")
            for item in items:
                opaque = next(self._opaques) & 0x7FFFFFFF
                heads.append(head(item, opaque))
                replies.append(reply := Reply())
                self._pending[opaque] = reply
                sent.append((opaque, reply))
        self._write((b"".join(heads),), timeout_s, sent)
        return replies

    def forget(self, fut: Future[RemotingCommand] | Reply) -> None:
        """Drops a request whose caller gave up waiting (its late response is then ignored)."""
        with self._pending_lock:
            for k, v in list(self._pending.items()):
                if v is fut:
                    del self._pending[k]
                    break

    def close(self) -> None:
        self._fail(ConnectionLost(f"connection to {self.address} closed by the client"))

    # ------------------------------------------------------------------ internals
    def _write(
        self,
        parts: tuple[bytes | memoryview, ...],
        timeout_s: float,
        requests: Sequence[tuple[int, Future[RemotingCommand] | Reply]] = (),
    ) -> None:
        """Writes one or more frames' bytes, in order, within `timeout_s`. A peer that does not take them in
        time, or a socket error, fails the connection (a frame may be cut short); another write holding
        the connection all that time fails only this write's `requests` (opaque, future)."""
        timeout_s = max(timeout_s, 0.001)
        deadline = time.monotonic() + timeout_s
        if not self._write_lock.acquire(timeout=timeout_s):
            busy = ConnectionLost(
                f"{self.address}: another write held the connection for {timeout_s * 1000:.0f} ms"
            )
            for opaque, fut in requests:
                self._forget(opaque)
                with contextlib.suppress(Exception):  # completed or cancelled meanwhile
                    fut.set_exception(busy)
            return
        try:
            for part in parts:
                if len(part):
                    self._send_until(part, deadline)
        except WriteTimeout as e:
            self._fail(
                ConnectionLost(
                    f"{self.address} did not take a request within {timeout_s * 1000:.0f} ms ({e}; the peer "
                    "stopped reading)"
                )
            )
        except OSError as e:
            self._fail(e)
        finally:
            self._write_lock.release()

    def _forget(self, opaque: int) -> None:
        with self._pending_lock:
            self._pending.pop(opaque, None)

    def _fail(self, error: BaseException) -> None:
        with self._pending_lock:
            first = self._closed is None
            if first:
                self._closed = error
            pending, self._pending = self._pending, {}
        if first:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                self._sock.close()
        lost = error if isinstance(error, ConnectionLost) else ConnectionLost(f"{self.address}: {error}")
        for fut in pending.values():
            if not fut.done():
                with contextlib.suppress(Exception):
                    fut.set_exception(lost)

    def _read_exact(self, view: memoryview, got: int = 0) -> None:
        """Fills `view` from its byte `got` on."""
        n = len(view)
        readinto = self._file.readinto
        while got < n:
            k = readinto(view[got:])
            if not k:
                raise ConnectionLost(f"{self.address} closed the connection")
            got += k

    def _read_loop(self) -> None:
        prefix = bytearray(4)
        pv = memoryview(prefix)
        readinto = self._file.readinto  # a buffered reader's: one call fills the view unless the stream ends
        pending, pending_lock = self._pending, self._pending_lock
        try:
            while True:
                got = readinto(pv)
                if got != 4:
                    try:
                        self._read_exact(pv, got or 0)
                    except ConnectionLost:
                        if self._closed is None:
                            raise
                        return
                (length,) = _I32.unpack(prefix)
                if length < 4 or length + 4 > MAX_FRAME_LENGTH:
                    raise FrameError(f"{self.address} sent a frame of length {length}")
                payload = np.empty(length, np.uint8)  # not zero-filled: recv fills it (a pull's ~10 MiB)
                view = memoryview(payload)
                got = readinto(view)
                if got != length:
                    self._read_exact(view, got or 0)
                (word,) = _I32.unpack_from(payload, 0)
                hlen = word & 0xFFFFFF
                if 4 + hlen > length:
                    raise FrameError(f"{self.address} sent a header length {hlen} past its frame of {length}")
                self.last_read = time.monotonic()
                cmd = decode_header(view[4 : 4 + hlen], (word >> 24) & 0xFF)
                cmd.body = view[4 + hlen :]  # type: ignore[assignment]  # a view into this frame's buffer
                if cmd.flag & RESPONSE_FLAG:
                    with pending_lock:
                        fut = pending.pop(cmd.opaque, None)
                    if fut is not None:
                        try:
                            fut.set_result(cmd)
                        except Exception:  # cancelled or failed in the meantime
                            pass
                else:
                    self._server_request(cmd)
        except (OSError, RemotingCodecError, ValueError) as e:
            if self._closed is None:
                log.debug("remoting connection to %s failed: %s", self.address, e)
            self._fail(e)
        except BaseException as e:  # pragma: no cover - keep waiters from hanging on a bug
            self._fail(e)
            raise

    def _server_request(self, cmd: RemotingCommand) -> None:
        """A call from the server (NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE, ...): oneways are
        ignored, others answered REQUEST_CODE_NOT_SUPPORTED, as a client without those features does."""
        if cmd.flag & ONEWAY_FLAG:
            return
        resp = RemotingCommand(
            code=int(ResponseCode.REQUEST_CODE_NOT_SUPPORTED),
            language=LanguageCode.PYTHON,
            opaque=cmd.opaque,
            flag=RESPONSE_FLAG,
            remark=f"request code {cmd.code} not supported by the pyspark-rocketmq client",
        )
        header = encode_header(resp, SerializeType.JSON)
        self._write((_PREFIX.pack(4 + len(header), len(header)) + header,), WRITE_TIMEOUT_S)


class _Deadlines:
    """One daemon thread failing futures whose deadline passed (instead of a timer thread per request)."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Future, Callable[[], None]]] = []
        self._cond = threading.Condition()
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None

    def add(self, deadline: float, fut: Future, on_expire: Callable[[], None]) -> None:
        with self._cond:
            heapq.heappush(self._heap, (deadline, next(self._seq), fut, on_expire))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="rocketmq-send-deadlines", daemon=True)
                self._thread.start()
            elif self._heap[0][2] is fut:
                self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._heap and self._heap[0][2].done():
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cond.wait(5.0)
                    if not self._heap:
                        self._thread = None
                        return
                    continue
                wait = self._heap[0][0] - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                _, _, fut, on_expire = heapq.heappop(self._heap)
            if not fut.done():
                on_expire()


_deadlines = _Deadlines()


def fail_after(conn: RemotingConnection, fut: Future, timeout_s: float) -> None:
    """Fails `fut` (a request on `conn`) with TimeoutError when it has no response within `timeout_s`."""

    def expire() -> None:
        conn.forget(fut)
        if not fut.done():
            try:
                fut.set_exception(
                    TimeoutError(f"no response from {conn.address} within {timeout_s * 1000:.0f} ms")
                )
            except Exception:  # completed meanwhile
                pass

    _deadlines.add(time.monotonic() + timeout_s, fut, expire)


class RequestSendCall:
    """A send carried by one request on a remoting connection, in flight (`connector.clients.base.SendFuture`):
    `outcome()` reads the response with `answered`; a lost connection or no response in time is retryable,
    labelled UNAVAILABLE or `timeout_label`."""

    __slots__ = ("_fut",)
    timeout_label = "TIMEOUT"

    def __init__(self, fut: Future) -> None:
        self._fut = fut

    def add_done_callback(self, fn: Callable[[], None]) -> None:
        self._fut.add_done_callback(lambda _f: fn())

    def cancel(self) -> bool:
        return self._fut.cancel()

    def outcome(self) -> SendOutcome | None:
        try:
            resp: RemotingCommand = self._fut.result()
        except CancelledError:
            return None
        except (ConnectionLost, OSError) as e:
            label = self.timeout_label if isinstance(e, TimeoutError) else "UNAVAILABLE"
            return SendOutcome(SendStatus.RETRYABLE, f"{label}: {e}", label)
        return self.answered(resp)

    def answered(self, resp: RemotingCommand) -> SendOutcome:
        raise NotImplementedError


class ConnectionPool:
    """One connection per address, (re)connected on demand; thread-safe."""

    def __init__(
        self, tls: ssl.SSLContext | None = None, connect_timeout_s: float = CONNECT_TIMEOUT_S
    ) -> None:
        self.tls = tls
        self.connect_timeout_s = connect_timeout_s
        self._conns: dict[str, RemotingConnection] = {}
        self._lock = threading.Lock()
        self._connecting: dict[str, threading.Lock] = {}

    def get(self, address: str, connect_timeout_s: float | None = None) -> RemotingConnection:
        conn = self._conns.get(address)
        if conn is not None and not conn.closed:
            return conn
        with self._lock:
            gate = self._connecting.setdefault(address, threading.Lock())
        with gate:  # one connect per address at a time; others wait for it
            conn = self._conns.get(address)
            if conn is not None and not conn.closed:
                return conn
            timeout = self.connect_timeout_s if connect_timeout_s is None else connect_timeout_s
            conn = RemotingConnection(address, self.tls, max(0.05, timeout))
            with self._lock:
                self._conns[address] = conn
            return conn

    def drop(self, address: str, conn: RemotingConnection | None = None) -> None:
        """Closes the address's connection (if it is still `conn`), e.g. after a request timed out on it."""
        with self._lock:
            cur = self._conns.get(address)
            if cur is None or (conn is not None and cur is not conn):
                return
            del self._conns[address]
        cur.close()

    def close(self) -> None:
        with self._lock:
            conns, self._conns = list(self._conns.values()), {}
        for c in conns:
            c.close()
