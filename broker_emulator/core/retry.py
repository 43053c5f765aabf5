"""Delay levels and the consumer send-back of pull/push consumers (apache/rocketmq
`SendMessageProcessor.consumerSendMsgBack`, `ScheduleMessageService`): a message a consumer failed is
copied into `%RETRY%{group}` after the delay of its level, or into `%DLQ%{group}` once the group's
retries are used. The group's maximum and the DLQ are the same ones POP consumption uses (`pop.py`)."""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING

from .errors import BrokerError, ErrorKind
from .parked import columns_of
from .pop import PROP_RETRY_TOPIC, RETRY_PREFIX, dlq_topic

if TYPE_CHECKING:
    from .cluster import Broker, Cluster

PROP_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_LEVEL = re.compile(r"^(\d+)(ms|s|m|h|d)$")


def parse_delay_levels(text: str) -> list[int]:
    """`messageDelayLevel` ("1s 5s 10s ... 2h") → milliseconds per level (level 1 first)."""
    out = []
    for item in text.split():
        m = _LEVEL.match(item.strip())
        if m is None:
            raise ValueError(f"delay level {item!r} is not a number with a unit (ms, s, m, h, d)")
        out.append(int(m.group(1)) * _UNITS[m.group(2)])
    if not out:
        raise ValueError("no delay level given")
    return out


def delay_ms(levels: list[int], level: int) -> int:
    """The delay of a level: levels above the last use the last one; 0 and below mean no delay."""
    if level <= 0:
        return 0
    return levels[min(level, len(levels)) - 1]


def retry_topic(group: str) -> str:
    """The retry topic of a pull/push consumer group (POP uses one per group and topic)."""
    return f"{RETRY_PREFIX}{group}"


def send_back(
    cluster: Cluster,
    broker: Broker,
    group: str,
    commit_offset: int,
    delay_level: int,
    max_reconsume_times: int | None = None,
    origin_message_id: str | None = None,
) -> str:
    """Sends a consumed message back for a later retry; returns the topic it went to (retry or DLQ).

    `commit_offset` names the consumed message (`MessageStore.commit_offsets`); `delay_level` 0 lets the
    broker pick 3 + reconsume times, a negative one sends it straight to the DLQ.
    """
    store = broker.store
    where = store.locate(commit_offset)
    r = store.get(where[0], where[1], where[2], 1) if where is not None else None
    if r is None or r.table is None or not r.count or r.table.column("queue_offset")[0].as_py() != where[2]:
        raise BrokerError(ErrorKind.BAD_REQUEST, f"look message by offset failed, {commit_offset}")
    topic = where[0]
    row = r.table.slice(0, 1)
    reconsume = row.column("reconsume_times")[0].as_py() or 0
    props = dict(row.column("properties")[0].as_py() or [])
    max_retries = (
        cluster.group_config(group).max_retries if max_reconsume_times is None else max_reconsume_times
    )
    extra = {
        PROP_RETRY_TOPIC: props.get(PROP_RETRY_TOPIC) or topic,
        PROP_ORIGIN_MESSAGE_ID: origin_message_id or row.column("message_id")[0].as_py(),
    }
    if reconsume >= max_retries or delay_level < 0:
        target = dlq_topic(group)
        if target not in store.topics:
            store.create_topic(target, 1)
        store.append(target, 0, columns_of(row, reconsume + 1, extra))
        return target
    level = delay_level or 3 + reconsume
    target = retry_topic(group)
    if target not in store.topics:
        store.create_topic(target, 1)
    cols = columns_of(row, reconsume + 1, extra)
    wait = delay_ms(parse_delay_levels(cluster.config.delay_levels), level)
    if wait <= 0 or broker.delay is None:
        store.append(target, 0, cols)
    else:
        broker.delay.schedule(target, 0, cols, [int(time.time() * 1000) + wait])
    return target
