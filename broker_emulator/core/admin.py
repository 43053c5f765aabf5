"""The admin verbs of the emulator (what `python -m broker_emulator admin` and the extension's Admin RPC
run): plain functions of the cluster, one table naming them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa

from .cluster import Broker, Cluster


class ClusterAdmin:
    """The cluster's admin operations; arguments and results are JSON-compatible values."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def create_topic(
        self,
        name: str,
        queues: int | None = None,
        message_type: str = "MIXED",
        brokers: list[str] | None = None,
    ) -> dict:
        for b in brokers or []:
            self.cluster.broker(b)  # unknown broker names are an error, not an empty topic
        cfgs = self.cluster.create_topic(name, queues, message_type, brokers)
        served = [b.name for b in self.cluster.brokers if brokers is None or b.name in brokers]
        return {"topic": name, "brokers": served, "queues": cfgs[0].queues}

    def topics(self, topic: str | None = None) -> list[dict]:
        out = []
        for b in self.cluster.brokers:
            for name, cfg in sorted(b.store.topics.items()):
                if topic and name != topic:
                    continue
                for qid in range(cfg.queues):
                    lo, hi = b.store.min_max(name, qid)
                    out.append(
                        {
                            "topic": name,
                            "broker": b.name,
                            "queue": qid,
                            "min_offset": lo,
                            "max_offset": hi,
                            "message_type": cfg.message_type,
                        }
                    )
        return out

    def groups(self) -> dict:
        clients = [c.to_dict() for c in self.cluster.clients.snapshot()]
        groups: dict[str, dict] = {}
        for b in self.cluster.brokers:
            for group, topic, _qid, _off in b.store.consumer_offsets():
                g = groups.setdefault(group, {"group": group, "topics": set(), "clients": 0})
                g["topics"].add(topic)
        for c in clients:
            # A remoting client may belong to several consumer groups (its heartbeat lists them all).
            for name in c.get("consumer_groups") or ([c["group"]] if c["group"] else []):
                g = groups.setdefault(name, {"group": name, "topics": set(), "clients": 0})
                g["clients"] += 1
                g["topics"].update(c["topics"])
        return {
            "clients": clients,
            "groups": [
                {**g, "topics": sorted(g["topics"])}
                for g in sorted(groups.values(), key=lambda x: x["group"])
            ],
        }

    def update_group(self, group: str, max_retries: int | None = None, fifo: bool | None = None) -> dict:
        cfg = self.cluster.update_group(group, max_retries, fifo)
        return {"group": group, "max_retries": cfg.max_retries, "fifo": cfg.fifo}

    def lag(self, group: str | None = None, topic: str | None = None) -> list[dict]:
        """Per group and queue: committed offsets (pull consumers, UpdateOffset) and POP progress (mode pop,
        including the group's retry topics), with the messages still in flight for POP groups."""
        out = []
        for b in self.cluster.brokers:
            rows = [(g, t, q, off, "pull") for g, t, q, off in b.store.consumer_offsets()]
            inflight: dict[tuple[str, str, int], int] = {}
            if b.pop is not None:
                rows += [(g, t, q, off, "pop") for g, t, q, off in b.pop.progress()]
                for inf in b.pop.inflight.values():
                    key = (inf.group, inf.source, inf.queue_id)
                    inflight[key] = inflight.get(key, 0) + 1
            for g, t, qid, off, mode in sorted(rows):
                if (group and g != group) or (topic and t != topic and not t.endswith("_" + topic)):
                    continue
                lo, hi = b.store.min_max(t, qid)
                out.append(
                    {
                        "group": g,
                        "topic": t,
                        "broker": b.name,
                        "queue": qid,
                        "mode": mode,
                        "committed": off,
                        "min_offset": lo,
                        "max_offset": hi,
                        "lag": max(hi - max(off, lo), 0),
                        "inflight": inflight.get((g, t, qid), 0),
                    }
                )
        return out

    def fault(self, broker: str, clear: bool = False, **faults) -> dict:
        target = self.cluster.broker(broker)
        return {"broker": broker, "faults": target.clear_faults() if clear else target.set_fault(**faults)}

    def stats(self) -> dict:
        return {
            "brokers": [
                {
                    **b.store.stats(),
                    "endpoint": b.endpoint,
                    "remoting": f"{b.host}:{b.remoting_port}" if b.remoting_port else None,
                    "faults": b.faults.current.to_dict(),
                    "pop": b.pop.stats() if b.pop else {},
                    "delayed_pending": b.delay.pending if b.delay else 0,
                    "transactions_pending": b.transactions.pending if b.transactions else 0,
                }
                for b in self.cluster.brokers
            ],
            "clients": len(self.cluster.clients.snapshot()),
            "held_requests": sum(b.polling.held for b in self.cluster.brokers if b.polling is not None),
        }

    def reload_acl(self) -> dict:
        return self.cluster.acl.reload()


@dataclass(frozen=True)
class AdminVerb:
    run: Callable[..., object]
    mutating: bool  # changes the cluster: only ACL accounts with "admin": true may run it
    help: str


ADMIN_VERBS: dict[str, AdminVerb] = {
    "create-topic": AdminVerb(ClusterAdmin.create_topic, True, "create or grow a topic on every broker"),
    "topics": AdminVerb(ClusterAdmin.topics, False, "per queue: min/max offset"),
    "groups": AdminVerb(ClusterAdmin.groups, False, "clients and consumer groups"),
    "update-group": AdminVerb(
        ClusterAdmin.update_group, True, "set a consumer group's max retries / FIFO mode"
    ),
    "lag": AdminVerb(ClusterAdmin.lag, False, "per group and queue: committed offset, max offset, lag"),
    "fault": AdminVerb(ClusterAdmin.fault, True, "set or clear faults on a broker"),
    "stats": AdminVerb(ClusterAdmin.stats, False, "per-broker store and server statistics"),
    "reload-acl": AdminVerb(
        ClusterAdmin.reload_acl, True, "re-read the --acl file now (an invalid file keeps the current ACL)"
    ),
}
MUTATING_ADMIN_VERBS = frozenset(name for name, verb in ADMIN_VERBS.items() if verb.mutating)


# ------------------------------------------------------------------------------------------ per broker
# The broker-side admin queries of RocketMQ (`AdminBrokerProcessor`), in plain values for any front end.


def _store_time(broker: Broker, topic: str, queue_id: int, offset: int) -> int:
    """Store time (ms) of the message at `offset`, 0 when it is not there."""
    r = broker.store.get(topic, queue_id, offset, 1)
    if r.table is None or not r.count or r.table.column("queue_offset")[0].as_py() != offset:
        return 0
    return int(r.table.column("store_timestamp").cast(pa.int64())[0].as_py())


def queue_bounds(broker: Broker, topic: str) -> list[tuple[int, int, int]] | None:
    """(queue id, min offset, max offset) of each queue of `topic` on this broker; None when the broker does
    not serve the topic."""
    cfg = broker.store.topics.get(topic)
    if cfg is None:
        return None
    return [(qid, *broker.store.min_max(topic, qid)) for qid in range(cfg.queues)]


def topic_stats(broker: Broker, topic: str) -> list[dict] | None:
    """Per queue of `topic` on this broker: min, max and the store time of the last message
    (`getTopicStatsInfo`); None when the broker does not serve the topic."""
    bounds = queue_bounds(broker, topic)
    if bounds is None:
        return None
    return [
        {
            "queue": qid,
            "min_offset": lo,
            "max_offset": hi,
            "last_update_ms": _store_time(broker, topic, qid, hi - 1) if hi > 0 else 0,
        }
        for qid, lo, hi in bounds
    ]


def consume_stats(broker: Broker, group: str, topic: str | None = None) -> list[dict]:
    """Per topic and queue a group committed offsets for on this broker (or of `topic`): broker offset
    (max), consumer offset (0 when none) and the store time of the last consumed message (`getConsumeStats`)."""
    store = broker.store
    topics = {topic} if topic else {t for g, t, _q, _o in store.consumer_offsets() if g == group}
    out = []
    for t in sorted(topics):
        cfg = store.topics.get(t)
        if cfg is None:
            continue
        for qid in range(cfg.queues):
            hi = store.min_max(t, qid)[1]
            off = max(store.get_consumer_offset(group, t, qid) or 0, 0)
            last = _store_time(broker, t, qid, off - 1) if off > 0 else 0
            out.append(
                {
                    "topic": t,
                    "queue": qid,
                    "broker_offset": hi,
                    "consumer_offset": off,
                    "last_timestamp": last,
                }
            )
    return out


def reset_offsets(
    broker: Broker, group: str, topic: str, timestamp_ms: int, force: bool
) -> dict[int, int] | None:
    """Moves a group's offsets on `topic` to the first message stored at or after the time (a negative time:
    the end), per queue; without `force` only backwards (`Broker2Client.resetOffset`). None: no such topic."""
    store = broker.store
    cfg = store.topics.get(topic)
    if cfg is None:
        return None
    out = {}
    for qid in range(cfg.queues):
        target = (
            store.min_max(topic, qid)[1]
            if timestamp_ms < 0
            else store.search_offset(topic, qid, timestamp_ms)
        )
        current = store.get_consumer_offset(group, topic, qid)
        if not force and current is not None and current <= target:
            target = current
        store.set_consumer_offset(group, topic, qid, target)
        out[qid] = target
    return out


def groups_of_topic(cluster: Cluster, broker: Broker, topic: str) -> list[str]:
    """Groups consuming `topic`: live subscribers plus groups with offsets on this broker."""
    groups = cluster.clients.groups_consuming(topic)
    groups |= {g for g, t, _q, _o in broker.store.consumer_offsets() if t == topic}
    return sorted(groups)
