"""rocketmq_protocol.arrow_values gives what pyarrow's own conversions give (slices, nulls, chunks)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from rocketmq_protocol import arrow_values
from rocketmq_protocol.arrow_values import (
    binary_scalar,
    bool_values,
    byte_lengths,
    empty_scalar,
    fill_fields,
    fixed_width_rows,
    from_numpy,
    int64_values,
    int_scalar,
    string_array,
)


def test_int64_values_of_slices_chunks_nulls_and_timestamps() -> None:
    arr = pa.array([5, None, 7, 8, -1], pa.int32())
    assert int64_values(arr).tolist() == [5, 0, 7, 8, -1]
    assert int64_values(arr.slice(1, 3), null=-9).tolist() == [-9, 7, 8]
    chunked = pa.chunked_array([pa.array([1, 2], pa.int64()), pa.array([3], pa.int64())])
    assert int64_values(chunked).tolist() == [1, 2, 3]
    ts = pa.array([1_700_000_000_000, None], pa.timestamp("ms"))
    assert int64_values(ts).tolist() == [1_700_000_000_000, 0]
    assert int64_values(pa.array([], pa.int64())).tolist() == []
    assert int64_values(pa.nulls(3, pa.int64()), null=-1).tolist() == [-1, -1, -1]  # no data buffer
    # slices of int64 and timestamp arrays are read in place, from their element offset
    wide = pa.array([10, 11, None, 2**40, -5, 15], pa.int64())
    assert int64_values(wide.slice(2, 3), null=-1).tolist() == [-1, 2**40, -5]
    assert int64_values(ts.slice(1)).tolist() == [0]
    stamps = pa.array([1, 2, 3, 4], pa.timestamp("us", tz="UTC"))
    assert int64_values(stamps.slice(1, 2)).tolist() == [2, 3]
    assert int64_values(pa.chunked_array([wide.slice(3, 2)])).tolist() == [2**40, -5]


def test_byte_lengths_are_utf8_bytes_with_nulls_as_zero() -> None:
    strings = pa.array(["ab", None, "日本", "", "x"])
    assert byte_lengths(strings).tolist() == [2, 0, 6, 0, 1]
    assert byte_lengths(strings.slice(1, 3)).tolist() == [0, 6, 0]
    assert byte_lengths(pa.array([b"xyz", None], pa.large_binary()).slice(1)).tolist() == [0]
    assert byte_lengths(pa.array(["abc", "de"], pa.large_string())).tolist() == [3, 2]
    assert byte_lengths(pa.nulls(2, pa.string())).tolist() == [0, 0]  # no offsets buffer
    assert byte_lengths(pa.array([], pa.binary())).dtype == np.int64


def test_bool_values_of_slices_and_nulls() -> None:
    arr = pa.array([True, None, False, True, True, None, True, False, True, True])
    assert bool_values(arr).tolist() == [v is True for v in arr.to_pylist()]
    part = arr.slice(3, 6)
    assert bool_values(part).tolist() == [v is True for v in part.to_pylist()]
    assert bool_values(pa.chunked_array([arr.slice(0, 2), arr.slice(8)])).tolist() == [
        True,
        False,
        True,
        True,
    ]


def test_from_numpy_keeps_values_and_converts_to_the_asked_type() -> None:
    assert from_numpy(np.array([True, False, True])).to_pylist() == [True, False, True]
    assert from_numpy(np.arange(3, dtype=np.int16)).type == pa.int16()
    big = np.array([1, 2], ">i8")  # a big-endian field of a decoded record
    out = from_numpy(big, pa.int32())
    assert out.type == pa.int32() and out.to_pylist() == [1, 2]


def test_scalars_and_strings() -> None:
    assert binary_scalar("é", pa.string()).as_py() == "é"
    assert binary_scalar(b"\x00x").as_py() == b"\x00x"
    assert int_scalar(-3).as_py() == -3 and int_scalar(2**40, pa.int64()).as_py() == 2**40
    keys = pa.list_(pa.string())
    props = pa.map_(pa.string(), pa.string())
    assert empty_scalar(keys).as_py() == [] and empty_scalar(keys).type == keys
    assert empty_scalar(props).as_py() == [] and empty_scalar(props).is_valid
    assert string_array(["a", "", "ü"]).to_pylist() == ["a", "", "ü"]


@pytest.mark.parametrize("block_bytes", [1, 24, 100, 1 << 20])
def test_fill_fields_writes_every_record_whatever_the_block(monkeypatch, block_bytes: int) -> None:
    """Blocks of one record, of a few records with a short last block, and one block for all give the same
    records: per-record values where they are arrays, a scalar in every record."""
    monkeypatch.setattr(arrow_values, "FILL_BLOCK_BYTES", block_bytes)
    n = 11
    records = np.zeros(n, np.dtype([("a", ">i4"), ("b", ">i8"), ("c", "V3")]))
    fill_fields(records, [("a", np.arange(n)), ("b", np.int64(-7)), ("c", np.frombuffer(b"xyz", "V3")[0])])
    assert records["a"].tolist() == list(range(n))
    assert records["b"].tolist() == [-7] * n
    assert records.view(np.uint8).reshape(n, 15)[:, 12:].tobytes() == b"xyz" * n


@pytest.mark.parametrize("block_bytes", [1, 64, 1 << 20])
def test_fixed_width_rows_joins_pieces_row_by_row(monkeypatch, block_bytes: int) -> None:
    monkeypatch.setattr(arrow_values, "FILL_BLOCK_BYTES", block_bytes)
    ids = pa.array([b"%04d" % i for i in range(10)], pa.binary()).slice(3)  # sliced: values from offset 3
    names = pa.array(["ab"] * 7, pa.string())
    rows = fixed_width_rows([b"<", ids, b"", names, b">>"], 7)
    assert rows is not None and rows.shape == (7, 9)
    assert [bytes(r) for r in rows] == [b"<%04dab>>" % i for i in range(3, 10)]
    assert fixed_width_rows([pa.array([b"a", b"bc"])], 2) is None  # lengths vary
    assert fixed_width_rows([pa.array([b"a", None])], 2) is None  # a null
    assert fixed_width_rows([b"", b""], 4).shape == (4, 0)
