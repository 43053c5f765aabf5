"""Frames: round trips of both header types, stream splitting, and malformed input raising, never hanging."""

from __future__ import annotations

import asyncio
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketmq_protocol.remoting.codes import LanguageCode, RequestCode, ResponseCode, SerializeType
from rocketmq_protocol.remoting.errors import FrameError, FrameTooLargeError, HeaderError
from rocketmq_protocol.remoting.frames import (
    MAX_FRAME_LENGTH,
    FrameSplitter,
    RemotingCommand,
    decode_frame,
    decode_payload,
    encode_frame,
    read_frame,
)

text = st.text(max_size=30)
commands = st.builds(
    RemotingCommand,
    code=st.integers(-32768, 32767),
    language=st.sampled_from(list(LanguageCode)),
    version=st.integers(-32768, 32767),
    opaque=st.integers(-(2**31), 2**31 - 1),
    flag=st.integers(0, 3),
    remark=st.one_of(st.none(), text.filter(bool)),
    ext_fields=st.dictionaries(text.filter(bool), text.filter(bool), max_size=5),
    body=st.binary(max_size=64),
)


@settings(max_examples=150, deadline=None)
@given(
    cmd=commands,
    stype=st.sampled_from(list(SerializeType)),
    style=st.sampled_from(["fastjson1", "fastjson2"]),
)
def test_round_trip_both_header_types(cmd: RemotingCommand, stype: SerializeType, style):
    frame = encode_frame(cmd, stype, json_style=style)
    back = decode_frame(frame)
    assert (back.code, back.version, back.opaque, back.flag, back.remark) == (
        cmd.code, cmd.version, cmd.opaque, cmd.flag, cmd.remark,
    )  # fmt: skip
    assert back.language == cmd.language and back.ext_fields == cmd.ext_fields and back.body == cmd.body
    assert back.serialize_type == stype
    assert encode_frame(back, json_style=style) == frame


def test_flags_and_response():
    req = RemotingCommand(RequestCode.PULL_MESSAGE, opaque=9, flag=2, serialize_type=SerializeType.ROCKETMQ)
    assert req.is_oneway and not req.is_response
    resp = req.response(ResponseCode.PULL_NOT_FOUND, ext_fields={"nextBeginOffset": "5"})
    assert resp.is_response and resp.opaque == 9 and resp.serialize_type == SerializeType.ROCKETMQ
    assert decode_frame(encode_frame(resp)).ext_fields == {"nextBeginOffset": "5"}


def test_json_header_is_what_java_writes():
    cmd = RemotingCommand(105, LanguageCode.PYTHON, 479, 1, 0, None, {"topic": "TopicTest"})
    header = b'{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"PYTHON","opaque":1,'
    header += b'"serializeTypeCurrentRPC":"JSON","version":479}'
    assert encode_frame(cmd) == struct.pack(">ii", 4 + len(header), len(header)) + header
    binary = encode_frame(cmd, SerializeType.ROCKETMQ)
    assert binary == bytes.fromhex(
        "0000002d 01000029 0069 03 01df 00000001 00000000 00000000 00000014 0005 746f706963 00000009 546f70696354657374"
    )


def test_pop_codes_need_a_json_header():
    with pytest.raises(ValueError, match="int16"):
        encode_frame(RemotingCommand(RequestCode.POP_MESSAGE), SerializeType.ROCKETMQ)
    assert decode_frame(encode_frame(RemotingCommand(RequestCode.POP_MESSAGE))).code == 200050


def test_json_header_tolerates_key_order_and_unknown_keys():
    header = b'{"version":1,"opaque":3,"extra":[1],"extFields":{"a":5,"b":true},"code":11,"language":"GO","flag":0}'
    cmd = decode_payload(struct.pack(">i", len(header)) + header + b"xy")
    assert (cmd.code, cmd.opaque, cmd.language, cmd.body) == (11, 3, LanguageCode.GO, b"xy")
    assert cmd.ext_fields == {"a": "5", "b": "true"}


@pytest.mark.parametrize(
    ("header", "code"),
    [
        (b'{"code":7}', 7),
        (b' {"code":7}\n', 7),  # whitespace around the object: read as json reads it
        (b'{"code":7} {"code":8}', None),  # two objects
        (b'{"code":7}}', None),
        (b'{"code":7', None),
        (b'{"code":7,}', None),
        (b"{}", None),  # no code
    ],
)
def test_json_headers_are_read_as_json_reads_them(header, code):
    payload = struct.pack(">i", len(header)) + header
    if code is None:
        with pytest.raises(HeaderError):
            decode_payload(payload)
    else:
        assert decode_payload(payload).code == code


@settings(max_examples=60, deadline=None)
@given(cmds=st.lists(commands, min_size=1, max_size=6), cuts=st.lists(st.integers(0, 400), max_size=8))
def test_splitter_reassembles_any_chunking(cmds, cuts):
    stream = b"".join(encode_frame(c, SerializeType(i % 2)) for i, c in enumerate(cmds))
    splitter = FrameSplitter()
    got = []
    pos = 0
    for cut in [*sorted(cuts), len(stream)]:
        got += splitter.feed(stream[pos : max(pos, cut)])
        pos = max(pos, cut)
    assert [(c.code, c.opaque, c.body) for c in got] == [(c.code, c.opaque, c.body) for c in cmds]
    assert splitter.buffered == 0


def test_splitter_waits_for_a_truncated_frame_then_completes():
    frame = encode_frame(RemotingCommand(34, body=b"x" * 100))
    splitter = FrameSplitter()
    assert splitter.feed(frame[:-1]) == []
    assert splitter.buffered == len(frame) - 1
    assert len(splitter.feed(frame[-1:])) == 1


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.sampled_from([0, 10, 5_000, 64 * 1024, 200_000, 300_000]), min_size=1, max_size=6),
    chunks=st.lists(st.integers(1, 400_000), min_size=1, max_size=12),
)
def test_splitter_receives_into_its_buffers_in_any_chunking(sizes, chunks):
    """What a BufferedProtocol does: each read lands in `buffer()` (at most its length), then `received`.
    Frames longer than DIRECT_FRAME_BYTES are read into a buffer of their own once their length is known."""
    cmds = [RemotingCommand(310, opaque=i, body=bytes([i % 251]) * n) for i, n in enumerate(sizes)]
    stream = memoryview(b"".join(encode_frame(c) for c in cmds))
    splitter = FrameSplitter()
    got = []
    pos = i = 0
    while pos < len(stream):
        room = splitter.buffer()
        assert len(room) > 0
        k = min(len(room), chunks[i % len(chunks)], len(stream) - pos)
        i += 1
        room[:k] = stream[pos : pos + k]
        got += splitter.received(k)
        pos += k
    assert [(c.opaque, c.body) for c in got] == [(c.opaque, c.body) for c in cmds]
    assert splitter.buffered == 0


def test_a_long_frame_is_received_into_a_buffer_of_its_own():
    frame = encode_frame(RemotingCommand(310, body=b"b" * 1_000_000))
    splitter = FrameSplitter()
    room = splitter.buffer()
    room[:100] = frame[:100]
    assert splitter.received(100) == []
    rest = splitter.buffer()
    assert len(rest) == len(frame) - 100  # exactly the frame's remaining bytes: one read, no copy after it
    rest[:] = frame[100:]
    (cmd,) = splitter.received(len(rest))
    assert cmd.body == b"b" * 1_000_000 and splitter.buffered == 0


@pytest.mark.parametrize(
    ("data", "error", "match"),
    [
        (struct.pack(">i", MAX_FRAME_LENGTH), FrameTooLargeError, "exceeds the maximum"),
        (struct.pack(">i", -1), FrameError, "smaller than"),
        (struct.pack(">i", 2) + b"ab", FrameError, "smaller than"),
        (struct.pack(">ii", 10, 100) + b"{}xxxx", HeaderError, "header length 100 exceeds"),
        (struct.pack(">ii", 9, 5) + b"notjs", HeaderError, "not valid JSON"),
        (struct.pack(">ii", 6, 2) + b"[]", HeaderError, "not an object"),
        (struct.pack(">ii", 6, 2) + b"{}", HeaderError, "no 'code'"),
        (struct.pack(">iI", 6, (7 << 24) | 2) + b"{}", HeaderError, "unknown serialize type 7"),
        (struct.pack(">iI", 9, (1 << 24) | 5) + b"short", HeaderError, "fixed part"),
        (struct.pack(">iI", 25, (1 << 24) | 21) + struct.pack(">hBhiii", 1, 0, 0, 0, 0, 999) + b"\0\0\0\0", HeaderError, "remark length"),
        (struct.pack(">iI", 25, (1 << 24) | 21) + struct.pack(">hBhiiii", 1, 0, 0, 0, 0, 0, 5), HeaderError, "extFields length"),
        (struct.pack(">iI", 29, (1 << 24) | 25) + struct.pack(">hBhiiii", 1, 0, 0, 0, 0, 0, 4) + struct.pack(">hh", 9, 0), HeaderError, "key length"),
    ],
)  # fmt: skip
def test_malformed_frames_raise(data: bytes, error: type, match: str):
    with pytest.raises(error, match=match):
        FrameSplitter().feed(data)


def test_splitter_stays_failed_and_limit_is_configurable():
    splitter = FrameSplitter(max_frame_length=64)
    with pytest.raises(FrameTooLargeError):
        splitter.feed(encode_frame(RemotingCommand(1, body=b"z" * 100)))
    with pytest.raises(FrameTooLargeError):
        splitter.feed(b"")


def test_decode_frame_checks_the_prefix_matches():
    frame = encode_frame(RemotingCommand(1))
    with pytest.raises(FrameError, match="length prefix"):
        decode_frame(frame + b"x")


def _reader(data: bytes) -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    reader.feed_eof()
    return reader


def test_read_frame():
    async def scenario():
        frame = encode_frame(RemotingCommand(11, opaque=5, body=b"abc"))
        reader = _reader(frame + frame)
        first = await asyncio.wait_for(read_frame(reader), 5)
        second = await asyncio.wait_for(read_frame(reader), 5)
        assert first.opaque == second.opaque == 5 and first.body == b"abc"
        assert await asyncio.wait_for(read_frame(reader), 5) is None
        with pytest.raises(FrameError, match="inside a frame"):
            await asyncio.wait_for(read_frame(_reader(frame[:-2])), 5)
        with pytest.raises(FrameError, match="length prefix"):
            await asyncio.wait_for(read_frame(_reader(frame[:2])), 5)
        with pytest.raises(FrameTooLargeError):
            await asyncio.wait_for(read_frame(_reader(struct.pack(">i", 1 << 30))), 5)

    asyncio.run(scenario())
