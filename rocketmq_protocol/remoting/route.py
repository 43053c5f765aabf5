"""Route and cluster models of the name server: TopicRouteData, QueueData, BrokerData, ClusterInfo, TopicList.

Shapes of apache/rocketmq `remoting.protocol.route.*` and `protocol.body.{ClusterInfo,TopicList}`, read
tolerantly (bare integer keys of `brokerAddrs`, the old `topicSynFlag` spelling) and written like a real
name server: fields in alphabetical order, nulls left out; `standard=True` quotes and sorts the map keys
as `ClientRequestProcessor` does for clients of version ≥ 4.9.4 (or `acceptStandardJsonOnly`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import fastjson
from .errors import JsonBodyError
from .flags import Perm

__all__ = ["MASTER_ID", "BrokerData", "ClusterInfo", "QueueData", "TopicList", "TopicRouteData"]

MASTER_ID = 0  # MixAll.MASTER_ID: the brokerAddrs key of the master


def _obj(doc: Any, what: str) -> dict:
    if not isinstance(doc, dict):
        raise JsonBodyError(f"{what} is not a JSON object: {type(doc).__name__}")
    return doc


def _int(doc: dict, key: str, what: str, default: int | None = None) -> int:
    value = doc.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise JsonBodyError(f"{what}.{key} is not an integer: {value!r}")
    return value


@dataclass
class QueueData:
    """One broker's queues of a topic."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int = int(Perm.READ | Perm.WRITE)
    topic_sys_flag: int = 0

    @classmethod
    def from_dict(cls, doc: Any) -> QueueData:
        d = _obj(doc, "QueueData")
        flag = d.get("topicSysFlag", d.get("topicSynFlag", 0))  # very old servers: topicSynFlag
        return cls(
            broker_name=str(d.get("brokerName")),
            read_queue_nums=_int(d, "readQueueNums", "QueueData", 0),
            write_queue_nums=_int(d, "writeQueueNums", "QueueData", 0),
            perm=_int(d, "perm", "QueueData", 6),
            topic_sys_flag=int(flag or 0),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "brokerName": self.broker_name,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }


@dataclass
class BrokerData:
    """A broker group: its name, cluster and addresses by broker id (0 = master)."""

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)
    zone_name: str | None = None
    enable_acting_master: bool = False

    @property
    def master_addr(self) -> str | None:
        return self.broker_addrs.get(MASTER_ID)

    @classmethod
    def from_dict(cls, doc: Any) -> BrokerData:
        d = _obj(doc, "BrokerData")
        addrs = d.get("brokerAddrs") or {}
        if not isinstance(addrs, dict):
            raise JsonBodyError(f"BrokerData.brokerAddrs is not an object: {addrs!r}")
        try:
            parsed = {int(k): str(v) for k, v in addrs.items()}
        except (TypeError, ValueError):
            raise JsonBodyError(
                f"BrokerData.brokerAddrs has a non-integer broker id: {list(addrs)}"
            ) from None
        return cls(
            cluster=str(d.get("cluster")),
            broker_name=str(d.get("brokerName")),
            broker_addrs=parsed,
            zone_name=d.get("zoneName"),
            enable_acting_master=bool(d.get("enableActingMaster", False)),
        )

    def to_dict(self, standard: bool = False) -> dict[str, Any]:
        addrs: dict[Any, str] = dict(self.broker_addrs)
        if standard:
            addrs = {str(k): addrs[k] for k in sorted(addrs)}
        out: dict[str, Any] = {
            "brokerAddrs": addrs,
            "brokerName": self.broker_name,
            "cluster": self.cluster,
            "enableActingMaster": self.enable_acting_master,
        }
        if self.zone_name is not None:
            out["zoneName"] = self.zone_name
        return out


@dataclass
class TopicRouteData:
    """GET_ROUTEINFO_BY_TOPIC's body."""

    queue_datas: list[QueueData] = field(default_factory=list)
    broker_datas: list[BrokerData] = field(default_factory=list)
    order_topic_conf: str | None = None
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)
    topic_queue_mapping_by_broker: dict[str, Any] | None = None  # static topics, kept as parsed

    @classmethod
    def from_json(cls, body: str | bytes | bytearray | memoryview) -> TopicRouteData:
        """Parses a route in either form (quoted or bare broker-id keys)."""
        d = _obj(fastjson.loads(body), "TopicRouteData")
        return cls(
            queue_datas=[QueueData.from_dict(q) for q in d.get("queueDatas") or []],
            broker_datas=[BrokerData.from_dict(b) for b in d.get("brokerDatas") or []],
            order_topic_conf=d.get("orderTopicConf"),
            filter_server_table=dict(d.get("filterServerTable") or {}),
            topic_queue_mapping_by_broker=d.get("topicQueueMappingByBroker"),
        )

    def to_json(self, standard: bool = True) -> bytes:
        """The name server's bytes: `standard` = quoted, sorted broker ids (clients ≥ 4.9.4), else bare."""
        doc: dict[str, Any] = {
            "brokerDatas": [b.to_dict(standard) for b in self.broker_datas],
            "filterServerTable": self.filter_server_table,
        }
        if self.order_topic_conf is not None:
            doc["orderTopicConf"] = self.order_topic_conf
        doc["queueDatas"] = [q.to_dict() for q in self.queue_datas]
        if self.topic_queue_mapping_by_broker is not None:
            doc["topicQueueMappingByBroker"] = self.topic_queue_mapping_by_broker
        return fastjson.dumps(doc, quote_keys=standard, sort_maps=standard).encode("utf-8")

    def subscribe_queues(self) -> list[tuple[str, int]]:
        """(brokerName, queueId) a consumer reads: queues of readable QueueData (`MQClientInstance`)."""
        return [
            (q.broker_name, i)
            for q in sorted(self.queue_datas, key=lambda q: q.broker_name)
            if q.perm & Perm.READ
            for i in range(q.read_queue_nums)
        ]

    def publish_queues(self) -> list[tuple[str, int]]:
        """(brokerName, queueId) a producer writes: writable queues of brokers that have a master."""
        masters = {b.broker_name for b in self.broker_datas if MASTER_ID in b.broker_addrs}
        return [
            (q.broker_name, i)
            for q in sorted(self.queue_datas, key=lambda q: q.broker_name)
            if q.perm & Perm.WRITE and q.broker_name in masters
            for i in range(q.write_queue_nums)
        ]

    def broker_addr(self, broker_name: str, broker_id: int = MASTER_ID) -> str | None:
        for b in self.broker_datas:
            if b.broker_name == broker_name:
                return b.broker_addrs.get(broker_id)
        return None


@dataclass
class ClusterInfo:
    """GET_BROKER_CLUSTER_INFO's body: brokers by name, broker names by cluster."""

    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def from_json(cls, body: str | bytes | bytearray | memoryview) -> ClusterInfo:
        d = _obj(fastjson.loads(body), "ClusterInfo")
        return cls(
            broker_addr_table={
                str(k): BrokerData.from_dict(v) for k, v in (d.get("brokerAddrTable") or {}).items()
            },
            cluster_addr_table={str(k): list(v) for k, v in (d.get("clusterAddrTable") or {}).items()},
        )

    def to_json(self, standard: bool = False) -> bytes:
        """As the name server sends it: always the plain form (bare broker ids) unless `standard`."""
        doc = {
            "brokerAddrTable": {k: v.to_dict(standard) for k, v in self.broker_addr_table.items()},
            "clusterAddrTable": self.cluster_addr_table,
        }
        return fastjson.dumps(doc, quote_keys=standard, sort_maps=standard).encode("utf-8")


@dataclass
class TopicList:
    """GET_ALL_TOPIC_LIST_FROM_NAMESERVER's (and GET_TOPICS_BY_CLUSTER's) body."""

    topic_list: list[str] = field(default_factory=list)
    broker_addr: str | None = None

    @classmethod
    def from_json(cls, body: str | bytes | bytearray | memoryview) -> TopicList:
        d = _obj(fastjson.loads(body), "TopicList")
        return cls(topic_list=[str(t) for t in d.get("topicList") or []], broker_addr=d.get("brokerAddr"))

    def to_json(self) -> bytes:
        doc: dict[str, Any] = {}
        if self.broker_addr is not None:
            doc["brokerAddr"] = self.broker_addr
        doc["topicList"] = self.topic_list
        return fastjson.dumps(doc).encode("utf-8")
