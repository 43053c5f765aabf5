"""connector.offsets: the offsets JSON ⇄ {MessageQueue: offset}, queue order, and clear errors (docs/design.md, 'Offsets')."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connector.offsets import OffsetsError, from_json, from_json_dict, to_json, to_json_dict
from connector.queues import MessageQueue, java_string_key, sort_queues


def test_round_trip_and_deterministic_order() -> None:
    offsets = {
        MessageQueue("b", "broker-b", 10): 5,
        MessageQueue("a", "broker-b", 0): 7,
        MessageQueue("a", "broker-a", 2): 3,
        MessageQueue("a", "broker-a", 10): 0,
    }
    doc = to_json_dict(offsets)
    assert doc == {"a": {"broker-a": {"2": 3, "10": 0}, "broker-b": {"0": 7}}, "b": {"broker-b": {"10": 5}}}
    assert json.dumps(doc) == json.dumps(to_json_dict(dict(reversed(offsets.items()))))
    assert list(doc["a"]["broker-a"]) == ["2", "10"]  # numeric queue order, not string order
    back = from_json_dict(json.loads(json.dumps(doc)))
    assert back == offsets
    assert list(back) == sort_queues(offsets)
    assert from_json(to_json(offsets)) == offsets


def test_java_string_order() -> None:
    # Java compares UTF-16 code units: U+FFFD sorts after U+1F600 (a surrogate pair 0xD83D...).
    assert java_string_key("\U0001f600") < java_string_key("\ufffd")
    assert (
        sort_queues([MessageQueue("\ufffd", "b", 0), MessageQueue("\U0001f600", "b", 0)])[0].topic
        == "\U0001f600"
    )
    assert sort_queues([MessageQueue("B", "b", 0), MessageQueue("a", "b", 0)])[0].topic == "B"


@pytest.mark.parametrize(
    ("doc", "fragment"),
    [
        ([1, 2], "must be a JSON object"),
        ({"t": 5}, "offsets of topic 't' must be an object"),
        ({"t": {"broker-a": [1]}}, "expected an object"),
        ({"t": {"broker-a": {"x": 1}}}, "queue id 'x'"),
        ({"t": {"broker-a": {"-1": 1}}}, "queue id '-1'"),
        ({"t": {"broker-a": {"01": 1}}}, "canonical"),
        ({"t": {"broker-a": {"0": "1"}}}, "is not an integer"),
        ({"t": {"broker-a": {"0": True}}}, "is not an integer"),
        ({"t": {"broker-a": {"0": 1.5}}}, "is not an integer"),
        ({"t": {"broker-a": {"0": -1}}}, "out of range"),
        ({"": {"broker-a": {"0": 1}}}, "topic name"),
        ({"t": {" ": {"0": 1}}}, "broker name"),
    ],
)
def test_malformed_documents(doc: object, fragment: str) -> None:
    with pytest.raises(OffsetsError, match=fragment):
        from_json_dict(doc)


def test_sentinels_only_when_allowed() -> None:
    doc = {"t": {"broker-a": {"0": -2, "1": -1, "2": 4}}}
    assert from_json_dict(doc, allow_sentinels=True) == {
        MessageQueue("t", "broker-a", 0): -2,
        MessageQueue("t", "broker-a", 1): -1,
        MessageQueue("t", "broker-a", 2): 4,
    }
    with pytest.raises(OffsetsError, match="offset >= 0"):
        from_json_dict(doc)
    with pytest.raises(OffsetsError, match="-2 \\(earliest\\)"):
        from_json_dict({"t": {"b": {"0": -3}}}, allow_sentinels=True)


def test_bad_json_text() -> None:
    with pytest.raises(OffsetsError, match="not valid JSON"):
        from_json("{not json")
    with pytest.raises(OffsetsError, match="must be a string"):
        from_json(b"{}")  # type: ignore[arg-type]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=20,
)


@given(json_values, st.booleans())
def test_fuzz_documents_parse_or_raise_offsets_error(doc: object, sentinels: bool) -> None:
    try:
        out = from_json_dict(doc, allow_sentinels=sentinels)
    except OffsetsError as e:
        assert str(e)
    else:
        assert from_json_dict(to_json_dict(out), allow_sentinels=sentinels) == out


@given(st.text(max_size=60))
def test_fuzz_text_parses_or_raises_offsets_error(text: str) -> None:
    try:
        from_json(text, allow_sentinels=True)
    except OffsetsError as e:
        assert str(e)


@given(
    st.dictionaries(
        st.builds(
            MessageQueue,
            st.text(min_size=1, max_size=4).filter(str.strip),
            st.text(min_size=1, max_size=4).filter(str.strip),
            st.integers(0, 2**31 - 1),
        ),
        st.integers(0, 2**63 - 1),
        max_size=10,
    )
)
def test_fuzz_round_trip(offsets: dict[MessageQueue, int]) -> None:
    text = to_json(offsets)
    assert from_json(text) == offsets
    assert to_json(from_json(text)) == text


def test_a_broker_missing_from_the_route_is_waited_for_before_data_loss(monkeypatch) -> None:
    """RocketMQ's name servers drop a restarting broker's routes: its queues keep their offsets for a grace
    period (no data loss, nothing read), and only a broker gone for longer, or a single queue gone from a
    broker still serving the topic, is data loss."""
    import connector.stream_reader as sr
    from connector.errors import DataLossError
    from connector.queues import MessageQueue, RouteEntry

    clock = [1000.0]
    monkeypatch.setattr(sr.time, "monotonic", lambda: clock[0])
    reader = sr.RocketMQStreamReader({"endpoints": "127.0.0.1:1", "topic": "t"}, None)
    a0, a1, b0 = MessageQueue("t", "a", 0), MessageQueue("t", "a", 1), MessageQueue("t", "b", 0)
    reader._queues = {a0: RouteEntry(a0, "h:1"), a1: RouteEntry(a1, "h:1")}  # broker b restarting
    latest = {a0: 9, a1: 3}
    reader._carry_vanished({a0: 5, a1: 3, b0: 7}, latest)
    assert latest == {a0: 9, a1: 3, b0: 7}
    clock[0] += 100  # still within max(pullTimeoutMs, 2 min)
    reader._carry_vanished({a0: 9, a1: 3, b0: 7}, latest)
    reader._queues[b0] = RouteEntry(b0, "h:2")  # back
    reader._carry_vanished({a0: 9, a1: 3, b0: 7}, {a0: 9, a1: 3, b0: 8})
    assert reader._absent_since == {}
    del reader._queues[b0]
    reader._carry_vanished({a0: 9, a1: 3, b0: 8}, {a0: 9, a1: 3})  # gone again: a new grace period
    clock[0] += 121
    with pytest.raises(DataLossError, match=r"queue t/b/0 \(next offset 8\) is no longer in the route"):
        reader._carry_vanished({a0: 9, a1: 3, b0: 8}, {a0: 9, a1: 3})
    # a queue missing from a broker that still serves the topic is data loss at once
    with pytest.raises(DataLossError, match=r"queue t/a/1"):
        reader._carry_vanished({a0: 9, a1: 3}, {a0: 9})


class _GetThenPutBroker:
    """Consumer offsets kept the way RocketMQ's ConsumerOffsetManager.commitOffset keeps them: a topic@group
    table created with a get, then a put, so first commits that overlap can replace each other's table."""

    def __init__(self) -> None:
        self.tables: dict[tuple[str, str, str], dict[int, int]] = {}

    def commit(self, group, queue, offset, timeout_ms=0) -> None:
        key = (queue.broker, queue.topic, group)
        table = self.tables.get(key)
        if table is None:
            time.sleep(0.05)  # widens the window real brokers leave between the get and the put
            self.tables[key] = {queue.queue_id: offset}
        else:
            table[queue.queue_id] = offset


def test_first_commits_to_a_broker_go_one_queue_first(monkeypatch) -> None:
    """A stream's first commit to each (topic, broker) runs one queue alone before the others, so a broker
    that creates the group's table with a get-then-put keeps every queue's offset."""
    import connector.stream_reader as sr
    from connector.queues import MessageQueue, RouteEntry

    reader = sr.RocketMQStreamReader({"endpoints": "127.0.0.1:1", "topic": "t", "consumerGroup": "g"}, None)
    broker = _GetThenPutBroker()
    monkeypatch.setattr(reader, "_client", lambda: broker)
    queues = [MessageQueue("t", b, i) for b in ("a", "b") for i in range(8)]
    reader._queues = {q: RouteEntry(q, f"{q.broker}:1") for q in queues}
    reader._commit_group({q: 0 for q in queues})
    assert broker.tables == {(b, "t", "g"): {i: 0 for i in range(8)} for b in ("a", "b")}
    reader._commit_group({q: 5 for q in queues})
    assert broker.tables == {(b, "t", "g"): {i: 5 for i in range(8)} for b in ("a", "b")}
