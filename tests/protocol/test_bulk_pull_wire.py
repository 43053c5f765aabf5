"""The hand-written BulkPullResponse codec against protobuf's own serialization and parse."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from rocketmq_protocol.extension import pb
from rocketmq_protocol.extension.bulk_pull_wire import decode_response, encode_response
from rocketmq_protocol.message_schema import MESSAGE_SCHEMA, ipc_parts, ipc_to_table, table_to_ipc


def _rows(n: int, seed: int) -> pa.Table:
    rnd = random.Random(seed)
    cols = {name: pa.nulls(n, MESSAGE_SCHEMA.field(name).type) for name in MESSAGE_SCHEMA.names}
    cols["queue_offset"] = pa.array(range(100, 100 + n), pa.int64())
    cols["message_id"] = pa.array([f"ID{i:030d}" for i in range(n)], pa.string())
    cols["body"] = pa.array([rnd.randbytes(rnd.randrange(0, 300)) for _ in range(n)], pa.binary())
    cols["tag"] = pa.array([rnd.choice([None, "a", "tägé"]) for _ in range(n)], pa.string())
    return pa.table(cols, schema=MESSAGE_SCHEMA)


def _random_fields(rnd: random.Random) -> tuple:
    def num(bits: int) -> int:
        return rnd.choice(
            [0, 1, -1, 127, 128, 2 ** (bits - 1) - 1, -(2 ** (bits - 1)), rnd.randrange(1 << 20)]
        )

    message = rnd.choice(["", "OK", "no new message", "topic t is not served by broker-a ✓"])
    return num(32), message, num(64), num(64), num(64), num(32)


@pytest.mark.parametrize("seed", range(40))
def test_encode_is_what_protobuf_serializes(seed):
    rnd = random.Random(seed)
    fields = _random_fields(rnd)
    rows = None if seed % 3 == 0 else _rows(rnd.randrange(0, 50), seed)
    code, message, next_offset, min_offset, max_offset, count = fields
    expected = pb.BulkPullResponse(
        code=code,
        message=message,
        next_offset=next_offset,
        min_offset=min_offset,
        max_offset=max_offset,
        count=count,
        arrow_ipc=b"" if rows is None else table_to_ipc(rows),
    ).SerializeToString()
    assert encode_response(*fields, rows) == expected
    pieces = encode_response(*fields, rows, copy=False)  # the pull channel's: the rows' buffers uncopied
    assert (pieces if isinstance(pieces, bytes) else b"".join(pieces)) == expected


@pytest.mark.parametrize("seed", range(40))
def test_decode_reads_what_protobuf_parses(seed):
    rnd = random.Random(seed)
    rows = _rows(rnd.randrange(1, 50), seed)
    msg = pb.BulkPullResponse(
        code=_random_fields(rnd)[0], message="m", next_offset=-5, count=7, arrow_ipc=table_to_ipc(rows)
    )
    raw = msg.SerializeToString()
    if seed % 2:  # a second serialization appended: protobuf merges, the last scalar and bytes win
        later = pb.BulkPullResponse(code=40402, max_offset=1 << 40, arrow_ipc=table_to_ipc(rows.slice(0, 1)))
        raw += later.SerializeToString()
        msg.MergeFrom(later)
    if seed % 5 == 0:  # an unknown field (number 15, LEN) is skipped
        raw = b"\x7a\x03abc" + raw
    got = decode_response(raw)
    assert (got.code, got.message, got.next_offset, got.min_offset, got.max_offset, got.count) == (
        msg.code,
        msg.message,
        msg.next_offset,
        msg.min_offset,
        msg.max_offset,
        msg.count,
    )
    assert bytes(got.arrow_ipc) == msg.arrow_ipc
    assert ipc_to_table(got.arrow_ipc).equals(ipc_to_table(msg.arrow_ipc))


def test_decode_of_a_response_without_payload_has_an_empty_view():
    got = decode_response(pb.BulkPullResponse(code=40401, message="topic t not found").SerializeToString())
    assert (got.code, got.message, len(got.arrow_ipc)) == (40401, "topic t not found", 0)
    assert decode_response(b"") == (0, "", 0, 0, 0, 0, memoryview(b""))


def test_decode_views_the_received_bytes_without_copying():
    raw = encode_response(20000, "OK", 3, 0, 3, 3, _rows(3, 1))
    got = decode_response(raw)
    assert got.arrow_ipc.obj is raw


@pytest.mark.parametrize(
    "raw", [b"\x08", b"\x3a\x05ab", b"\x0b", b"\x00\x01", b"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"]
)
def test_malformed_responses_raise_value_error(raw):
    with pytest.raises(ValueError):
        decode_response(raw)


def test_ipc_parts_are_the_stream_with_the_large_buffers_uncopied():
    """The pull channel's pieces: their concatenation is the IPC stream, and a table's large buffers (here
    its bodies, in two stored chunks, one sliced) are among them as views of the arrays' own memory."""
    rows = _rows(3000, 7)
    table = pa.concat_tables([rows.slice(0, 1000), rows.slice(1000)])  # chunks as a store's segments
    parts = ipc_parts(table)
    assert b"".join(parts) == table_to_ipc(table)
    addresses = {pa.py_buffer(p).address for p in parts if p.nbytes}
    for chunk in table.column("body").chunks:
        offsets, data = chunk.buffers()[1:]
        first = int(np.frombuffer(offsets, np.int32, 1, 4 * chunk.offset)[0])
        start = data.address + first
        assert start in addresses, "a chunk's bodies were copied"
