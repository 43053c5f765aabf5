"""Java-compatible hashes RocketMQ relies on: String.hashCode (tag codes) and Guava consistentHash (FIFO
queue of a message group). Shared by the emulator (broker side) and the writer (client-side queue choice)."""

from __future__ import annotations

import sys
from array import array
from functools import lru_cache

# UTF-16 in the machine's byte order, so array("H") reads the code units directly.
_UTF16_NATIVE = "utf-16-le" if sys.byteorder == "little" else "utf-16-be"


@lru_cache(maxsize=1024)
def java_string_hash(s: str) -> int:
    """Java `String.hashCode` as a signed int32 (over UTF-16 code units); recent results are cached."""
    h = 0
    for unit in s.encode("ascii") if s.isascii() else array("H", s.encode(_UTF16_NATIVE)):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def guava_consistent_hash(input_value: int, buckets: int) -> int:
    """Guava `Hashing.consistentHash(long, int)`; the proxy feeds it `messageGroup.hashCode()`."""
    if buckets <= 0:
        raise ValueError(f"buckets must be positive, got {buckets}")
    state = input_value & 0xFFFFFFFFFFFFFFFF
    candidate = 0
    while True:
        state = (2862933555777941757 * state + 1) & 0xFFFFFFFFFFFFFFFF
        nxt = int((candidate + 1) / (((state >> 33) + 1) / 2147483648.0))
        if 0 <= nxt < buckets:
            candidate = nxt
        else:
            return candidate
