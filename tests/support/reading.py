"""Helpers of the reader tests: producing known messages to every queue of a topic, the rows Spark
should read back, and bounded waits on streaming queries."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import grpc

from rocketmq_protocol.grpc_v2 import definition_pb2 as d
from rocketmq_protocol.grpc_v2 import service_pb2_grpc as sg
from tests.support.helpers import make_message, send
from tests.support.targets import connect_options

Key = tuple[str, int, int]  # (brokerName, queueId, queueOffset)
SEND_CHUNK = 1000  # messages per SendMessage request


@dataclass
class Sent:
    """What was produced, keyed by (broker, queue, offset), with one dict per message of the expected row."""

    topic: str
    rows: dict[Key, dict[str, Any]] = field(default_factory=dict)
    ends: dict[tuple[str, int], int] = field(default_factory=dict)  # (broker, queue) → next offset

    def keys(self) -> set[Key]:
        return set(self.rows)


class Producer:
    """Sends messages to explicit queues of a topic on every broker of an emulator (one channel per broker)."""

    def __init__(self, rocketmq_emulator: Any) -> None:
        self.brokers = [b.name for b in rocketmq_emulator.brokers]
        self._channels = {b.name: grpc.insecure_channel(b.endpoint) for b in rocketmq_emulator.brokers}
        self._stubs = {name: sg.MessagingServiceStub(ch) for name, ch in self._channels.items()}
        self._seq = 0

    def close(self) -> None:
        for ch in self._channels.values():
            ch.close()

    def send_queue(
        self,
        sent: Sent,
        broker: str,
        queue_id: int,
        count: int,
        *,
        tags: Callable[[int], str | None] = lambda i: None,
        rich: bool = False,
    ) -> None:
        """`count` messages to one queue; with `rich`, keys, properties and FIFO groups vary by message
        so every column carries data (delayed messages get their offsets later: see the batch tests)."""
        for first in range(0, count, SEND_CHUNK):
            msgs, expected = [], []
            for _ in range(min(SEND_CHUNK, count - first)):
                i = self._seq
                self._seq += 1
                tag = tags(i)
                keys = [f"k{i}", f"kk{i % 7}"] if rich and i % 3 else []
                props = {"seq": str(i), "mod": str(i % 5)} if rich and i % 4 else {}
                group = f"g{i % 3}" if rich and i % 5 == 0 else None
                body = f"{sent.topic}-{i}-".encode() + uuid.uuid4().bytes
                m = make_message(
                    sent.topic,
                    body,
                    tag=tag,
                    keys=keys,
                    properties=props,
                    queue_id=queue_id,
                    message_group=group,
                )
                m.system_properties.born_host = f"10.0.0.{i % 250}"
                msgs.append(m)
                expected.append(
                    {
                        "topic": sent.topic,
                        "brokerName": broker,
                        "queueId": queue_id,
                        "messageId": m.system_properties.message_id,
                        "tags": tag,
                        "keys": keys,
                        "body": body,
                        "properties": props,
                        "bornTimestamp": m.system_properties.born_timestamp.ToMilliseconds(),
                        "bornHost": f"10.0.0.{i % 250}",
                        "reconsumeTimes": 0,
                        "messageGroup": group,
                        "deliveryTimestamp": None,
                    }
                )
            resp = send(self._stubs[broker], msgs, explicit=True)
            assert resp.status.code == d.OK, resp.status
            for entry, row in zip(resp.entries, expected, strict=True):
                row["queueOffset"] = entry.offset
                sent.rows[(broker, queue_id, entry.offset)] = row
                sent.ends[(broker, queue_id)] = max(sent.ends.get((broker, queue_id), 0), entry.offset + 1)

    def send_all(self, sent: Sent, per_queue: int, queues: int, **kwargs: Any) -> Sent:
        """`per_queue` messages to each of `queues` queues on every broker."""
        for broker in self.brokers:
            for q in range(queues):
                self.send_queue(sent, broker, q, per_queue, **kwargs)
        return sent


def produce(rocketmq_emulator: Any, topic: str, per_queue: int, queues: int = 4, **kwargs: Any) -> Sent:
    p = Producer(rocketmq_emulator)
    try:
        return p.send_all(Sent(topic), per_queue, queues, **kwargs)
    finally:
        p.close()


def row_key(row: Mapping[str, Any]) -> Key:
    return (row["brokerName"], row["queueId"], row["queueOffset"])


def offsets_json(ends: Mapping[tuple[str, int], int], topic: str) -> dict[str, dict[str, dict[str, int]]]:
    out: dict[str, dict[str, dict[str, int]]] = {topic: {}}
    for (broker, q), off in sorted(ends.items()):
        out[topic].setdefault(broker, {})[str(q)] = off
    return out


def reader(spark: Any, endpoints: str, topic: str, *, stream: bool = False, **options: Any) -> Any:
    r = spark.readStream if stream else spark.read
    r = r.format("rocketmq").options(**connect_options(endpoints)).option("topic", topic)
    for k, v in options.items():
        r = r.option(k, str(v))
    return r.load()


@contextmanager
def running(query: Any) -> Iterator[Any]:
    """Stops the query however the block exits."""
    try:
        yield query
    finally:
        if query.isActive:
            query.stop()


def wait_for(predicate: Callable[[], bool], timeout: float, what: str, query: Any = None) -> None:
    """Polls `predicate`; fails after `timeout` s (or at once if `query` died, with its exception)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if query is not None and not query.isActive:
            exc = query.exception()
            raise AssertionError(f"query ended while waiting for {what}: {exc}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)


def await_done(query: Any, timeout: float = 120) -> None:
    """Waits for an AvailableNow query to finish; fails (and stops it) after `timeout` s."""
    if not query.awaitTermination(timeout):
        query.stop()
        raise AssertionError(f"query did not finish within {timeout} s")


def by_key(rows: Iterable[Mapping[str, Any]]) -> dict[Key, Mapping[str, Any]]:
    out: dict[Key, Mapping[str, Any]] = {}
    for r in rows:
        k = row_key(r)
        assert k not in out, f"message {k} read twice"
        out[k] = r
    return out


def _epoch_ms(value: Any) -> int | None:
    return None if value is None else int(value.timestamp() * 1000)


def arrow_rows(table: Any) -> list[dict[str, Any]]:
    """Rows of a pyarrow table of the reader's schema with maps as dicts and timestamps as epoch ms."""
    rows = table.to_pylist()
    for r in rows:
        r["properties"] = dict(r["properties"])
        for c in ("bornTimestamp", "storeTimestamp", "deliveryTimestamp"):
            r[c] = _epoch_ms(r[c])
    return rows


def assert_rows_match(sent: Sent, rows: list[dict[str, Any]], started_ms: int | None = None) -> None:
    """Exactly the sent messages, once each, with every column as produced (store time after born time)."""
    got = by_key(rows)
    missing = sent.keys() - got.keys()
    extra = got.keys() - sent.keys()
    assert not missing and not extra, (
        f"{len(missing)} missing (e.g. {sorted(missing)[:3]}), {len(extra)} extra"
    )
    now = int(time.time() * 1000)
    for k, exp in sent.rows.items():
        row = got[k]
        for col, value in exp.items():
            assert row[col] == value, f"{k} column {col}: got {row[col]!r}, expected {value!r}"
        assert exp["bornTimestamp"] - 5 <= row["storeTimestamp"] <= now, (k, row["storeTimestamp"])
        if started_ms is not None:
            assert row["storeTimestamp"] >= started_ms
