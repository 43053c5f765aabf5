"""Registry of producers and consumers seen through Heartbeat/Telemetry; silent clients expire (120 s)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

CLIENT_EXPIRY_SECONDS = 120.0


@dataclass
class ClientInfo:
    client_id: str
    client_type: str
    group: str = ""
    topics: list[str] = field(default_factory=list)
    language: str = ""
    version: str = ""
    last_heartbeat: float = 0.0
    brokers: set[str] = field(default_factory=set)
    settings: object | None = None  # the client's last Telemetry settings (apache.rocketmq.v2.Settings)
    address: str = ""  # where it connects from (remoting)
    # Remoting heartbeats (`HeartbeatData`): every producer and consumer group of the client, and per
    # consumer group its subscriptions (topic → (expression type, expression)) and consume settings.
    producer_groups: set[str] = field(default_factory=set)
    consumer_groups: dict[str, ConsumerGroupData] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "client_id": self.client_id,
            "client_type": self.client_type,
            "group": self.group,
            "topics": sorted(self.topics),
            "language": self.language,
            "version": self.version,
            "last_heartbeat_ms": int(self.last_heartbeat * 1000),
            "brokers": sorted(self.brokers),
            **({"producer_groups": sorted(self.producer_groups)} if self.producer_groups else {}),
            **({"consumer_groups": sorted(self.consumer_groups)} if self.consumer_groups else {}),
        }


@dataclass
class ConsumerGroupData:
    """One consumer group of a client as its heartbeat describes it (RocketMQ `ConsumerData`)."""

    consume_type: str = "CONSUME_PASSIVELY"  # CONSUME_ACTIVELY (pull), CONSUME_PASSIVELY (push), CONSUME_POP
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    subscriptions: dict[str, tuple[str, str]] = field(default_factory=dict)  # topic → (TAG|SQL92, expr)


class ClientRegistry:
    def __init__(self, expiry_seconds: float = CLIENT_EXPIRY_SECONDS) -> None:
        self.expiry_seconds = expiry_seconds
        self._clients: dict[str, ClientInfo] = {}
        self._lock = threading.Lock()

    def touch(
        self,
        client_id: str,
        broker: str,
        *,
        client_type: str | None = None,
        group: str | None = None,
        topics: list[str] | None = None,
        language: str | None = None,
        version: str | None = None,
        settings: object | None = None,
    ) -> ClientInfo:
        """Registers or refreshes a client (heartbeat, settings or any RPC that names it)."""
        with self._lock:
            info = self._clients.get(client_id)
            if info is None:
                info = self._clients[client_id] = ClientInfo(client_id, client_type or "UNKNOWN")
            if client_type:
                info.client_type = client_type
            if group:
                info.group = group
            if topics:
                info.topics = sorted(set(info.topics) | set(topics))
            if language:
                info.language = language
            if version:
                info.version = version
            if settings is not None:
                info.settings = settings
            info.last_heartbeat = time.time()
            info.brokers.add(broker)
            return info

    def heartbeat(
        self,
        client_id: str,
        broker: str,
        *,
        producer_groups: list[str],
        consumer_groups: dict[str, ConsumerGroupData],
        language: str | None = None,
        version: str | None = None,
        address: str = "",
    ) -> set[str]:
        """A remoting heartbeat (the whole state of the client); returns the consumer groups whose member
        list changed (their other members are told to rebalance, as `ConsumerManager` does)."""
        with self._lock:
            before = {g: self._members(g) for g in consumer_groups}
            info = self._clients.get(client_id)
            if info is None:
                info = self._clients[client_id] = ClientInfo(client_id, "UNKNOWN")
            was = set(info.consumer_groups)
            info.producer_groups = set(producer_groups)
            info.consumer_groups = dict(consumer_groups)
            if consumer_groups:
                first = sorted(consumer_groups)[0]
                info.client_type = (
                    "PUSH_CONSUMER"
                    if consumer_groups[first].consume_type == ("CONSUME_PASSIVELY")
                    else "PULL_CONSUMER"
                )
                info.group = first
                info.topics = sorted({t for d in consumer_groups.values() for t in d.subscriptions})
            elif producer_groups:
                info.client_type = "PRODUCER"
                info.group = sorted(producer_groups)[0]
            if language:
                info.language = language
            if version:
                info.version = version
            if address:
                info.address = address
            info.last_heartbeat = time.time()
            info.brokers.add(broker)
            changed = {g for g in consumer_groups if client_id not in before[g]}
            return changed | (was - set(consumer_groups))

    def _members(self, group: str) -> list[str]:
        return sorted(cid for cid, c in self._clients.items() if group in c.consumer_groups)

    def members(self, group: str) -> list[str]:
        """Client ids of a consumer group's live members (GET_CONSUMER_LIST_BY_GROUP), sorted."""
        self.expire()
        with self._lock:
            return self._members(group)

    def group_members(self, group: str) -> list[tuple[ClientInfo, ConsumerGroupData]]:
        self.expire()
        with self._lock:
            return [
                (c, c.consumer_groups[group]) for c in self._clients.values() if group in c.consumer_groups
            ]

    def subscription(self, group: str, topic: str) -> tuple[str, str] | None:
        """The (expression type, expression) a live member of `group` registered for `topic`."""
        with self._lock:
            for c in self._clients.values():
                data = c.consumer_groups.get(group)
                if data is not None and topic in data.subscriptions:
                    return data.subscriptions[topic]
        return None

    def groups_consuming(self, topic: str) -> set[str]:
        """Consumer groups with a live member subscribed to `topic` (QUERY_TOPIC_CONSUME_BY_WHO)."""
        with self._lock:
            return {
                g
                for c in self._clients.values()
                for g, d in c.consumer_groups.items()
                if topic in d.subscriptions
            }

    def producers_of(self, group: str) -> list[str]:
        """Client ids that registered `group` as one of their producer groups."""
        with self._lock:
            return [cid for cid, c in self._clients.items() if group in c.producer_groups]

    def unregister(
        self, client_id: str, producer_group: str | None = None, consumer_group: str | None = None
    ) -> set[str]:
        """UNREGISTER_CLIENT: drops the named groups of the client (the whole client when it has none left);
        returns the consumer groups whose member list changed."""
        with self._lock:
            info = self._clients.get(client_id)
            if info is None:
                return set()
            changed: set[str] = set()
            if producer_group:
                info.producer_groups.discard(producer_group)
            if consumer_group and info.consumer_groups.pop(consumer_group, None) is not None:
                changed.add(consumer_group)
            if not producer_group and not consumer_group:
                changed |= set(info.consumer_groups)
                info.consumer_groups.clear()
                info.producer_groups.clear()
            if not info.consumer_groups and not info.producer_groups and (info.settings is None):
                del self._clients[client_id]
            return changed

    def get(self, client_id: str) -> ClientInfo | None:
        with self._lock:
            return self._clients.get(client_id)

    def remove(self, client_id: str) -> ClientInfo | None:
        with self._lock:
            return self._clients.pop(client_id, None)

    def expire(self, now: float | None = None) -> list[str]:
        now = time.time() if now is None else now
        with self._lock:
            gone = [cid for cid, c in self._clients.items() if now - c.last_heartbeat > self.expiry_seconds]
            for cid in gone:
                del self._clients[cid]
            return gone

    def snapshot(self) -> list[ClientInfo]:
        self.expire()
        with self._lock:
            return list(self._clients.values())
