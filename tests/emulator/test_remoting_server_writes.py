"""How the remoting server writes its answers (broker_emulator/remoting/server.py, `Connection`): the frames
of one event-loop turn go out in one write, large bodies uncopied; multi-MiB answers reach a reader slower
than the server whole and in order with the answers around them; a connection closed after an answer
sends it first; a reader that goes away with an answer unsent leaves the server serving."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import numpy as np
import pytest

from broker_emulator.remoting.server import Connection, RemotingServer
from rocketmq_protocol.remoting.codes import ResponseCode
from rocketmq_protocol.remoting.frames import FrameSplitter, RemotingCommand, encode_frame

BIG, CLOSE_AFTER, PIECES = 9001, 9002, 9003
MIB = 1 << 20


def _pattern(size: int, seed: int) -> bytes:
    return ((np.arange(size, dtype=np.int64) + seed) % 251).astype(np.uint8).tobytes()


class _Server:
    """A RemotingServer on 127.0.0.1 in a thread of its own."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.server = RemotingServer(
            "test", {BIG: self._big, CLOSE_AFTER: self._close_after, PIECES: self._pieces}
        )
        self.pieces: list[bytes] = []  # the last PIECES answer's body
        self.port = 0
        started = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(self.loop)
            self.port = self.loop.run_until_complete(self.server.start("127.0.0.1", 0))
            started.set()
            self.loop.run_forever()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        assert started.wait(10)

    @staticmethod
    def _small_send_buffer(conn: Connection) -> None:
        """The kernel takes little of an answer at once, so the transport holds the rest."""
        conn.writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)

    def _answer(self, cmd: RemotingCommand) -> RemotingCommand:
        ext = cmd.ext_fields
        resp = cmd.response(ResponseCode.SUCCESS, None)
        resp.body = _pattern(int(ext["size"]), int(ext["seed"]))
        return resp

    async def _big(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        self._small_send_buffer(conn)
        return self._answer(cmd)

    async def _pieces(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """A body in pieces (as a bulk answer's Arrow buffers): tiny, large and middling ones, in turn."""
        self._small_send_buffer(conn)
        seed = int(cmd.ext_fields["seed"])
        sizes = (4, 3 * MIB + 5, 3, 7, 2 * MIB, 20_000, 1)
        self.pieces = [_pattern(size, seed + i) for i, size in enumerate(sizes)]
        resp = cmd.response(ResponseCode.SUCCESS, None)
        resp.body = list(self.pieces)
        return resp

    async def _close_after(self, conn: Connection, cmd: RemotingCommand) -> None:
        self._small_send_buffer(conn)
        resp = self._answer(cmd)
        resp.opaque = cmd.opaque
        conn.send(resp)
        conn.close()

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture()
def srv():
    s = _Server()
    try:
        yield s
    finally:
        s.stop()


def _request(code: int, opaque: int, size: int, seed: int) -> bytes:
    cmd = RemotingCommand(code=code, opaque=opaque, ext_fields={"size": str(size), "seed": str(seed)})
    return encode_frame(cmd)


def _connect(port: int, rcvbuf: int | None = None) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf is not None:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)  # before connect: the window stays small
    s.settimeout(10)
    s.connect(("127.0.0.1", port))
    return s


def _read(
    s: socket.socket, frames: int, slow: bool = False, wait_close: bool = False
) -> tuple[list[RemotingCommand], bool]:
    """Up to `frames` frames, reading 16 KiB at a time (pausing now and then when `slow`), and whether the
    server closed the connection (with `wait_close`, waiting up to 2 s for it after the frames)."""
    splitter = FrameSplitter()
    got: list[RemotingCommand] = []
    deadline = time.monotonic() + 30
    reads = 0
    while len(got) < frames:
        assert time.monotonic() < deadline, f"{len(got)} of {frames} frames in 30 s"
        chunk = s.recv(16384)
        if not chunk:
            return got, True
        got += splitter.feed(chunk)
        reads += 1
        if slow and reads % 32 == 0:
            time.sleep(0.002)
    if not wait_close:
        return got, False
    s.settimeout(2)
    try:
        closed = s.recv(1) == b""
    except TimeoutError:
        closed = False
    return got, closed


def test_large_answers_reach_a_slow_reader_whole_and_in_order(srv: _Server) -> None:
    sizes = [3 * MIB + 12345, 10, 2 * MIB + 1]
    with _connect(srv.port, rcvbuf=65536) as s:
        s.sendall(b"".join(_request(BIG, i + 1, size, i) for i, size in enumerate(sizes)))
        got, _ = _read(s, len(sizes), slow=True)
    assert [c.opaque for c in got] == [1, 2, 3]
    for i, (cmd, size) in enumerate(zip(got, sizes, strict=True)):
        assert cmd.code == ResponseCode.SUCCESS
        assert bytes(cmd.body) == _pattern(size, i)


def test_a_connection_closed_after_an_answer_sends_the_answer_first(srv: _Server) -> None:
    size = 4 * MIB + 7
    with _connect(srv.port, rcvbuf=65536) as s:
        s.sendall(_request(CLOSE_AFTER, 5, size, 3))
        got, closed = _read(s, 1, slow=True, wait_close=True)
    assert [c.opaque for c in got] == [5]
    assert bytes(got[0].body) == _pattern(size, 3)
    assert closed


def test_a_reader_gone_with_an_answer_unsent_leaves_the_server_serving(srv: _Server) -> None:
    with _connect(srv.port, rcvbuf=65536) as s:
        s.sendall(_request(BIG, 1, 8 * MIB, 0))
        assert s.recv(16384)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # reset
    deadline = time.monotonic() + 10
    while srv.server.connections and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not srv.server.connections, "the server forgot the connection"
    with _connect(srv.port) as s:
        s.sendall(_request(BIG, 2, 1000, 9))
        got, _ = _read(s, 1)
    assert bytes(got[0].body) == _pattern(1000, 9)


class _RecordingTransport:
    """What `Connection` writes to: each write() call's bytes, in order."""

    def __init__(self) -> None:
        self.writes: list[bytes | memoryview] = []
        self.closing = False

    def get_extra_info(self, name: str) -> object:
        return ("127.0.0.1", 1234) if name == "peername" else None

    def is_closing(self) -> bool:
        return self.closing

    def write(self, data: bytes | memoryview) -> None:
        assert not self.closing
        self.writes.append(data)

    def close(self) -> None:
        self.closing = True


def test_the_frames_of_one_turn_go_out_in_one_write_large_bodies_uncopied() -> None:
    async def scenario() -> _RecordingTransport:
        transport = _RecordingTransport()
        conn = Connection(RemotingServer("test", {}), transport)  # type: ignore[arg-type]
        big = memoryview(_pattern(MIB, 1))
        for opaque in range(1, 17):  # the answers to a window of pipelined pulls
            conn.send(RemotingCommand(code=0, opaque=opaque, flag=1, body=_pattern(100, opaque)))
        conn.send(RemotingCommand(code=0, opaque=17, flag=1, body=big))
        conn.send(RemotingCommand(code=0, opaque=18, flag=1))
        assert conn.request_oneway(40, {"k": "v"})
        assert transport.writes == []  # nothing before the turn ends
        await asyncio.sleep(0)
        assert len(transport.writes) == 3
        assert transport.writes[1] is big  # handed over as it is
        conn.send(RemotingCommand(code=0, opaque=19, flag=1))
        conn.close()  # what is queued goes out before the close
        assert len(transport.writes) == 4 and transport.closing
        return transport

    transport = asyncio.run(scenario())
    got = FrameSplitter().feed(b"".join(bytes(w) for w in transport.writes))
    assert [c.opaque for c in got][:16] == list(range(1, 17))
    assert [bytes(c.body) for c in got][:17] == [_pattern(100, i) for i in range(1, 17)] + [_pattern(MIB, 1)]
    assert [(c.opaque, c.is_response) for c in got][16:18] == [(17, True), (18, True)]
    assert got[18].code == 40 and not got[18].is_response and got[19].opaque == 19


def _on_loop(srv: _Server, fn):  # type: ignore[no-untyped-def]
    """`fn()` run on the server's event loop; its result."""

    async def call():  # type: ignore[no-untyped-def]
        return fn()

    return asyncio.run_coroutine_threadsafe(call(), srv.loop).result(10)


def test_a_large_answer_the_kernel_cannot_take_at_once_waits_in_its_own_memory(srv: _Server) -> None:
    """The part of a multi-MiB answer a slow reader has not taken stays in the answer's memory, behind the
    socket, not copied into the transport's buffer; the answers after it wait behind it and all arrive."""
    size = 8 * MIB + 3
    with _connect(srv.port, rcvbuf=65536) as s:
        s.sendall(_request(BIG, 1, size, 4) + _request(BIG, 2, 100, 5))
        deadline = time.monotonic() + 10
        waiting = 0
        while waiting == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
            conns = _on_loop(srv, lambda: list(srv.server.connections))
            if conns:
                transport_holds = _on_loop(srv, conns[0].writer.get_write_buffer_size)
                waiting = _on_loop(srv, lambda c=conns[0]: sum(len(p) for p in c._backlog))
        assert waiting > size // 2, "the answer did not wait behind the socket"
        assert transport_holds == 0, f"the transport copied {transport_holds} bytes"
        got, _ = _read(s, 2)
    assert [c.opaque for c in got] == [1, 2]
    assert bytes(got[0].body) == _pattern(size, 4) and bytes(got[1].body) == _pattern(100, 5)


def test_a_reader_that_half_closes_after_its_request_gets_the_whole_answer_then_the_close(
    srv: _Server,
) -> None:
    size = 6 * MIB + 11
    with _connect(srv.port, rcvbuf=65536) as s:
        s.sendall(_request(BIG, 7, size, 2))
        time.sleep(0.2)  # the answer is partly sent when the end of the requests arrives
        s.shutdown(socket.SHUT_WR)
        got, closed = _read(s, 1, slow=True, wait_close=True)
    assert [c.opaque for c in got] == [7]
    assert bytes(got[0].body) == _pattern(size, 2)
    assert closed


def test_an_answer_in_pieces_reaches_a_slow_reader_whole_its_large_pieces_sent_from_their_memory(
    srv: _Server,
) -> None:
    """A body given as a list of pieces goes out as their concatenation, followed by the next answer; what
    waits behind the socket are views of the large pieces themselves, not copies."""
    with _connect(srv.port, rcvbuf=65536) as s:
        s.sendall(_request(PIECES, 1, 0, 3) + _request(BIG, 2, 100, 5))
        deadline = time.monotonic() + 10
        waiting: list[object] = []
        while not waiting and time.monotonic() < deadline:
            time.sleep(0.01)
            conns = _on_loop(srv, lambda: list(srv.server.connections))
            if conns:
                waiting = _on_loop(srv, lambda c=conns[0]: [v.obj for v in c._backlog])
        large = [p for p in srv.pieces if len(p) > MIB]
        assert any(any(obj is p for p in large) for obj in waiting), "no large piece waits in its own memory"
        got, _ = _read(s, 2, slow=True)
    assert [c.opaque for c in got] == [1, 2]
    assert bytes(got[0].body) == b"".join(srv.pieces)
    assert bytes(got[1].body) == _pattern(100, 5)
