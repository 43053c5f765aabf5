"""The pull table of docs/protocols.md ('Pull results') through PullMessage (v2 stream) and BulkPull (extension, over
gRPC and over the pull channel), tag filters,
consumer offsets (GetOffset/UpdateOffset) and QueryOffset BEGINNING/END/TIMESTAMP (docs/protocols.md, 'Pull results')."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from broker_emulator import Emulator
from broker_emulator.core.store.consume_queue import MERGE_BELOW
from connector.clients.remoting_connection import RemotingConnection
from rocketmq_protocol.extension import pb
from rocketmq_protocol.grpc_v2 import definition_pb2 as d
from rocketmq_protocol.grpc_v2 import service_pb2 as s
from tests.support.helpers import (
    CLIENT_MD,
    RPC_TIMEOUT_S,
    bulk_pull,
    endpoints_by_broker,
    make_message,
    pull_channel_address,
    pull_v2,
    query_offset,
    queue_ref,
    send,
    send_to_queue,
    unique_name,
)

BROKER = "broker-a"


@dataclass
class Outcome:
    """What both protocols have in common: status code, next offset, returned offsets and tags."""

    code: int
    next_offset: int
    offsets: list[int]
    tags: list[str | None]


Puller = Callable[..., Outcome]


def _v2_puller(stub) -> Puller:
    def do(topic: str, queue_id: int, offset: int, max_messages: int = 32, expression: str | None = None):
        r = pull_v2(stub, topic, queue_id, offset, max_messages, expression=expression)
        return Outcome(r.code, r.next_offset, r.offsets, r.tags)

    return do


def _bulk_puller(via) -> Puller:
    """BulkPull through `via`: an extension stub (gRPC) or a connection to the pull channel."""

    def do(topic: str, queue_id: int, offset: int, max_messages: int = 32, expression: str | None = None):
        r = bulk_pull(via, topic, queue_id, offset, max_messages, expression=expression)
        return Outcome(r.code, r.next_offset, r.offsets, r.tags)

    return do


@pytest.fixture(params=["PullMessage", "BulkPull", "PullChannel"])
def puller(request, rocketmq_emulator, v2_stub, ext_stub) -> Iterator[Puller]:
    endpoint = endpoints_by_broker(rocketmq_emulator)[BROKER]
    if request.param == "PullMessage":
        yield _v2_puller(v2_stub(endpoint))
    elif request.param == "BulkPull":
        yield _bulk_puller(ext_stub(endpoint))
    else:
        conn = RemotingConnection(pull_channel_address(ext_stub(endpoint)))
        try:
            yield _bulk_puller(conn)
        finally:
            conn.close()


@pytest.fixture
def stub(rocketmq_emulator, v2_stub):
    return v2_stub(endpoints_by_broker(rocketmq_emulator)[BROKER])


@pytest.fixture
def ten(topic, stub) -> str:
    """Queue 0 of `topic` on broker-a holds offsets 0..9: 0..2 TagA, 3..9 TagB."""
    offsets = send_to_queue(stub, topic, 0, 10, tags=["TagA"] * 3 + ["TagB"] * 7)
    assert offsets == list(range(10))
    return topic


# ---------------------------------------------------------------------------------- pull outcomes
def test_found_returns_batch_and_next_after_last(ten, puller):
    r = puller(ten, 0, 3, max_messages=4)
    assert r.code == d.OK
    assert r.offsets == [3, 4, 5, 6]
    assert r.next_offset == 7


def test_found_to_the_end_of_the_queue(ten, puller):
    r = puller(ten, 0, 7, max_messages=32)
    assert (r.code, r.offsets, r.next_offset) == (d.OK, [7, 8, 9], 10)


def test_at_max_offset_is_no_new_message_with_same_next(ten, puller):
    r = puller(ten, 0, 10)
    assert r.code == d.MESSAGE_NOT_FOUND
    assert r.next_offset == 10
    assert r.offsets == []


def test_above_max_offset_is_illegal_with_next_max(ten, puller):
    r = puller(ten, 0, 12)
    assert r.code == d.ILLEGAL_OFFSET
    assert r.next_offset == 10
    assert r.offsets == []


def test_filtered_out_is_not_found_with_next_past_scanned(ten, puller):
    r = puller(ten, 0, 3, expression="TagA")  # 3..9 are all TagB
    assert r.code == d.MESSAGE_NOT_FOUND
    assert r.next_offset == 10
    assert r.offsets == []


def test_filter_found_next_is_after_last_scanned_entry(ten, puller):
    r = puller(ten, 0, 0, expression="TagA")
    assert r.code == d.OK
    assert r.offsets == [0, 1, 2]
    assert r.tags == ["TagA"] * 3
    assert r.next_offset == 10  # scanned 0..9, TagB entries are skipped, not data loss


def test_filtered_scan_is_bounded_and_resumable(topic, stub, puller):
    """A long run of non-matching entries: each pull scans a bounded window and the next offset moves on."""
    send_to_queue(stub, topic, 1, 2000, tags="TagB")
    send_to_queue(stub, topic, 1, 1, tags="TagA")
    offset, pulls = 0, 0
    while True:
        r = puller(topic, 1, offset, expression="TagA")
        pulls += 1
        assert pulls < 100
        if r.code == d.OK:
            assert r.offsets == [2000]
            assert r.next_offset == 2001
            break
        assert r.code == d.MESSAGE_NOT_FOUND
        assert offset < r.next_offset <= 2000
        offset = r.next_offset
    assert pulls > 1, "a single pull should not scan 2,000 filtered entries"


def test_a_bulk_pull_ends_where_a_stored_segment_it_would_cut_starts(topic, stub, puller, request):
    """Two sends of MERGE_BELOW messages are two stored segments. A BulkPull asking for more than the first
    ends at the second's start (each segment one record batch, never two pieces), and the next starts
    there; PullMessage returns what it is asked for, as a broker does."""
    first = send_to_queue(stub, topic, 2, MERGE_BELOW)
    second = send_to_queue(stub, topic, 2, MERGE_BELOW)
    assert (first[0], second[0]) == (0, MERGE_BELOW)
    start = MERGE_BELOW - 10
    r = puller(topic, 2, start, max_messages=32)
    if request.node.callspec.params["puller"] == "PullMessage":
        assert (r.code, r.offsets, r.next_offset) == (d.OK, list(range(start, start + 32)), start + 32)
        return
    assert (r.code, r.offsets, r.next_offset) == (d.OK, list(range(start, MERGE_BELOW)), MERGE_BELOW)
    r = puller(topic, 2, MERGE_BELOW, max_messages=MERGE_BELOW + 1)
    assert (r.code, r.offsets, r.next_offset) == (d.OK, second, 2 * MERGE_BELOW)


def test_empty_queue(topic, puller):
    r0 = puller(topic, 3, 0)
    assert (r0.code, r0.next_offset, r0.offsets) == (d.MESSAGE_NOT_FOUND, 0, [])
    r3 = puller(topic, 3, 3)
    assert (r3.code, r3.next_offset, r3.offsets) == (d.ILLEGAL_OFFSET, 0, [])


@pytest.fixture(scope="module")
def retained():
    """A separate emulator keeping only the last 5 messages per queue: 10 sent → min offset 5, max 10."""
    with Emulator(brokers=1, queues=1, retention_messages=5) as emu:
        name = unique_name("retained")
        emu.create_topic(name)
        yield emu, name


@pytest.mark.parametrize("protocol", ["PullMessage", "BulkPull"])
def test_below_min_offset_is_illegal_with_next_min(retained, protocol, v2_stub, ext_stub):
    emu, topic = retained
    endpoint = emu.endpoints
    stub = v2_stub(endpoint)
    if query_offset(stub, topic, 0, d.END)[1] == 0:
        send_to_queue(stub, topic, 0, 10)
    assert query_offset(stub, topic, 0, d.BEGINNING) == (d.OK, 5)
    assert query_offset(stub, topic, 0, d.END) == (d.OK, 10)
    puller = _v2_puller(stub) if protocol == "PullMessage" else _bulk_puller(ext_stub(endpoint))
    r = puller(topic, 0, 2)
    assert r.code == d.ILLEGAL_OFFSET
    assert r.next_offset == 5
    assert r.offsets == []
    r = puller(topic, 0, 5)
    assert (r.code, r.offsets, r.next_offset) == (d.OK, [5, 6, 7, 8, 9], 10)
    if protocol == "BulkPull":
        b = bulk_pull(ext_stub(endpoint), topic, 0, 0)
        assert (b.min_offset, b.max_offset) == (5, 10)


# ------------------------------------------------------------------------------------ tag filters
def test_tag_or_expression(topic, stub, puller):
    tags = ["TagA", "TagB", None, "TagC", "TagB", None, "TagA"]
    send_to_queue(stub, topic, 2, len(tags), tags=tags)
    r = puller(topic, 2, 0, expression="TagA || TagB")
    assert r.code == d.OK
    assert r.offsets == [0, 1, 4, 6]
    assert r.tags == ["TagA", "TagB", "TagB", "TagA"]
    assert r.next_offset == len(tags)
    # '*' and blank take everything, untagged included.
    for expression in ("*", None):
        r = puller(topic, 2, 0, expression=expression)
        assert r.offsets == list(range(len(tags)))
    # A single tag never matches untagged messages.
    r = puller(topic, 2, 0, expression="TagC")
    assert (r.offsets, r.tags) == ([3], ["TagC"])


# ------------------------------------------------------------------------------------ consumer offsets
def _get_offset(stub, group: str, topic: str, queue_id: int):
    return stub.GetOffset(
        s.GetOffsetRequest(group=d.Resource(name=group), message_queue=queue_ref(topic, queue_id)),
        metadata=CLIENT_MD,
        timeout=RPC_TIMEOUT_S,
    )


def _update_offset(stub, group: str, topic: str, queue_id: int, offset: int):
    return stub.UpdateOffset(
        s.UpdateOffsetRequest(
            group=d.Resource(name=group), message_queue=queue_ref(topic, queue_id), offset=offset
        ),
        metadata=CLIENT_MD,
        timeout=RPC_TIMEOUT_S,
    )


def test_get_update_offset_round_trip(topic, stub):
    group = unique_name("group")
    assert _get_offset(stub, group, topic, 1).status.code == d.OFFSET_NOT_FOUND
    assert _update_offset(stub, group, topic, 1, 42).status.code == d.OK
    r = _get_offset(stub, group, topic, 1)
    assert (r.status.code, r.offset) == (d.OK, 42)
    # overwrite semantics, also backwards
    assert _update_offset(stub, group, topic, 1, 7).status.code == d.OK
    r = _get_offset(stub, group, topic, 1)
    assert (r.status.code, r.offset) == (d.OK, 7)
    # per (group, topic, queue): other queues and groups are untouched
    assert _get_offset(stub, group, topic, 2).status.code == d.OFFSET_NOT_FOUND
    assert _get_offset(stub, unique_name("other"), topic, 1).status.code == d.OFFSET_NOT_FOUND


def test_offsets_are_per_broker(rocketmq_emulator, topic, v2_stub):
    eps = endpoints_by_broker(rocketmq_emulator)
    a, b = v2_stub(eps["broker-a"]), v2_stub(eps["broker-b"])
    group = unique_name("group")
    assert _update_offset(a, group, topic, 0, 3).status.code == d.OK
    assert _get_offset(b, group, topic, 0).status.code == d.OFFSET_NOT_FOUND


# ------------------------------------------------------------------------------------ QueryOffset
def test_query_offset_policies(topic, stub):
    assert query_offset(stub, topic, 0, d.BEGINNING) == (d.OK, 0)
    assert query_offset(stub, topic, 0, d.END) == (d.OK, 0)
    assert query_offset(stub, topic, 0, d.TIMESTAMP, int(time.time() * 1000)) == (d.OK, 0)

    send_to_queue(stub, topic, 0, 3, body_prefix="first")
    time.sleep(0.01)
    send_to_queue(stub, topic, 0, 3, body_prefix="second")
    msgs = pull_v2(stub, topic, 0, 0).messages
    assert len(msgs) == 6
    ts = [m.system_properties.store_timestamp.ToMilliseconds() for m in msgs]
    t_first, t_second = ts[0], ts[3]
    assert ts[:3] == [t_first] * 3 and ts[3:] == [t_second] * 3
    assert t_second > t_first

    assert query_offset(stub, topic, 0, d.BEGINNING) == (d.OK, 0)
    assert query_offset(stub, topic, 0, d.END) == (d.OK, 6)
    # first offset whose store time >= the timestamp
    assert query_offset(stub, topic, 0, d.TIMESTAMP, 0) == (d.OK, 0)
    assert query_offset(stub, topic, 0, d.TIMESTAMP, t_first - 1) == (d.OK, 0)
    assert query_offset(stub, topic, 0, d.TIMESTAMP, t_first) == (d.OK, 0)
    assert query_offset(stub, topic, 0, d.TIMESTAMP, t_first + 1) == (d.OK, 3)
    assert query_offset(stub, topic, 0, d.TIMESTAMP, t_second) == (d.OK, 3)
    # after every message → END
    assert query_offset(stub, topic, 0, d.TIMESTAMP, t_second + 1) == (d.OK, 6)
    assert query_offset(stub, topic, 0, d.TIMESTAMP, int(time.time() * 1000) + 3_600_000) == (d.OK, 6)


def test_queue_offsets_extension_gives_every_queue_as_query_offset_does(
    rocketmq_emulator, topic, stub, ext_stub
):
    """QueueOffsets (extension): each queue's QueryOffset BEGINNING and END of one broker in one call."""
    send_to_queue(stub, topic, 1, 3)
    send_to_queue(stub, topic, 3, 5)
    ext = ext_stub(endpoints_by_broker(rocketmq_emulator)[BROKER])
    r = ext.QueueOffsets(pb.QueueOffsetsRequest(topic=topic), metadata=CLIENT_MD, timeout=RPC_TIMEOUT_S)
    assert r.code == d.OK
    got = [(q.queue_id, q.min_offset, q.max_offset) for q in r.queues]
    expected = [
        (i, query_offset(stub, topic, i, d.BEGINNING)[1], query_offset(stub, topic, i, d.END)[1])
        for i in range(len(got))
    ]
    assert got == expected and len(got) >= 4
    assert [hi for _, _, hi in got][1] == 3 and got[3][2] == 5
    missing = ext.QueueOffsets(
        pb.QueueOffsetsRequest(topic=unique_name("missing")), metadata=CLIENT_MD, timeout=RPC_TIMEOUT_S
    )
    assert missing.code == d.TOPIC_NOT_FOUND and not missing.queues
    bad = ext.QueueOffsets(
        pb.QueueOffsetsRequest(topic="bad topic!"), metadata=CLIENT_MD, timeout=RPC_TIMEOUT_S
    )
    assert bad.code == d.BAD_REQUEST


def test_query_offset_beginning_follows_retention(retained, v2_stub):
    emu, topic = retained
    stub = v2_stub(emu.endpoints)
    if query_offset(stub, topic, 0, d.END)[1] == 0:
        send_to_queue(stub, topic, 0, 10)
    assert query_offset(stub, topic, 0, d.BEGINNING) == (d.OK, 5)
    assert query_offset(stub, topic, 0, d.TIMESTAMP, 0) == (d.OK, 5)


def test_unknown_topic_and_queue(rocketmq_emulator, stub):
    missing = unique_name("missing")
    assert query_offset(stub, missing, 0, d.END)[0] == d.TOPIC_NOT_FOUND
    r = pull_v2(stub, missing, 0, 0)
    assert r.code == d.TOPIC_NOT_FOUND


def test_send_then_pull_single_messages_dense(topic, stub):
    """Single-message sends to one queue get dense offsets (same path as the table's data)."""
    offs = []
    for i in range(5):
        resp = send(stub, [make_message(topic, f"s{i}".encode(), queue_id=2)], explicit=True)
        assert resp.status.code == d.OK
        offs.append(resp.entries[0].offset)
    assert offs == list(range(5))
    assert pull_v2(stub, topic, 2, 0).offsets == list(range(5))
