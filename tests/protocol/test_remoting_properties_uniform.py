"""`parse_properties_column`'s fast path for property strings of one shape (`_parse_uniform`) gives exactly
what the general parse gives, and declines whatever it cannot read off the first row."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from rocketmq_protocol.remoting import properties as P


def _general(raw: pa.Array, **kw) -> P.PropertyColumns:
    P.UNIFORM_FAST_PATH = False
    try:
        return P.parse_properties_column(raw, **kw)
    finally:
        P.UNIFORM_FAST_PATH = True


def _ids(n: int, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice("0123456789ABCDEF") for _ in range(32)) for _ in range(n)]


BROKER_STYLE = (
    "UNIQ_KEY\x01{id}\x02CLUSTER\x01DefaultCluster\x02MSG_REGION\x01DefaultRegion\x02TRACE_ON\x01true\x02"
)
SHAPES = {
    "broker": BROKER_STYLE,
    "no trailing separator": "UNIQ_KEY\x01{id}\x02WAIT\x01true",
    "user properties and tags": "a\x01{id}\x02TAGS\x01TagA\x02KEYS\x01k1 k2\x02colour\x01red\x02",
    "repeated name": "UNIQ_KEY\x01{id}\x02x\x011\x02UNIQ_KEY\x01{id}\x02",
    "empty value and empty name": "e\x01\x02\x01v\x02UNIQ_KEY\x01{id}\x02",
    "long names": "a_property_name_over_8_bytes\x01{id}\x02MSG_REGION\x01r\x02",
    "value holding a name separator": "v\x01a\x01{id}\x02",
    "item without a name separator": "junk\x02UNIQ_KEY\x01{id}\x02",
}


def _check(raw: pa.Array, expect_fast: bool, **kw) -> None:
    binary = raw.cast(pa.binary()) if pa.types.is_string(raw.type) else raw
    assert (P._parse_uniform(binary, kw.get("names", P.WELL_KNOWN), kw.get("hidden", P.HIDDEN_FROM_READER))
            is not None) is expect_fast  # fmt: skip
    fast, slow = P.parse_properties_column(raw, **kw), _general(raw, **kw)
    assert fast.values.keys() == slow.values.keys()
    for name in slow.values:
        assert fast.values[name].equals(slow.values[name]), name
    assert fast.others.equals(slow.others)


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("typ", [pa.string(), pa.binary()])
def test_one_shape_is_read_off_the_first_row(shape: str, typ: pa.DataType) -> None:
    raw = pa.array([SHAPES[shape].format(id=i) for i in _ids(50)], typ)
    _check(raw, True)
    _check(raw, True, names=("a", "UNIQ_KEY", "missing"), hidden=frozenset({"UNIQ_KEY"}))
    _check(raw.slice(7, 20), True)


def test_other_shapes_take_the_general_path() -> None:
    ids = _ids(6)
    base = [BROKER_STYLE.format(id=i) for i in ids]
    swapped = base[3][:20] + "\x02" + base[3][21:]
    renamed = base[2].replace("CLUSTER", "CLUSTEX")
    cases = {
        "a separator where others have a value byte": [*base[:3], swapped, *base[4:]],
        "a different name": [*base[:2], renamed, *base[3:]],
        "different lengths": [*base[:5], base[5] + "x\x01y\x02"],
        "a null": [*base[:5], None],
        "one row": base[:1],
    }
    for rows in cases.values():
        _check(pa.array(rows, pa.string()), False)
