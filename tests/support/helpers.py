"""Shared helpers of the emulator tests: v2 / bulk-pull requests and their decoded results.

Every RPC here carries `x-mq-client-id` and a gRPC deadline, so no test can hang on the emulator.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from google.protobuf import duration_pb2, timestamp_pb2

from connector.clients.remoting_connection import RemotingConnection
from rocketmq_protocol.extension import pb
from rocketmq_protocol.extension.bulk_pull_wire import decode_response
from rocketmq_protocol.extension.pull_channel import BULK_PULL_CODE
from rocketmq_protocol.grpc_v2 import definition_pb2 as d
from rocketmq_protocol.grpc_v2 import service_pb2 as s
from rocketmq_protocol.message_schema import ipc_to_table

CLIENT_ID = "pytest-emulator-client"
CLIENT_MD: tuple[tuple[str, str], ...] = (("x-mq-client-id", CLIENT_ID),)
EXPLICIT_MD: tuple[tuple[str, str], ...] = (*CLIENT_MD, ("x-mq-queue-id-explicit", "true"))
RPC_TIMEOUT_S = 10.0
GROUP = "pytest-group"


def unique_name(prefix: str = "t") -> str:
    """A topic/group name legal for RocketMQ ([a-zA-Z0-9_-]) and unique per call."""
    return f"{prefix}_{uuid.uuid4().hex[:16]}"


def endpoints_by_broker(rocketmq_emulator: Any) -> dict[str, str]:
    return {b.name: b.endpoint for b in rocketmq_emulator.brokers}


def wait_until(predicate: Callable[[], bool], timeout: float = 5.0, interval: float = 0.001) -> None:
    """Polls `predicate` until true; fails the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(interval)


# ------------------------------------------------------------------------------------------ messages
def make_message(
    topic: str,
    body: bytes = b"x",
    *,
    tag: str | None = None,
    keys: Sequence[str] = (),
    properties: Mapping[str, str] | None = None,
    message_id: str | None = None,
    queue_id: int | None = None,
    message_group: str | None = None,
    delivery_ms: int | None = None,
) -> d.Message:
    m = d.Message(topic=d.Resource(name=topic), body=body)
    sp = m.system_properties
    sp.message_id = uuid.uuid4().hex.upper() if message_id is None else message_id
    sp.body_encoding = d.IDENTITY
    sp.message_type = d.NORMAL
    sp.born_timestamp.FromMilliseconds(int(time.time() * 1000))
    sp.born_host = "127.0.0.1"
    if tag is not None:
        sp.tag = tag
    if keys:
        sp.keys.extend(keys)
    if properties:
        m.user_properties.update(dict(properties))
    if queue_id is not None:
        sp.queue_id = queue_id
    if message_group is not None:
        sp.message_group = message_group
        sp.message_type = d.FIFO
    if delivery_ms is not None:
        sp.delivery_timestamp.FromMilliseconds(delivery_ms)
        sp.message_type = d.DELAY
    return m


def send(stub: Any, messages: Iterable[d.Message], *, explicit: bool = False) -> s.SendMessageResponse:
    return stub.SendMessage(
        s.SendMessageRequest(messages=list(messages)),
        metadata=EXPLICIT_MD if explicit else CLIENT_MD,
        timeout=RPC_TIMEOUT_S,
    )


def send_to_queue(
    stub: Any,
    topic: str,
    queue_id: int,
    count: int = 1,
    *,
    tags: Sequence[str | None] | str | None = None,
    body_prefix: str = "m",
) -> list[int]:
    """Sends `count` messages in one request to one queue; returns their offsets (asserts OK)."""
    if tags is None or isinstance(tags, str):
        tags = [tags] * count
    msgs = [
        make_message(topic, f"{body_prefix}-{i}".encode(), tag=tags[i], queue_id=queue_id)
        for i in range(count)
    ]
    resp = send(stub, msgs, explicit=True)
    assert resp.status.code == d.OK, resp.status
    assert len(resp.entries) == count
    return [e.offset for e in resp.entries]


# ------------------------------------------------------------------------------------------ pulls
@dataclass
class PullResult:
    code: int
    next_offset: int
    messages: list[d.Message] = field(default_factory=list)
    message: str = ""

    @property
    def offsets(self) -> list[int]:
        return [m.system_properties.queue_offset for m in self.messages]

    @property
    def tags(self) -> list[str | None]:
        return [
            m.system_properties.tag if m.system_properties.HasField("tag") else None for m in self.messages
        ]


def _filter(expression: str | None) -> d.FilterExpression | None:
    if expression is None:
        return None
    return d.FilterExpression(type=d.TAG, expression=expression)


def _duration_ms(ms: int) -> duration_pb2.Duration:
    dur = duration_pb2.Duration()
    dur.FromMilliseconds(ms)
    return dur


def pull_v2(
    stub: Any,
    topic: str,
    queue_id: int,
    offset: int,
    batch_size: int = 32,
    *,
    expression: str | None = None,
    polling_ms: int = 0,
    group: str = GROUP,
    timeout: float = RPC_TIMEOUT_S,
) -> PullResult:
    """PullMessage (server stream): collects every frame; exactly one status and one next_offset."""
    req = s.PullMessageRequest(
        group=d.Resource(name=group),
        message_queue=d.MessageQueue(topic=d.Resource(name=topic), id=queue_id),
        offset=offset,
        batch_size=batch_size,
        long_polling_timeout=_duration_ms(polling_ms),
    )
    flt = _filter(expression)
    if flt is not None:
        req.filter_expression.CopyFrom(flt)
    statuses: list[d.Status] = []
    nexts: list[int] = []
    messages: list[d.Message] = []
    for frame in stub.PullMessage(req, metadata=CLIENT_MD, timeout=timeout):
        kind = frame.WhichOneof("content")
        if kind == "status":
            statuses.append(frame.status)
        elif kind == "message":
            messages.append(frame.message)
        elif kind == "next_offset":
            nexts.append(frame.next_offset)
        else:
            raise AssertionError(f"PullMessage frame without content: {frame}")
    assert len(statuses) == 1, f"expected one status frame, got {statuses}"
    code = statuses[0].code
    if code in (d.OK, d.MESSAGE_NOT_FOUND, d.ILLEGAL_OFFSET):
        assert len(nexts) == 1, f"expected one next_offset frame with {d.Code.Name(code)}, got {nexts}"
    return PullResult(code, nexts[0] if nexts else -1, messages, statuses[0].message)


@dataclass
class BulkResult:
    code: int
    next_offset: int
    min_offset: int
    max_offset: int
    count: int
    rows: list[dict[str, Any]]
    message: str = ""

    @property
    def offsets(self) -> list[int]:
        return [r["queue_offset"] for r in self.rows]

    @property
    def tags(self) -> list[str | None]:
        return [r["tag"] for r in self.rows]


def bulk_request(
    topic: str,
    queue_id: int,
    offset: int,
    max_messages: int = 1024,
    *,
    expression: str | None = None,
    polling_ms: int = 0,
    group: str = GROUP,
    max_bytes: int = 0,
) -> pb.BulkPullRequest:
    req = pb.BulkPullRequest(
        group=group,
        topic=topic,
        queue_id=queue_id,
        offset=offset,
        max_messages=max_messages,
        max_bytes=max_bytes,
        long_polling_timeout_ms=polling_ms,
    )
    if expression is not None:
        req.filter.CopyFrom(pb.PullFilter(type=d.TAG, expression=expression))
    return req


def bulk_result(resp: Any) -> BulkResult:
    """A BulkPullResponse (or `bulk_pull_wire.BulkPullReply`) as rows, its count checked against them."""
    rows: list[dict[str, Any]] = []
    if resp.arrow_ipc:
        rows = ipc_to_table(resp.arrow_ipc).to_pylist()
    assert resp.count == len(rows), f"count {resp.count} but {len(rows)} rows in the payload"
    return BulkResult(
        resp.code, resp.next_offset, resp.min_offset, resp.max_offset, resp.count, rows, resp.message
    )


def bulk_pull(
    via: Any,
    topic: str,
    queue_id: int,
    offset: int,
    max_messages: int = 1024,
    *,
    timeout: float = RPC_TIMEOUT_S,
    **fields: Any,
) -> BulkResult:
    """BulkPull over gRPC (`via`: an EmulatorService stub) or over the emulator's pull channel (`via`: a
    `RemotingConnection` to the address PullChannel names); `fields`: `bulk_request`'s keyword arguments."""
    req = bulk_request(topic, queue_id, offset, max_messages, **fields)
    if not isinstance(via, RemotingConnection):
        return bulk_result(via.BulkPull(req, metadata=CLIENT_MD, timeout=timeout))
    cmd = via.request(BULK_PULL_CODE, {}, req.SerializeToString()).result(timeout)
    assert cmd.code == 0, (cmd.code, cmd.remark)
    return bulk_result(decode_response(cmd.body))


def pull_channel_address(ext: Any) -> str:
    """The address an endpoint's PullChannel names ("" for none)."""
    resp = ext.PullChannel(pb.PullChannelRequest(), metadata=CLIENT_MD, timeout=RPC_TIMEOUT_S)
    assert resp.code == d.OK, resp
    return resp.address


def read_queue_v2(stub: Any, topic: str, queue_id: int, end: int, batch_size: int = 32) -> list[d.Message]:
    """Every message of [0, end) through PullMessage."""
    out: list[d.Message] = []
    offset = 0
    while offset < end:
        r = pull_v2(stub, topic, queue_id, offset, batch_size)
        assert r.code == d.OK, (d.Code.Name(r.code), r.message)
        assert r.next_offset > offset
        out.extend(r.messages)
        offset = r.next_offset
    assert offset == end
    return out


def read_queue_bulk(ext: Any, topic: str, queue_id: int, end: int, max_messages: int = 128) -> list[dict]:
    """Every message of [0, end) through BulkPull."""
    out: list[dict] = []
    offset = 0
    while offset < end:
        r = bulk_pull(ext, topic, queue_id, offset, max_messages)
        assert r.code == d.OK, (d.Code.Name(r.code), r.message)
        assert r.next_offset > offset
        out.extend(r.rows)
        offset = r.next_offset
    assert offset == end
    return out


# ------------------------------------------------------------------------------------------ offsets
def queue_ref(topic: str, queue_id: int) -> d.MessageQueue:
    return d.MessageQueue(topic=d.Resource(name=topic), id=queue_id)


def query_offset(
    stub: Any, topic: str, queue_id: int, policy: int, ts_ms: int | None = None
) -> tuple[int, int]:
    """QueryOffset → (code, offset)."""
    req = s.QueryOffsetRequest(message_queue=queue_ref(topic, queue_id), query_offset_policy=policy)
    if ts_ms is not None:
        ts = timestamp_pb2.Timestamp()
        ts.FromMilliseconds(ts_ms)
        req.timestamp.CopyFrom(ts)
    resp = stub.QueryOffset(req, metadata=CLIENT_MD, timeout=RPC_TIMEOUT_S)
    return resp.status.code, resp.offset


def max_offsets(stub: Any, topic: str, queues: int) -> list[int]:
    """QueryOffset END of every queue of `topic` on the stub's broker."""
    out = []
    for q in range(queues):
        code, off = query_offset(stub, topic, q, d.END)
        assert code == d.OK, d.Code.Name(code)
        out.append(off)
    return out


def query_route(stub: Any, topic: str, timeout: float = RPC_TIMEOUT_S) -> s.QueryRouteResponse:
    return stub.QueryRoute(
        s.QueryRouteRequest(topic=d.Resource(name=topic)), metadata=CLIENT_MD, timeout=timeout
    )


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100)."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    rank = max(1, min(len(ordered), math.ceil(p / 100.0 * len(ordered))))
    return ordered[rank - 1]


def read_queue(endpoint: str, topic: str, queue_id: int, batch: int = 10_000) -> pa.Table | None:
    """Every stored message of one queue (BulkPull from offset 0 until MESSAGE_NOT_FOUND), or None."""
    import grpc

    from rocketmq_protocol.extension import pb_grpc

    tables, offset = [], 0
    with grpc.insecure_channel(endpoint, options=[("grpc.max_receive_message_length", 64 << 20)]) as ch:
        stub = pb_grpc.EmulatorServiceStub(ch)
        while True:
            r = stub.BulkPull(
                pb.BulkPullRequest(
                    group="verify", topic=topic, queue_id=queue_id, offset=offset, max_messages=batch
                ),
                timeout=30,
            )
            if r.code != d.OK:
                assert r.code == d.MESSAGE_NOT_FOUND, r.message
                break
            tables.append(ipc_to_table(r.arrow_ipc))
            offset = r.next_offset
    return pa.concat_tables(tables) if tables else None


def plain_columns(message_ids: Sequence[str], body: bytes = b"x") -> Any:
    """Stored-message columns of NORMAL messages with only an id and a body, for the broker core's own tests."""
    from broker_emulator.core.store.records import MessageColumns

    cols = MessageColumns()
    for mid in message_ids:
        cols.append(
            message_id=mid,
            tag=None,
            keys=[],
            body=body,
            properties=[],
            born_timestamp=0,
            born_host="",
            reconsume_times=0,
            message_group=None,
            delivery_timestamp=None,
            message_type=d.NORMAL,
            tag_code=0,
        )
    return cols
