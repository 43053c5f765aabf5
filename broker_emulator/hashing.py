"""Java-compatible hashes RocketMQ relies on: String.hashCode (tag codes) and Guava consistentHash (FIFO)."""

from __future__ import annotations


def java_string_hash(s: str) -> int:
    """Java `String.hashCode` as a signed int32 (over UTF-16 code units)."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
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
