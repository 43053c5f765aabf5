"""fastjson's string escapes: the vectorised check of long strings gives what the per-character escape gives."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketmq_protocol.remoting import fastjson
from rocketmq_protocol.remoting.fastjson import json_string

# Mostly plain ASCII with now and then a character some style escapes.
_CHARS = st.sampled_from([*"0123456789ABCDEF,:;=", "\x00", "\x1f", '"', "\\", "\x7f", "é", "\u2028", "😀"])


@settings(max_examples=60, deadline=None)
@given(
    head=st.text(alphabet=_CHARS, max_size=8),
    size=st.integers(0, 6000),
    style=st.sampled_from(["fastjson1", "fastjson2"]),
    ascii_only=st.booleans(),
)
def test_long_strings_escape_as_short_ones_do(head: str, size: int, style, ascii_only: bool) -> None:
    s = ("0A1B,2C3D" * (size // 9 + 1))[:size] + head
    fast = json_string(s, style, ascii_only)
    long_before = fastjson._LONG
    try:
        fastjson._LONG = 1 << 60  # every string escaped character by character
        slow = json_string(s, style, ascii_only)
    finally:
        fastjson._LONG = long_before
    assert fast == slow
    assert json.loads(fast) == s


def test_a_batch_answers_msg_id_is_written_as_is() -> None:
    ids = ",".join(f"7F0000010000{i:020X}" for i in range(8192))
    assert json_string(ids) == f'"{ids}"'
    assert json_string(ids + "\n") == f'"{ids}\\n"'
