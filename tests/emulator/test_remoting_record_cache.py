"""The remoting front end's record cache: kept pull answers are found by offset, admitted on their second
encode, bounded by a budget; a small pull's read-ahead is its queue's one window; a pull served from
either carries the bytes encoding again would give."""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
import pytest

from broker_emulator.remoting.messages import stored_record_buffer
from broker_emulator.remoting.record_cache import MIN_RECORDS, READ_AHEAD_RECORDS, RecordCache
from rocketmq_protocol.remoting.codes import RequestCode as Q
from rocketmq_protocol.remoting.codes import ResponseCode as R
from rocketmq_protocol.remoting.message_codec import encode_batch, record_starts
from tests.support.remoting import RemotingClient, messages


def _answer(first: int, n: int, width: int = 10) -> tuple[pa.Buffer, np.ndarray]:
    """n records of `width` bytes, each filled with its offset's low byte."""
    data = np.repeat((np.arange(first, first + n) & 0xFF).astype(np.uint8), width)
    return pa.py_buffer(data.tobytes()), np.arange(n + 1, dtype=np.int64) * width


def _keep_twice(cache: RecordCache, first: int, n: int, *, queue: int = 0) -> None:
    for _ in range(2):
        cache.keep("b", "t", queue, first, *_answer(first, n))


def test_an_answer_is_kept_from_its_second_encode_and_found_inside() -> None:
    cache = RecordCache(1 << 20)
    n = MIN_RECORDS * 2
    cache.keep("b", "t", 0, 100, *_answer(100, n))
    assert cache.lookup("b", "t", 0, 100, n) is None  # a first read keeps nothing
    cache.keep("b", "t", 0, 100, *_answer(100, n))
    records, starts = cache.lookup("b", "t", 0, 100, n)
    assert records.to_pybytes() == _answer(100, n)[0].to_pybytes()
    assert starts.tolist() == (np.arange(n + 1) * 10).tolist()
    records, starts = cache.lookup("b", "t", 0, 150, 7)  # offsets inside the answer: a slice of it
    assert records.to_pybytes() == bytes(np.repeat(np.arange(150, 157, dtype=np.uint8), 10))
    assert starts.tolist() == list(range(0, 80, 10))
    assert cache.hits == 2
    assert cache.lookup("b", "t", 0, 99, 5) is None  # starts before it
    assert cache.lookup("b", "t", 0, 100 + n - 2, 3) is None  # runs past its end
    assert cache.lookup("b", "t", 1, 100, 5) is None  # another queue
    assert cache.lookup("b", "u", 0, 100, 5) is None  # another topic
    assert cache.lookup("a", "t", 0, 100, 5) is None  # another broker


def test_small_answers_and_a_zero_budget_keep_nothing() -> None:
    cache = RecordCache(1 << 20)
    _keep_twice(cache, 0, MIN_RECORDS - 1)
    assert cache.lookup("b", "t", 0, 0, 1) is None and cache.bytes == 0
    off = RecordCache(0)
    _keep_twice(off, 0, MIN_RECORDS)
    assert off.lookup("b", "t", 0, 0, 1) is None and off.bytes == 0
    tight = RecordCache(MIN_RECORDS * 10 - 1)  # one answer larger than the whole budget
    _keep_twice(tight, 0, MIN_RECORDS)
    assert tight.lookup("b", "t", 0, 0, 1) is None and tight.bytes == 0


def test_the_least_recently_used_answers_go_past_the_budget() -> None:
    size = MIN_RECORDS * 10
    cache = RecordCache(2 * size)
    for first in (0, MIN_RECORDS):
        _keep_twice(cache, first, MIN_RECORDS)
    assert cache.lookup("b", "t", 0, 0, 1) is not None  # the first answer is now the most recently used
    _keep_twice(cache, 2 * MIN_RECORDS, MIN_RECORDS)
    assert cache.bytes == 2 * size
    assert cache.lookup("b", "t", 0, MIN_RECORDS, 1) is None  # evicted
    assert cache.lookup("b", "t", 0, 0, 1) is not None
    assert cache.lookup("b", "t", 0, 2 * MIN_RECORDS, 1) is not None


def test_an_answer_kept_twice_is_held_once() -> None:
    cache = RecordCache(1 << 20)
    _keep_twice(cache, 0, MIN_RECORDS)
    _keep_twice(cache, 0, MIN_RECORDS)
    assert cache.bytes == MIN_RECORDS * 10


def test_a_read_ahead_is_its_queues_one_window() -> None:
    cache = RecordCache(1 << 20)
    cache.keep_ahead("b", "t", 0, 0, *_answer(0, 100))  # kept at once: no second encode needed
    records, starts = cache.lookup("b", "t", 0, 32, 32)
    assert records.to_pybytes() == bytes(np.repeat(np.arange(32, 64, dtype=np.uint8), 10))
    assert starts.tolist() == list(range(0, 330, 10))
    cache.keep_ahead("b", "t", 1, 0, *_answer(0, 100))  # another queue's window is its own
    cache.keep_ahead("b", "t", 0, 100, *_answer(100, 50))  # replaces queue 0's window
    assert cache.lookup("b", "t", 0, 32, 1) is None
    assert cache.lookup("b", "t", 0, 149, 1) is not None
    assert cache.lookup("b", "t", 1, 99, 1) is not None
    assert cache.bytes == 1500
    _keep_twice(cache, 200, MIN_RECORDS)  # a kept answer beside the window
    cache.keep_ahead("b", "t", 0, 150, *_answer(150, 50))
    assert cache.lookup("b", "t", 0, 200, MIN_RECORDS) is not None
    assert cache.bytes == 1500 + MIN_RECORDS * 10


def test_read_aheads_share_the_budget_and_go_by_age() -> None:
    cache = RecordCache(2000)
    cache.keep_ahead("b", "t", 0, 0, *_answer(0, 100))
    cache.keep_ahead("b", "t", 1, 0, *_answer(0, 100))
    cache.keep_ahead("b", "t", 2, 0, *_answer(0, 100))  # over the budget: queue 0's goes
    assert cache.lookup("b", "t", 0, 0, 1) is None
    assert cache.lookup("b", "t", 2, 0, 1) is not None and cache.bytes == 2000
    cache.keep_ahead("b", "t", 0, 100, *_answer(100, 100))  # its queue's window was evicted: kept anew
    assert cache.lookup("b", "t", 0, 100, 1) is not None and cache.bytes == 2000
    cache.keep_ahead("b", "t", 3, 0, *_answer(0, 201))  # larger than the whole budget: not kept
    assert cache.lookup("b", "t", 3, 0, 1) is None and cache.bytes == 2000
    off = RecordCache(0)
    off.keep_ahead("b", "t", 0, 0, *_answer(0, 10))
    assert off.lookup("b", "t", 0, 0, 1) is None and off.bytes == 0


# ------------------------------------------------------------------------------------------ on the wire
N = 3 * MIN_RECORDS


@pytest.fixture
def broker(rocketmq_emulator_factory):
    emu = rocketmq_emulator_factory(brokers=1, queues=1)
    emu.create_topic("cached", 1)
    with RemotingClient(f"127.0.0.1:{emu.cluster.broker('broker-a').remoting_port}") as client:
        props = [f"UNIQ_KEY\x01ID{i:06d}\x02TAGS\x01{'ab'[i % 2]}\x02" for i in range(N)]
        bodies = [b"m%d" % i * (1 + i % 5) for i in range(N)]  # bodies of several sizes
        for lo in range(0, N, 512):
            r = client.send_message(
                "cached",
                encode_batch(bodies[lo : lo + 512], props[lo : lo + 512]),
                queue_id=0,
                code=Q.SEND_BATCH_MESSAGE,
            )
            assert r.code == R.SUCCESS
        yield emu, client, bodies


def _pull(client: RemotingClient, offset: int, count: int, **kw) -> bytes:
    r = client.pull("cached", 0, offset, max_nums=count, **kw)
    assert r.code == R.SUCCESS, r.remark
    return bytes(r.body)


def _records(body: bytes) -> list[bytes]:
    starts = [*record_starts(body, [(0, len(body))], 1).tolist(), len(body)]
    return [body[a:b] for a, b in itertools.pairwise(starts)]


def test_pulls_served_from_kept_answers_carry_the_encoded_bytes(broker) -> None:
    emu, client, bodies = broker
    cache = emu.server.record_cache
    first = _pull(client, 0, N)
    assert _pull(client, 0, N) == first  # encoded again, now kept
    hits = cache.hits
    assert _pull(client, 0, N) == first
    inside = _pull(client, 100, 700)
    assert cache.hits == hits + 2
    records = _records(first)
    assert len(records) == N
    assert _records(inside) == records[100:800]
    rows = messages(inside).to_pylist()
    assert [m["queue_offset"] for m in rows] == list(range(100, 800))
    assert [m["body"] for m in rows] == bodies[100:800]
    # a tag filter keeps only its rows, whatever is kept for the unfiltered offsets
    tagged = messages(_pull(client, 100, 10, subscription="b")).to_pylist()
    assert [m["queue_offset"] for m in tagged] == list(range(101, 120, 2))
    assert [m["tags"] for m in tagged] == ["b"] * 10


def test_a_disabled_cache_encodes_every_answer(rocketmq_emulator_factory) -> None:
    emu = rocketmq_emulator_factory(brokers=1, queues=1, remoting_cache_mb=0)
    emu.create_topic("plain", 1)
    with RemotingClient(f"127.0.0.1:{emu.cluster.broker('broker-a').remoting_port}") as client:
        body = encode_batch([b"x"] * MIN_RECORDS, [f"UNIQ_KEY\x01I{i}\x02" for i in range(MIN_RECORDS)])
        assert client.send_message("plain", body, queue_id=0, code=Q.SEND_BATCH_MESSAGE).code == R.SUCCESS
        answers = {bytes(client.pull("plain", 0, 0, max_nums=MIN_RECORDS).body) for _ in range(3)}
    assert len(answers) == 1
    assert emu.server.record_cache.hits == 0 and emu.server.record_cache.bytes == 0


def test_small_pulls_are_served_from_a_read_ahead_with_the_encoded_bytes(broker) -> None:
    emu, client, bodies = broker
    cache = emu.server.record_cache
    core = emu.cluster.broker("broker-a")
    expected = _records(
        bytes(stored_record_buffer(core.store.get("cached", 0, 0, N).table, "cached", 0, core,
                                   emu.cluster.config.cluster_name)[0])
    )  # fmt: skip
    assert N < READ_AHEAD_RECORDS  # the first small pull encodes all of them
    got: list[bytes] = []
    offset = 0
    while offset < N:  # 32 a pull, as a Java push consumer asks, pipelined 16 at a time
        opaques = [
            client.send_pull("cached", 0, o, max_nums=32) for o in range(offset, min(offset + 512, N), 32)
        ]
        for opaque in opaques:
            r = client.wait(opaque, 10.0)
            assert r.code == R.SUCCESS, r.remark
            got += _records(bytes(r.body))
        offset = min(offset + 512, N)
    assert got == expected
    assert cache.hits == N // 32 - 1
    assert cache.bytes == sum(map(len, expected))
    # messages sent after the window was encoded: a pull past its end encodes a new one from there
    more = encode_batch([b"late"] * 40, [f"UNIQ_KEY\x01L{i}\x02" for i in range(40)])
    assert client.send_message("cached", more, queue_id=0, code=Q.SEND_BATCH_MESSAGE).code == R.SUCCESS
    rows = messages(_pull(client, N - 8, 32)).to_pylist()
    assert [m["queue_offset"] for m in rows] == list(range(N - 8, N + 24))
    assert [m["body"] for m in rows] == bodies[N - 8 :] + [b"late"] * 24
    hits = cache.hits
    rows = messages(_pull(client, N + 24, 32)).to_pylist()
    assert [m["body"] for m in rows] == [b"late"] * 16
    assert cache.hits == hits + 1
    # a filtered pull that skips rows is encoded as it is, the window left alone
    tagged = messages(_pull(client, 0, 10, subscription="a")).to_pylist()
    assert [m["queue_offset"] for m in tagged] == list(range(0, 20, 2))
