"""Helpers of the writer tests: read a topic back with the connector's client (bulk pull), count per queue."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from connector.clients import PullStatus, get_client
from rocketmq_protocol.message_schema import MESSAGE_SCHEMA
from tests.support.targets import client_config

GROUP = "writer-tests"


def read_topic(endpoints: str, topic: str, group: str = GROUP) -> dict[tuple[str, int], pa.Table]:
    """Every stored message of `topic`, per (broker, queue id), in queue-offset order (`endpoints`: a target
    of tests/support/targets.py, read over its protocol)."""
    client = get_client(client_config(endpoints))
    out: dict[tuple[str, int], pa.Table] = {}
    for q in client.route(topic):
        tables, offset = [], 0
        while True:
            r = client.pull(q, offset, 65536, group=group, timeout_ms=30_000)
            if r.status != PullStatus.FOUND:
                break
            tables.append(r.table)
            offset = r.next_offset
        out[(q.broker, q.queue_id)] = pa.concat_tables(tables) if tables else MESSAGE_SCHEMA.empty_table()
    return out


def counts(tables: dict[tuple[str, int], pa.Table]) -> dict[tuple[str, int], int]:
    return {k: t.num_rows for k, t in tables.items()}


def bodies(tables: dict[tuple[str, int], pa.Table]) -> list[bytes]:
    return [b for t in tables.values() for b in t.column("body").to_pylist()]


def broker_count(tables: dict[tuple[str, int], pa.Table], broker: str) -> int:
    return sum(t.num_rows for (b, _), t in tables.items() if b == broker)


def assert_even(tables: dict[tuple[str, int], pa.Table], tolerance: float = 0.25) -> None:
    """Each queue holds within ±tolerance of the mean number of messages."""
    c = counts(tables)
    mean = sum(c.values()) / len(c)
    off = {k: v for k, v in c.items() if abs(v - mean) > tolerance * mean}
    assert not off, f"queues off the mean {mean:.0f} by more than {tolerance:.0%}: {off} (all: {c})"


def spark_thread(spark: Any, target: Callable[[], None], errors: list[BaseException]) -> threading.Thread:
    """A started thread running `target` (a Spark job, e.g. a write while a test injects a fault), its
    exception appended to `errors`. A Python data source resolves through the JVM thread's active session,
    which a new thread lacks: the thread sets it first."""

    def run() -> None:
        spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
        try:
            target()
        except BaseException as e:
            errors.append(e)

    thread = threading.Thread(target=run)
    thread.start()
    return thread
