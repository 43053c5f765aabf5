"""The remoting transport (apache/rocketmq `NettyRemotingServer` + `NettyRemotingAbstract`): an asyncio TCP
server; per connection a `FrameSplitter` the socket is read straight into (a `BufferedProtocol`: a
multi-MiB send is received once, into a buffer of its own); every request handled in its own task and
answered with its opaque when done, so long-polled pulls answer out of order; oneway requests get no
answer; the server may send requests of its own to a client over the client's connection
(CHECK_TRANSACTION_STATE, NOTIFY_CONSUMER_IDS_CHANGED). A frame that cannot be decoded closes its
connection, as Netty's decoder does; a handler's exception is answered SYSTEM_ERROR; an unknown code
REQUEST_CODE_NOT_SUPPORTED."""

from __future__ import annotations

import asyncio
import itertools
import logging
import socket
from collections import deque
from collections.abc import Awaitable, Callable

from rocketmq_protocol.remoting.codes import ResponseCode
from rocketmq_protocol.remoting.errors import FrameError, MissingFieldError, RemotingCodecError
from rocketmq_protocol.remoting.frames import (
    MAX_FRAME_LENGTH,
    ONEWAY_FLAG,
    FrameSplitter,
    RemotingCommand,
    encode_frame,
    encode_frame_parts,
)

from ..core.acl import Denied
from ..core.errors import BrokerError
from .codes import code_of

log = logging.getLogger(__name__)

IDLE_TIMEOUT_S = 120.0  # serverChannelMaxIdleTimeSeconds
# Queued frame parts up to this size are joined into one write; larger ones are written as they are.
JOIN_BELOW = 64 * 1024
# Sent from their own memory: runs of queued parts below this size joined first (lengths, headers, Arrow's
# metadata and padding), so each costs a copy of a few bytes instead of an entry of its own in the gather.
GATHER_JOIN_BELOW = 1024
# Pieces one sendmsg takes at most (Linux's UIO_MAXIOV).
_IOV_MAX = 1024


class Refused(Exception):
    """A request answered with `code` and `remark` (the handler's way of refusing)."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = int(code)
        self.remark = remark


class Connection:
    """One client connection: writes whole frames, remembers the client ids that spoke over it.

    Frames queued in one turn of the event loop go out together at its end, small ones joined into one
    write: the answers to a window of pipelined pulls cost one send instead of two each. A large answer (a
    pull's records, a bulk answer's Arrow buffers in pieces) is sent from its own memory, its pieces
    gathered by `sendmsg`, through a duplicate of the socket: Python 3.11's transport copies whatever the
    kernel does not take at once into a buffer of its own (most of a 10 MB answer, a quarter of the
    emulator's CPU serving a read); while it is partly sent, what is queued after it waits behind it, in
    order."""

    def __init__(self, server: RemotingServer, writer: asyncio.WriteTransport) -> None:
        self.server = server
        self.writer = writer
        peer = writer.get_extra_info("peername") or ("0.0.0.0", 0)
        self.peer = f"{peer[0]}:{peer[1]}"
        self.client_ids: set[str] = set()
        self.closed = False
        self.tasks: set[asyncio.Task] = set()
        self._loop = asyncio.get_running_loop()
        self._out: list[bytes | memoryview] = []
        self._direct = _duplicate_socket(writer)
        self._backlog: deque[memoryview] = deque()  # what waits to be sent from its own memory, in order
        self._waiting = False  # for the duplicate to take more (its writer registered with the loop)
        self._close_when_sent = False

    def send(self, cmd: RemotingCommand) -> None:
        if self.closed or self.writer.is_closing():
            return
        self._queue(*encode_frame_parts(cmd))

    def request_oneway(self, code: int, ext_fields: dict[str, str], body: bytes = b"") -> bool:
        """Sends a oneway request to the client (broker → client); False when the connection is gone."""
        if self.closed or self.writer.is_closing():
            return False
        cmd = RemotingCommand(
            code=code, opaque=next(self.server.opaque), flag=ONEWAY_FLAG, ext_fields=ext_fields, body=body
        )
        cmd.language = 0  # JAVA, as a broker
        self._queue(encode_frame(cmd))
        return True

    def _queue(self, *parts: bytes | memoryview) -> None:
        if not self._out:
            self._loop.call_soon(self.flush)
        self._out.extend(p for p in parts if len(p))

    def flush(self) -> None:
        """Writes the queued frames in order: through the socket's duplicate from their own memory when they
        are large (or when something sent that way is still going out), else through the transport, runs
        of small parts joined."""
        out, self._out = self._out, []
        if self.writer.is_closing() or not out:
            return
        if self._backlog:
            self._backlog.extend(_gathered(out))
            return
        direct = self._direct
        if direct is None or self.writer.get_write_buffer_size() or sum(map(len, out)) <= JOIN_BELOW:
            for part in _joined(out, JOIN_BELOW):  # behind what the transport holds, if anything: in order
                self.writer.write(part)
            return
        self._backlog.extend(_gathered(out))
        self._send_backlog()

    def _send_backlog(self) -> None:
        """Sends what waits, as far as the kernel takes it; waits for the socket to drain for the rest."""
        backlog, direct = self._backlog, self._direct
        assert direct is not None
        try:
            while backlog:
                batch = list(itertools.islice(backlog, _IOV_MAX))
                sent = direct.sendmsg(batch)
                taken = 0
                while taken < len(batch) and sent >= len(backlog[0]):
                    sent -= len(backlog.popleft())
                    taken += 1
                if taken < len(batch):  # the kernel took less than offered: the rest waits for it to drain
                    if sent:
                        backlog[0] = backlog[0][sent:]
                    break
        except BlockingIOError:
            pass
        except OSError as e:
            log.debug("%s: sending to %s failed: %s", self.server.name, self.peer, e)
            self._drop_backlog()
            self.writer.abort()
            return
        if backlog:
            if not self._waiting:
                self._loop.add_writer(direct.fileno(), self._send_backlog)
                self._waiting = True
            return
        if self._waiting:
            self._loop.remove_writer(direct.fileno())
            self._waiting = False
        if self._close_when_sent:
            self._close_transport()

    def _drop_backlog(self) -> None:
        if self._waiting and self._direct is not None:
            self._loop.remove_writer(self._direct.fileno())
            self._waiting = False
        self._backlog.clear()

    def close(self) -> None:
        """Closes after what is queued and what is partly sent has gone out."""
        if not self.closed:
            self.closed = True
            self.flush()
            if self._backlog:
                self._close_when_sent = True
            else:
                self._close_transport()

    def lost(self) -> None:
        """The connection is gone (reset, or closed by either side): nothing more is sent."""
        self.closed = True
        self._drop_backlog()
        self._close_transport()

    def _close_transport(self) -> None:
        self.writer.close()
        if self._direct is not None:
            self._direct.close()
            self._direct = None


def _joined(parts: list[bytes | memoryview], below: int) -> list[bytes | memoryview]:
    """`parts` with each run of parts smaller than `below` bytes joined into one."""
    out: list[bytes | memoryview] = []
    run: list[bytes | memoryview] = []
    for part in parts:
        if len(part) < below:
            run.append(part)
            continue
        if run:
            out.append(run[0] if len(run) == 1 else b"".join(run))
            run = []
        out.append(part)
    if run:
        out.append(run[0] if len(run) == 1 else b"".join(run))
    return out


def _gathered(parts: list[bytes | memoryview]) -> list[memoryview]:
    """`parts` as the byte views a gathered send takes, runs of tiny ones joined."""
    return [memoryview(p).cast("B") for p in _joined(parts, GATHER_JOIN_BELOW)]


def _duplicate_socket(writer: asyncio.WriteTransport) -> socket.socket | None:
    """A duplicate of a plain TCP transport's socket (same connection, its own descriptor, non-blocking as
    the transport's), or None where there is none to write to directly."""
    sock = writer.get_extra_info("socket")
    if sock is None or writer.get_extra_info("sslcontext") is not None:
        return None
    try:
        dup = sock.dup()
    except OSError:
        return None
    dup.setblocking(False)
    return dup


Handler = Callable[[Connection, RemotingCommand], Awaitable[RemotingCommand | None]]
# Runs before every handler: a response refusing the request (ACL, faults), or None to serve it.
Gate = Callable[[Connection, RemotingCommand], Awaitable[RemotingCommand | None]]


class RemotingServer:
    def __init__(
        self,
        name: str,
        handlers: dict[int, Handler],
        *,
        gate: Gate | None = None,
        on_close: Callable[[Connection], None] | None = None,
        max_frame_length: int = MAX_FRAME_LENGTH,
    ) -> None:
        self.name = name
        self.handlers = handlers
        self.gate = gate
        self.on_close = on_close
        self.max_frame_length = max_frame_length
        self.opaque = itertools.count(1)
        self.connections: set[Connection] = set()
        self._server: asyncio.Server | None = None
        self.port = 0

    async def start(self, host: str, port: int) -> int:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _FrameProtocol(self), host, port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            for t in list(conn.tasks):
                t.cancel()
            conn.close()
        if self._server is not None:
            try:
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
            except TimeoutError:
                pass
            self._server = None

    def _dispatch(self, conn: Connection, cmd: RemotingCommand) -> None:
        if cmd.is_response:
            return  # answers to our oneway requests do not exist; others are dropped as Java does
        task = asyncio.ensure_future(self._handle(conn, cmd))
        conn.tasks.add(task)
        task.add_done_callback(conn.tasks.discard)

    def _closed(self, conn: Connection) -> None:
        conn.lost()
        self.connections.discard(conn)
        if self.on_close is not None:
            try:
                self.on_close(conn)
            except Exception:
                log.exception("%s: on_close failed", self.name)

    async def _handle(self, conn: Connection, cmd: RemotingCommand) -> None:
        try:
            resp = await self._respond(conn, cmd)
        except asyncio.CancelledError:
            return
        if resp is not None and not cmd.is_oneway:
            resp.opaque = cmd.opaque
            conn.send(resp)

    async def _respond(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        handler = self.handlers.get(cmd.code)
        if handler is None:
            return cmd.response(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {cmd.code} not supported"
            )
        try:
            if self.gate is not None:
                refused = await self.gate(conn, cmd)
                if refused is not None:
                    return refused
            return await handler(conn, cmd)
        except Refused as e:
            return cmd.response(e.code, e.remark)
        except (BrokerError, Denied) as e:
            return cmd.response(code_of(e), e.message)
        except MissingFieldError as e:
            return cmd.response(ResponseCode.SYSTEM_ERROR, str(e))
        except RemotingCodecError as e:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"{type(e).__name__}: {e}")
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.exception("%s: request code %d failed", self.name, cmd.code)
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"{type(e).__name__}: {e}")


class _FrameProtocol(asyncio.BufferedProtocol):
    """One connection: the socket is read into its `FrameSplitter`'s buffers; whole requests are dispatched;
    an undecodable frame or `IDLE_TIMEOUT_S` without a byte received closes it."""

    def __init__(self, server: RemotingServer) -> None:
        self.server = server
        self.splitter = FrameSplitter(server.max_frame_length)
        self.conn: Connection | None = None
        self._loop = asyncio.get_running_loop()
        self._last = self._loop.time()
        self._idle: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.conn = Connection(self.server, transport)  # type: ignore[arg-type]
        self.server.connections.add(self.conn)
        self._idle = self._loop.call_later(IDLE_TIMEOUT_S, self._check_idle)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.splitter.buffer()

    def buffer_updated(self, nbytes: int) -> None:
        conn = self.conn
        assert conn is not None
        self._last = self._loop.time()
        try:
            commands = self.splitter.received(nbytes)
        except FrameError as e:
            log.warning("%s: closing %s: undecodable frame (%s)", self.server.name, conn.peer, e)
            conn.close()
            return
        for cmd in commands:
            self.server._dispatch(conn, cmd)

    def eof_received(self) -> bool:
        if self.conn is None:
            return False  # close our side too
        self.conn.close()  # answers queued or partly sent go out first, then our side closes
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        if self._idle is not None:
            self._idle.cancel()
        if self.conn is not None:
            self.server._closed(self.conn)

    def _check_idle(self) -> None:
        conn = self.conn
        if conn is None or conn.closed:
            return
        idle = self._loop.time() - self._last
        if idle >= IDLE_TIMEOUT_S:
            log.info("%s: closing %s, idle for %.0f s", self.server.name, conn.peer, IDLE_TIMEOUT_S)
            conn.close()
            return
        self._idle = self._loop.call_later(IDLE_TIMEOUT_S - idle, self._check_idle)
