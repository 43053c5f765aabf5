"""connector.clients.grpc_v2 (GrpcClient) against the real emulator over gRPC: routes, queue and group offsets, bulk and standard
pulls (same MESSAGE_SCHEMA table), fallback when BulkPull is missing, the clear error when PullMessage is
missing (Apache's proxy), retries of transient failures, in-band errors, headers and the process cache."""

from __future__ import annotations

import hashlib
import hmac
import pickle
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures

import grpc
import pyarrow as pa
import pytest

from broker_emulator import Emulator
from connector.clients import PullStatus, close_clients, get_client
from connector.clients.base import SEND_OK, SendStatus
from connector.clients.grpc_v2 import GrpcClient, _SendCall
from connector.config import ClientConfig, FilterSpec
from connector.errors import (
    ConnectorError,
    ErrorKind,
    RetriesExhaustedError,
    RocketMQError,
    UnsupportedEndpointError,
)
from connector.options import parse_reader_options
from connector.queues import MessageQueue, RouteEntry
from rocketmq_protocol.grpc_v2 import definition_pb2 as d
from rocketmq_protocol.grpc_v2 import service_pb2 as s
from rocketmq_protocol.grpc_v2 import service_pb2_grpc as sg
from rocketmq_protocol.hashing import java_string_hash
from rocketmq_protocol.message_schema import MESSAGE_SCHEMA
from tests.support.helpers import endpoints_by_broker, make_message, send, send_to_queue, unique_name

GROUP = "connector-client-test"
BROKER_A = "broker-a"


def entry(topic: str, broker: str, queue_id: int, endpoint: str) -> RouteEntry:
    return RouteEntry(MessageQueue(topic, broker, queue_id), endpoint)


@pytest.fixture
def client(rocketmq_emulator) -> Iterator[GrpcClient]:
    c = GrpcClient(ClientConfig(rocketmq_emulator.endpoints))
    try:
        yield c
    finally:
        c.close()
        for b in rocketmq_emulator.brokers:
            b.clear_faults()


@pytest.fixture
def queue_a0(rocketmq_emulator, topic) -> RouteEntry:
    return entry(topic, BROKER_A, 0, endpoints_by_broker(rocketmq_emulator)[BROKER_A])


def _fill(
    v2_stub, rocketmq_emulator, topic: str, n: int, queue_id: int = 0, broker: str = BROKER_A, **kw
) -> list[int]:
    return send_to_queue(v2_stub(endpoints_by_broker(rocketmq_emulator)[broker]), topic, queue_id, n, **kw)


# ------------------------------------------------------------------------------------------ route
def test_route_lists_every_queue_in_order(rocketmq_emulator, topic, client) -> None:
    route = client.route(topic)
    eps = endpoints_by_broker(rocketmq_emulator)
    assert [q.queue for q in route] == [
        MessageQueue(topic, b, i) for b in ("broker-a", "broker-b") for i in range(4)
    ]
    assert all(q.endpoint == eps[q.queue.broker] and q.readable and q.writable for q in route)
    assert pickle.loads(pickle.dumps(route)) == route


def test_route_skips_a_dead_endpoint(rocketmq_emulator, topic) -> None:
    c = GrpcClient(ClientConfig("127.0.0.1:1;" + rocketmq_emulator.endpoints))
    try:
        assert len(c.route(topic, timeout_ms=5000)) == 8
    finally:
        c.close()


def test_route_unknown_topic_is_an_in_band_error(rocketmq_emulator, client) -> None:
    with pytest.raises(RocketMQError) as e:
        client.route(unique_name("missing"))
    assert e.value.code == d.TOPIC_NOT_FOUND and e.value.code_name == "TOPIC_NOT_FOUND"
    assert e.value.kind == ErrorKind.TOPIC_NOT_FOUND
    assert e.value.endpoint in rocketmq_emulator.endpoints and "QueryRoute" in str(e.value)
    copy = pickle.loads(pickle.dumps(e.value))
    assert (copy.code, copy.kind, str(copy)) == (d.TOPIC_NOT_FOUND, ErrorKind.TOPIC_NOT_FOUND, str(e.value))


# ------------------------------------------------------------------------------------------ offsets
def test_queue_offsets(rocketmq_emulator, topic, client, queue_a0, v2_stub) -> None:
    assert (client.min_offset(queue_a0), client.max_offset(queue_a0)) == (0, 0)
    before = int(time.time() * 1000) - 1
    _fill(v2_stub, rocketmq_emulator, topic, 5)
    assert (client.min_offset(queue_a0), client.max_offset(queue_a0)) == (0, 5)
    assert client.offset_for_timestamp(queue_a0, before) == 0
    assert client.offset_for_timestamp(queue_a0, int(time.time() * 1000) + 60_000) == 5


@pytest.mark.parametrize("protocol", ["grpc", "remoting"])
def test_bounds_are_asked_once_per_broker(rocketmq_emulator, topic, v2_stub, protocol, monkeypatch) -> None:
    """`fetch_bounds` / `fetch_max_offsets` ask each broker for all its queues of the topic at once (the
    extension's QueueOffsets, remoting's GET_TOPIC_STATS_INFO), not each queue, and agree with the
    per-queue answers."""
    from connector.clients.remoting import RemotingClient
    from connector.positions import fetch_bounds, fetch_max_offsets

    _fill(v2_stub, rocketmq_emulator, topic, 3, queue_id=1)
    _fill(v2_stub, rocketmq_emulator, topic, 2, queue_id=2, broker="broker-b")
    if protocol == "grpc":
        c: GrpcClient | RemotingClient = GrpcClient(ClientConfig(rocketmq_emulator.endpoints))
    else:
        c = RemotingClient(ClientConfig(name_server=rocketmq_emulator.name_server))
    try:
        route = c.route(topic)
        expected = {q.queue: (c.min_offset(q), c.max_offset(q)) for q in route}
        assert expected[MessageQueue(topic, BROKER_A, 1)] == (0, 3)
        assert expected[MessageQueue(topic, "broker-b", 2)] == (0, 2)
        calls: list[str] = []
        for name in ("min_offset", "max_offset", "broker_bounds"):
            real = getattr(c, name)
            monkeypatch.setattr(c, name, lambda *a, _r=real, _n=name, **k: calls.append(_n) or _r(*a, **k))
        assert fetch_bounds(c, route, 5000) == expected
        assert fetch_max_offsets(c, route, 5000) == {k: hi for k, (_, hi) in expected.items()}
        assert calls == ["broker_bounds"] * 4
    finally:
        c.close()


def test_bounds_fall_back_to_query_offset_without_the_extension(
    rocketmq_emulator, topic, v2_stub, serve
) -> None:
    from connector.positions import fetch_max_offsets

    _fill(v2_stub, rocketmq_emulator, topic, 3, queue_id=1)
    endpoint = serve(_Forwarder(endpoints_by_broker(rocketmq_emulator)[BROKER_A]))
    c = GrpcClient(ClientConfig(endpoint, access_key="AK", secret_key="SK"))
    queues = [entry(topic, BROKER_A, i, endpoint) for i in range(4)]
    try:
        assert c.broker_bounds(queues) is None
        assert endpoint in c._no_queue_offsets  # remembered: not asked again
        assert fetch_max_offsets(c, queues, 5000) == {
            q.queue: 3 if q.queue.queue_id == 1 else 0 for q in queues
        }
    finally:
        c.close()


def test_group_offsets(client, queue_a0) -> None:
    group = unique_name("g")
    assert client.get_committed(group, queue_a0) is None
    client.commit(group, queue_a0, 42)
    assert client.get_committed(group, queue_a0) == 42
    with pytest.raises(RocketMQError) as e:
        client.commit(group, queue_a0, -1)
    assert e.value.code == d.ILLEGAL_OFFSET and e.value.rpc == "UpdateOffset"


# ------------------------------------------------------------------------------------------ pulls
def _send_rich(rocketmq_emulator, v2_stub, topic: str) -> None:
    msgs = [
        make_message(topic, b"plain", queue_id=1),
        make_message(topic, b"tagged", tag="TagA", keys=["k1", "k2"], properties={"p": "1"}, queue_id=1),
        make_message(topic, b"fifo", tag="TagB", message_group="g1", queue_id=1),
    ]
    assert (
        send(v2_stub(endpoints_by_broker(rocketmq_emulator)[BROKER_A]), msgs, explicit=True).status.code
        == d.OK
    )


@pytest.mark.parametrize("protocol", ["bulk", "standard", "auto"])
def test_pull_statuses(rocketmq_emulator, topic, client, queue_a0, v2_stub, protocol: str) -> None:
    _fill(v2_stub, rocketmq_emulator, topic, 10, tags=["TagA"] * 3 + ["TagB"] * 7)
    r = client.pull(queue_a0, 3, 4, group=GROUP, protocol=protocol)
    assert r.status == PullStatus.FOUND and r.next_offset == 7
    assert r.table.schema == MESSAGE_SCHEMA and r.table.column("queue_offset").to_pylist() == [3, 4, 5, 6]
    assert r.protocol == ("standard" if protocol == "standard" else "bulk")
    at_end = client.pull(queue_a0, 10, 4, group=GROUP, protocol=protocol)
    assert (at_end.status, at_end.next_offset, at_end.table.num_rows) == (PullStatus.NO_NEW_MSG, 10, 0)
    beyond = client.pull(queue_a0, 12, 4, group=GROUP, protocol=protocol)
    assert (beyond.status, beyond.next_offset) == (PullStatus.OFFSET_ILLEGAL, 10)
    filtered = client.pull(queue_a0, 3, 32, group=GROUP, protocol=protocol, filter=FilterSpec("tag", "TagA"))
    assert (filtered.status, filtered.next_offset) == (PullStatus.NO_MATCHED_MSG, 10)
    tag_b = client.pull(queue_a0, 0, 32, group=GROUP, protocol=protocol, filter=FilterSpec("tag", "TagB"))
    assert tag_b.table.column("queue_offset").to_pylist() == list(range(3, 10))
    if protocol != "standard":
        assert (r.min_offset, r.max_offset) == (0, 10)


def test_standard_pull_yields_the_bulk_table(rocketmq_emulator, topic, client, v2_stub) -> None:
    _send_rich(rocketmq_emulator, v2_stub, topic)
    queue = entry(topic, BROKER_A, 1, endpoints_by_broker(rocketmq_emulator)[BROKER_A])
    bulk = client.pull(queue, 0, 32, group=GROUP, protocol="bulk").table
    standard = client.pull(queue, 0, 32, group=GROUP, protocol="standard").table
    assert bulk.num_rows == 3
    assert standard.equals(bulk), (standard.to_pylist(), bulk.to_pylist())
    rows = standard.to_pylist()
    assert (
        rows[1]["tag"] == "TagA" and rows[1]["keys"] == ["k1", "k2"] and rows[1]["properties"] == [("p", "1")]
    )
    assert rows[1]["tag_code"] == java_string_hash("TagA") == 2598919
    assert rows[2]["message_group"] == "g1" and rows[0]["tag"] is None and rows[0]["tag_code"] == 0


def test_long_polling_pull_wakes_on_arrival(rocketmq_emulator, topic, client, queue_a0, v2_stub) -> None:
    timer = threading.Timer(0.3, lambda: _fill(v2_stub, rocketmq_emulator, topic, 1))
    timer.start()
    t0 = time.monotonic()
    r = client.pull(queue_a0, 0, 8, group=GROUP, long_polling_ms=5000, timeout_ms=10_000)
    timer.join()
    assert r.status == PullStatus.FOUND and r.table.num_rows == 1
    assert time.monotonic() - t0 < 3


def test_pull_bad_queue_is_an_in_band_error(rocketmq_emulator, topic, client) -> None:
    queue = entry(topic, BROKER_A, 99, endpoints_by_broker(rocketmq_emulator)[BROKER_A])
    for protocol in ("bulk", "standard"):
        t0 = time.monotonic()
        with pytest.raises(RocketMQError) as e:
            client.pull(queue, 0, 8, group=GROUP, protocol=protocol)
        assert e.value.code == d.BAD_REQUEST and queue.endpoint in str(e.value)
        assert time.monotonic() - t0 < 2  # not retried


def test_namespace(rocketmq_emulator, v2_stub) -> None:
    name = unique_name("nst")
    rocketmq_emulator.create_topic(f"ns1%{name}")
    ep = endpoints_by_broker(rocketmq_emulator)[BROKER_A]
    send_to_queue(v2_stub(ep), f"ns1%{name}", 2, 3)
    c = GrpcClient(ClientConfig(rocketmq_emulator.endpoints, namespace="ns1"))
    try:
        route = c.route(name)
        assert route[0].queue.topic == name and len(route) == 8
        q = next(q for q in route if q.queue == MessageQueue(name, BROKER_A, 2))
        assert c.max_offset(q) == 3
        assert c.pull(q, 0, 8, group=GROUP, protocol="bulk").table.num_rows == 3
        assert c.pull(q, 0, 8, group=GROUP, protocol="standard").table.num_rows == 3
        c.commit(GROUP, q, 2)
        assert c.get_committed(GROUP, q) == 2
    finally:
        c.close()


# ------------------------------------------------------------------------------------------ retries
def test_down_broker_exhausts_retries_with_a_clear_error(rocketmq_emulator, topic, client, queue_a0) -> None:
    rocketmq_emulator.broker(BROKER_A).set_fault(down=True)
    t0 = time.monotonic()
    with pytest.raises(RetriesExhaustedError) as e:
        client.pull(queue_a0, 0, 8, group=GROUP, timeout_ms=600)
    elapsed = time.monotonic() - t0
    assert 0.5 < elapsed < 3
    msg = str(e.value)
    assert queue_a0.endpoint in msg and "BulkPull" in msg and "UNAVAILABLE" in msg and "600 ms" in msg


def test_transient_outage_is_retried(rocketmq_emulator, topic, client, queue_a0, v2_stub) -> None:
    _fill(v2_stub, rocketmq_emulator, topic, 2)
    rocketmq_emulator.broker(BROKER_A).set_fault(down=True)
    timer = threading.Timer(0.4, lambda: rocketmq_emulator.broker(BROKER_A).set_fault(down=False))
    timer.start()
    try:
        assert client.max_offset(queue_a0, timeout_ms=10_000) == 2
        assert client.pull(queue_a0, 0, 8, group=GROUP, timeout_ms=10_000).table.num_rows == 2
    finally:
        timer.join()


# ------------------------------------------------------------------------------------------ other servers
class _Forwarder(sg.MessagingServiceServicer):
    """A v2-only server (no extension service): forwards PullMessage/QueryOffset to a real broker, answers
    QueryOffset with TOO_MANY_REQUESTS `busy` times first, and records every call's metadata."""

    def __init__(self, target: str, busy: int = 0) -> None:
        self.channel = grpc.insecure_channel(target)
        self.stub = sg.MessagingServiceStub(self.channel)
        self.busy = busy
        self.calls: list[tuple[str, dict[str, str]]] = []

    def _md(self, rpc: str, context) -> list[tuple[str, str]]:
        md = {
            m.key: m.value
            for m in context.invocation_metadata()
            if m.key.startswith(("x-mq", "authorization"))
        }
        self.calls.append((rpc, md))
        return list(md.items())

    def PullMessage(self, request, context):
        yield from self.stub.PullMessage(request, metadata=self._md("PullMessage", context), timeout=10)

    def QueryOffset(self, request, context):
        md = self._md("QueryOffset", context)
        if self.busy > 0:
            self.busy -= 1
            return s.QueryOffsetResponse(status=d.Status(code=d.TOO_MANY_REQUESTS, message="busy"))
        return self.stub.QueryOffset(request, metadata=md, timeout=10)


@pytest.fixture
def serve() -> Iterator[Callable[[sg.MessagingServiceServicer], str]]:
    """Starts a plain grpc server with one MessagingService servicer; returns its endpoint."""
    servers: list[grpc.Server] = []

    def start(servicer: sg.MessagingServiceServicer) -> str:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        sg.add_MessagingServiceServicer_to_server(servicer, server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        servers.append(server)
        return f"127.0.0.1:{port}"

    yield start
    for server in servers:
        server.stop(0)


# ------------------------------------------------------------------------------------------ pull channel
def test_bulk_pulls_go_over_the_emulators_pull_channel(
    rocketmq_emulator, topic, client, queue_a0, v2_stub
) -> None:
    _fill(v2_stub, rocketmq_emulator, topic, 10, tags=["TagA"] * 3 + ["TagB"] * 7)
    broker = rocketmq_emulator.cluster.broker(BROKER_A)
    address = f"{broker.host}:{broker.remoting_port}"
    grpc_only = GrpcClient(ClientConfig(rocketmq_emulator.endpoints, pull_channel=False))
    try:
        for offset, flt in ((0, None), (2, FilterSpec("tag", "TagB")), (10, None)):
            over_channel = client.pull(queue_a0, offset, 32, group=GROUP, filter=flt)
            over_grpc = grpc_only.pull(queue_a0, offset, 32, group=GROUP, filter=flt)
            fields = ("status", "next_offset", "min_offset", "max_offset", "protocol")
            assert [getattr(over_channel, f) for f in fields] == [getattr(over_grpc, f) for f in fields]
            assert over_channel.table.equals(over_grpc.table)
        assert grpc_only._pull_channels._addresses == {}  # never asked
    finally:
        grpc_only.close()
    assert client._pull_channels._addresses == {queue_a0.endpoint: address}
    conn = client._pull_channels._connections().get(address)
    assert not conn.closed and conn.address == address  # the one the pulls opened


def test_held_pull_over_the_pull_channel_answers_on_arrival(
    rocketmq_emulator, topic, client, queue_a0, v2_stub
) -> None:
    _fill(v2_stub, rocketmq_emulator, topic, 1)
    client.pull(queue_a0, 0, 8, group=GROUP)  # the channel is open
    with futures.ThreadPoolExecutor(1) as pool:
        t0 = time.monotonic()
        held = pool.submit(client.pull, queue_a0, 1, 8, group=GROUP, long_polling_ms=5000)
        time.sleep(0.3)
        assert not held.done()
        _fill(v2_stub, rocketmq_emulator, topic, 1)
        r = held.result(timeout=10)
    assert r.status == PullStatus.FOUND and r.table.column("queue_offset").to_pylist() == [1]
    assert time.monotonic() - t0 < 3


def test_an_unreachable_pull_channel_leaves_pulls_to_grpc(
    rocketmq_emulator, topic, client, queue_a0, v2_stub
) -> None:
    _fill(v2_stub, rocketmq_emulator, topic, 3)
    with socket.socket() as sock:  # a port nobody listens on once closed
        sock.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{sock.getsockname()[1]}"
    client._pull_channels._addresses[queue_a0.endpoint] = dead
    r = client.pull(queue_a0, 0, 8, group=GROUP)
    assert (r.status, r.table.num_rows, r.protocol) == (PullStatus.FOUND, 3, "bulk")
    assert client._pull_channels._addresses[queue_a0.endpoint] is None  # from now on over gRPC


def test_sends_go_over_the_pull_channel_and_store_what_grpc_stores(
    rocketmq_emulator, topic, client, queue_a0
) -> None:
    """The same encoded request sent over the channel and over gRPC: both acknowledged OK and stored alike
    (message ids and offsets aside); the channel is the one the sends opened."""
    from connector.clients.pull_channel import ChannelSend
    from connector.sink_rows import RowChecker

    batch = pa.record_batch(
        [pa.array([b"a", b"bb", b"ccc"]), pa.array(["t1", "t2", None])], names=["body", "tag"]
    )
    grpc_only = GrpcClient(ClientConfig(rocketmq_emulator.endpoints, pull_channel=False))
    try:
        for c, via in ((client, ChannelSend), (grpc_only, _SendCall)):
            (rows,) = RowChecker({"body": "body", "tag": "tag"}, topic, 4 << 20).check(batch, 0)
            encoded = c.send_encoder("producers").encode(rows)
            call = c.send_async(queue_a0.endpoint, encoded.payload(slice(0, 3), queue_a0.queue), 3, 5.0)
            assert isinstance(call, via)
            assert call.outcome() == SEND_OK
        assert grpc_only._pull_channels._addresses == {}
    finally:
        grpc_only.close()
    broker = rocketmq_emulator.cluster.broker(BROKER_A)
    assert client._pull_channels._addresses == {queue_a0.endpoint: f"{broker.host}:{broker.remoting_port}"}
    table = client.pull(queue_a0, 0, 32, group=GROUP).table
    assert table.column("queue_offset").to_pylist() == list(range(6))
    same = ("body", "tag", "keys", "properties", "message_type", "born_host")
    first, second = table.slice(0, 3).select(same), table.slice(3, 3).select(same)
    assert first.equals(second) and first.column("body").to_pylist() == [b"a", b"bb", b"ccc"]


def test_a_refused_channel_send_is_retried_over_grpc(rocketmq_emulator, topic, client, queue_a0) -> None:
    """A channel that answers the send with an error (here: an emulator port that is no channel, the name
    server's) makes that send retryable and the endpoint's later sends go over gRPC."""
    from connector.sink_rows import RowChecker

    client._pull_channels._addresses[queue_a0.endpoint] = rocketmq_emulator.name_server
    (rows,) = RowChecker({"body": "body"}, topic, 4 << 20).check(
        pa.record_batch([pa.array([b"x"])], names=["body"]), 0
    )
    payload = client.send_encoder("producers").encode(rows).payload(slice(0, 1), queue_a0.queue)
    out = client.send_async(queue_a0.endpoint, payload, 1, 5.0).outcome()
    assert out is not None and out.status is SendStatus.RETRYABLE and out.label == "CHANNEL_REFUSED"
    assert "(code 3: " in out.reason and "not supported" in out.reason  # REQUEST_CODE_NOT_SUPPORTED
    assert client._pull_channels._addresses[queue_a0.endpoint] is None
    again = client.send_async(queue_a0.endpoint, payload, 1, 5.0)
    assert isinstance(again, _SendCall) and again.outcome() == SEND_OK


def test_no_pull_channel_with_credentials_or_tls(rocketmq_emulator) -> None:
    """The channel carries neither signatures nor TLS, so such clients never use it."""
    for config in (
        ClientConfig(rocketmq_emulator.endpoints, access_key="AK", secret_key="SK"),
        ClientConfig(rocketmq_emulator.endpoints, tls=True),
        ClientConfig(rocketmq_emulator.endpoints, pull_channel=False),
    ):
        c = GrpcClient(config)
        try:
            assert c._pull_channels.address("any:1", lambda: "127.0.0.1:1") is None
        finally:
            c.close()


def test_auto_falls_back_to_pull_message_without_the_extension(
    rocketmq_emulator, topic, v2_stub, serve
) -> None:
    _fill(v2_stub, rocketmq_emulator, topic, 3)
    endpoint = serve(_Forwarder(endpoints_by_broker(rocketmq_emulator)[BROKER_A]))
    c = GrpcClient(ClientConfig(endpoint, access_key="AK", secret_key="SK"))
    queue = entry(topic, BROKER_A, 0, endpoint)
    try:
        first = c.pull(queue, 0, 8, group=GROUP)
        assert first.protocol == "standard" and first.table.num_rows == 3
        assert endpoint in c._no_bulk  # remembered: later pulls go straight to PullMessage
        assert c.pull(queue, 1, 8, group=GROUP).table.column("queue_offset").to_pylist() == [1, 2]
        with pytest.raises(UnsupportedEndpointError, match="BulkPull answered UNIMPLEMENTED"):
            c.pull(queue, 0, 8, group=GROUP, protocol="bulk")
    finally:
        c.close()


def test_headers_and_signature(rocketmq_emulator, topic, serve) -> None:
    forwarder = _Forwarder(endpoints_by_broker(rocketmq_emulator)[BROKER_A])
    endpoint = serve(forwarder)
    c = GrpcClient(ClientConfig(endpoint, access_key="AK", secret_key="SK", namespace=""))
    try:
        c.pull(entry(topic, BROKER_A, 0, endpoint), 0, 8, group=GROUP, protocol="standard")
    finally:
        c.close()
    _, md = forwarder.calls[-1]
    assert md["x-mq-language"] == "PYTHON" and md["x-mq-protocol"] == "v2"
    host, pid, suffix = md["x-mq-client-id"].split("@")
    assert host and pid.isdigit() and len(suffix) == 32
    assert time.strptime(md["x-mq-date-time"], "%Y%m%dT%H%M%SZ")
    assert md["x-mq-request-id"]
    signature = hmac.new(b"SK", md["x-mq-date-time"].encode(), hashlib.sha1).hexdigest()
    assert md["authorization"] == (
        f"MQv2-HMAC-SHA1 Credential=AK, SignedHeaders=x-mq-date-time, Signature={signature}"
    )
    anonymous = GrpcClient(ClientConfig(endpoint))
    assert "authorization" not in dict(anonymous.metadata())


def test_in_band_too_many_requests_is_retried(rocketmq_emulator, topic, v2_stub, serve) -> None:
    _fill(v2_stub, rocketmq_emulator, topic, 4)
    endpoint = serve(_Forwarder(endpoints_by_broker(rocketmq_emulator)[BROKER_A], busy=3))
    c = GrpcClient(ClientConfig(endpoint))
    try:
        assert c.max_offset(entry(topic, BROKER_A, 0, endpoint), timeout_ms=5000) == 4
    finally:
        c.close()
    always_busy = serve(_Forwarder(endpoints_by_broker(rocketmq_emulator)[BROKER_A], busy=10**6))
    c = GrpcClient(ClientConfig(always_busy))
    try:
        with pytest.raises(RetriesExhaustedError, match="TOO_MANY_REQUESTS"):
            c.max_offset(entry(topic, BROKER_A, 0, always_busy), timeout_ms=400)
    finally:
        c.close()


def test_endpoint_without_pull_rpcs_fails_clearly(topic, serve) -> None:
    endpoint = serve(sg.MessagingServiceServicer())  # every RPC answers UNIMPLEMENTED, like Apache's proxy
    c = GrpcClient(ClientConfig(endpoint))
    queue = entry(topic, BROKER_A, 0, endpoint)
    try:
        for call in (
            lambda: c.pull(queue, 0, 8, group=GROUP),
            lambda: c.pull(queue, 0, 8, group=GROUP, protocol="standard"),
            lambda: c.max_offset(queue),
            lambda: c.get_committed(GROUP, queue),
            lambda: c.commit(GROUP, queue, 1),
        ):
            t0 = time.monotonic()
            with pytest.raises(UnsupportedEndpointError) as e:
                call()
            assert time.monotonic() - t0 < 2
            msg = str(e.value)
            assert endpoint in msg and "PullMessage, GetOffset, UpdateOffset and QueryOffset" in msg
        with pytest.raises(ConnectorError, match=r"QueryRoute on .* gRPC UNIMPLEMENTED"):
            c.route(topic)
    finally:
        c.close()


# ------------------------------------------------------------------------------------------ process cache
def test_get_client_is_cached_per_config_and_not_picklable(rocketmq_emulator) -> None:
    config = ClientConfig(rocketmq_emulator.endpoints)
    try:
        a = get_client(config)
        assert get_client(pickle.loads(pickle.dumps(config))) is a
        assert get_client(ClientConfig(rocketmq_emulator.endpoints, namespace="x")) is not a
        with pytest.raises(TypeError, match="not picklable"):
            pickle.dumps(a)
    finally:
        close_clients()
    assert get_client(config) is not a
    close_clients()


def test_messages_to_table_empty() -> None:
    from connector.clients.grpc_v2 import messages_to_table

    assert messages_to_table([]).schema == MESSAGE_SCHEMA
    assert isinstance(messages_to_table([]), pa.Table)


# ------------------------------------------------------------------------------------------ TLS
@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl CLI")
def test_tls_with_ca_file(tmp_path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    with Emulator(brokers=1, queues=2, tls_cert=cert.read_bytes(), tls_key=key.read_bytes()) as emu:
        emu.create_topic("tls_topic")
        opts = parse_reader_options(
            {"endpoints": emu.endpoints, "topic": "tls_topic", "tlscafile": str(cert)}, streaming=True
        )
        c = GrpcClient(opts.client_config)
        try:
            route = c.route("tls_topic", timeout_ms=5000)
            assert len(route) == 2 and c.max_offset(route[0]) == 0
        finally:
            c.close()
        plain = GrpcClient(ClientConfig(emu.endpoints))
        try:
            with pytest.raises(RetriesExhaustedError):
                plain.route("tls_topic", timeout_ms=500)
        finally:
            plain.close()


def test_a_stream_warns_once_while_its_topic_has_no_route(rocketmq_emulator, client, caplog) -> None:
    """A running stream's topic without a route (deleted, or its brokers restarting) is left out with one
    warning per outage, not one per trigger, and a second when it has a route again."""
    from connector.positions import discover_queues

    name = unique_name("unrouted")
    opts = parse_reader_options({"endpoints": rocketmq_emulator.endpoints, "topic": name}, streaming=True)
    with caplog.at_level("WARNING", logger="connector.positions"):
        assert discover_queues(client, opts, missing_ok=True) == {}
        assert discover_queues(client, opts, missing_ok=True) == {}
        rocketmq_emulator.create_topic(name, queues=2)
        assert len(discover_queues(client, opts, missing_ok=True)) == 2 * len(rocketmq_emulator.brokers)
        assert len(discover_queues(client, opts, missing_ok=True)) == 2 * len(rocketmq_emulator.brokers)
    said = [r.getMessage() for r in caplog.records if name in r.getMessage()]
    assert len(said) == 2, said
    assert "has no route now (deleted, or every broker serving it is down or restarting)" in said[0]
    assert said[1] == f"topic {name!r} has a route again"
    batch = parse_reader_options(
        {"endpoints": rocketmq_emulator.endpoints, "topic": name + "x"}, streaming=False
    )
    with pytest.raises(ConnectorError, match=f"topic '{name}x' of option 'topic' does not exist"):
        discover_queues(client, batch)  # a read's missing topic is an error
