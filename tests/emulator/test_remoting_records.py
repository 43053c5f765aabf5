"""The remoting front end's per-segment record cache and column-wise batch decode give exactly what the
message-by-message paths give."""

from __future__ import annotations

import dataclasses
import random
import uuid
from unittest import mock

import numpy as np
import pyarrow as pa
import pytest

import broker_emulator.remoting.messages as messages
from broker_emulator.core.filtering import FILTER_TAG, parse_filter
from broker_emulator.core.send_columns import SendColumns, message_columns
from broker_emulator.core.store.message_store import FOUND, MessageStore
from broker_emulator.remoting.messages import stored_records
from broker_emulator.remoting.record_cache import RecordCache
from rocketmq_protocol.remoting.headers import SendMessageRequestHeader
from rocketmq_protocol.remoting.message_codec import encode_batch
from rocketmq_protocol.remoting.message_id import create_offset_message_id, join_offset_message_ids


class _Broker:
    host = "127.0.0.1"
    remoting_port = 10911

    def __init__(self, store: MessageStore) -> None:
        self.store = store


def _store(n: int, seed: int) -> MessageStore:
    """One queue of `n` messages with three tags, appended in runs of 1 to 1000 (merged and own segments)."""
    rng = random.Random(seed)
    store = MessageStore("b")
    store.create_topic("t", 1)
    bodies = [b"m%d" % i * rng.randint(1, 4) for i in range(n)]
    cols = SendColumns(
        n=n, topics_match=True, body=bodies, body_size=[len(b) for b in bodies],
        message_id=[uuid.uuid4().hex for _ in range(n)], tag=["a", "b", None][:3] * (n // 3) + ["a"] * (n % 3),
        keys=None, properties=None, born_timestamp=[1_700_000_000_000] * n, born_host=["10.0.0.5"] * n,
        message_group=None, delivery_timestamp=None, message_type=None, compressed=None, queue_id=None,
    )  # fmt: skip
    mcols = message_columns(cols, bodies, None, 0)
    start = 0
    while start < n:
        k = rng.choice([1, 5, 300, 1000])
        store.append("t", 0, mcols.take(np.arange(start, min(start + k, n))))
        start += k
    return store


@pytest.mark.parametrize("max_bytes", [1 << 30, 200_000])
def test_cached_records_equal_encoding_each_pull(max_bytes: int) -> None:
    store = _store(6000, seed=max_bytes)
    broker = _Broker(store)
    cache = RecordCache(broker, "cluster", max_bytes=max_bytes)  # type: ignore[arg-type]
    for expr in ("*", "a || b", "b"):
        flt = parse_filter(FILTER_TAG, expr)
        for size in (7, 1000, 8192):
            offset = 0
            while offset < 6000:
                r = store.get("t", 0, offset, size, None, flt)
                if r.status == FOUND:
                    want = stored_records(r.table, "t", 0, broker, "cluster")  # type: ignore[arg-type]
                    assert cache.body(r, "t", 0) == want, (expr, size, offset)
                offset = r.next_offset
    if max_bytes < 1 << 30:
        assert cache.nbytes <= max_bytes or len(cache._lru) == 1


def test_segment_growth_is_encoded_on_the_next_pull() -> None:
    store = _store(10, seed=1)
    broker = _Broker(store)
    cache = RecordCache(broker, "c")  # type: ignore[arg-type]
    first = store.get("t", 0, 0, 100)
    cache.body(first, "t", 0)
    more = store.get("t", 0, 0, 1)  # a segment of the same store grows by single appends
    cols = message_columns(
        SendColumns(n=1, topics_match=True, body=[b"late"], body_size=[4], message_id=["X"], tag=None,
                    keys=None, properties=None, born_timestamp=None, born_host=None, message_group=None,
                    delivery_timestamp=None, message_type=None, compressed=None, queue_id=None),
        [b"late"], None, 0,
    )  # fmt: skip
    for _ in range(5):
        store.append("t", 0, cols)
    r = store.get("t", 0, 0, 100)
    assert r.count == 15 and more.count == 1
    assert cache.body(r, "t", 0) == stored_records(r.table, "t", 0, broker, "c")  # type: ignore[arg-type]


def test_joined_offset_message_ids() -> None:
    offsets = np.array([0, 5, (3 << 40) | 7, 2**62], np.int64)
    for host in ("127.0.0.1", "::1", "10.1.2.3"):
        want = ",".join(create_offset_message_id(host, 10911, int(o)) for o in offsets)
        assert join_offset_message_ids(host, 10911, offsets) == want


S, E = "\x01", "\x02"
BATCHES = {
    "wait": [f"UNIQ_KEY{S}A{i:031d}{E}WAIT{S}true{E}" for i in range(5)],
    "tags": [
        f"UNIQ_KEY{S}A{i:031d}{E}TAGS{S}t{i % 2}{E}" if i % 3 else f"UNIQ_KEY{S}B{i}{E}" for i in range(6)
    ],
    "keys": [f"UNIQ_KEY{S}C{i}{E}KEYS{S}k{i}  x{E}WAIT{S}true{E}u{S}v{E}" for i in range(4)],
    "group": [f"UNIQ_KEY{S}D{i}{E}__SHARDINGKEY{S}g{i % 2}{E}PGROUP{S}pg{E}" for i in range(4)],
    "no uniq key": [f"TAGS{S}é{E}" for _ in range(3)],
    "none": ["" for _ in range(3)],
    "empty values": [f"UNIQ_KEY{S}{E}TAGS{S}{E}x{S}y{E}" for _ in range(3)],
    "repeated name": [f"a{S}1{E}a{S}2{E}" for _ in range(3)],
    "different": [f"a{S}{i}{E}" for i in range(3)],
    "delay": [f"DELAY{S}2{E}" for _ in range(3)],
    "transaction": [f"TRAN_MSG{S}true{E}" for _ in range(3)],
}


@pytest.mark.parametrize("outer", ["", f"WAIT{S}true{E}", f"WAIT{S}false{E}u{S}outer{E}", f"TAGS{S}o{E}"])
@pytest.mark.parametrize("name", list(BATCHES))
def test_batch_columns_equal_message_by_message(name: str, outer: str) -> None:
    props = BATCHES[name]
    body = encode_batch(pa.array([b"b%d" % i for i in range(len(props))]), pa.array(props))
    header = SendMessageRequestHeader(
        producer_group="g", topic="t", default_topic="TBW102", default_topic_queue_nums=4, queue_id=0,
        sys_flag=0, born_timestamp=1, flag=0, properties=outer, reconsume_times=0,
    )  # fmt: skip
    with (
        mock.patch.object(messages, "create_uniq_id", lambda: "GENERATED"),
        mock.patch.object(messages.time, "time", lambda: 1_700_000_000.0),
    ):
        fast = messages.send_columns(
            header, body, batch=True, born_host="1.2.3.4:5", delay_levels=[1000, 5000]
        )
        with mock.patch.object(messages, "_uniform_batch", lambda *a: None):
            slow = messages.send_columns(
                header, body, batch=True, born_host="1.2.3.4:5", delay_levels=[1000, 5000]
            )
    assert dataclasses.asdict(fast) == dataclasses.asdict(slow)
