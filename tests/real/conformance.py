"""Differential conformance: one list of scenarios, run against the emulator and against real RocketMQ,
comparing what a client observes (status codes, counts, the presence and shape of fields — never ids,
hosts or clock values).

A scenario is a function of a protocol client (`V2Client` here: apache.rocketmq.v2 over gRPC; a remoting
client will implement the same methods) and returns a JSON-able observation. `SCENARIOS` lists them with
the protocols they apply to; `DEVIATIONS` lists, per protocol and scenario, the observations that are
known to differ and why (docs/deviations.md shows the same table; a test keeps the two equal).
"""

from __future__ import annotations

import os
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf import duration_pb2, timestamp_pb2

from rocketmq_protocol.signature import authorization
from tests.real.observations import Deviations
from tests.real.v2stubs import d, s, sg


# ----------------------------------------------------------------------------------------------- targets
@dataclass
class Target:
    """A server under test: its gRPC endpoint and how to create topics and groups on it."""

    name: str
    endpoint: str
    create_topic: Callable[
        [str, int, str], None
    ]  # (name, queues, message type NORMAL/FIFO/DELAY/TRANSACTION)
    create_group: Callable[[str, int, bool], None]  # (group, max retries, fifo)
    notes: dict[str, Any] = field(default_factory=dict)


def code_name(code: int) -> str:
    try:
        return d.Code.Name(code)
    except ValueError:
        return f"CODE_{code}"


def new_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


# ----------------------------------------------------------------------------------------------- v2 client
class Telemetry:
    """A Telemetry stream: sends commands, collects what the server sends back."""

    def __init__(self, stub: sg.MessagingServiceStub, metadata: list[tuple[str, str]]) -> None:
        self._out: queue.Queue = queue.Queue()
        self.inbox: queue.Queue = queue.Queue()
        self.error: grpc.RpcError | None = None

        def requests() -> Iterator[s.TelemetryCommand]:
            while (cmd := self._out.get()) is not None:
                yield cmd

        self._call = stub.Telemetry(requests(), metadata=metadata, timeout=300)

        def pump() -> None:
            try:
                for reply in self._call:
                    self.inbox.put(reply)
            except grpc.RpcError as e:
                self.error = e
                self.inbox.put(None)

        self._thread = threading.Thread(target=pump, daemon=True, name="telemetry")
        self._thread.start()

    def send(self, cmd: s.TelemetryCommand) -> None:
        self._out.put(cmd)

    def next(self, timeout: float, where: Callable[[s.TelemetryCommand], bool] = lambda _c: True):
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                item = self.inbox.get(timeout=left)
            except queue.Empty:
                return None
            if item is None:
                return None
            if where(item):
                return item
        return None

    def close(self) -> None:
        self._out.put(None)
        self._call.cancel()
        self._thread.join(5)


class V2Client:
    """What a v2 client does, one RPC per method, with the headers the official clients send."""

    protocol = "grpc"

    def __init__(self, target: Target, credentials: tuple[str, str] | None = None) -> None:
        self.target = target
        self.credentials = credentials  # (access key, secret key): requests carry `authorization`
        self.channel = grpc.insecure_channel(target.endpoint)
        self.stub = sg.MessagingServiceStub(self.channel)
        self.client_id = f"conformance@{os.getpid()}@{uuid.uuid4().hex[:12]}"
        self.streams: list[Telemetry] = []
        host, port = target.endpoint.rsplit(":", 1)
        self.endpoints = d.Endpoints(scheme=d.IPv4, addresses=[d.Address(host=host, port=int(port))])

        self.peers: list[V2Client] = []

    def peer(self) -> V2Client:
        """Another client (its own client id) on the same target, closed with this one: real clients keep
        one set of settings per client id, so a producer and a consumer are two clients."""
        return self.peer_as(self.credentials)

    def peer_as(self, credentials: tuple[str, str] | None) -> V2Client:
        """A peer signing its requests with other credentials (None: unsigned)."""
        p = type(self)(self.target, credentials)
        self.peers.append(p)
        return p

    def close(self) -> None:
        for p in self.peers:
            p.close()
        for t in self.streams:
            t.close()
        self.channel.close()

    def metadata(self, client_id: str | None = None) -> list[tuple[str, str]]:
        date_time = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        md = [
            ("x-mq-language", "PYTHON"),
            ("x-mq-protocol", "v2"),
            ("x-mq-client-version", "5.1.2"),
            ("x-mq-date-time", date_time),
            ("x-mq-request-id", str(uuid.uuid4())),
        ]
        if self.credentials is not None:
            md.append(("authorization", authorization(*self.credentials, date_time)))
        cid = self.client_id if client_id is None else client_id
        if cid:
            md.append(("x-mq-client-id", cid))
        return md

    def call(self, rpc: str, request, timeout: float = 15.0, client_id: str | None = None):
        return getattr(self.stub, rpc)(request, metadata=self.metadata(client_id), timeout=timeout)

    # -- routes and sends
    def route(self, topic: str) -> s.QueryRouteResponse:
        return self.call(
            "QueryRoute", s.QueryRouteRequest(topic=d.Resource(name=topic), endpoints=self.endpoints)
        )

    def queues(self, topic: str) -> list:
        r = self.route(topic)
        assert r.status.code == d.OK, (topic, r.status)
        return list(r.message_queues)

    def send(self, *messages: d.Message, client_id: str | None = None) -> s.SendMessageResponse:
        return self.call("SendMessage", s.SendMessageRequest(messages=list(messages)), client_id=client_id)

    # -- telemetry
    def settings(self, client_type: int, *, topics=(), group: str | None = None, fifo: bool = False):
        """Opens a Telemetry stream and sends the client's settings; (stream, the server's reply or None)."""
        st = d.Settings(
            client_type=client_type,
            access_point=self.endpoints,
            request_timeout=duration_pb2.Duration(seconds=3),
            user_agent=d.UA(language=d.PYTHON, version="5.1.2", platform="linux", hostname="conformance"),
        )
        if client_type == d.PRODUCER:
            st.publishing.CopyFrom(
                d.Publishing(
                    topics=[d.Resource(name=t) for t in topics],
                    max_body_size=128 << 20,
                    validate_message_type=True,
                )
            )
        else:
            st.subscription.CopyFrom(
                d.Subscription(
                    group=d.Resource(name=group or ""),
                    subscriptions=[
                        d.SubscriptionEntry(
                            topic=d.Resource(name=t),
                            expression=d.FilterExpression(type=d.TAG, expression="*"),
                        )
                        for t in topics
                    ],
                    fifo=fifo,
                    long_polling_timeout=duration_pb2.Duration(seconds=20),
                )
            )
        t = Telemetry(self.stub, self.metadata())
        self.streams.append(t)
        t.send(s.TelemetryCommand(settings=st))
        reply = t.next(10, lambda c: c.HasField("settings") or c.HasField("status"))
        return t, reply

    def heartbeat(self, client_type: int, group: str | None = None) -> s.HeartbeatResponse:
        req = s.HeartbeatRequest(client_type=client_type)
        if group:
            req.group.CopyFrom(d.Resource(name=group))
        return self.call("Heartbeat", req)

    # -- consumption
    def receive(
        self,
        group: str,
        mq,
        *,
        batch: int = 32,
        invisible_s: float = 10,
        long_poll_s: float = 5,
        expression: str = "*",
    ) -> dict:
        """One ReceiveMessage: {"frames": [kinds in order], "status": code name, "messages": [...]}."""
        req = s.ReceiveMessageRequest(
            group=d.Resource(name=group),
            message_queue=mq,
            filter_expression=d.FilterExpression(type=d.TAG, expression=expression),
            batch_size=batch,
            invisible_duration=_duration(invisible_s),
            long_polling_timeout=_duration(long_poll_s),
        )
        frames, messages, status = [], [], None
        try:
            for r in self.stub.ReceiveMessage(req, metadata=self.metadata(), timeout=long_poll_s + 15):
                kind = r.WhichOneof("content")
                if kind == "status":
                    status = code_name(r.status.code)
                    frames.append(f"status:{status}")
                elif kind == "message":
                    messages.append(r.message)
                    if not frames or frames[-1] != "message":
                        frames.append("message")
                else:
                    frames.append(kind)
        except grpc.RpcError as e:
            frames.append(f"grpc:{e.code().name}")
            status = status or f"grpc:{e.code().name}"
        return {"frames": frames, "status": status, "messages": messages}

    def ack(self, group: str, topic: str, *messages) -> s.AckMessageResponse:
        return self.call(
            "AckMessage",
            s.AckMessageRequest(
                group=d.Resource(name=group),
                topic=d.Resource(name=topic),
                entries=[
                    s.AckMessageEntry(
                        message_id=m.system_properties.message_id,
                        receipt_handle=m.system_properties.receipt_handle,
                    )
                    for m in messages
                ],
            ),
        )

    def ack_handle(self, group: str, topic: str, message_id: str, handle: str) -> s.AckMessageResponse:
        return self.call(
            "AckMessage",
            s.AckMessageRequest(
                group=d.Resource(name=group),
                topic=d.Resource(name=topic),
                entries=[s.AckMessageEntry(message_id=message_id, receipt_handle=handle)],
            ),
        )

    def change_invisible(self, group: str, topic: str, m, seconds: float, handle: str | None = None):
        return self.call(
            "ChangeInvisibleDuration",
            s.ChangeInvisibleDurationRequest(
                group=d.Resource(name=group),
                topic=d.Resource(name=topic),
                receipt_handle=handle or m.system_properties.receipt_handle,
                invisible_duration=_duration(seconds),
                message_id=m.system_properties.message_id,
            ),
        )

    def end_transaction(self, topic: str, message_id: str, transaction_id: str, resolution: int, source: int):
        return self.call(
            "EndTransaction",
            s.EndTransactionRequest(
                topic=d.Resource(name=topic),
                message_id=message_id,
                transaction_id=transaction_id,
                resolution=resolution,
                source=source,
            ),
        )


def _duration(seconds: float) -> duration_pb2.Duration:
    whole = int(seconds)
    return duration_pb2.Duration(seconds=whole, nanos=round((seconds - whole) * 1e9))


def message(
    topic: str,
    body: bytes = b"hello",
    *,
    tag: str | None = None,
    keys: tuple[str, ...] = (),
    props: dict[str, str] | None = None,
    group: str | None = None,
    delivery_ms: int | None = None,
    mtype: int | None = None,
    message_id: str | None = None,
    recovery_s: int | None = None,
) -> d.Message:
    if mtype is None:
        mtype = d.FIFO if group else d.DELAY if delivery_ms else d.NORMAL
    now = time.time()
    sp = d.SystemProperties(
        message_id=uuid.uuid4().hex.upper() if message_id is None else message_id,
        keys=list(keys),
        message_type=mtype,
        body_encoding=d.IDENTITY,
        born_host="127.0.0.1",
        born_timestamp=timestamp_pb2.Timestamp(seconds=int(now), nanos=int((now % 1) * 1e9)),
    )
    if tag is not None:
        sp.tag = tag
    if group is not None:
        sp.message_group = group
    if delivery_ms is not None:
        sp.delivery_timestamp.CopyFrom(
            timestamp_pb2.Timestamp(seconds=delivery_ms // 1000, nanos=(delivery_ms % 1000) * 1_000_000)
        )
    if recovery_s is not None:
        sp.orphaned_transaction_recovery_duration.CopyFrom(duration_pb2.Duration(seconds=recovery_s))
    return d.Message(
        topic=d.Resource(name=topic), body=body, system_properties=sp, user_properties=props or {}
    )


# ----------------------------------------------------------------------------------------------- observing
def send_result(r: s.SendMessageResponse) -> dict:
    return {
        "status": code_name(r.status.code),
        "entries": [code_name(e.status.code) for e in r.entries],
    }


def message_shape(m: d.Message) -> dict:
    """The fields of a received message a client relies on: presence and kind, not values."""
    sp = m.system_properties
    return {
        "message_type": d.MessageType.Name(sp.message_type),
        "body_encoding": d.Encoding.Name(sp.body_encoding),
        "digest": d.DigestType.Name(sp.body_digest.type) if sp.HasField("body_digest") else None,
        "has": sorted(
            f
            for f in (
                "born_timestamp",
                "store_timestamp",
                "delivery_timestamp",
                "invisible_duration",
                "message_group",
                "tag",
                "dead_letter_queue",
            )
            if sp.HasField(f)
        ),
        "receipt_handle": bool(sp.receipt_handle),
        "delivery_attempt": sp.delivery_attempt,
        "queue_offset_set": sp.queue_offset >= 0,
        "keys": len(sp.keys),
        # TRANSACTION_CHECK_TIMES appears only when the real broker's check ran before the commit: timing.
        "user_properties": sorted(k for k in m.user_properties if k != "TRANSACTION_CHECK_TIMES"),
    }


def frames(result: dict) -> list[str]:
    return result["frames"]


# ----------------------------------------------------------------------------------------------- scenarios
@dataclass(frozen=True)
class Scenario:
    id: str
    run: Callable[[V2Client], dict]
    protocols: tuple[str, ...] = ("grpc",)
    doc: str = ""


SCENARIOS: list[Scenario] = []


def scenario(*protocols: str):
    def register(fn: Callable[[V2Client], dict]) -> Callable[[V2Client], dict]:
        SCENARIOS.append(Scenario(fn.__name__, fn, protocols or ("grpc",), (fn.__doc__ or "").strip()))
        return fn

    return register


def fresh_topic(c: V2Client, mtype: str = "NORMAL", queues: int = 8) -> str:
    t = new_name(f"conf-{mtype.lower()}")
    c.target.create_topic(t, queues, mtype)
    return t


@scenario("grpc", "remoting")
def query_route_shape(c: V2Client) -> dict:
    """QueryRoute of an 8-queue topic: queue ids, permissions, broker, endpoints, accepted types."""
    t = fresh_topic(c)
    r = c.route(t)
    mqs = list(r.message_queues)
    return {
        "status": code_name(r.status.code),
        "queues": len(mqs),
        "ids": sorted(q.id for q in mqs),
        "permissions": sorted({d.Permission.Name(q.permission) for q in mqs}),
        "broker_ids": sorted({q.broker.id for q in mqs}),
        "broker_names": len({q.broker.name for q in mqs}),
        "topic_echo": all(q.topic.name == t for q in mqs),
        "scheme": sorted({d.AddressScheme.Name(q.broker.endpoints.scheme) for q in mqs}),
        "addresses_are_the_access_point": all(
            [f"{a.host}:{a.port}" for a in q.broker.endpoints.addresses] == [c.target.endpoint] for q in mqs
        ),
        "accept_message_types": sorted({d.MessageType.Name(x) for q in mqs for x in q.accept_message_types}),
        "unknown_topic": code_name(c.route(new_name("nope")).status.code),
        "bad_topic_name": code_name(c.route("bad topic!").status.code),
    }


@scenario("grpc")
def query_route_message_types(c: V2Client) -> dict:
    """accept_message_types of FIFO, DELAY and TRANSACTION topics."""
    out = {}
    for mtype in ("FIFO", "DELAY", "TRANSACTION"):
        mqs = c.queues(fresh_topic(c, mtype, 2))
        out[mtype] = sorted({d.MessageType.Name(x) for q in mqs for x in q.accept_message_types})
    return out


@scenario("grpc", "remoting")
def send_ok(c: V2Client) -> dict:
    """A valid message with tag, keys and properties: OK, one entry, the message id echoed, an offset."""
    t = fresh_topic(c)
    m = message(t, b"payload", tag="TagA", keys=("k1", "k2"), props={"a": "1"})
    r = c.send(m)
    e = r.entries[0] if r.entries else None
    return {
        **send_result(r),
        "message_id_echoed": bool(e) and e.message_id == m.system_properties.message_id,
        "offset": e.offset if e else None,
        "transaction_id": bool(e and e.transaction_id),
    }


def _send_case(c: V2Client, t: str, build: Callable[[str], list[d.Message]]) -> dict:
    try:
        r = c.send(*build(t))
    except grpc.RpcError as e:
        return {"grpc": e.code().name}
    return send_result(r)


INVALID_SENDS: dict[str, Callable[[str], list[d.Message]]] = {
    "no_messages": lambda t: [],
    "empty_body": lambda t: [message(t, b"")],
    "body_too_large": lambda t: [message(t, b"x" * (4 * 1024 * 1024 + 1))],
    "body_at_limit": lambda t: [message(t, b"x" * (4 * 1024 * 1024))],
    "tag_with_bar": lambda t: [message(t, tag="a|b")],
    "tag_blank": lambda t: [message(t, tag="  ")],
    "tag_control_char": lambda t: [message(t, tag="a\x01b")],
    "key_blank": lambda t: [message(t, keys=(" ",))],
    "bad_topic_chars": lambda t: [message("bad topic!")],
    "topic_too_long": lambda t: [message("t" * 128)],
    "unknown_topic": lambda t: [message(new_name("nope"))],
    "mixed_topics": lambda t: [message(t), message(t + "-other")],
    "too_many_properties": lambda t: [message(t, props={f"p{i}": "v" for i in range(129)})],
    "properties_too_large": lambda t: [message(t, props={"big": "v" * (16 * 1024 + 1)})],
    "reserved_property_key": lambda t: [message(t, props={"UNIQ_KEY": "x"})],
    "property_control_char": lambda t: [message(t, props={"a\x02": "x"})],
    "message_id_blank": lambda t: [message(t, message_id="")],
    "message_group_too_long": lambda t: [message(t, group="g" * 64, mtype=d.NORMAL)],
    "delivery_over_a_day": lambda t: [
        message(t, delivery_ms=int(time.time() * 1000) + 2 * 86_400_000, mtype=d.NORMAL)
    ],
    "fifo_to_normal_topic": lambda t: [message(t, group="g1")],
    "delay_to_normal_topic": lambda t: [message(t, delivery_ms=int(time.time() * 1000) + 5000)],
    "batch_of_two": lambda t: [message(t, b"1"), message(t, b"2")],
}


@scenario("grpc", "remoting")
def send_validation(c: V2Client) -> dict:
    """SendMessage's in-band code for each invalid input (and two valid edge cases)."""
    t = fresh_topic(c, "NORMAL", 2)
    return {case: _send_case(c, t, build) for case, build in INVALID_SENDS.items()}


@scenario("grpc", "remoting")
def send_batch_limit(c: V2Client) -> dict:
    """The proxy forwards a multi-message request as one remoting batch (each record the body and ~150
    bytes of properties): 3,000 × 1,000-byte bodies fit the broker's 4 MiB and are stored, 4,200 are
    refused ("message body size exceeded")."""
    t = fresh_topic(c, "NORMAL", 2)
    out = {}
    for case, n in (("under_4_mib", 3000), ("over_4_mib", 4200)):
        result = _send_case(c, t, lambda t, n=n: [message(t, b"x" * 1000) for _ in range(n)])
        out[case] = result.get("status", result)
    return out


@scenario("grpc")
def send_without_client_id(c: V2Client) -> dict:
    """Every RPC needs the x-mq-client-id header."""
    t = fresh_topic(c, "NORMAL", 2)
    r = c.send(message(t), client_id="")
    return send_result(r)


def _consumer(c: V2Client, t: str, group: str, fifo: bool = False) -> tuple[V2Client, Any]:
    """A simple consumer of `group` (a peer client that has sent its settings) and the settings reply."""
    k = c.peer()
    _, reply = k.settings(d.SIMPLE_CONSUMER, topics=[t], group=group, fifo=fifo)
    return k, reply


@scenario("grpc", "remoting")
def receive_ack(c: V2Client) -> dict:
    """Send 3, receive them (frames, fields), ack (codes), receive again (nothing), ack again (expired?)."""
    t = fresh_topic(c)
    g = new_name("g")
    c.target.create_group(g, 16, False)
    k, _ = _consumer(c, t, g)
    mq = c.queues(t)[0]
    for i in range(3):
        assert (
            c.send(message(t, f"m{i}".encode(), tag="TagA", keys=("k",), props={"p": "v"})).status.code
            == d.OK
        )
    got, first = [], None
    deadline = time.monotonic() + 30
    while len(got) < 3 and time.monotonic() < deadline:
        r = k.receive(g, mq, batch=32)
        first = first or (r if r["messages"] else None)
        got += r["messages"]
    ack = k.ack(g, t, *got)
    again = k.receive(g, mq, batch=32)
    ack_again = k.ack(g, t, got[0]) if got else None
    return {
        "received": len(got),
        "first_frames": frames(first) if first else None,
        "shape": message_shape(got[0]) if got else None,
        "ack": {
            "status": code_name(ack.status.code),
            "entries": sorted(code_name(e.status.code) for e in ack.entries),
        },
        "receive_again": again["frames"],
        "ack_twice": code_name(ack_again.status.code) if ack_again else None,
    }


@scenario("grpc")
def receive_bounds(c: V2Client) -> dict:
    """ReceiveMessage invisible_duration below 10 s / above 12 h, a bad filter, an unknown topic."""
    t = fresh_topic(c, "NORMAL", 2)
    g = new_name("g")
    k, _ = _consumer(c, t, g)
    mq = c.queues(t)[0]
    unknown = d.MessageQueue()
    unknown.CopyFrom(mq)
    unknown.topic.name = new_name("nope")
    return {
        "invisible_1s": k.receive(g, mq, invisible_s=1, long_poll_s=5)["frames"],
        "invisible_13h": k.receive(g, mq, invisible_s=13 * 3600, long_poll_s=5)["frames"],
        "bad_filter": k.receive(g, mq, expression="a||", long_poll_s=5)["frames"],
        "unknown_topic": k.receive(g, unknown, long_poll_s=5)["frames"],
    }


@scenario("grpc")
def receive_before_settings(c: V2Client) -> dict:
    """ReceiveMessage from a client that never sent its Telemetry settings."""
    t = fresh_topic(c, "NORMAL", 2)
    c.send(message(t))
    return {"frames": c.receive(new_name("g"), c.queues(t)[0], long_poll_s=5)["frames"]}


@scenario("grpc", "remoting")
def change_invisible_and_redelivery(c: V2Client) -> dict:
    """Receive, ChangeInvisibleDuration (new handle), let it expire: redelivered with delivery_attempt 2;
    acking with the superseded or the old handle."""
    t = fresh_topic(c, "NORMAL", 1)
    g = new_name("g")
    c.target.create_group(g, 16, False)
    k, _ = _consumer(c, t, g)
    mq = c.queues(t)[0]
    c.send(message(t, b"redeliver-me"))
    first = k.receive(g, mq, batch=1)["messages"]
    assert first, "nothing received"
    m = first[0]
    old = m.system_properties.receipt_handle
    change = k.change_invisible(g, t, m, 2)
    too_long = k.change_invisible(g, t, m, 13 * 3600, handle=change.receipt_handle or old)
    t0 = time.monotonic()
    second = []
    while not second and time.monotonic() - t0 < 40:
        second = k.receive(g, mq, batch=1)["messages"]
    waited = time.monotonic() - t0
    ack_old = k.ack_handle(g, t, m.system_properties.message_id, old)
    ack_new = k.ack(g, t, *second) if second else None
    return {
        "change": code_name(change.status.code),
        "new_handle": bool(change.receipt_handle) and change.receipt_handle != old,
        "change_13h": code_name(too_long.status.code),
        "redelivered": len(second),
        "redelivered_within_20s": waited < 20,
        "delivery_attempt": second[0].system_properties.delivery_attempt if second else None,
        "same_message": bool(second)
        and second[0].system_properties.message_id == m.system_properties.message_id,
        "ack_with_first_handle": code_name(ack_old.status.code),
        "ack_redelivered": code_name(ack_new.status.code) if ack_new else None,
    }


@scenario("grpc", "remoting")
def retry_then_dlq(c: V2Client) -> dict:
    """A group with max retries 1: two deliveries (attempts 1, 2) never acked, then the message is in
    %DLQ%group, receivable by another group."""
    t = fresh_topic(c, "NORMAL", 1)
    g = new_name("g")
    c.target.create_group(g, 1, False)
    k, reply = _consumer(c, t, g)
    mq = c.queues(t)[0]
    c.send(message(t, b"poison", tag="TagP"))
    attempts = []
    deadline = time.monotonic() + 90
    while len(attempts) < 3 and time.monotonic() < deadline:
        for m in k.receive(g, mq, batch=1, invisible_s=10, long_poll_s=10)["messages"]:
            attempts.append(m.system_properties.delivery_attempt)
        if len(attempts) == 2:
            break
    # After the second delivery expires the message goes to the DLQ; a third receive finds nothing.
    time.sleep(10)
    third = k.receive(g, mq, batch=1, long_poll_s=5)
    dlq = f"%DLQ%{g}"
    deadline = time.monotonic() + 30
    while (route := c.route(dlq)).status.code != d.OK and time.monotonic() < deadline:
        time.sleep(1)
    dlq_msgs = []
    dlq_shape = None
    if route.status.code == d.OK:
        g2 = new_name("gdlq")
        k2, _ = _consumer(c, dlq, g2)
        deadline = time.monotonic() + 30
        while not dlq_msgs and time.monotonic() < deadline:
            for q in route.message_queues:
                dlq_msgs += k2.receive(g2, q, batch=1, long_poll_s=5)["messages"]
        if dlq_msgs:
            dlq_shape = {
                "body": dlq_msgs[0].body.decode(),
                "tag": dlq_msgs[0].system_properties.tag,
                "topic_is_dlq": dlq_msgs[0].topic.name == dlq,
                "delivery_attempt": dlq_msgs[0].system_properties.delivery_attempt,
            }
    return {
        "settings_max_attempts": reply.settings.backoff_policy.max_attempts
        if reply and reply.HasField("settings")
        else None,
        "attempts": attempts,
        "third_receive": third["frames"],
        "dlq_route": code_name(route.status.code),
        "dlq_permissions": sorted({d.Permission.Name(q.permission) for q in route.message_queues}),
        "dlq": dlq_shape,
    }


@scenario("grpc", "remoting")
def delayed_delivery(c: V2Client) -> dict:
    """A DELAY message 3 s ahead: not receivable before, receivable after, with its delivery timestamp."""
    t = fresh_topic(c, "DELAY", 1)
    g = new_name("g")
    c.target.create_group(g, 16, False)
    k, _ = _consumer(c, t, g)
    mq = c.queues(t)[0]
    sent_at = time.time()
    r = c.send(message(t, b"later", delivery_ms=int((sent_at + 3) * 1000)))
    got = []
    while not got and time.time() - sent_at < 30:
        got = k.receive(g, mq, batch=1, long_poll_s=5)["messages"]
    arrived = time.time() - sent_at
    return {
        "send": send_result(r),
        "received": len(got),
        "not_before_delay": arrived >= 2.5,
        "within_10s": arrived < 10,
        "shape": message_shape(got[0]) if got else None,
    }


@scenario("grpc", "remoting")
def fifo_group_order(c: V2Client) -> dict:
    """FIFO topic and orderly group: one message group's messages arrive in order, and the next one only
    after the previous is acked."""
    t = fresh_topic(c, "FIFO", 2)
    g = new_name("g")
    c.target.create_group(g, 16, True)
    k, reply = _consumer(c, t, g, fifo=True)
    sends = [c.send(message(t, f"f{i}".encode(), group="order-1")) for i in range(3)]
    queues_of_group = set()
    order = []
    before_ack = []
    deadline = time.monotonic() + 40
    mqs = c.queues(t)
    while len(order) < 3 and time.monotonic() < deadline:
        for q in mqs:
            r = k.receive(g, q, batch=1, long_poll_s=5)
            for m in r["messages"]:
                order.append(m.body.decode())
                queues_of_group.add(m.system_properties.queue_id)
                if len(order) == 1:
                    # Not acked yet: the group's next message must not be served.
                    before_ack = k.receive(g, q, batch=1, long_poll_s=5)["messages"]
                k.ack(g, t, m)
    return {
        "sends": [send_result(x)["status"] for x in sends],
        "settings_fifo": reply.settings.subscription.fifo if reply and reply.HasField("settings") else None,
        "order": order,
        "one_queue": len(queues_of_group) == 1,
        "served_before_ack": len(before_ack),
    }


@scenario("grpc", "remoting")
def transactions(c: V2Client) -> dict:
    """Half messages: COMMIT becomes visible, ROLLBACK never; EndTransaction with a blank id."""
    t = fresh_topic(c, "TRANSACTION", 1)
    c.settings(d.PRODUCER, topics=[t])
    g = new_name("g")
    c.target.create_group(g, 16, False)
    k, _ = _consumer(c, t, g)
    mq = c.queues(t)[0]
    a = c.send(message(t, b"commit-me", mtype=d.TRANSACTION))
    b = c.send(message(t, b"roll-me-back", mtype=d.TRANSACTION))
    invisible = k.receive(g, mq, batch=8, long_poll_s=5)["messages"]
    ea, eb = a.entries[0], b.entries[0]
    commit = c.end_transaction(t, ea.message_id, ea.transaction_id, d.COMMIT, d.SOURCE_CLIENT)
    rollback = c.end_transaction(t, eb.message_id, eb.transaction_id, d.ROLLBACK, d.SOURCE_CLIENT)
    blank = c.end_transaction(t, ea.message_id, "", d.COMMIT, d.SOURCE_CLIENT)
    got = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        r = k.receive(g, mq, batch=8, long_poll_s=5)["messages"]
        got += r
        if got and not r:
            break
    return {
        "sends": [send_result(a), send_result(b)],
        "transaction_ids": bool(ea.transaction_id) and bool(eb.transaction_id),
        "visible_before_end": len(invisible),
        "commit": code_name(commit.status.code),
        "rollback": code_name(rollback.status.code),
        "blank_transaction_id": code_name(blank.status.code),
        "received": sorted(m.body.decode() for m in got),
        "shape": message_shape(got[0]) if got else None,
    }


@scenario("grpc")
def transaction_check_back(c: V2Client) -> dict:
    """A half message left unresolved: the server asks the producer (Telemetry
    recover_orphaned_transaction_command); COMMIT from the check makes it visible."""
    t = fresh_topic(c, "TRANSACTION", 1)
    stream, _ = c.settings(d.PRODUCER, topics=[t])
    g = new_name("g")
    c.target.create_group(g, 16, False)
    k, _ = _consumer(c, t, g)
    mq = c.queues(t)[0]
    r = c.send(message(t, b"ask-me", mtype=d.TRANSACTION))
    e = r.entries[0]
    t0 = time.monotonic()
    cmd = stream.next(60, lambda x: x.HasField("recover_orphaned_transaction_command"))
    asked_after = time.monotonic() - t0
    out: dict[str, Any] = {"send": send_result(r), "asked": cmd is not None}
    if cmd is None:
        return out
    rc = cmd.recover_orphaned_transaction_command
    out["command"] = {
        "transaction_id_matches": rc.transaction_id == e.transaction_id,
        "message_id_matches": rc.message.system_properties.message_id == e.message_id,
        "topic_matches": rc.message.topic.name == t,
        "body": rc.message.body.decode(),
        "message_type": d.MessageType.Name(rc.message.system_properties.message_type),
    }
    out["asked_within_30s"] = asked_after < 30
    end = c.end_transaction(t, e.message_id, rc.transaction_id, d.COMMIT, d.SOURCE_SERVER_CHECK)
    out["commit"] = code_name(end.status.code)
    got = []
    deadline = time.monotonic() + 20
    while not got and time.monotonic() < deadline:
        got = k.receive(g, mq, batch=1, long_poll_s=5)["messages"]
    out["received"] = [m.body.decode() for m in got]
    return out


@scenario("grpc")
def heartbeat_and_settings(c: V2Client) -> dict:
    """Heartbeat before/after settings, and the Telemetry settings replies for a producer and a consumer."""
    t = fresh_topic(c, "NORMAL", 2)
    g = new_name("g")
    c.target.create_group(g, 3, False)
    consumer = c.peer()
    before = consumer.heartbeat(d.SIMPLE_CONSUMER, g)
    _, prod = c.settings(d.PRODUCER, topics=[t])
    _, cons = consumer.settings(d.SIMPLE_CONSUMER, topics=[t], group=g)
    after_p = c.heartbeat(d.PRODUCER)
    after_c = consumer.heartbeat(d.SIMPLE_CONSUMER, g)

    def shape(reply) -> dict | None:
        if reply is None:
            return None
        st = reply.settings
        bp = st.backoff_policy
        return {
            "status": code_name(reply.status.code),
            "client_type": d.ClientType.Name(st.client_type),
            "publishing": {
                "max_body_size": st.publishing.max_body_size,
                "validate_message_type": st.publishing.validate_message_type,
            }
            if st.HasField("publishing")
            else None,
            "subscription": {
                "receive_batch_size": st.subscription.receive_batch_size,
                "long_polling_timeout_s": st.subscription.long_polling_timeout.seconds,
                "fifo": st.subscription.fifo,
            }
            if st.HasField("subscription")
            else None,
            "backoff": {
                "max_attempts": bp.max_attempts,
                "kind": bp.WhichOneof("strategy"),
                "customized_next_s": [x.seconds for x in bp.customized_backoff.next][:4]
                if bp.HasField("customized_backoff")
                else None,
                "exponential": [
                    bp.exponential_backoff.initial.ToMilliseconds(),
                    bp.exponential_backoff.max.ToMilliseconds(),
                    bp.exponential_backoff.multiplier,
                ]
                if bp.HasField("exponential_backoff")
                else None,
            },
            "metric_on": st.metric.on,
        }

    return {
        "heartbeat_before_settings": code_name(before.status.code),
        "producer_settings": shape(prod),
        "consumer_settings": shape(cons),
        "heartbeat_producer": code_name(after_p.status.code),
        "heartbeat_consumer": code_name(after_c.status.code),
    }


@scenario("grpc")
def pull_rpcs(c: V2Client) -> dict:
    """The v2 pull RPCs the connector's reader needs (PullMessage, GetOffset, UpdateOffset, QueryOffset)."""
    t = fresh_topic(c, "NORMAL", 1)
    mq = c.queues(t)[0]
    out = {}
    calls = {
        "QueryOffset": lambda: c.call(
            "QueryOffset", s.QueryOffsetRequest(message_queue=mq, query_offset_policy=d.BEGINNING)
        ),
        "GetOffset": lambda: c.call(
            "GetOffset", s.GetOffsetRequest(group=d.Resource(name="g"), message_queue=mq)
        ),
        "UpdateOffset": lambda: c.call(
            "UpdateOffset", s.UpdateOffsetRequest(group=d.Resource(name="g"), message_queue=mq, offset=0)
        ),
        "PullMessage": lambda: list(
            c.stub.PullMessage(
                s.PullMessageRequest(
                    group=d.Resource(name="g"),
                    message_queue=mq,
                    offset=0,
                    batch_size=1,
                    filter_expression=d.FilterExpression(type=d.TAG, expression="*"),
                    long_polling_timeout=_duration(0.5),
                ),
                metadata=c.metadata(),
                timeout=10,
            )
        ),
    }
    for rpc, call in calls.items():
        try:
            r = call()
            out[rpc] = "served"
            del r
        except grpc.RpcError as e:
            out[rpc] = f"grpc:{e.code().name}"
    return out


# ----------------------------------------------------------------------------------------------- deviations
# Known, deliberate differences: {protocol: {scenario: {observation path: (emulator, real, reason)}}}.
# An observation path is the dotted key into the scenario's result. docs/deviations.md renders the same.
_UNIMPLEMENTED = (
    "served",
    "grpc:UNIMPLEMENTED",
    "Apache's proxy does not implement the v2 pull RPCs (apache/rocketmq issue 10434); the emulator serves "
    "them because the connector's reader needs them",
)
_FORBIDDEN = (
    "a signed request the account lacks the permission for: the emulator answers FORBIDDEN, as docs/design.md "
    "(Security) specifies, so a client can tell a missing grant from bad credentials; Apache's 5.5 proxy answers UNAUTHORIZED for "
    "failed authentication and failed authorization alike (its ResponseBuilder maps AuthorizationException to "
    "UNAUTHORIZED), with the reason in the message"
)
DEVIATIONS: dict[str, Deviations] = {
    "grpc": {
        # tests/real/conformance_acl.py (run by test_conformance_acl.py against a proxy with ACL 2.0 on)
        "acl_refusals": {
            "ack.pub": ("FORBIDDEN", "UNAUTHORIZED", _FORBIDDEN),
            "receive.pub": (["status:FORBIDDEN"], ["status:UNAUTHORIZED"], _FORBIDDEN),
            "route.pub_other_topic": ("FORBIDDEN", "UNAUTHORIZED", _FORBIDDEN),
            "send.sub.status": ("FORBIDDEN", "UNAUTHORIZED", _FORBIDDEN),
            "telemetry.pub_consumer": ("status:FORBIDDEN", "status:UNAUTHORIZED", _FORBIDDEN),
            "telemetry.sub_producer": ("status:FORBIDDEN", "status:UNAUTHORIZED", _FORBIDDEN),
        },
        "send_ok": {
            "transaction_id": (
                False,
                True,
                "the proxy copies the broker's SendResult.transactionId, which is the message id for every "
                "message; the emulator sets transaction_id only for TRANSACTION messages, the only ones whose "
                "clients read it (EndTransaction)",
            ),
        },
        "send_validation": {
            "batch_of_two.entries": (
                ["OK", "OK"],
                ["OK"],
                "the proxy stores a multi-message request as one MessageBatch and reports one entry (ids joined "
                "by commas, the first offset); the emulator reports one entry per message with its own offset. "
                "Clients that also talk to the proxy read only the top-level status, as the connector does",
            ),
            "unknown_topic.status": (
                "TOPIC_NOT_FOUND",
                "MESSAGE_PROPERTY_CONFLICT_WITH_TYPE",
                "the 5.5 proxy compares the message type with the topic's message.type before it looks up the "
                "route, and an unknown topic has no type; the emulator answers TOPIC_NOT_FOUND, as QueryRoute "
                "does for the same topic, so an error names the actual problem",
            ),
        },
        "receive_before_settings": {
            "frames": (
                ["status:OK", "message", "delivery_timestamp"],
                ["status:INTERNAL_SERVER_ERROR", "delivery_timestamp"],
                "the proxy fails with a NullPointerException when a client receives before its Telemetry "
                "settings arrived (apache/rocketmq issue 5728); the emulator serves the receive",
            ),
        },
        "heartbeat_and_settings": {
            "heartbeat_before_settings": (
                "OK",
                "UNRECOGNIZED_CLIENT_TYPE",
                "the emulator registers a client from its heartbeat alone (the admin 'groups' verb lists it); "
                "the official clients send their settings first and never see the difference",
            ),
        },
        "transactions": {
            "shape.user_properties": (
                [],
                ["__transactionId__"],
                "the real broker leaves its transaction bookkeeping properties on a committed message (and "
                "TRANSACTION_CHECK_TIMES when a check ran first, not compared) and the proxy passes them on as "
                "user properties; the emulator adds no internal properties",
            ),
        },
        "pull_rpcs": {
            rpc: _UNIMPLEMENTED for rpc in ("GetOffset", "PullMessage", "QueryOffset", "UpdateOffset")
        },
    }
}
