"""The remoting front end's column-wise batch decode and msgId join give exactly what the
message-by-message paths give."""

from __future__ import annotations

import dataclasses
from unittest import mock

import numpy as np
import pyarrow as pa
import pytest

import broker_emulator.remoting.messages as messages
from rocketmq_protocol.remoting.headers import SendMessageRequestHeader
from rocketmq_protocol.remoting.message_codec import encode_batch
from rocketmq_protocol.remoting.message_id import create_offset_message_id, join_offset_message_ids


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


def _as_lists(cols: object) -> dict:
    """SendColumns' fields with Arrow columns (the column-wise path's bodies and ids) as lists."""
    return {k: v.to_pylist() if isinstance(v, pa.Array) else v for k, v in dataclasses.asdict(cols).items()}


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
    assert _as_lists(fast) == _as_lists(slow)


@pytest.mark.parametrize(
    ("hosts", "want"),
    [
        (["10.0.0.5:41000"] * 3, "10.0.0.5:41000"),
        (["10.0.0.5"] * 2, "10.0.0.5:0"),
        (["gateway.local"] * 2, "127.0.0.1:0"),
        (
            ["10.0.0.5:1", "10.0.0.6", None, "h:1", "10.0.0.5:1", "1.2.3.4:123456"],
            ["10.0.0.5:1", "10.0.0.6:0", "127.0.0.1:0", "127.0.0.1:0", "10.0.0.5:1", "127.0.0.1:0"],
        ),
    ],
)
def test_born_hosts_are_normalised_once_per_distinct_value(hosts, want) -> None:
    """One shared host comes back as a single string; mixed hosts row by row, each normalised."""
    got = messages._born_hosts(pa.chunked_array([pa.array(hosts, pa.string())]))
    assert (got if isinstance(got, str) else got.to_pylist()) == want
