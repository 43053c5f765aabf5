"""The C reader of JSON headers (`rocketmq_protocol/remoting/_json_header.c`) against the json module's path
of `frames.py`: the same command for every header it reads, None (the json path decides, errors included)
for every header it does not."""

from __future__ import annotations

import json
import os
import random
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketmq_protocol.remoting import frames
from rocketmq_protocol.remoting.codes import LanguageCode, SerializeType
from rocketmq_protocol.remoting.errors import HeaderError
from rocketmq_protocol.remoting.frames import RemotingCommand, decode_header, encode_header

PARSE = frames._json_header
GOLDEN = Path(__file__).parent / "golden"


def test_the_c_reader_is_built_in_ci():
    """CI installs with a compiler present: the build must not silently fall back to the json module there."""
    if PARSE is None and not os.environ.get("CI"):
        pytest.skip("the C header reader is not built here (no compiler at install)")
    assert PARSE is not None


needs_c = pytest.mark.skipif(PARSE is None, reason="the C header reader is not built here")


def _json_path(header: bytes) -> RemotingCommand | type[HeaderError]:
    try:
        return frames._decode_json_text(header)
    except HeaderError:
        return HeaderError


def _agrees(header: bytes) -> bool:
    """Whether the C reader took `header`, after checking that decode_header then equals the json path."""
    fields = PARSE.parse(header)
    expected = _json_path(header)
    if fields is None:
        return False
    assert expected is not HeaderError, header
    assert decode_header(header, SerializeType.JSON) == expected
    return True


def _golden_headers() -> list[tuple[str, bytes]]:
    out = []
    for path in sorted(GOLDEN.glob("*/frame_*.json.bin")):
        raw = path.read_bytes()
        _, word = struct.unpack(">ii", raw[:8])
        out.append((f"{path.parent.name}/{path.name}", raw[8 : 8 + (word & 0xFFFFFF)]))
    return out


CAPTURED = _golden_headers()


@needs_c
@pytest.mark.parametrize(("name", "header"), CAPTURED, ids=lambda v: v if isinstance(v, str) else "")
def test_headers_captured_from_rocketmq(name, header):
    """Real brokers' headers: the C reader takes every one without an escaped string (responses, pulls),
    and reads it as the json path does; one with an escape (a send's properties) goes the json way."""
    taken = _agrees(header)
    assert taken == (b"\\" not in header), name


names = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12)
commands = st.builds(
    RemotingCommand,
    code=st.integers(-(2**31), 2**31 - 1),
    language=st.sampled_from(list(LanguageCode)),
    version=st.integers(-32768, 32767),
    opaque=st.integers(-(2**31), 2**31 - 1),
    flag=st.integers(0, 3),
    remark=st.one_of(st.none(), st.text(max_size=20)),
    ext_fields=st.dictionaries(names, st.text(max_size=12), max_size=6),
)


@needs_c
@settings(max_examples=300, deadline=None)
@given(cmd=commands, style=st.sampled_from(["fastjson1", "fastjson2"]), seed=st.integers(0, 2**32))
def test_any_command_reads_back_the_same(cmd, style, seed):
    """Headers as the encoder writes them, and the same keys shuffled with whitespace between tokens."""
    header = encode_header(cmd, SerializeType.JSON, json_style=style)
    _agrees(header)
    doc = json.loads(header)
    rng = random.Random(seed)
    keys = list(doc)
    rng.shuffle(keys)
    spaced = json.dumps(
        {k: doc[k] for k in keys}, ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, 1])
    )
    if _agrees(spaced.encode()):
        assert decode_header(spaced.encode(), SerializeType.JSON) == decode_header(header, SerializeType.JSON)


@needs_c
@pytest.mark.parametrize(
    "header",
    [
        b'{"code":1,"remark":"a\\"b"}',  # an escape
        b'{"code":1,"remark":"a\tb"}',  # a control character (invalid JSON)
        b'{"code":1,"extFields":null}',
        b'{"code":1,"extFields":{"a":1}}',  # a value that is not a string
        b'{"code":1,"extFields":{"a":{"b":"c"}}}',
        b'{"code":1.0}',
        b'{"code":1e3}',
        b'{"code":01}',
        b'{"code":-}',
        b'{"code":1234567890123456789}',  # 19 digits
        b'{"code":true}',
        b'{"code":"7"}',
        b'{"code":1,"language":7}',
        b'{"code":1,"remark":null}',
        b'{"code":1,"extra":[1]}',  # a key RemotingCommand does not have
        b'{"code":1,"":"x"}',
        b'{"code":1,}',
        b'{"code":1} x',
        b'{"code":1}}',
        b'{"code":1',
        b'{"code":1 "flag":0}',
        b'{"flag":0}',  # no code
        b"{}",
        b"",
        b"[1]",
        b'{"code":1,"remark":"\xff"}',  # invalid UTF-8
        b'{"code":1,"extFields":{"a":"b",}}',
    ],
)
def test_other_headers_go_the_json_way(header):
    assert PARSE.parse(header) is None
    expected = _json_path(header)
    if expected is HeaderError:
        with pytest.raises(HeaderError):
            decode_header(header, SerializeType.JSON)
    else:
        assert decode_header(header, SerializeType.JSON) == expected


@needs_c
def test_what_it_reads():
    header = (
        b' {"opaque":-3, "code" : 0,"language":"CPP","extFields":{"k":"v","k":"w","\xc3\xa9":""},"flag":1}\n'
    )
    assert PARSE.parse(header) == (0, "CPP", 0, -3, 1, None, {"k": "w", "é": ""})
    cmd = decode_header(header, SerializeType.JSON)
    assert (cmd.language, cmd.version, cmd.ext_fields) == (LanguageCode.CPP, 0, {"k": "w", "é": ""})
    assert decode_header(b'{"code":5,"language":"NEW"}', SerializeType.JSON).language == LanguageCode.OTHER
    assert decode_header(b'{"code":5}', SerializeType.JSON).language == LanguageCode.JAVA


@needs_c
@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_damaged_headers_are_read_as_json_reads_them_or_left_to_it(data):
    """Any byte changed, inserted or cut in a real header: what the C reader takes, the json path reads the
    same way; what the json path rejects, the C reader leaves to it."""
    _, header = data.draw(st.sampled_from(CAPTURED))
    b = bytearray(header)
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, max(len(b) - 1, 0)))
        op = data.draw(st.sampled_from(["set", "insert", "cut"]))
        if op == "set" and b:
            b[i] = data.draw(st.sampled_from(list(b'{}[]":,\\ 0123456789-.eE\x00\x01\xffabn')))
        elif op == "insert":
            b.insert(i, data.draw(st.integers(0, 255)))
        elif b:
            del b[i:]
    damaged = bytes(b)
    if not _agrees(damaged):  # left to the json path: its error stands
        expected = _json_path(damaged)
        if expected is HeaderError:
            with pytest.raises(HeaderError):
                decode_header(damaged, SerializeType.JSON)
