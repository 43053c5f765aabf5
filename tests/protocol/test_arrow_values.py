"""rocketmq_protocol.arrow_values gives what pyarrow's own conversions give (slices, nulls, chunks)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from rocketmq_protocol.arrow_values import (
    binary_scalar,
    bool_values,
    byte_lengths,
    empty_scalar,
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
