"""The remoting transport (apache/rocketmq `NettyRemotingServer` + `NettyRemotingAbstract`): an asyncio TCP
server; per connection a `FrameSplitter`; every request handled in its own task and answered with its
opaque when done, so long-polled pulls answer out of order; oneway requests get no answer; the server may
send requests of its own to a client over the client's connection (CHECK_TRANSACTION_STATE,
NOTIFY_CONSUMER_IDS_CHANGED). A frame that cannot be decoded closes its connection, as Netty's decoder does;
a handler's exception is answered SYSTEM_ERROR; an unknown code REQUEST_CODE_NOT_SUPPORTED."""

from __future__ import annotations

import asyncio
import itertools
import logging
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
READ_CHUNK = 256 * 1024


class Refused(Exception):
    """A request answered with `code` and `remark` (the handler's way of refusing)."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = int(code)
        self.remark = remark


class Connection:
    """One client connection: writes whole frames, remembers the client ids that spoke over it."""

    def __init__(self, server: RemotingServer, writer: asyncio.StreamWriter) -> None:
        self.server = server
        self.writer = writer
        peer = writer.get_extra_info("peername") or ("0.0.0.0", 0)
        self.peer = f"{peer[0]}:{peer[1]}"
        self.client_ids: set[str] = set()
        self.closed = False
        self.tasks: set[asyncio.Task] = set()

    def send(self, cmd: RemotingCommand) -> None:
        if self.closed or self.writer.is_closing():
            return
        head, body = encode_frame_parts(cmd)
        self.writer.write(head)
        if body:
            self.writer.write(body)

    def request_oneway(self, code: int, ext_fields: dict[str, str], body: bytes = b"") -> bool:
        """Sends a oneway request to the client (broker → client); False when the connection is gone."""
        if self.closed or self.writer.is_closing():
            return False
        cmd = RemotingCommand(
            code=code, opaque=next(self.server.opaque), flag=ONEWAY_FLAG, ext_fields=ext_fields, body=body
        )
        cmd.language = 0  # JAVA, as a broker
        self.writer.write(encode_frame(cmd))
        return True

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.writer.close()


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
        self._server = await asyncio.start_server(self._serve, host, port, limit=READ_CHUNK)
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

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = Connection(self, writer)
        self.connections.add(conn)
        splitter = FrameSplitter(self.max_frame_length)
        try:
            while not conn.closed:
                try:
                    data = await asyncio.wait_for(reader.read(READ_CHUNK), IDLE_TIMEOUT_S)
                except TimeoutError:
                    log.info("%s: closing %s, idle for %.0f s", self.name, conn.peer, IDLE_TIMEOUT_S)
                    break
                if not data:
                    break
                try:
                    commands = splitter.feed(data)
                except FrameError as e:
                    log.warning("%s: closing %s: undecodable frame (%s)", self.name, conn.peer, e)
                    break
                for cmd in commands:
                    if cmd.is_response:
                        continue  # answers to our oneway requests do not exist; others are dropped as Java does
                    task = asyncio.ensure_future(self._handle(conn, cmd))
                    conn.tasks.add(task)
                    task.add_done_callback(conn.tasks.discard)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            conn.close()
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
