"""The reader's offsets: `{"topic": {"brokerName": {"queueId": nextOffset}}}` ⇄ `{MessageQueue: offset}`.

Spark stores offsets as JSON-serializable dicts (string keys) and compares them by `json.dumps`, so every
dict produced here has one deterministic key order: RocketMQ's `MessageQueue.compareTo` order (topic,
then broker name, then queue id; see `connector.queues`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .queues import MessageQueue, sort_queues

EARLIEST = -2
LATEST = -1
_MAX_OFFSET = 2**63 - 1

JsonOffsets = dict[str, dict[str, dict[str, int]]]


class OffsetsError(ValueError):
    """Malformed offsets JSON; the message says where in the document and what was expected."""


def sorted_offsets(offsets: Mapping[MessageQueue, int]) -> dict[MessageQueue, int]:
    """A copy of `offsets` whose iteration order is the queue order."""
    return {k: offsets[k] for k in sort_queues(offsets)}


def to_json_dict(offsets: Mapping[MessageQueue, int]) -> JsonOffsets:
    """`{MessageQueue: offset}` → the nested dict Spark stores (string keys, deterministic order)."""
    out: JsonOffsets = {}
    for key in sort_queues(offsets):
        out.setdefault(key.topic, {}).setdefault(key.broker, {})[str(key.queue_id)] = int(offsets[key])
    return out


def to_json(offsets: Mapping[MessageQueue, int]) -> str:
    return json.dumps(to_json_dict(offsets), separators=(",", ":"))


def _queue_id(raw: Any, where: str) -> int:
    if (
        not isinstance(raw, str)
        or not 0 < len(raw) <= 10
        or not raw.isascii()
        or not raw.isdigit()
        or str(int(raw)) != raw
    ):
        raise OffsetsError(f"{where}: queue id {raw!r} is not a non-negative integer in canonical form")
    value = int(raw)
    if value > 2**31 - 1:
        raise OffsetsError(f"{where}: queue id {raw} is larger than 2147483647")
    return value


def _offset(raw: Any, where: str, minimum: int) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise OffsetsError(f"{where}: offset {raw!r} is not an integer")
    if raw < minimum or raw > _MAX_OFFSET:
        accepted = "-2 (earliest), -1 (latest) or an offset >= 0" if minimum < 0 else "an offset >= 0"
        raise OffsetsError(f"{where}: offset {raw} is out of range, expected {accepted}")
    return raw


def _name(raw: Any, what: str, where: str) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise OffsetsError(f"{where}: {what} name {raw!r} is not a non-blank string")
    return raw


def from_json_dict(doc: Any, *, allow_sentinels: bool = False) -> dict[MessageQueue, int]:
    """The nested offsets dict → `{MessageQueue: offset}` in queue order; OffsetsError when malformed.

    With `allow_sentinels`, -2 (earliest) and -1 (latest) are accepted as offsets (option values).
    """
    minimum = EARLIEST if allow_sentinels else 0
    if not isinstance(doc, Mapping):
        raise OffsetsError(
            f'offsets must be a JSON object {{"topic": {{"broker": {{"queueId": offset}}}}}}, got {doc!r}'
        )
    out: dict[MessageQueue, int] = {}
    for topic, brokers in doc.items():
        _name(topic, "topic", "offsets")
        if not isinstance(brokers, Mapping):
            raise OffsetsError(
                f'offsets of topic {topic!r} must be an object {{"broker": {{"queueId": offset}}}}, '
                f"got {brokers!r}"
            )
        for broker, queues in brokers.items():
            _name(broker, "broker", f"topic {topic!r}")
            where = f"topic {topic!r} broker {broker!r}"
            if not isinstance(queues, Mapping):
                raise OffsetsError(f'{where}: expected an object {{"queueId": offset}}, got {queues!r}')
            for qid, offset in queues.items():
                key = MessageQueue(topic, broker, _queue_id(qid, where))
                out[key] = _offset(offset, f"{where} queue {qid}", minimum)
    return sorted_offsets(out)


def from_json(text: str, *, allow_sentinels: bool = False) -> dict[MessageQueue, int]:
    """Parses offsets JSON text; OffsetsError (a ValueError) names the problem."""
    if not isinstance(text, str):
        raise OffsetsError(f"offsets JSON must be a string, got {type(text).__name__}")
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise OffsetsError(f"offsets are not valid JSON ({e}): {text[:200]!r}") from None
    return from_json_dict(doc, allow_sentinels=allow_sentinels)
