"""Garbage, oversized and abusive traffic against a `serve` subprocess (bad input): random and
mutated request bytes on every RPC, random bytes on the TCP port, invalid UTF-8, oversized messages and
requests, huge batches, and thousands of held long polls. Each gets an error; the emulator never
crashes, keeps serving other clients, and returns to its resting thread count and memory."""

from __future__ import annotations

import asyncio
import random
import socket
import time
import uuid

import grpc
import psutil
import pytest
from google.protobuf import duration_pb2

from rocketmq_protocol.extension import pb, pb_grpc
from rocketmq_protocol.grpc_v2 import definition_pb2 as d
from rocketmq_protocol.grpc_v2 import service_pb2 as s
from rocketmq_protocol.grpc_v2 import service_pb2_grpc as sg
from tests.support.emulator_proc import EmulatorProcess
from tests.support.helpers import CLIENT_MD, EXPLICIT_MD, make_message, pull_v2, send

TOPIC = "garbage"
OTHER = "bystander"
QUEUES = 2
SEED = 20261122
BIG = 200 << 20  # client-side message limits above the emulator's 128 MiB
# gRPC codes an invalid request may get; UNAVAILABLE or a hang would mean the server is gone or stuck.
REJECTED = {
    grpc.StatusCode.INTERNAL,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.UNIMPLEMENTED,
}


@pytest.fixture(scope="module")
def served():
    emu = EmulatorProcess(
        "--brokers", "1", "--queues", str(QUEUES), "--in-memory", "--topic", f"{TOPIC}:{QUEUES}"
    )
    try:
        yield emu
    finally:
        assert emu.proc.poll() is None, f"the emulator died:\n{emu.output[-3000:]}"
        emu.stop()


@pytest.fixture
def channel(served):
    ch = grpc.insecure_channel(
        served.endpoints,
        options=[("grpc.max_send_message_length", BIG), ("grpc.max_receive_message_length", BIG)],
    )
    try:
        yield ch
    finally:
        ch.close()


def assert_serving(served, channel) -> None:
    """The process is alive and a normal send + pull round trip works."""
    assert served.proc.poll() is None, f"the emulator died:\n{served.output[-3000:]}"
    stub = sg.MessagingServiceStub(channel)
    body = uuid.uuid4().hex.encode()
    r = send(stub, [make_message(TOPIC, body, queue_id=1)], explicit=True)
    assert r.status.code == d.OK, r.status
    got = pull_v2(stub, TOPIC, 1, r.entries[0].offset)
    assert got.code == d.OK and got.messages[0].body == body


def _methods() -> list[tuple[str, bool, bool, type]]:
    """(path, request streaming, response streaming, response class) of every RPC the emulator serves."""
    out = []
    for module, svc_name in ((s, "MessagingService"), (pb, "EmulatorService")):
        svc = module.DESCRIPTOR.services_by_name[svc_name]
        for m in svc.methods:
            resp_cls = _message_class(m.output_type)
            out.append((f"/{svc.full_name}/{m.name}", m.client_streaming, m.server_streaming, resp_cls))
    return out


def _message_class(descriptor):
    from google.protobuf import message_factory

    return message_factory.GetMessageClass(descriptor)


def _valid_requests() -> dict[str, bytes]:
    """One well-formed request per RPC that matters, to be mutated byte by byte."""
    mq = d.MessageQueue(topic=d.Resource(name=TOPIC), id=0)
    g = d.Resource(name="g")
    return {
        "SendMessage": s.SendMessageRequest(
            messages=[
                make_message(TOPIC, b"x" * 50, tag="t", keys=["k"], properties={"p": "v"}) for _ in range(3)
            ]
        ).SerializeToString(),
        "PullMessage": s.PullMessageRequest(
            group=g, message_queue=mq, offset=0, batch_size=8
        ).SerializeToString(),
        "QueryRoute": s.QueryRouteRequest(topic=d.Resource(name=TOPIC)).SerializeToString(),
        "UpdateOffset": s.UpdateOffsetRequest(group=g, message_queue=mq, offset=1).SerializeToString(),
        "QueryOffset": s.QueryOffsetRequest(message_queue=mq, query_offset_policy=d.END).SerializeToString(),
        "AckMessage": s.AckMessageRequest(
            group=g,
            topic=d.Resource(name=TOPIC),
            entries=[s.AckMessageEntry(message_id="m", receipt_handle="h")],
        ).SerializeToString(),
        "BulkPull": pb.BulkPullRequest(
            group="g", topic=TOPIC, queue_id=0, offset=0, max_messages=8
        ).SerializeToString(),
    }


def _call(channel, path: str, client_stream: bool, server_stream: bool, payload: bytes):
    """Sends raw bytes; returns the raw response(s) or the RpcError."""
    ident = lambda b: b  # noqa: E731
    kw = {"request_serializer": ident, "response_deserializer": ident}
    try:
        if client_stream:
            return list(channel.stream_stream(path, **kw)(iter([payload]), metadata=CLIENT_MD, timeout=3))
        if server_stream:
            return list(channel.unary_stream(path, **kw)(payload, metadata=CLIENT_MD, timeout=3))
        return channel.unary_unary(path, **kw)(payload, metadata=CLIENT_MD, timeout=3)
    except grpc.RpcError as e:
        return e


def _undecodable(e: grpc.RpcError) -> bool:
    """grpc.aio answers a request that does not parse with UNKNOWN naming protobuf's DecodeError."""
    return e.code() == grpc.StatusCode.UNKNOWN and "DecodeError" in (e.details() or "")


def test_random_and_mutated_bytes_on_every_rpc(served, channel):
    rng = random.Random(SEED)
    valid = _valid_requests()
    answered = rejected = 0
    unexpected: list[str] = []
    for path, cs, ss, resp_cls in _methods():
        name = path.rsplit("/", 1)[1]
        payloads = [rng.randbytes(rng.randint(1, 300)) for _ in range(15)]
        base = valid.get(name)
        if base:
            for _ in range(25):
                b = bytearray(base)
                for _ in range(rng.randint(1, 4)):
                    b[rng.randrange(len(b))] = rng.randrange(256)
                payloads.append(bytes(b))
        for payload in payloads:
            out = _call(channel, path, cs, ss, payload)
            if isinstance(out, grpc.RpcError):
                if out.code() == grpc.StatusCode.DEADLINE_EXCEEDED and (ss or cs):
                    rejected += 1  # a parsed stream request (Telemetry, long receive) just stays open
                elif out.code() in REJECTED or _undecodable(out):
                    rejected += 1
                else:
                    unexpected.append(f"{name}: {out.code()} {out.details()} for {payload[:40]!r}")
                continue
            for raw in out if isinstance(out, list) else [out]:
                resp_cls.FromString(raw)  # a well-formed answer (an in-band error is fine)
            answered += 1
    print(
        f"[reliability-garbage] random/mutated requests: {answered} answered, {rejected} rejected", flush=True
    )
    assert not unexpected, "\n".join(unexpected[:20])
    assert_serving(served, channel)


def test_random_bytes_on_the_tcp_port(served, channel):
    rng = random.Random(SEED + 1)
    host, port = served.endpoints.rsplit(":", 1)
    payloads = [rng.randbytes(rng.randint(1, 5000)) for _ in range(40)]
    payloads += [
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + rng.randbytes(2000),  # the HTTP/2 preface, then garbage frames
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",  # preface and silence
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + rng.randbytes(100),  # a TLS ClientHello start
    ]
    for payload in payloads:
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            try:
                sock.sendall(payload)
                sock.settimeout(0.2)
                sock.recv(4096)
            except OSError:
                pass
    # Half-open connections that never send anything, while a normal client works.
    idle = [socket.create_connection((host, int(port)), timeout=5) for _ in range(50)]
    try:
        assert_serving(served, channel)
    finally:
        for sock in idle:
            sock.close()
    assert_serving(served, channel)


def _with_property_value(value: bytes) -> bytes:
    """A serialized SendMessageRequest whose user property value is `value` (possibly invalid UTF-8)."""
    marker = "MARKER-" + uuid.uuid4().hex[:9]  # same length as the replacements below
    m = make_message(TOPIC, b"body", properties={"k": marker}, queue_id=0)
    raw = s.SendMessageRequest(messages=[m]).SerializeToString()
    assert len(value) == len(marker)
    return raw.replace(marker.encode(), value)


@pytest.mark.parametrize(
    "value",
    [b"\xff" * 16, b"\xc3\x28" * 8, b"\xed\xa0\x80" + b"a" * 13, b"\xf8\x88\x80\x80\x80" + b"b" * 11],
    ids=["ff", "bad-continuation", "surrogate", "5-byte"],
)
def test_invalid_utf8_in_properties_is_rejected(served, channel, value):
    out = _call(
        channel, "/apache.rocketmq.v2.MessagingService/SendMessage", False, False, _with_property_value(value)
    )
    if isinstance(out, grpc.RpcError):
        assert out.code() in REJECTED or _undecodable(out), (out.code(), out.details())
    else:
        r = s.SendMessageResponse.FromString(out)
        assert r.status.code != d.OK, "a message with invalid UTF-8 in a property was stored"
    assert_serving(served, channel)


def test_invalid_utf8_in_topic_tag_and_id(served, channel):
    for field in ("topic", "tag", "message_id"):
        marker = "MARKER-" + uuid.uuid4().hex[:9]
        m = make_message(TOPIC, b"body", tag="t", queue_id=0)
        if field == "topic":
            m.topic.name = marker
        elif field == "tag":
            m.system_properties.tag = marker
        else:
            m.system_properties.message_id = marker
        raw = s.SendMessageRequest(messages=[m]).SerializeToString().replace(marker.encode(), b"\xfe" * 16)
        out = _call(channel, "/apache.rocketmq.v2.MessagingService/SendMessage", False, False, raw)
        if isinstance(out, grpc.RpcError):
            assert out.code() in REJECTED or _undecodable(out), (field, out.code(), out.details())
        else:
            assert s.SendMessageResponse.FromString(out).status.code != d.OK, field
    assert_serving(served, channel)


def test_oversized_body_and_request(served, channel):
    stub = sg.MessagingServiceStub(channel)
    r = send(stub, [make_message(TOPIC, b"x" * (4 * 1024 * 1024 + 1), queue_id=0)], explicit=True)
    assert r.status.code == d.MESSAGE_BODY_TOO_LARGE, r.status
    # A request beyond the server's receive limit (128 MiB): refused by gRPC, nothing stored.
    before = pull_v2(stub, TOPIC, 0, 0, batch_size=1)
    big = s.SendMessageRequest(
        messages=[make_message(TOPIC, b"y" * (65 << 20), queue_id=0) for _ in range(2)]
    )
    with pytest.raises(grpc.RpcError) as err:
        stub.SendMessage(big, metadata=EXPLICIT_MD, timeout=60)
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, err.value
    del big
    assert pull_v2(stub, TOPIC, 0, 0, batch_size=1).next_offset == before.next_offset
    assert_serving(served, channel)


def test_huge_batch_is_stored_densely_or_refused_whole(served, channel):
    stub = sg.MessagingServiceStub(channel)
    n = 20_000
    msgs = [make_message(TOPIC, f"{i}".encode(), queue_id=1) for i in range(n)]
    r = send(stub, msgs, explicit=True)
    assert r.status.code == d.OK, r.status
    offsets = [e.offset for e in r.entries]
    assert offsets == list(range(offsets[0], offsets[0] + n))
    assert_serving(served, channel)


# ------------------------------------------------------------------------------------------ held polls
def _resting(proc: psutil.Process) -> tuple[int, int]:
    return proc.num_threads(), proc.memory_info().rss


async def _collect(call) -> list:
    return [frame async for frame in call]


async def _hold_polls(endpoint: str, n: int, seconds: float) -> tuple[list, list[grpc.aio.Channel]]:
    """Starts n long polls on the empty queue 0, as tasks: PullMessage, BulkPull, ReceiveMessage in turn."""
    channels = [grpc.aio.insecure_channel(endpoint) for _ in range(max(1, n // 200))]
    calls = []
    wait = duration_pb2.Duration(seconds=int(seconds))
    deadline = seconds + 5
    for i in range(n):
        ch = channels[i % len(channels)]
        group = d.Resource(name=f"held-{i % 7}")
        kind = ("pull", "bulk", "receive")[i % 3]
        if kind == "pull":
            req = s.PullMessageRequest(
                group=group,
                message_queue=d.MessageQueue(topic=d.Resource(name=TOPIC), id=0),
                offset=0,
                batch_size=1,
                long_polling_timeout=wait,
            )
            call = sg.MessagingServiceStub(ch).PullMessage(req, metadata=CLIENT_MD, timeout=deadline)
            coro = _collect(call)
        elif kind == "bulk":
            req = pb.BulkPullRequest(
                group=group.name, topic=TOPIC, queue_id=0, offset=0, max_messages=1,
                long_polling_timeout_ms=int(seconds * 1000),
            )  # fmt: skip
            call = pb_grpc.EmulatorServiceStub(ch).BulkPull(req, metadata=CLIENT_MD, timeout=deadline)
            coro = call
        else:
            req = s.ReceiveMessageRequest(
                group=d.Resource(name=f"held-pop-{i % 5}"),
                message_queue=d.MessageQueue(topic=d.Resource(name=TOPIC), id=-1),
                batch_size=1,
                invisible_duration=duration_pb2.Duration(seconds=30),
                long_polling_timeout=wait,
                auto_renew=False,
            )
            call = sg.MessagingServiceStub(ch).ReceiveMessage(req, metadata=CLIENT_MD, timeout=deadline)
            coro = _collect(call)
        calls.append((kind, call, asyncio.ensure_future(coro)))
    return calls, channels


@pytest.mark.reliability
def test_thousands_of_held_long_polls(tmp_path):
    """2000 held pulls/receives on an empty topic: other clients are served meanwhile; an arrival answers
    the pulls on its queue at once; cancelling the rest returns threads and memory to rest."""
    emu = EmulatorProcess("--brokers", "1", "--in-memory", "--topic", f"{TOPIC}:2", "--topic", f"{OTHER}:2")
    proc = psutil.Process(emu.proc.pid)
    try:
        ch = grpc.insecure_channel(emu.endpoints)
        stub = sg.MessagingServiceStub(ch)
        ext = pb_grpc.EmulatorServiceStub(ch)
        # The held polls wait on the empty topic; other clients use another one.
        send(stub, [make_message(OTHER, b"warm", queue_id=1)], explicit=True)
        threads0, rss0 = _resting(proc)
        n = 2000

        async def scenario() -> dict[str, float]:
            calls, channels = await _hold_polls(emu.endpoints, n, 30)
            figures: dict[str, float] = {}
            try:
                deadline = time.time() + 60
                while _held(ext) < n and time.time() < deadline:
                    await asyncio.sleep(0.2)
                figures["held"] = _held(ext)
                figures["threads_held"], figures["rss_held"] = _resting(proc)
                # Other clients meanwhile: a normal send + pull round trip stays quick.
                t0 = time.perf_counter()
                await asyncio.to_thread(
                    lambda: send(stub, [make_message(OTHER, b"other", queue_id=1)], explicit=True)
                )
                figures["round_trip_ms"] = (time.perf_counter() - t0) * 1000
                # One arrival on queue 0 answers the pulls waiting on it at once.
                t0 = time.perf_counter()
                await asyncio.to_thread(
                    lambda: send(stub, [make_message(TOPIC, b"wake", queue_id=0)], explicit=True)
                )
                pulls = [t for kind, _, t in calls if kind in ("pull", "bulk")]
                kinds = [kind for kind, _, t in calls if kind in ("pull", "bulk")]
                done = await asyncio.wait_for(asyncio.gather(*pulls, return_exceptions=True), 20)
                figures["wake_ms"] = (time.perf_counter() - t0) * 1000
                ok = sum(1 for r in done if not isinstance(r, Exception) and _found(r))
                figures["woken"] = ok
                bad = [
                    (k, r)
                    for k, r in zip(kinds, done, strict=True)
                    if isinstance(r, Exception) or not _found(r)
                ]
                assert not bad, bad[:3]
            finally:
                for _, call, task in calls:
                    call.cancel()
                    task.cancel()
                await asyncio.gather(*(t for _, _, t in calls), return_exceptions=True)
                for c in channels:
                    await c.close()
            return figures

        figures = asyncio.run(scenario())
        wait_for_rest = time.time() + 30
        while _held(ext) and time.time() < wait_for_rest:
            time.sleep(0.2)
        assert _held(ext) == 0, "held requests stay registered after their clients left"
        threads1, rss1 = _resting(proc)
        print(
            f"[reliability-garbage] held polls: {int(figures['held'])} held at once, round trip meanwhile "
            f"{figures['round_trip_ms']:.0f} ms, {int(figures['woken'])} pulls woken in {figures['wake_ms']:.0f} ms; "
            f"threads {threads0} -> {figures['threads_held']} -> {threads1}, "
            f"RSS {rss0 >> 20} -> {figures['rss_held'] >> 20} -> {rss1 >> 20} MiB",
            flush=True,
        )
        assert figures["held"] == n, "some long polls were refused or dropped"
        assert threads1 <= threads0 + 2, f"threads grew from {threads0} to {threads1}"
        assert rss1 < rss0 + (64 << 20), f"RSS grew from {rss0 >> 20} to {rss1 >> 20} MiB"
        ch.close()
        ch = grpc.insecure_channel(emu.endpoints)
        assert_serving(emu, ch)
        ch.close()
    finally:
        assert emu.proc.poll() is None, f"the emulator died:\n{emu.output[-3000:]}"
        emu.stop()


def _held(ext) -> int:
    import json

    r = ext.Admin(pb.AdminRequest(verb="stats"), metadata=CLIENT_MD, timeout=10)
    return int(json.loads(r.result_json)["held_requests"])


def _found(response) -> bool:
    """A BulkPull response or the frames of a PullMessage that found the message."""
    if isinstance(response, pb.BulkPullResponse):
        return response.code == d.OK
    return any(f.WhichOneof("content") == "message" for f in response)
