"""The C scan of stored records (`rocketmq_protocol/remoting/_stored_scan.c`) against the numpy decoder: the
same batches for every input it takes, None (the numpy path decides) for every input it does not."""

from __future__ import annotations

import contextlib
import itertools
import os
import struct
import zlib
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketmq_protocol.remoting import message_codec
from rocketmq_protocol.remoting.errors import MessageDecodeError
from rocketmq_protocol.remoting.flags import MessageSysFlag
from rocketmq_protocol.remoting.message_codec import decode_stored, encode_stored
from rocketmq_protocol.remoting.properties import encode_properties

SCAN = message_codec._stored_scan


def test_the_c_scan_is_built_in_ci():
    """CI installs with a compiler present: the build must not silently fall back to numpy there."""
    if SCAN is None and not os.environ.get("CI"):
        pytest.skip("the C scan is not built here (no compiler at install)")
    assert SCAN is not None


needs_scan = pytest.mark.skipif(SCAN is None, reason="the C scan is not built here")

names = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), max_size=10)
record = st.fixed_dictionaries(
    {
        "topic": st.one_of(
            st.sampled_from(["T", "TopicTest", ""]), st.text("ab%", min_size=120, max_size=300)
        ),
        "body": st.binary(max_size=60),
        "props": st.one_of(
            st.dictionaries(names.filter(bool), names, max_size=4),
            st.fixed_dictionaries({"UNIQ_KEY": st.text("0123456789ABCDEF", min_size=32, max_size=32)}),
        ),
        "queue_id": st.integers(-(2**31), 2**31 - 1),
        "offset": st.integers(-(2**63), 2**63 - 1),
        "ts": st.integers(0, 2**45),
        "born": st.tuples(st.ip_addresses(v=4), st.integers(0, 65535)).map(lambda t: f"{t[0]}:{t[1]}"),
        "flag": st.integers(-(2**31), 2**31 - 1),
        "reconsume": st.integers(0, 2**31 - 1),
    }
)


def _records(msgs: list[dict], **extra: object) -> bytes:
    return encode_stored(
        topic=pa.array([m["topic"] for m in msgs], pa.string()),
        queue_id=np.array([m["queue_id"] for m in msgs]),
        queue_offset=np.array([m["offset"] for m in msgs], dtype=np.int64),
        commitlog_offset=np.array([m["offset"] // 3 for m in msgs], dtype=np.int64),
        body=pa.array([m["body"] for m in msgs], pa.binary()),
        properties=pa.array([encode_properties(m["props"]) for m in msgs], pa.string()),
        born_timestamp=np.array([m["ts"] for m in msgs], dtype=np.int64),
        store_timestamp=np.array([m["ts"] + 7 for m in msgs], dtype=np.int64),
        born_host=pa.array([m["born"] for m in msgs]),
        store_host=pa.array(["10.0.0.5:10911"] * len(msgs)),
        flag=np.array([m["flag"] for m in msgs], dtype=np.int32),
        reconsume_times=np.array([m["reconsume"] for m in msgs], dtype=np.int32),
        **extra,
    )


@contextlib.contextmanager
def numpy_alone() -> Iterator[None]:
    """decode_stored without the C scan inside the block."""
    message_codec._stored_scan = None
    try:
        yield
    finally:
        message_codec._stored_scan = SCAN


def _both(bodies: list[bytes], **kw: object) -> tuple[pa.RecordBatch, pa.RecordBatch]:
    """decode_stored with the C scan, then with numpy alone."""
    with_scan = decode_stored(bodies, **kw)
    with numpy_alone():
        return with_scan, decode_stored(bodies, **kw)


def _scan(bodies: list[bytes]) -> tuple | None:
    buf, spans = message_codec._concat(bodies)
    return SCAN.scan_stored(buf, np.array(spans, dtype=np.int64).reshape(-1))


@needs_scan
@settings(max_examples=150, deadline=None)
@given(
    msgs=st.lists(record, min_size=1, max_size=12),
    cuts=st.lists(st.integers(0, 12), max_size=4),
    raw=st.booleans(),
    same_props=st.booleans(),
)
def test_the_scan_decodes_as_numpy_does(msgs, cuts, raw, same_props):
    """Any messages of the common layout, split into answers anywhere between records: the scan takes
    them, and every column (the property-derived ones too, from rows of one width or not) is numpy's."""
    if same_props:
        msgs = [{**m, "props": msgs[0]["props"]} for m in msgs]
    pieces = [_records([m]) for m in msgs]
    bounds = sorted({0, len(pieces), *(c for c in cuts if c <= len(pieces))})
    bodies = [b"".join(pieces[a:b]) for a, b in itertools.pairwise(bounds)]
    assert _scan(bodies) is not None
    got, want = _both(bodies, raw_properties=raw)
    if not raw:  # the property strings "may come back null" (the scan parses them instead of copying them)
        kept = [name for name in got.schema.names if name != "raw_properties"]
        got, want = got.select(kept), want.select(kept)
    assert got.equals(want), (got.to_pylist(), want.to_pylist())
    assert got.num_rows == len(msgs)


prop_name = st.one_of(
    st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "__SHARDINGKEY", "TIMER_DELIVER_MS", "CLUSTER", "MSG_REGION",
                     "__BORNHOST", "k", "k2", "a_much_longer_user_property_name", "",
                     # the scan compares a name's length and first 8 bytes, then the rest: near misses
                     "UNIQ_KE", "UNIQ_KEY2", "TIMER_DELIVER_MX", "TIMER_DEL", "k\x00", "KEYS\x00\x00\x00\x00"]),
    st.text("ab\x01", max_size=9),
)  # fmt: skip
prop_item = st.tuples(prop_name, st.sampled_from(["\x01", "", "\x01\x01"]), st.text("xy \x01", max_size=6))


@needs_scan
@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(st.tuples(st.lists(prop_item, max_size=6), st.booleans()), min_size=1, max_size=10),
    cut=st.integers(0, 10),
)
def test_properties_parsed_in_the_scan_are_numpys(rows, cut):
    """Property strings of any shape (repeated names, hidden ones, empty names or values, a \\x01 inside a
    value, no \\x01 at all, with or without the final \\x02), parsed in the scan: every derived column, the
    extra properties and the map are what numpy's parse gives."""
    props = [
        "\x02".join(f"{k}{sep}{v}" for k, sep, v in items) + ("\x02" if end else "") for items, end in rows
    ]
    pieces = [_one(p) for p in props]
    bodies = [b"".join(pieces[:cut]), b"".join(pieces[cut:])]
    bodies = [b for b in bodies if b]
    buf, spans = message_codec._concat(bodies)
    names = message_codec._property_names(("__BORNHOST", "k"))
    assert message_codec._scanned(buf, spans, names).parsed_properties() is not None
    got, want = _both(bodies, raw_properties=False, extra_properties=("__BORNHOST", "k"))
    kept = [name for name in got.schema.names if name != "raw_properties"]
    assert got.select(kept).equals(want.select(kept)), (got.to_pylist(), want.to_pylist())


@needs_scan
def test_uniform_properties_come_with_their_column_folds():
    msgs = [{"UNIQ_KEY": f"{i:032X}", "TAGS": "a"} for i in range(5)]
    data = encode_stored(topic="T", queue_id=0, queue_offset=np.arange(5), commitlog_offset=np.arange(5),
                         body=pa.array([b"x"] * 5), properties=pa.array(map(encode_properties, msgs)))  # fmt: skip
    n, width, *_, props_off, props, high, low, parsed = _scan([data])
    assert parsed is None  # asked for no names: the strings are kept, not parsed
    rows = np.frombuffer(props, np.uint8).reshape(n, width)
    assert width == len(encode_properties(msgs[0]).encode())
    assert bytes(high) == rows.max(axis=0).tobytes() and bytes(low) == rows.min(axis=0).tobytes()
    assert np.frombuffer(props_off, np.int32).tolist() == list(range(0, 6 * width, width))


@needs_scan
@pytest.mark.parametrize(
    "sizes",
    [[20_000] + [0] * 300, [0] + [20_000] * 3, [5] * 40 + [4_000] + [5] * 40],
    ids=["a large first record", "a small first record", "one large record among small ones"],
)
def test_the_columns_grow_past_what_the_first_record_suggests(sizes):
    """The scan sizes its columns from the first record and grows them when later records do not fit
    (more records, longer bodies, topics or properties): every column is still numpy's."""
    msgs = [
        {"topic": "T" * (1 + n % 200), "body": bytes([i % 251]) * n,
         "props": {"UNIQ_KEY": f"{i:032X}", "K": "v" * (n // 100)}, "queue_id": i % 4, "offset": i,
         "ts": 1_700_000_000_000 + i, "born": "10.0.0.1:4242", "flag": i, "reconsume": 0}
        for i, n in enumerate(sizes)
    ]  # fmt: skip
    bodies = [_records(msgs[:7]), _records(msgs[7:])]
    assert _scan(bodies)[0] == len(sizes)
    got, want = _both(bodies)
    assert got.equals(want)
    assert got.column("body").to_pylist() == [m["body"] for m in msgs]


def _one(props: str = "TAGS\x01a\x02", body: bytes = b"hello", **kw: object) -> bytes:
    return encode_stored(topic="T", queue_id=0, queue_offset=np.array([0]), commitlog_offset=np.array([0]),
                         body=pa.array([body]), properties=props, **kw)  # fmt: skip


@needs_scan
@pytest.mark.parametrize(
    "data",
    [
        _one(born_host=pa.array(["[::1]:9"])),
        _one(store_host=pa.array(["[fe80::1]:10911"])),
        _one(body=zlib.compress(b"hello"), sysflag=np.array([int(MessageSysFlag.COMPRESSED)], np.int32)),
    ],
    ids=["born IPv6", "store IPv6", "compressed"],
)
def test_other_layouts_are_left_to_numpy(data):
    assert _scan([data]) is None
    assert decode_stored(data).column("body").to_pylist() == [b"hello"]


@needs_scan
@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d[:-1],
        lambda d: d + b"\0\0",
        lambda d: struct.pack(">i", 10) + d[4:],
        lambda d: struct.pack(">i", -5) + d[4:],
        lambda d: struct.pack(">i", 2**31 - 1) + d[4:],
        lambda d: d[:4] + b"\xca\xfe\xba\xbe" + d[8:],
        lambda d: d[:84] + struct.pack(">i", 9999) + d[88:],
        lambda d: d[:84] + struct.pack(">i", -1) + d[88:],
        lambda d: d[:-9] + b"\x00\x09" + d[-7:],
        lambda d: d[:-9] + b"\xff\xff" + d[-7:],
    ],
)
def test_malformed_records_get_numpys_error(mutate):
    """The scan refuses what the numpy decoder refuses, and leaves the error (its message) to it."""
    data = mutate(_one() + _one())
    assert _scan([data]) is None
    with numpy_alone(), pytest.raises(MessageDecodeError) as alone:
        decode_stored(data)
    with pytest.raises(MessageDecodeError) as with_scan:
        decode_stored(data)
    assert str(with_scan.value) == str(alone.value)


@needs_scan
@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=400), st.integers(0, 500), st.integers(0, 3))
def test_garbage_is_refused_or_decoded_as_numpy_does(data, cut, split):
    """Random bytes, alone or after a real record cut anywhere, in up to four answers: the scan reads
    nothing outside its buffer and never takes what numpy refuses."""
    real = _one() + _one("UNIQ_KEY\x01" + "A" * 32 + "\x02")
    whole = real[: cut % (len(real) + 1)] + data
    at = sorted({0, len(whole), *(len(whole) * k // 4 for k in range(1, split + 1))})
    bodies = [whole[a:b] for a, b in itertools.pairwise(at)] or [b""]
    scanned = _scan(bodies)
    try:
        with numpy_alone():
            want = decode_stored(bodies)
    except MessageDecodeError:
        assert scanned is None or scanned[0] == 0
        return
    if scanned is not None:
        assert decode_stored(bodies).equals(want)
