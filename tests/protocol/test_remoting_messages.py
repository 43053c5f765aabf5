"""Stored-message and batch codecs: round trips, the Java property rules, and malformed bodies."""

from __future__ import annotations

import itertools
import struct
import zlib

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketmq_protocol.remoting.columns import fold_rows, rows_at, uniform_value
from rocketmq_protocol.remoting.errors import BatchDecodeError, MessageDecodeError
from rocketmq_protocol.remoting.flags import MessageSysFlag
from rocketmq_protocol.remoting.message_codec import (
    LOCKSTEP_MIN_SPANS,
    MAGIC_V1,
    MAGIC_V2,
    STORED_SCHEMA,
    _chained_starts,
    _join_buffer,
    decode_batch,
    decode_stored,
    encode_batch,
    encode_stored,
    record_starts,
)
from rocketmq_protocol.remoting.message_id import UniqIdGenerator, create_offset_message_id, parse_uniq_id
from rocketmq_protocol.remoting.properties import (
    build_properties_column,
    decode_properties,
    encode_properties,
    parse_properties_column,
)

# Every decode runs with each stored-record decoder (tests/protocol/conftest.py).
pytestmark = pytest.mark.usefixtures("stored_decoder")

names = st.text(
    st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), min_size=1, max_size=12
)
hosts = st.one_of(
    st.tuples(st.ip_addresses(v=4), st.integers(0, 65535)).map(lambda t: f"{t[0]}:{t[1]}"),
    st.tuples(st.ip_addresses(v=6), st.integers(0, 65535)).map(lambda t: f"[{t[0]}]:{t[1]}"),
)
messages = st.fixed_dictionaries(
    {
        "topic": st.one_of(st.sampled_from(["T", "TopicTest"]), st.text("ab%", min_size=120, max_size=200)),
        "body": st.binary(max_size=40),
        "props": st.dictionaries(names, names, max_size=4),
        "born": hosts,
        "store": hosts,
        "queue_id": st.integers(0, 2**31 - 1),
        "offset": st.integers(0, 2**62),
        "ts": st.integers(0, 2**45),
    }
)


def encode(msgs: list[dict]) -> bytes:
    return encode_stored(
        topic=pa.array([m["topic"] for m in msgs], pa.string()),
        queue_id=np.array([m["queue_id"] for m in msgs]),
        queue_offset=np.array([m["offset"] for m in msgs], dtype=np.int64),
        commitlog_offset=np.array([m["offset"] // 2 for m in msgs], dtype=np.int64),
        body=pa.array([m["body"] for m in msgs], pa.binary()),
        properties=pa.array([encode_properties(m["props"]) for m in msgs], pa.string()),
        born_timestamp=np.array([m["ts"] for m in msgs], dtype=np.int64),
        store_timestamp=np.array([m["ts"] + 1 for m in msgs], dtype=np.int64),
        born_host=pa.array([m["born"] for m in msgs]),
        store_host=pa.array([m["store"] for m in msgs]),
    )


@settings(max_examples=60, deadline=None)
@given(msgs=st.lists(messages, min_size=1, max_size=8))
def test_stored_round_trip(msgs):
    data = encode(msgs)
    rows = decode_stored(data).to_pylist()
    for row, m in zip(rows, msgs, strict=True):
        assert (row["topic"], row["body"], row["queue_id"], row["queue_offset"]) == (
            m["topic"],
            m["body"],
            m["queue_id"],
            m["offset"],
        )
        assert decode_properties(row["raw_properties"]) == m["props"]
        assert row["born_host"] == m["born"] and row["store_host"] == m["store"]
        v6 = m["store"].startswith("[")
        assert bool(row["sysflag"] & MessageSysFlag.STOREHOST_V6) == v6
        if "UNIQ_KEY" not in m["props"]:
            host, _, port = m["store"].rpartition(":")
            assert row["message_id"] == create_offset_message_id(
                host.strip("[]"), int(port), m["offset"] // 2
            )
    topics = [m["topic"] for m in msgs]
    magics = [struct.unpack_from(">i", data, 4)[0]]
    if len(topics[0].encode()) > 127:
        assert magics[0] == MAGIC_V2
    # split across several bodies: same rows
    assert decode_stored([data[: len(data)], b""]).num_rows == len(msgs)


@settings(max_examples=60, deadline=None)
@given(
    msgs=st.lists(messages, min_size=1, max_size=8),
    columns=st.lists(st.sampled_from(STORED_SCHEMA.names), unique=True),
    derive=st.booleans(),
    raw=st.booleans(),
)
def test_chosen_columns_decode_as_in_the_full_batch(msgs, columns, derive, raw):
    """Whichever columns are asked for come back in schema order, each equal to the full decode's; without
    ports, hosts are the full decode's addresses (IPv6 without brackets)."""
    data = encode(msgs)
    full = decode_stored(data, derive=derive, extra_properties=("u",))
    part = decode_stored(data, derive=derive, extra_properties=("u",), raw_properties=raw, columns=columns)
    assert part.schema.names == [n for n in STORED_SCHEMA.names if n in columns] + ["u"]
    for name in part.schema.names:
        if name != "raw_properties" or raw:
            assert part.column(name).equals(full.column(name)), name
    bare = decode_stored(data, columns=["born_host", "store_host"], host_ports=False)
    for name in ("born_host", "store_host"):
        want = [h.rpartition(":")[0].strip("[]") for h in full.column(name).to_pylist()]
        assert bare.column(name).to_pylist() == want


def test_unknown_columns_are_refused():
    with pytest.raises(ValueError, match=r"no column \['nope'\]"):
        decode_stored(_stored_one(), columns=["body", "nope"])


def test_compressed_and_derived_columns():
    plain = b"x" * 5000
    props = encode_properties({"UNIQ_KEY": "AB", "KEYS": "k1  k2 ", "TAGS": "TagA", "__SHARDINGKEY": "g",
                               "TIMER_OUT_MS": "123", "color": "red", "WAIT": "true", "order": "1"})  # fmt: skip
    data = encode_stored(
        topic="T", queue_id=1, queue_offset=np.array([7, 8]), commitlog_offset=np.array([0, 500]),
        body=pa.array([zlib.compress(plain, 5), b"raw"]), properties=pa.array([props, ""]),
        sysflag=np.array([MessageSysFlag.COMPRESSED | MessageSysFlag.COMPRESSION_ZLIB, 0]),
    )  # fmt: skip
    a, b = decode_stored(data).to_pylist()
    assert a["body"] == plain and not a["sysflag"] & MessageSysFlag.COMPRESSED
    assert (a["message_id"], a["tags"], a["keys"], a["message_group"]) == ("AB", "TagA", ["k1", "k2"], "g")
    assert a["delivery_timestamp"].timestamp() == 0.123
    assert dict(a["properties"]) == {"color": "red", "order": "1"}
    assert b["keys"] == [] and b["tags"] is None and b["properties"] == [] and b["delivery_timestamp"] is None
    assert b["message_id"] == create_offset_message_id("127.0.0.1", 10911, 500)
    raw = decode_stored(data, decompress=False).to_pylist()[0]
    assert zlib.decompress(raw["body"]) == plain and raw["sysflag"] & MessageSysFlag.COMPRESSED
    assert decode_stored(data, derive=False).column("tags").null_count == 2


@pytest.mark.parametrize("uniform", [True, False])
def test_extra_properties_come_back_as_columns(uniform):
    """`extra_properties`: hidden names too, null where a message lacks them, in both parse paths."""
    props = ["__BORNHOST\x0110.0.0.7\x02KEYS\x01a\x02", "__BORNHOST\x0110.0.0.8\x02KEYS\x01b\x02"]
    if not uniform:
        props[1] = "TAGS\x01t\x02"
    data = encode_stored(topic="T", queue_id=0, queue_offset=np.array([0, 1]), commitlog_offset=np.array([0, 90]),
                         body=pa.array([b"x", b"y"]), properties=pa.array(props))  # fmt: skip
    batch = decode_stored(data, extra_properties=("__BORNHOST", "KEYS", "NOPE"))
    assert batch.schema.names[-3:] == ["__BORNHOST", "KEYS", "NOPE"]
    expected = ["10.0.0.7", "10.0.0.8"] if uniform else ["10.0.0.7", None]
    assert batch.column("__BORNHOST").to_pylist() == expected
    assert batch.column("KEYS").to_pylist() == (["a", "b"] if uniform else ["a", None])
    assert batch.column("NOPE").null_count == 2
    assert all(dict(p) == {} for p in batch.column("properties").to_pylist())  # still hidden from the map
    assert batch.column("keys").to_pylist() == ([["a"], ["b"]] if uniform else [["a"], []])
    assert decode_stored(b"", extra_properties=("X",)).schema.names[-1] == "X"


PROPERTY_LAYOUTS = {
    "one layout, one record size": (["UNIQ_KEY\x01{i:08d}\x02TAGS\x01t\x02u\x01v\x02"] * 4, [b"abcd"] * 4),
    "one layout, bodies of two sizes": (["UNIQ_KEY\x01{i:08d}\x02KEYS\x01k{i}\x02"] * 4, [b"a", b"bb"] * 2),
    "a separator in a varying value": (["v\x01{i}\x02"] * 4, [b"x"] * 4),  # 1, 2: \x01, \x02 bytes
    "layouts differ": (["a\x01{i}\x02", "b\x01{i}\x02", "UNIQ_KEY\x01u{i}\x02", ""], [b"x"] * 4),
    "no properties": ([""] * 4, [b"x"] * 4),
}


@pytest.mark.parametrize("layout", sorted(PROPERTY_LAYOUTS))
def test_raw_properties_false_gives_the_same_parsed_columns(layout, stored_decoder):
    """`raw_properties=False` parses in place where it can; every other column is what the default gives."""
    templates, bodies = PROPERTY_LAYOUTS[layout]
    props = [t.format(i=chr(i) if "separator" in layout else i) for i, t in enumerate(templates)]
    data = encode_stored(topic="T", queue_id=0, queue_offset=np.arange(4), commitlog_offset=np.arange(4) * 100,
                         body=pa.array(bodies), properties=pa.array(props))  # fmt: skip
    full = decode_stored(data, extra_properties=("u",))
    lean = decode_stored(data, extra_properties=("u",), raw_properties=False)
    assert lean.schema == full.schema
    for name in full.schema.names:
        if name != "raw_properties":
            assert lean.column(name).equals(full.column(name)), name
    # The C scan parses every layout as it reads the records; numpy parses rows of one layout in place and
    # copies the strings out of any other
    in_place = stored_decoder == "c" or layout.startswith("one layout")
    assert lean.column("raw_properties").null_count == (4 if in_place else 0)


def _stored_one() -> bytes:
    return encode_stored(topic="T", queue_id=0, queue_offset=np.array([0]), commitlog_offset=np.array([0]),
                         body=pa.array([b"hello"]), properties="TAGS\x01a\x02")  # fmt: skip


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda d: d[:-1], "TOTALSIZE"),
        (lambda d: d + b"\0\0", "trailing bytes"),
        (lambda d: struct.pack(">i", 10) + d[4:], "TOTALSIZE 10"),
        (lambda d: struct.pack(">i", -5) + d[4:], "TOTALSIZE -5"),
        (lambda d: d[:4] + b"\xca\xfe\xba\xbe" + d[8:], "magic code 0xcafebabe"),
        (lambda d: d[:84] + struct.pack(">i", 9999) + d[88:], "BODYLEN"),
        (lambda d: d[:84] + struct.pack(">i", -1) + d[88:], "BODYLEN"),
        (lambda d: d[:-9] + b"\x00\x09" + d[-7:], "PROPLEN"),
    ],
)
def test_malformed_stored_bodies(mutate, match):
    with pytest.raises(MessageDecodeError, match=match):
        decode_stored(mutate(_stored_one()))


def test_empty_inputs():
    assert decode_stored(b"").num_rows == 0
    assert decode_stored([]).num_rows == 0
    assert decode_batch(b"").num_rows == 0
    assert encode_batch(pa.array([], pa.binary()), pa.array([], pa.string())) == b""


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.binary(max_size=30), st.dictionaries(names, names, max_size=3), st.integers(-5, 5)),
        max_size=8,
    )
)
def test_batch_round_trip(msgs):
    body = pa.array([m[0] for m in msgs], pa.binary())
    props = pa.array([encode_properties(m[1]) for m in msgs], pa.string())
    data = encode_batch(body, props, np.array([m[2] for m in msgs], dtype=np.int32))
    rows = decode_batch(data).to_pylist()
    assert [(r["body"], decode_properties(r["raw_properties"]), r["flag"]) for r in rows] == list(msgs)


@pytest.mark.parametrize(
    "data",
    [
        struct.pack(">i", 3),
        struct.pack(">iiiii", 40, 0, 0, 0, 3) + b"abc" + b"\0\0",
        struct.pack(">iiiii", 25, 0, 0, 0, 90) + b"abc" + b"\0\0",
        struct.pack(">iiiii", 25, 0, 0, 0, 3) + b"abc" + b"\0\x09",
        b"\x00" * 7,
    ],
)
def test_bad_batch_bodies(data):
    with pytest.raises(BatchDecodeError):
        decode_batch(data)


def test_properties_follow_java_rules():
    assert encode_properties({"a": "1", "b": None, "c": "é"}) == "a\x011\x02c\x01é\x02"
    assert decode_properties("a\x011\x02\x01x\x02k\x01\x02nosep\x02a\x012\x02z\x01v\x01w") == {
        "a": "2",
        "z": "v\x01w",
    }
    with pytest.raises(ValueError, match="separator"):
        encode_properties({"a\x02": "1"})


prop_strings = st.lists(st.tuples(st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "x", "", "__SHARDINGKEY", "WAIT"]),
                                  st.sampled_from(["", "v", "a b", "\x01"])), max_size=5).map(
    lambda items: "".join(f"{k}\x01{v}\x02" for k, v in items))  # fmt: skip


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(prop_strings, prop_strings.map(lambda s: s.rstrip("\x02")), st.none()), max_size=6))
def test_columnar_parse_equals_row_parse(raws):
    parsed = parse_properties_column(pa.array(raws, pa.string()))
    for i, raw in enumerate(raws):
        expected = decode_properties(raw or "")
        for name, col in parsed.values.items():
            assert col[i].as_py() == expected.get(name)
        others = dict(parsed.others[i].as_py())
        assert others == {k: v for k, v in expected.items() if k in ("x",)}


def test_build_properties_column():
    col = build_properties_column(
        3, uniq_keys=UniqIdGenerator(ip=b"\x7f\0\0\x01", pid=1).many(3), tags=pa.array(["A", None, ""]),
        keys=pa.array([["k1", "k2"], [], None]), constant={"WAIT": "true"},
        user=pa.array([[("c", "d")], [], []], pa.map_(pa.string(), pa.string())),
    )  # fmt: skip
    rows = [decode_properties(x) for x in col.to_pylist()]
    assert rows[0]["TAGS"] == "A" and rows[0]["KEYS"] == "k1 k2" and rows[0]["c"] == "d"
    assert set(rows[1]) == set(rows[2]) == {"UNIQ_KEY", "WAIT"}
    ids = [r["UNIQ_KEY"] for r in rows]
    assert len(set(ids)) == 3 and all(parse_uniq_id(i).ip == "127.0.0.1" for i in ids)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.integers(0, 400))
def test_garbage_never_escapes_as_another_error(data, cut):
    """Random bytes (and a real body cut anywhere) raise the codec's errors, nothing else, and end."""
    from rocketmq_protocol.remoting.errors import RemotingCodecError
    from rocketmq_protocol.remoting.frames import FrameSplitter

    real = _stored_one() + _stored_one()
    for body in (data, real[:cut] + data, real[: cut % len(real)]):
        for decode in (decode_stored, decode_batch, lambda b: FrameSplitter().feed(b)):
            try:
                decode(body)
            except RemotingCodecError:
                pass


def test_uniform_value():
    assert uniform_value(pa.array(["ab", "ab", "ab"])) == b"ab"
    assert uniform_value(pa.array(["ab", "ab", "ab"]).slice(1)) == b"ab"
    assert uniform_value(pa.array(["", ""])) == b""
    assert uniform_value(pa.array([b"x\x00", b"x\x00"])) == b"x\x00"
    for differs in (["ab", "ac"], ["ab", "abc"], ["ab", None], [], ["a", "b", "a"][1:]):
        assert uniform_value(pa.array(differs, pa.string())) is None
    assert uniform_value(pa.array(["a", "b", "b"]).slice(1)) == b"b"


def test_many_answers_of_same_size_records_decode_as_one():
    """Bodies of same-size records (a real broker's 32-message answers) are cut in one check; a body that
    ends inside a record is still refused."""
    n = 6
    data = encode_stored(topic="T", queue_id=0, queue_offset=np.arange(n), commitlog_offset=np.arange(n) * 200,
                         body=pa.array([b"%03d" % i for i in range(n)]),
                         properties=pa.array([f"UNIQ_KEY\x01{i:032X}\x02" for i in range(n)]))  # fmt: skip
    size = len(data) // n
    parts = [data[: 2 * size], data[2 * size : 5 * size], b"", data[5 * size :]]
    assert decode_stored(parts).to_pylist() == decode_stored(data).to_pylist()
    with pytest.raises(MessageDecodeError, match="TOTALSIZE"):
        decode_stored([data[: size + 10], data[size + 10 :]])


#: A V1 record's magic code as stored, inside a body: a false record start for `_chained_starts`.
_MAGIC_BYTES = struct.pack(">i", MAGIC_V1)


def _variable_records(n: int, seed: int = 0, magic_in: int | None = None) -> tuple[bytes, np.ndarray]:
    """`n` records of varied sizes, and where each starts (one more: the end); record `magic_in`'s body
    holds a magic code."""
    rng = np.random.default_rng(seed)
    bodies = [b"b" * int(k) for k in rng.integers(1, 300, n)]
    if magic_in is not None:
        bodies[magic_in] = b"bbbb" + _MAGIC_BYTES + bodies[magic_in]
    records = [
        encode_stored(
            topic="T",
            queue_id=0,
            queue_offset=np.array([i]),
            commitlog_offset=np.array([i]),
            body=pa.array([b]),
            properties=f"UNIQ_KEY\x01{i:032X}\x02",
        )
        for i, b in enumerate(bodies)
    ]
    return b"".join(records), np.cumsum([0, *map(len, records)])


@pytest.mark.parametrize("per_span", [[3] * 40, [32] * 20, [2] * 18 + [50, 70], [0, 5, 1, *([4] * 30), 0]])
def test_many_answers_of_varied_records_are_walked_together(per_span):
    """Many bodies of varied record sizes (a real broker's answers) are walked in lockstep when a body holds
    a magic code: the same records as one body walked record by record, including spans left to finish
    alone and empty ones."""
    assert len(per_span) >= LOCKSTEP_MIN_SPANS
    data, starts = _variable_records(sum(per_span), magic_in=sum(per_span) // 2)
    assert _chained_starts(np.frombuffer(data, np.uint8), [(0, len(data))], 50) is None
    cuts = np.cumsum([0, *per_span])
    parts = [data[starts[a] : starts[b]] for a, b in itertools.pairwise(cuts)]
    whole = decode_stored(data)
    assert decode_stored(parts).to_pylist() == whole.to_pylist()
    buf = np.frombuffer(data, np.uint8)
    spans = [(int(starts[a]), int(starts[b])) for a, b in itertools.pairwise(cuts)]
    assert record_starts(buf, spans, 50).tolist() == starts[:-1].tolist()


@pytest.mark.parametrize("per_span", [[1], [700], [3] * 40, [0, 5, 1, *([4] * 30), 0]])
def test_records_of_any_sizes_are_found_by_their_magic_codes(per_span):
    """One body or many of varied record sizes: the records chain from magic code to magic code, found
    without a per-record step, the same as walked one by one."""
    data, starts = _variable_records(sum(per_span), seed=len(per_span))
    cuts = np.cumsum([0, *per_span])
    spans = [(int(starts[a]), int(starts[b])) for a, b in itertools.pairwise(cuts)]
    buf = np.frombuffer(data, np.uint8)
    chained = _chained_starts(buf, spans, 91)
    assert chained is not None and chained.tolist() == starts[:-1].tolist()
    parts = [data[a:b] for a, b in spans]
    assert decode_stored(parts).to_pylist() == decode_stored(data).to_pylist()


@pytest.mark.parametrize("magic_in", [0, 1, 5, 9])
def test_a_body_holding_a_magic_code_is_walked(magic_in):
    data, starts = _variable_records(10, magic_in=magic_in)
    buf = np.frombuffer(data, np.uint8)
    assert _chained_starts(buf, [(0, len(data))], 91) is None
    assert record_starts(buf, [(0, len(data))], 91).tolist() == starts[:-1].tolist()
    assert decode_stored(data).column("queue_offset").to_pylist() == list(range(10))


def test_spans_that_do_not_start_at_a_record_are_not_chained():
    """Records chaining across an answer boundary that cuts one in two: left to the walk, which refuses it."""
    data, starts = _variable_records(6)
    cut = int(starts[3]) + 10
    assert _chained_starts(np.frombuffer(data, np.uint8), [(0, cut), (cut, len(data))], 91) is None
    with pytest.raises(MessageDecodeError):
        decode_stored([data[:cut], data[cut:]])


def _first_record(mutate):
    """A change to the first record of an answer, the rest of the answer kept."""

    def apply(part: bytes, size: int) -> bytes:
        return mutate(part[:size]) + part[size:]

    return apply


@pytest.mark.parametrize(
    ("span", "mutate", "match"),
    [
        (7, _first_record(lambda r: struct.pack(">i", 10) + r[4:]), "TOTALSIZE 10 \\(minimum"),
        (7, _first_record(lambda r: struct.pack(">i", 1 << 20) + r[4:]), "only"),
        (19, lambda part, size: part + b"\0\0", "trailing bytes"),
        (0, lambda part, size: part[:-1], "only"),
    ],
)
def test_malformed_answers_walked_together_are_refused(span, mutate, match):
    data, starts = _variable_records(60, seed=1)
    parts = [data[starts[i] : starts[i + 3]] for i in range(0, 60, 3)]
    parts[span] = mutate(parts[span], int(starts[3 * span + 1] - starts[3 * span]))
    with pytest.raises(MessageDecodeError, match=match):
        decode_stored(parts)


def _reference_join(pieces: list) -> bytes:
    n = len(next(p for p in pieces if not isinstance(p, bytes)))
    out = []
    for i in range(n):
        for p in pieces:
            if isinstance(p, bytes):
                out.append(p)
            else:
                v = p[i].as_py()
                out.append(b"" if v is None else v.encode() if isinstance(v, str) else v)
    return b"".join(out)


@pytest.mark.parametrize(
    "pieces",
    [
        # one width per piece (the 2-D path): slices, strings, constant pieces, an empty-valued piece
        [pa.array([b"ab", b"cd", b"ef", b"gh"]).slice(1, 3), b"|", pa.array(["xé", "yü", "zö"]), b""],
        [pa.array([b"", b"", b""]), b"k", pa.array([b"123", b"456", b"789"])],
        # widths that differ, nulls: Arrow's element-wise join
        [pa.array([b"a", b"bb", b"ccc"]), b"-", pa.array([b"1", b"2", b"3"])],
        [pa.array([b"aa", None, b"cc"]), b"-", pa.array(["1", "2", "3"])],
    ],
)
def test_joined_rows_are_each_rows_pieces_back_to_back(pieces: list) -> None:
    assert _join_buffer(pieces).to_pybytes() == _reference_join(pieces)


@settings(max_examples=80, deadline=None)
@given(data=st.data(), n=st.integers(2, 12), width=st.integers(0, 14), body=st.integers(0, 6))
def test_records_decode_together_as_each_alone(data, n, width, body):
    """Records whose tails (topic and properties) have one length are read from one compact copy and their
    properties off the first row where the layouts agree: every column equals each record decoded alone,
    whatever the separators, names and hosts (a one-record decode takes none of those paths)."""
    draw = lambda values: data.draw(st.lists(values, min_size=n, max_size=n))  # noqa: E731
    value = st.text("ab\x01\x02", min_size=width, max_size=width)
    # any bytes, or one layout ("ab" and "b") whose values may hold separators
    properties = value if data.draw(st.booleans()) else value.map(lambda v: f"ab\x01{v}\x02b\x01{v[::-1]}")
    records = encode_stored(
        topic=pa.array(draw(st.sampled_from(["TA", "TB"])), pa.string()),
        queue_id=0,
        queue_offset=np.arange(n, dtype=np.int64),
        commitlog_offset=np.arange(n, dtype=np.int64) * 300,
        body=pa.array(draw(st.binary(min_size=body, max_size=body)), pa.binary()),
        properties=pa.array(draw(properties), pa.string()),
        born_host=pa.array(["[::1]:7" if v6 else "10.0.0.5:54321" for v6 in draw(st.booleans())]),
        store_host="10.0.0.9:10911",
    )
    ends = [*record_starts(records, [(0, len(records))], 1).tolist()[1:], len(records)]
    pieces = [records[a:b] for a, b in itertools.pairwise([0, *ends])]
    for raw_properties in (True, False):
        together = decode_stored(records, extra_properties=("a",), raw_properties=raw_properties)
        alone = [decode_stored(p, extra_properties=("a",)) for p in pieces]
        for name in together.schema.names:
            if name != "raw_properties" or raw_properties:
                expect = pa.concat_arrays([b.column(name) for b in alone])
                assert together.column(name).equals(expect), name


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(1, 70), width=st.integers(1, 9), step=st.integers(0, 5), seed=st.integers(0, 99))
def test_folded_rows_and_copied_rows(rows, width, step, seed):
    """`fold_rows` is the column-wise reduction and `rows_at` the byte rows, evenly stepped or not."""
    buf = np.random.default_rng(seed).integers(0, 256, rows * (width + step) + 3, dtype=np.uint8)
    positions = np.arange(rows, dtype=np.int64) * (width + step) + 1
    if seed % 2:  # not evenly stepped: the gathered path
        positions[-1] -= 1
    copied = rows_at(buf, positions, width)
    assert copied.flags.c_contiguous and copied.flags.writeable
    assert copied.tolist() == [buf[p : p + width].tolist() for p in positions]
    for op, reduce in ((np.maximum, np.max), (np.minimum, np.min)):
        assert fold_rows(copied, op).tolist() == reduce(copied, axis=0).tolist()


def test_a_last_record_of_another_layout_is_not_read_off_the_first():
    """Three records of one size whose last has its separator elsewhere: parsed one by one."""
    props = ["ab\x01xy\x02b\x01z", "ab\x01yx\x02b\x01z", "ab\x01x\x02yb\x01z"]
    data = encode_stored(topic="T", queue_id=0, queue_offset=np.arange(3), commitlog_offset=np.arange(3) * 100,
                         body=pa.array([b"x"] * 3), properties=pa.array(props))  # fmt: skip
    lean = decode_stored(data, extra_properties=("ab", "yb"), raw_properties=False)
    assert lean.column("ab").to_pylist() == ["xy", "yx", "x"]
    assert lean.column("yb").to_pylist() == [None, None, "z"]
