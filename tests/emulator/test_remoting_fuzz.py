"""Bad input on the remoting ports (broker_emulator/remoting/server.py): truncated frames, lengths over the
limit, non-JSON and malformed binary headers, unknown codes, random ext fields and bodies on every code the
broker and the name server serve. Each gets an error response or a closed connection; the server never
crashes or hangs and keeps serving a well-behaved client."""

from __future__ import annotations

import json
import random
import socket
import struct

import pytest

from rocketmq_protocol.remoting.codes import ResponseCode as R
from rocketmq_protocol.remoting.frames import FrameSplitter, RemotingCommand, encode_frame
from tests.support.helpers import unique_name
from tests.support.remoting import RemotingClient, host_port

SEED = 20261123


@pytest.fixture(scope="module")
def emu():
    from broker_emulator import Emulator

    with Emulator(brokers=1, queues=2) as e:
        e.create_topic("fuzz", 2)
        yield e


def _addrs(emu) -> list[str]:
    return [emu.name_server, f"127.0.0.1:{emu.cluster.brokers[0].remoting_port}"]


def _exchange(addr: str, data: bytes, timeout: float = 5.0) -> list[RemotingCommand] | None:
    """Sends raw bytes; the commands the server answered before closing or going quiet (None: closed with
    nothing). A server that neither answers nor closes within `timeout` after a complete frame is stuck."""
    with socket.create_connection(host_port(addr), timeout=timeout) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        splitter = FrameSplitter()
        got: list[RemotingCommand] = []
        while True:
            try:
                chunk = s.recv(65536)
            except TimeoutError:
                raise AssertionError(f"{addr}: no answer and no close within {timeout} s") from None
            except ConnectionResetError:
                break
            if not chunk:
                break
            got += splitter.feed(chunk)
        return got or None


def _healthy(emu) -> None:
    ns, broker = _addrs(emu)
    with RemotingClient(ns) as c:
        assert c.call(105, {"topic": "fuzz"}).code == R.SUCCESS
    with RemotingClient(broker) as c:
        assert c.send_message("fuzz", b"still here", queue_id=0).code == R.SUCCESS
        assert c.pull("fuzz", 0, 0).code == R.SUCCESS


def _served_codes(emu) -> list[int]:
    from broker_emulator.remoting.broker import RemotingBroker
    from broker_emulator.remoting.namesrv import NameServer

    b = emu.cluster.brokers[0]
    return sorted(
        set(RemotingBroker(emu.cluster, b, b.polling).handlers()) | set(NameServer(emu.cluster).handlers())
    )


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"\x00\x00", id="truncated-prefix"),
        pytest.param(struct.pack(">i", 100) + b"\x00" * 10, id="truncated-frame"),
        pytest.param(struct.pack(">i", 2), id="length-below-header-word"),
        pytest.param(struct.pack(">i", 17 * 1024 * 1024) + b"\x00" * 16, id="length-over-limit"),
        pytest.param(struct.pack(">iI", 4 + 5, 5) + b"{oops", id="non-json-header"),
        pytest.param(struct.pack(">iI", 4 + 4, 4) + b"[1]x", id="json-not-an-object"),
        pytest.param(struct.pack(">iI", 4 + 50, 60) + b"{}" * 25, id="header-longer-than-frame"),
        pytest.param(struct.pack(">iI", 4 + 3, (1 << 24) | 3) + b"\x00\x01\x02", id="short-binary-header"),
        pytest.param(struct.pack(">iI", 4 + 2, (7 << 24) | 2) + b"{}", id="unknown-serialize-type"),
        pytest.param(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", id="http"),
    ],
)
def test_malformed_frames_close_the_connection(emu, data):
    for addr in _addrs(emu):
        got = _exchange(addr, data)
        assert not got or all(c.is_response and c.code != R.SUCCESS for c in got)
    _healthy(emu)


def test_unknown_code_and_missing_fields(emu):
    for addr in _addrs(emu):
        got = _exchange(addr, encode_frame(RemotingCommand(code=31999, opaque=7)))
        assert got and got[0].code == R.REQUEST_CODE_NOT_SUPPORTED and got[0].opaque == 7
    for code in _served_codes(emu):
        for addr in _addrs(emu):
            got = _exchange(addr, encode_frame(RemotingCommand(code=code, opaque=9)))
            assert got is not None and len(got) == 1, code
            assert got[0].opaque == 9
    _healthy(emu)


def test_random_ext_fields_and_bodies_on_every_code(emu):
    rng = random.Random(SEED)
    codes = _served_codes(emu)
    keys = ["topic", "queueId", "consumerGroup", "queueOffset", "maxMsgNums", "sysFlag", "commitOffset",
            "suspendTimeoutMillis", "subVersion", "subscription", "expressionType", "a", "b", "c", "d", "e", "f",
            "g", "h", "i", "m", "offset", "group", "delayLevel", "timestamp", "commitLogOffset",
            "commitOrRollback", "tranStateTableOffset", "producerGroup", "msgId", "readQueueNums",
            "writeQueueNums", "perm", "topicFilterType", "order", "clientID", "isForce"]  # fmt: skip
    values = ["", "0", "-1", "1", "99999999999999999999", "fuzz", "NaN", "true", "*", "a >", "SQL92",
              "\x01\x02", "%RETRY%x", "TBW102", str(2**31), "-2147483649", unique_name("t")]  # fmt: skip
    bodies = [b"", b"{}", b"[]", b"not json", b"\x00\x00\x00\x16" + b"\x00" * 18, bytes(rng.randbytes(64)),
              json.dumps({"clientID": "x", "consumerDataSet": [{"groupName": 1}]}).encode()]  # fmt: skip
    with RemotingClient(_addrs(emu)[1]) as broker, RemotingClient(_addrs(emu)[0]) as ns:
        for i in range(600):
            code = rng.choice(codes)
            ext = {rng.choice(keys): rng.choice(values) for _ in range(rng.randint(0, 12))}
            if "suspendTimeoutMillis" in ext:
                ext["suspendTimeoutMillis"] = "0"
            body = rng.choice(bodies)
            for c in (broker, ns):
                r = c.call(code, ext, body, timeout=10)
                assert r.is_response and r.opaque, (i, code)
    _healthy(emu)


def test_pull_for_a_queue_that_does_not_exist(emu):
    with RemotingClient(_addrs(emu)[1]) as c:
        assert c.pull("fuzz", 7, 0).code == R.INVALID_PARAMETER
        assert c.pull("fuzz", -1, 0).code == R.INVALID_PARAMETER
        assert c.pull(unique_name("none"), 0, 0).code == R.TOPIC_NOT_EXIST


def test_a_long_frame_in_small_pieces_between_short_ones(emu):
    """A send longer than the receive scratch (read into a buffer of its own), arriving in pieces and
    between short requests on one connection, is answered like the short ones."""
    import time

    body = b"L" * (3 * FrameSplitter.SCRATCH_BYTES)
    ext = {
        "a": "fuzz-producer", "b": "fuzz", "c": "TBW102", "d": "4", "e": "1", "f": "0",
        "g": str(int(time.time() * 1000)), "h": "0", "i": "", "j": "0", "k": "false",
    }  # fmt: skip
    route = RemotingCommand(code=105, ext_fields={"topic": "fuzz"})
    stream = b"".join(
        encode_frame(c)
        for c in (
            RemotingCommand(code=105, opaque=1, ext_fields={"topic": "fuzz"}),
            RemotingCommand(code=310, opaque=2, ext_fields=ext, body=body),  # SEND_MESSAGE_V2
            RemotingCommand(code=105, opaque=3, ext_fields=route.ext_fields),
        )
    )
    _, broker = _addrs(emu)
    with socket.create_connection(host_port(broker), timeout=10) as s:
        for i in range(0, len(stream), 50_000):
            s.sendall(stream[i : i + 50_000])
        splitter = FrameSplitter()
        got: dict[int, RemotingCommand] = {}
        while len(got) < 3:
            got.update((c.opaque, c) for c in splitter.feed(s.recv(65536)))
    assert got[2].code == R.SUCCESS, got[2].remark
    assert got[2].ext_fields["queueId"] == "1"
    with RemotingClient(broker) as c:
        pulled = c.pull("fuzz", 1, int(got[2].ext_fields["queueOffset"]))
        assert pulled.code == R.SUCCESS and body in pulled.body


def test_an_idle_connection_is_closed(emu, monkeypatch):
    import broker_emulator.remoting.server as server

    monkeypatch.setattr(server, "IDLE_TIMEOUT_S", 0.3)
    _, broker = _addrs(emu)
    with socket.create_connection(host_port(broker), timeout=5) as s:
        s.sendall(encode_frame(RemotingCommand(code=31999, opaque=1))[:3])  # a partial frame, then silence
        data = b""
        while chunk := s.recv(65536):  # the server closes it (a timeout here fails the test)
            data += chunk
        assert data == b""
