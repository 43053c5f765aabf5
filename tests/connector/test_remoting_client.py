"""The connector's remoting client against small scripted remoting servers (threads on loopback ports):
multiplexing by opaque, timeouts and retries within the deadline, name-server failover, ACL signatures,
broker → client requests, pull pipelining against a broker that caps each pull like Apache's (32
messages), and the columnar conversion of stored messages into the reader's schema. What a real broker
does is checked by tests/real/test_real_connector_remoting.py."""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa
import pytest

from connector.clients import PullStatus
from connector.clients.base import SendStatus
from connector.clients.remoting import PULL_WINDOW, RemotingClient, _window, stored_to_table
from connector.clients.remoting_connection import (
    ConnectionLost,
    ConnectionPool,
    HeaderTemplate,
    RemotingConnection,
    Reply,
    TlsStream,
    encode_request,
    split_address,
)
from connector.clients.remoting_send import RemotingPayload
from connector.config import ClientConfig, FilterSpec
from connector.errors import AccessDeniedError, ConnectorError, RetriesExhaustedError, RocketMQError
from connector.queues import MessageQueue, RouteEntry
from connector.schema import ARROW_SCHEMA, to_record_batches
from rocketmq_protocol.message_schema import MESSAGE_SCHEMA
from rocketmq_protocol.remoting import signature
from rocketmq_protocol.remoting.codes import RequestCode
from rocketmq_protocol.remoting.errors import FrameError
from rocketmq_protocol.remoting.frames import FrameSplitter, RemotingCommand, encode_frame
from rocketmq_protocol.remoting.message_codec import encode_stored
from rocketmq_protocol.remoting.properties import build_properties_column, encode_properties
from rocketmq_protocol.remoting.route import BrokerData, QueueData, TopicRouteData
from tests.emulator.test_security import certificate  # noqa: F401  (the self-signed certificate fixture)

Handler = Callable[[RemotingCommand], RemotingCommand | None]


class FakeServer:
    """A remoting server on a free loopback port; `handler(cmd)` returns the response (None: no answer)."""

    def __init__(self, handler: Handler, tls: ssl.SSLContext | None = None) -> None:
        self.handler = handler
        self.tls = tls
        self.requests: list[RemotingCommand] = []
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self.address = f"127.0.0.1:{self._sock.getsockname()[1]}"
        self._conns: list[socket.socket] = []
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        splitter = FrameSplitter()
        lock = threading.Lock()
        with contextlib.suppress(
            OSError, FrameError
        ):  # a frame past the limit (the 64 MiB write tests) ends it
            if self.tls is not None:
                conn = self.tls.wrap_socket(conn, server_side=True)
                self._conns.append(conn)
            while True:
                data = conn.recv(65536)
                if not data:
                    return
                for cmd in splitter.feed(data):
                    self.requests.append(cmd)
                    if cmd.is_response:
                        continue
                    resp = self.handler(cmd)
                    if resp is not None:
                        with lock:
                            conn.sendall(encode_frame(resp))

    def send_to_clients(self, cmd: RemotingCommand) -> None:
        for c in self._conns:
            with contextlib.suppress(OSError):
                c.sendall(encode_frame(cmd))

    def close(self) -> None:
        self._stop = True
        self._sock.close()
        for c in self._conns:
            with contextlib.suppress(OSError):
                c.close()


@pytest.fixture
def servers() -> Iterator[Callable[..., FakeServer]]:
    started: list[FakeServer] = []

    def start(handler: Handler, tls: ssl.SSLContext | None = None) -> FakeServer:
        s = FakeServer(handler, tls)
        started.append(s)
        return s

    yield start
    for s in started:
        s.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def route_body(broker_addr: str, topic_queues: int = 2) -> bytes:
    return TopicRouteData(
        queue_datas=[QueueData("broker-a", topic_queues, topic_queues, 6)],
        broker_datas=[BrokerData("DefaultCluster", "broker-a", {0: broker_addr})],
    ).to_json()


# ------------------------------------------------------------------------------------------ connection
def test_responses_out_of_order_reach_their_requests(servers) -> None:
    held: list[RemotingCommand] = []
    done = threading.Event()

    def handler(cmd: RemotingCommand) -> RemotingCommand | None:
        held.append(cmd)
        if len(held) < 20:
            return None
        for c in reversed(held):  # answer all twenty in reverse order, on one connection
            srv.send_to_clients(c.response(0, ext_fields={"echo": c.ext_fields["i"]}))
        done.set()
        return None

    srv = servers(handler)
    pool = ConnectionPool()
    conn = pool.get(srv.address)
    futures = [conn.request(30, {"i": str(i)}) for i in range(20)]
    assert [f.result(5).ext_fields["echo"] for f in futures] == [str(i) for i in range(20)]
    assert conn.in_flight == 0
    pool.close()


def test_frames_arriving_in_pieces_are_read_whole_and_a_cut_frame_fails_its_request(servers) -> None:
    """Responses sent a few bytes at a time (split inside the length prefix, the header and the body) reach
    their requests whole; a peer that closes inside a frame fails what is still in flight."""
    srv = servers(lambda cmd: None)
    pool = ConnectionPool()
    conn = pool.get(srv.address)
    futures = [conn.request(30, {"i": str(i)}) for i in range(3)]
    deadline = time.monotonic() + 5
    while len(srv.requests) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    frames = b"".join(
        encode_frame(c.response(0, ext_fields={"echo": c.ext_fields["i"]}, body=b"b" * 50))
        for c in srv.requests
    )
    (peer,) = srv._conns
    for i in range(0, len(frames), 3):
        peer.sendall(frames[i : i + 3])
        time.sleep(0.0005)
    assert [(f.result(5).ext_fields["echo"], bytes(f.result(5).body)) for f in futures] == [
        (str(i), b"b" * 50) for i in range(3)
    ]
    cut = conn.request(30, {"i": "3"})
    while len(srv.requests) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    peer.sendall(encode_frame(srv.requests[3].response(0, body=b"b" * 50))[:-10])
    peer.shutdown(socket.SHUT_RDWR)
    with pytest.raises(ConnectionLost):
        cut.result(5)
    pool.close()


def test_server_requests_are_answered_not_supported_and_oneways_ignored(servers) -> None:
    srv = servers(lambda cmd: cmd.response(0))
    pool = ConnectionPool()
    conn = pool.get(srv.address)
    conn.request(30, {}).result(5)
    srv.send_to_clients(RemotingCommand(code=40, opaque=77, flag=2))  # NOTIFY_CONSUMER_IDS_CHANGED, oneway
    srv.send_to_clients(RemotingCommand(code=307, opaque=78))  # GET_CONSUMER_RUNNING_INFO
    deadline = time.monotonic() + 5
    while not any(r.is_response and r.opaque == 78 for r in srv.requests) and time.monotonic() < deadline:
        time.sleep(0.01)
    answers = [r for r in srv.requests if r.is_response]
    assert [(r.opaque, r.code) for r in answers] == [(78, 3)]
    pool.close()


def test_a_lost_connection_fails_its_requests_and_the_next_call_reconnects(servers) -> None:
    calls = {"n": 0}

    def handler(cmd: RemotingCommand) -> RemotingCommand | None:
        calls["n"] += 1
        if calls["n"] == 1:
            srv.close_clients()
            return None
        return cmd.response(0, ext_fields={"offset": "42"})

    srv = servers(handler)
    srv.close_clients = lambda: [c.shutdown(socket.SHUT_RDWR) for c in srv._conns]  # type: ignore[attr-defined]
    client = RemotingClient(ClientConfig(name_server="127.0.0.1:1"))
    q = RouteEntry(MessageQueue("t", "broker-a", 0), srv.address)
    assert client.max_offset(q, timeout_ms=5000) == 42  # the first attempt lost its connection: retried
    assert calls["n"] == 2
    client.close()


class SilentPeer:
    """A loopback listener that accepts connections and never reads from them (a broker that stopped
    reading: stuck, or SIGSTOPped); its receive buffer is made small so that a write fills it quickly."""

    def __init__(self) -> None:
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(4)
        self.address = f"127.0.0.1:{self._sock.getsockname()[1]}"

    def close(self) -> None:
        self._sock.close()


@pytest.fixture
def silent_peer() -> Iterator[SilentPeer]:
    peer = SilentPeer()
    yield peer
    peer.close()


BIG = bytes(64 << 20)  # more than loopback's socket buffers hold, whatever their autotuning


def test_a_peer_that_stops_reading_fails_the_write_at_its_deadline(silent_peer) -> None:
    """A request whose bytes the peer does not take is not written past its timeout: the caller gets its
    Future back, failed with ConnectionLost naming the deadline, and the connection is closed."""
    pool = ConnectionPool()
    conn = pool.get(silent_peer.address, 3.0)
    t0 = time.monotonic()
    fut = conn.request(310, {"topic": "t"}, BIG, timeout_s=0.5)
    assert time.monotonic() - t0 < 3.0
    with pytest.raises(ConnectionLost, match=r"did not take a request within 500 ms"):
        fut.result(timeout=1)
    assert conn.closed
    pool.close()


def test_a_stuck_tls_peer_fails_the_write_and_waiting_writers_too(servers, certificate) -> None:  # noqa: F811
    """Over TLS the same bound holds. A second writer waiting for the connection meanwhile gives up at its
    own timeout and fails only its own request; the first fails the connection at its deadline."""
    cert_pem, ctx = _server_tls(certificate)
    release = threading.Event()
    srv = servers(lambda cmd: release.wait(20) and None, tls=ctx)  # the server's reader stops in its handler
    conn = ConnectionPool(ssl.create_default_context(cadata=cert_pem.decode())).get(srv.address, 5.0)
    conn.request(10, {}, b"x")  # the server now waits in its handler and reads no more
    try:
        results: dict[str, tuple[float, str]] = {}

        def write(name: str, timeout_s: float) -> None:
            t = time.monotonic()
            fut = conn.request(310, {}, BIG, timeout_s=timeout_s)
            with pytest.raises(ConnectionLost) as e:
                fut.result(timeout=5)
            results[name] = (time.monotonic() - t, str(e.value))

        first = threading.Thread(target=write, args=("first", 1.5))
        first.start()
        time.sleep(0.2)
        write("second", 0.3)
        assert not conn.closed  # the second write failed alone
        first.join(10)
        assert (
            results["second"][0] < 1.0
            and "another write held the connection for 300 ms" in results["second"][1]
        )
        assert (
            1.0 < results["first"][0] < 3.5 and "did not take a request within 1500 ms" in results["first"][1]
        )
        assert conn.closed
    finally:
        release.set()


def test_a_tls_write_leaves_no_records_for_the_reader_thread_to_send(servers, certificate) -> None:  # noqa: F811
    """A write's TLS records leave the outgoing BIO in the locked step that makes them. Were they left
    there between two locked steps, the reader thread, woken by any record from the peer, would find them
    and send them itself on its own 30 s deadline, the writer waiting behind it past its timeout (a CI
    run's stuck-TLS test hung that way, once in ~25 runs here)."""
    cert_pem, ctx = _server_tls(certificate)
    srv = servers(lambda cmd: cmd.response(0), tls=ctx)
    host, port = split_address(srv.address)
    sock = socket.create_connection((host, port), timeout=5)
    stream = TlsStream(sock, ssl.create_default_context(cadata=cert_pem.decode()), host)
    left_in_bio: list[int] = []

    class WatchedLock:
        """The stream's SSLObject lock, noting what the outgoing BIO holds each time it is let go."""

        def __init__(self) -> None:
            self._lock = threading.Lock()

        def __enter__(self) -> None:
            self._lock.acquire()

        def __exit__(self, *exc: object) -> None:
            left_in_bio.append(stream._outgoing.pending)
            self._lock.release()

    stream._lock = WatchedLock()  # type: ignore[assignment]
    try:
        frame = encode_request(10, {}, bytes(100_000), opaque=1) + bytes(100_000)
        stream.send_until(frame, time.monotonic() + 5)
        assert left_in_bio and set(left_in_bio) == {0}, left_in_bio
        got = bytearray(4)
        assert stream.recv_into(memoryview(got)) == 4  # the server read the request whole and answered
    finally:
        sock.close()


def test_a_send_to_a_broker_that_stopped_reading_is_retryable_at_its_timeout(silent_peer) -> None:
    client = RemotingClient(ClientConfig(name_server="127.0.0.1:1"))
    payload = RemotingPayload(int(RequestCode.SEND_MESSAGE_V2), {"a": "t"}, BIG)
    t0 = time.monotonic()
    out = client.send_async(silent_peer.address, payload, 1, 0.5).outcome()
    assert time.monotonic() - t0 < 3.0
    assert out is not None and out.status == SendStatus.RETRYABLE and "did not take a request" in out.reason
    client.close()


# ------------------------------------------------------------------------------------------ client calls
def test_name_servers_fail_over_in_turn_and_routes_list_master_queues(servers) -> None:
    srv = servers(lambda cmd: cmd.response(0, body=route_body("127.0.0.1:10911", 3)))
    dead = f"127.0.0.1:{free_port()}"
    client = RemotingClient(ClientConfig(name_server=f"{dead};{srv.address}"))
    route = client.route("orders", timeout_ms=5000)
    assert [(e.broker, e.queue_id, e.endpoint) for e in route] == [
        ("broker-a", i, "127.0.0.1:10911") for i in range(3)
    ]
    assert client._name_servers()[0] == srv.address  # the one that answered is asked first next time
    req = srv.requests[0]
    assert (
        req.code == 105
        and req.ext_fields["topic"] == "orders"
        and req.ext_fields["acceptStandardJsonOnly"] == "true"
    )
    client.close()


def test_timeouts_are_retried_until_the_deadline(servers) -> None:
    srv = servers(lambda cmd: None)  # never answers
    client = RemotingClient(ClientConfig(name_server=srv.address))
    t0 = time.monotonic()
    with pytest.raises(
        RetriesExhaustedError, match=r"GET_ROUTEINFO_BY_TOPIC\(t\) .* did not succeed within 1500 ms"
    ):
        client.route("t", timeout_ms=1500)
    assert 1.4 < time.monotonic() - t0 < 4
    client.close()


def test_transient_codes_are_retried_and_errors_are_not(servers) -> None:
    answers = [2, 1500, 0]  # SYSTEM_BUSY, GO_AWAY, then the answer

    def handler(cmd: RemotingCommand) -> RemotingCommand:
        code = answers.pop(0) if answers else 17
        return cmd.response(
            code, "busy" if code else None, body=route_body("127.0.0.1:10911") if code == 0 else b""
        )

    srv = servers(handler)
    client = RemotingClient(ClientConfig(name_server=srv.address))
    assert len(client.route("t", timeout_ms=5000)) == 2
    with pytest.raises(RocketMQError, match=r"TOPIC_NOT_EXIST \(17\)") as e:
        client.route("gone", timeout_ms=5000)
    assert e.value.kind.name == "TOPIC_NOT_FOUND"
    client.close()


def test_requests_are_signed_with_the_acl_signature(servers) -> None:
    def handler(cmd: RemotingCommand) -> RemotingCommand:
        if cmd.ext_fields.get("AccessKey") != "AK" or not signature.verify(cmd, "SK"):
            return cmd.response(16, "[authentication] check signature failed")
        return cmd.response(0, ext_fields={"offset": "7"})

    srv = servers(handler)
    q = RouteEntry(MessageQueue("t", "broker-a", 0), srv.address)
    good = RemotingClient(ClientConfig(name_server="127.0.0.1:1", access_key="AK", secret_key="SK"))
    assert good.max_offset(q, timeout_ms=3000) == 7
    bad = RemotingClient(ClientConfig(name_server="127.0.0.1:1", access_key="AK", secret_key="wrong"))
    with pytest.raises(AccessDeniedError, match="rejected the credentials"):
        bad.max_offset(q, timeout_ms=3000)
    good.close()
    bad.close()


# ------------------------------------------------------------------------------------------ pulls
def stored(offsets: np.ndarray, body_size: int = 100, tags: list[str | None] | None = None) -> bytes:
    n = len(offsets)
    props = build_properties_column(
        n,
        uniq_keys=np.array([f"{o:032X}".encode() for o in offsets], dtype="S32"),
        tags=pa.array(tags if tags is not None else [None] * n, pa.string()),
        keys=pa.array([f"k{o} x" for o in offsets], pa.string()),
    )
    return encode_stored(
        topic="t",
        queue_id=0,
        queue_offset=offsets,
        commitlog_offset=offsets * 300,
        body=pa.array([f"{o:0{body_size}d}".encode() for o in offsets], pa.binary()),
        properties=props,
        born_timestamp=1_700_000_000_000,
        store_timestamp=offsets + 1_700_000_000_000,
        born_host="10.0.0.7:5555",
        store_host="127.0.0.1:10911",
    )


class CappedBroker:
    """Serves PULL_MESSAGE over offsets [0, max) like Apache's broker from page cache: at most `cap`
    messages per answer; tags cycle TagA/TagB/None."""

    def __init__(self, max_offset: int, cap: int = 32) -> None:
        self.max_offset, self.cap = max_offset, cap
        self.pulls = 0

    def tag(self, o: int) -> str | None:
        return (["TagA", "TagB", None])[o % 3]

    def __call__(self, cmd: RemotingCommand) -> RemotingCommand:
        if cmd.code != 11:
            return cmd.response(0, ext_fields={"offset": str(self.max_offset)})
        self.pulls += 1
        f = cmd.ext_fields
        start, want = int(f["queueOffset"]), int(f["maxMsgNums"])
        header = {"suggestWhichBrokerId": "0", "minOffset": "0", "maxOffset": str(self.max_offset)}
        if start == self.max_offset:
            return cmd.response(19, ext_fields={**header, "nextBeginOffset": str(start)})
        if start > self.max_offset:
            return cmd.response(21, ext_fields={**header, "nextBeginOffset": str(self.max_offset)})
        end = min(start + min(want, self.cap), self.max_offset)
        offsets = np.arange(start, end)
        tags = [self.tag(int(o)) for o in offsets]
        if f["subscription"] != "*":
            wanted = {t.strip() for t in f["subscription"].split("||")}
            offsets = np.array([o for o, t in zip(offsets, tags, strict=True) if t in wanted], dtype=np.int64)
            tags = [t for t in tags if t in wanted]
        if not len(offsets):
            return cmd.response(20, ext_fields={**header, "nextBeginOffset": str(end)})
        return cmd.response(
            0, ext_fields={**header, "nextBeginOffset": str(end)}, body=stored(offsets, tags=tags)
        )


def test_pulls_are_pipelined_past_the_brokers_cap_and_decoded_at_once(servers) -> None:
    broker = CappedBroker(1000)
    srv = servers(broker)
    client = RemotingClient(ClientConfig(name_server="127.0.0.1:1"))
    q = RouteEntry(MessageQueue("t", "broker-a", 0), srv.address)
    res = client.pull(q, 0, 900, group="g")
    assert res.status == PullStatus.FOUND and res.next_offset == 900
    assert res.table.column("queue_offset").to_pylist() == list(range(900))
    assert res.table.schema == MESSAGE_SCHEMA and res.table.num_rows == 900
    assert broker.pulls == 1 + -(-(900 - 32) // 32)  # one request, then the rest in parallel
    res = client.pull(q, 900, 8192, group="g")  # stops at the queue's max offset
    assert (res.status, res.next_offset, res.table.num_rows) == (PullStatus.FOUND, 1000, 100)
    assert client.pull(q, 1000, 10, group="g").status == PullStatus.NO_NEW_MSG
    assert client.pull(q, 2000, 10, group="g").status == PullStatus.OFFSET_ILLEGAL
    sub = srv.requests[0].ext_fields
    assert (sub["sysFlag"], sub["subscription"], sub["expressionType"], sub["commitOffset"]) == (
        "4",
        "*",
        "TAG",
        "0",
    )
    client.close()


def test_pipelined_pulls_send_the_same_fields_signed_or_not(servers) -> None:
    """Unsigned sub-pulls come from a frame template, signed ones are built in full: the broker sees the
    same fields either way (but the signature), each signed request verifies, and the rows are the same."""
    tables, fields = [], []
    for creds in ({}, {"access_key": "AK", "secret_key": "SK"}):
        broker = CappedBroker(300)
        srv = servers(broker)
        client = RemotingClient(ClientConfig(name_server="127.0.0.1:1", **creds))
        q = RouteEntry(MessageQueue("t", "broker-a", 0), srv.address)
        for _ in range(2):  # the second pull reuses the cached template
            res = client.pull(q, 0, 300, group="g", filter=FilterSpec("tag", "TagA || TagB"))
            assert res.next_offset == 300
        tables.append(res.table)
        pulls = [r for r in srv.requests if r.code == 11]
        assert len(pulls) == 2 * (1 + -(-(300 - 32) // 32))
        if creds:
            assert all(signature.verify(r, "SK") for r in pulls)
        fields.append(
            [{k: v for k, v in r.ext_fields.items() if k not in ("AccessKey", "Signature")} for r in pulls]
        )
        client.close()
    assert fields[0] == fields[1]
    assert [f["queueOffset"] for f in fields[0][:3]] == ["0", "32", "64"]
    assert tables[0].equals(tables[1]) and tables[0].num_rows == 200


def test_header_templates_encode_what_the_json_encoder_does() -> None:
    fixed = {"consumerGroup": 'g\u00e9"%d\\', "topic": "t%s", "queueId": "3"}
    t = HeaderTemplate(11, fixed, ("queueOffset", "maxMsgNums"))
    for offset, count, opaque in ((0, 32, 1), (2**40, 7, 0x7FFFFFFF)):
        expected = encode_request(
            11, {**fixed, "queueOffset": str(offset), "maxMsgNums": str(count)}, b"", opaque
        )
        assert t.frame_head((offset, count), opaque) == expected
    assert HeaderTemplate(11, {}, ("a",)).frame_head((5,), 9) == encode_request(11, {"a": "5"}, b"", 9)
    assert HeaderTemplate(11, {"b": "x"}, ()).frame_head((), 9) == encode_request(11, {"b": "x"}, b"", 9)
    with pytest.raises(ValueError, match="both fixed and variable"):
        HeaderTemplate(11, {"a": "1"}, ("a",))
    with pytest.raises(ValueError, match="1 values for 2"):
        t.frame_head((1,), 1)


def test_replies_hold_one_outcome_and_time_out() -> None:
    ok, failed, silent = Reply(), Reply(), Reply()
    cmd = RemotingCommand(0)
    threading.Timer(0.05, ok.set_result, (cmd,)).start()
    assert ok.result(5) is cmd and ok.result(0.001) is cmd and ok.done()
    ok.set_exception(RuntimeError("late"))  # ignored: the outcome is in
    assert ok.result(0.001) is cmd
    failed.set_exception(ConnectionError("lost"))
    with pytest.raises(ConnectionError, match="lost"):
        failed.result(1)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        silent.result(0.05)
    assert 0.04 <= time.monotonic() - started < 2 and not silent.done()


def test_filtered_pulls_skip_ahead_without_gaps_or_repeats(servers) -> None:
    srv = servers(CappedBroker(500, cap=10))
    client = RemotingClient(ClientConfig(name_server="127.0.0.1:1"))
    q = RouteEntry(MessageQueue("t", "broker-a", 0), srv.address)
    got: list[int] = []
    offset = 0
    while offset < 500:
        res = client.pull(q, offset, 200, group="g", filter=FilterSpec("tag", "TagB"))
        assert res.next_offset > offset
        got += res.table.column("queue_offset").to_pylist()
        assert set(res.table.column("tag").to_pylist()) <= {"TagB"}
        offset = res.next_offset
    assert got == [o for o in range(500) if o % 3 == 1]
    client.close()


def test_stored_messages_convert_to_the_readers_schema() -> None:
    body = stored(np.arange(5, 10), tags=["TagA", None, "TagA", "TagAB", "TagA"])
    table = stored_to_table([memoryview(body)], FilterSpec("tag", "TagA"))
    assert table.column("queue_offset").to_pylist() == [5, 7, 9]  # TagAB is not TagA (hash re-check)
    row = table.slice(0, 1).to_pylist()[0]
    assert row["message_id"] == f"{5:032X}" and row["keys"] == ["k5", "x"] and row["tag"] == "TagA"
    assert row["born_host"] == "10.0.0.7" and row["reconsume_times"] == 0 and row["message_type"] == 1
    batches = to_record_batches(table, "t", "broker-a", 0)
    assert batches[0].schema == ARROW_SCHEMA
    # the 5.x proxy's producers: their born host travels in __BORNHOST
    props = encode_properties(
        {"UNIQ_KEY": "ID1", "__BORNHOST": "192.168.1.9", "__SHARDINGKEY": "g1", "a": "b"}
    )
    one = encode_stored(topic="t", queue_id=0, queue_offset=[0], commitlog_offset=[0], body=[b"x"],
                        properties=[props], born_host="10.0.0.7:5555")  # fmt: skip
    row = stored_to_table([one]).to_pylist()[0]
    assert (row["born_host"], row["message_group"], row["message_type"], row["properties"]) == (
        "192.168.1.9",
        "g1",
        2,
        [("a", "b")],
    )


def test_born_hosts_lose_their_ports_whether_one_producer_or_several() -> None:
    def born(hosts: list[str]) -> list[str]:
        n = len(hosts)
        body = encode_stored(topic="t", queue_id=0, queue_offset=list(range(n)), commitlog_offset=list(range(n)),
                             body=[b"x"] * n, born_host=pa.array(hosts, pa.string()))  # fmt: skip
        return stored_to_table([body]).column("born_host").to_pylist()

    assert born(["10.0.0.7:5555"] * 3) == ["10.0.0.7"] * 3  # one host: rewritten once, repeated
    assert born(["10.0.0.7:5555", "10.0.0.8:1", "[::1]:9876"]) == ["10.0.0.7", "10.0.0.8", "::1"]
    assert born(["[fe80::1]:7"] * 2) == ["fe80::1"] * 2


def _server_tls(cert: tuple) -> tuple[bytes, ssl.SSLContext]:
    """The certificate fixture's PEM and a server context serving it."""
    cert_pem, key_pem, cert_file = cert
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    key_file = cert_file.with_name("key.pem")
    key_file.write_bytes(key_pem)
    ctx.load_cert_chain(cert_file, key_file)
    return cert_pem, ctx


def test_tls_with_the_cas_certificate_and_a_clear_error_without_tls(servers, certificate) -> None:  # noqa: F811
    cert_pem, ctx = _server_tls(certificate)
    srv = servers(lambda cmd: cmd.response(0, ext_fields={"offset": "3"}), tls=ctx)
    q = RouteEntry(MessageQueue("t", "broker-a", 0), srv.address)
    client = RemotingClient(ClientConfig(name_server="127.0.0.1:1", tls=True, tls_ca_pem=cert_pem))
    assert client.max_offset(q, timeout_ms=5000) == 3
    untrusted = RemotingClient(ClientConfig(name_server="127.0.0.1:1", tls=True))
    with pytest.raises(ConnectorError, match=r"TLS handshake failed.*tlsCaFile"):
        untrusted.max_offset(q, timeout_ms=3000)
    plain = RemotingClient(ClientConfig(name_server="127.0.0.1:1"))
    with pytest.raises(RetriesExhaustedError, match="set option 'tls' to 'true'"):
        plain.max_offset(q, timeout_ms=1500)
    for c in (client, untrusted, plain):
        c.close()


def test_a_tls_connection_reads_while_other_threads_send(servers, certificate) -> None:  # noqa: F811
    """Over TLS the connection's reader thread waits for answers while 4 threads send 8 KiB requests, 1,200
    in all: every answer comes back to its request, whole (an `ssl.SSLSocket` read and written at once by
    two threads can lose or garble records; `TlsStream` keeps one TLS object call at a time). This load did
    not make the former `SSLSocket` fail here; a CI run against a real broker lost one answer that way."""
    cert_pem, ctx = _server_tls(certificate)
    srv = servers(lambda cmd: cmd.response(0, body=bytes(cmd.body)[::-1]), tls=ctx)
    client_ctx = ssl.create_default_context(cadata=cert_pem.decode())
    pool = ConnectionPool(client_ctx)
    conn = pool.get(srv.address, 5.0)
    failures: list[str] = []

    def sender(k: int) -> None:
        for i in range(300):
            body = (b"%d-%d;" % (k, i)) * 1024
            resp = conn.request(10, {"n": str(i)}, body[:8192]).result(timeout=30)
            if bytes(resp.body) != body[:8192][::-1]:
                failures.append(f"thread {k} request {i}: a wrong answer")

    threads = [threading.Thread(target=sender, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads) and failures == []
    pool.close()


def test_one_pull_gathers_a_bounded_number_of_bytes(servers, monkeypatch) -> None:
    import connector.clients.remoting as remoting

    monkeypatch.setattr(remoting, "PULL_MAX_BYTES", 64 * 1024)  # ~260 records of ~250 bytes
    srv = servers(CappedBroker(5000))
    client = RemotingClient(ClientConfig(name_server="127.0.0.1:1"))
    q = RouteEntry(MessageQueue("t", "broker-a", 0), srv.address)
    res = client.pull(q, 0, 5000, group="g")
    n = res.table.num_rows
    assert 200 < n < 5000 and res.next_offset == n
    assert res.table.column("queue_offset").to_pylist() == list(range(n))
    client.close()


def test_acl_on_the_emulators_remoting_front_end() -> None:
    """Signed requests within the account's permissions pass; wrong credentials are UNAUTHORIZED and a
    missing permission FORBIDDEN (AccessDeniedError naming the endpoint and the reason); a send refused
    fails fast."""
    from broker_emulator import Emulator
    from connector.errors import ErrorKind, SendFailedError
    from connector.options import parse_writer_options
    from connector.producer import Producer
    from connector.sink_rows import RowChecker

    acl = {
        "accounts": [
            {"accessKey": "app", "secretKey": "app-secret", "topics": {"orders": "PUB_SUB"}, "groups": {"readers": "SUB"}},
            {"accessKey": "reader", "secretKey": "reader-secret", "topics": {"orders": "SUB"}, "groups": {"*": "SUB"}},
        ]
    }  # fmt: skip
    with Emulator(brokers=1, queues=2, acl=acl) as emu:
        emu.create_topic("orders", 2)

        def client(ak: str, sk: str) -> RemotingClient:
            return RemotingClient(ClientConfig(name_server=emu.name_server, access_key=ak, secret_key=sk))

        app = client("app", "app-secret")
        options = parse_writer_options(
            {"nameServer": emu.name_server, "topic": "orders", "accessKey": "app", "secretKey": "app-secret"}
        )
        producer = Producer(options, client=app)
        for rows in RowChecker({"body": "body"}, "orders", 1 << 20).check(
            pa.record_batch([pa.array([b"a", b"b", b"c"])], names=["body"]), 0
        ):
            producer.send(rows)
        assert producer.flush().messages == 3
        q = app.route("orders")[0]
        total = sum(app.pull(e, 0, 10, group="readers").table.num_rows for e in app.route("orders"))
        assert total == 3
        app.commit("readers", q, 1)
        assert app.get_committed("readers", q) == 1
        with pytest.raises(AccessDeniedError) as e:
            app.pull(q, 0, 10, group="others")
        assert e.value.kind == ErrorKind.FORBIDDEN and "group 'others'" in str(e.value)
        wrong = client("app", "nope")
        with pytest.raises(AccessDeniedError) as e:
            wrong.max_offset(q)
        assert e.value.kind == ErrorKind.UNAUTHORIZED and q.endpoint in str(e.value)
        reader = client("reader", "reader-secret")
        options = parse_writer_options(
            {
                "nameServer": emu.name_server,
                "topic": "orders",
                "accessKey": "reader",
                "secretKey": "reader-secret",
            }
        )
        producer = Producer(options, client=reader)
        started = time.monotonic()
        with pytest.raises(SendFailedError, match=r"was rejected: NO_PERMISSION \(16\).*lacks PUB"):
            for rows in RowChecker({"body": "body"}, "orders", 1 << 20).check(
                pa.record_batch([pa.array([b"x"])], names=["body"]), 0
            ):
                producer.send(rows)
            producer.flush()
        assert time.monotonic() - started < 2
        for c in (app, wrong, reader):
            c.close()


def _one_queue_topic(emu, topic: str, bodies: list[bytes]) -> tuple[RemotingClient, RouteEntry]:
    """`topic` with one queue on the emulator, holding `bodies` sent by the connector's producer over
    remoting; the client that sent them and the queue's route entry."""
    from connector.options import parse_writer_options
    from connector.producer import Producer
    from connector.sink_rows import RowChecker

    emu.create_topic(topic, 1)
    client = RemotingClient(ClientConfig(name_server=emu.name_server))
    producer = Producer(parse_writer_options({"nameServer": emu.name_server, "topic": topic}), client=client)
    for rows in RowChecker({"body": "body"}, topic, 1 << 20).check(
        pa.record_batch([pa.array(bodies, pa.binary())], names=["body"]), 0
    ):
        producer.send(rows)
    assert producer.flush().messages == len(bodies)
    return client, client.route(topic)[0]


def test_pipelined_pulls_through_an_emulator_answering_32_at_a_time() -> None:
    """The real-broker path end to end on the emulator (`max_transfer_count=32`, a real broker's cap): one
    pull() of 3,000 messages is pipelined, its answers come from the queue's read-ahead, and the rows are
    the messages sent, in order."""
    from broker_emulator import Emulator

    with Emulator(brokers=1, queues=1, max_transfer_count=32) as emu:
        bodies = [b"body-%d" % i * (1 + i % 7) for i in range(3000)]
        client, q = _one_queue_topic(emu, "capped", bodies)
        res = client.pull(q, 0, 3000, group="g")
        assert (res.status, res.next_offset) == (PullStatus.FOUND, 3000)
        assert res.table.column("queue_offset").to_pylist() == list(range(3000))
        assert res.table.column("body").to_pylist() == bodies
        assert emu.server.record_cache.hits >= 3000 // 32 - 3000 // 4096 - 2
        client.close()


def test_the_pull_window_fits_the_byte_cap() -> None:
    """Answers of ~10 KB leave room for a full window; answers of one large message, for as many as fit."""
    assert _window(8 << 20, 10_000, 1) == PULL_WINDOW == 64
    assert _window(192 * 1024, 65_636, 1) == 3
    assert _window(100, 65_636, 1) == 1
    assert _window(8 << 20, 0, 0) == PULL_WINDOW  # nothing received yet (or only filtered answers)


def test_a_pipeline_of_large_messages_asks_for_about_its_byte_cap(monkeypatch) -> None:
    """Through an emulator answering one message per pull: a pull() capped at 256 KiB of 64 KiB messages
    sends its sub-pulls a few at a time, not a full window of 64 KiB answers."""
    from broker_emulator import Emulator

    windows: list[int] = []
    request_many = RemotingConnection.request_many

    def recording(self, items, head, timeout_s=30.0):  # type: ignore[no-untyped-def]
        windows.append(len(items))
        return request_many(self, items, head, timeout_s)

    with Emulator(brokers=1, queues=1, max_transfer_count=1) as emu:
        bodies = [bytes([i]) * (64 * 1024) for i in range(40)]
        client, q = _one_queue_topic(emu, "large", bodies)
        monkeypatch.setattr(RemotingConnection, "request_many", recording)
        res = client.pull(q, 0, 40, group="g", max_bytes=256 * 1024)
        assert windows == [3]  # the first answer (one ~64 KiB message) leaves room for three more
        assert res.table.column("queue_offset").to_pylist() == [0, 1, 2, 3]
        assert res.table.column("body").to_pylist() == bodies[:4]
        assert res.next_offset == 4
        client.close()
