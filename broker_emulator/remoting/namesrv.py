"""The name-server role (apache/rocketmq `ClientRequestProcessor`, `DefaultRequestProcessor`,
`RouteInfoManager`): routes, cluster info and topic lists, read from the cluster itself (the brokers of
one emulator register by sharing it). Broker addresses are the brokers' remoting listeners."""

from __future__ import annotations

from rocketmq_protocol.remoting.codes import RequestCode as Q
from rocketmq_protocol.remoting.codes import ResponseCode as R
from rocketmq_protocol.remoting.codes import Version
from rocketmq_protocol.remoting.frames import RemotingCommand
from rocketmq_protocol.remoting.headers import GetRouteInfoRequestHeader, GetTopicsByClusterRequestHeader
from rocketmq_protocol.remoting.route import BrokerData, ClusterInfo, QueueData, TopicList, TopicRouteData

from ..core.cluster import Broker, Cluster
from .server import Connection, Handler

AUTO_CREATE_TEMPLATE = "TBW102"  # TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC
_FAQ = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."


def broker_data(cluster: Cluster, b: Broker) -> BrokerData:
    return BrokerData(
        cluster=cluster.config.cluster_name,
        broker_name=b.name,
        broker_addrs={0: f"{b.host}:{b.remoting_port}"},
    )


def topic_route(cluster: Cluster, topic: str) -> TopicRouteData | None:
    """The route of a topic over every broker serving it; None when no broker does. TBW102 (the template a
    producer sends unknown topics with) is routed when topics are auto-created, as `autoCreateTopicEnable`."""
    pairs = [(b, cfg.queues, cfg.perm) for b, cfg in cluster.route(topic)]
    if not pairs and topic == AUTO_CREATE_TEMPLATE and cluster.config.auto_create_topics:
        pairs = [(b, cluster.config.default_queues, 7) for b in cluster.brokers]
    if not pairs:
        return None
    route = TopicRouteData()
    for b, queues, perm in pairs:
        if b.faults.current.read_only:
            perm &= ~2
        route.queue_datas.append(QueueData(b.name, queues, queues, perm, 0))
        route.broker_datas.append(broker_data(cluster, b))
    return route


class NameServer:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def handlers(self) -> dict[int, Handler]:
        return {
            Q.GET_ROUTEINFO_BY_TOPIC: self.route,
            Q.GET_BROKER_CLUSTER_INFO: self.cluster_info,
            Q.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.all_topics,
            Q.GET_TOPICS_BY_CLUSTER: self.topics_by_cluster,
            Q.GET_SYSTEM_TOPIC_LIST_FROM_NS: self.system_topics,
            Q.PUT_KV_CONFIG: self.put_kv,
            Q.GET_KV_CONFIG: self.get_kv,
            Q.DELETE_KV_CONFIG: self.put_kv,
        }

    async def route(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = GetRouteInfoRequestHeader.from_ext_fields(cmd.ext_fields)
        route = topic_route(self.cluster, h.topic)
        if route is None:
            return cmd.response(
                R.TOPIC_NOT_EXIST, f"No topic route info in name server for the topic: {h.topic}{_FAQ}"
            )
        standard = cmd.version >= Version.V4_9_4 or bool(h.accept_standard_json_only)
        return cmd.response(R.SUCCESS, body=route.to_json(standard=standard))

    async def cluster_info(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        info = ClusterInfo()
        for b in self.cluster.brokers:
            info.broker_addr_table[b.name] = broker_data(self.cluster, b)
        info.cluster_addr_table[self.cluster.config.cluster_name] = [b.name for b in self.cluster.brokers]
        return cmd.response(R.SUCCESS, body=info.to_json())

    def _topics(self) -> list[str]:
        return sorted({t for b in self.cluster.brokers for t in b.store.topics})

    async def all_topics(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(R.SUCCESS, body=TopicList(self._topics()).to_json())

    async def topics_by_cluster(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = GetTopicsByClusterRequestHeader.from_ext_fields(cmd.ext_fields)
        topics = self._topics() if h.cluster == self.cluster.config.cluster_name else []
        return cmd.response(R.SUCCESS, body=TopicList(topics).to_json())

    async def system_topics(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        names = [self.cluster.config.cluster_name, *(b.name for b in self.cluster.brokers)]
        first = self.cluster.brokers[0] if self.cluster.brokers else None
        addr = f"{first.host}:{first.remoting_port}" if first is not None else None
        return cmd.response(R.SUCCESS, body=TopicList(names, addr).to_json())

    async def put_kv(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(R.SUCCESS)

    async def get_kv(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        ns, key = cmd.ext_fields.get("namespace"), cmd.ext_fields.get("key")
        return cmd.response(R.QUERY_NOT_FOUND, f"No config item, Namespace: {ns} Key: {key}")
