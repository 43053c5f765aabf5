"""The admin codes `mqadmin` sends to brokers (apache/rocketmq `AdminBrokerProcessor`): topic creation,
topic and consume stats, consumer connections, offset reset, runtime info; translation to the core's admin
queries (`core/admin.py`). Bodies are fastjson's: maps keyed by MessageQueue objects (`fastjson.dumps`)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from rocketmq_protocol.names import DLQ_PREFIX, RETRY_PREFIX, topic_error
from rocketmq_protocol.remoting import fastjson
from rocketmq_protocol.remoting.codes import RequestCode as Q
from rocketmq_protocol.remoting.codes import ResponseCode as R
from rocketmq_protocol.remoting.frames import RemotingCommand
from rocketmq_protocol.remoting.headers import (
    CreateTopicRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumeStatsRequestHeader,
    GetTopicStatsInfoRequestHeader,
    QueryTopicConsumeByWhoRequestHeader,
    ResetOffsetRequestHeader,
)

from ..core import admin as core_admin
from ..core.cluster import MESSAGE_TYPES
from .clients import _json_body
from .server import Connection, Refused

if TYPE_CHECKING:
    from .broker import RemotingBroker

_START_MS = int(time.time() * 1000)


def _mq(topic: str, broker: str, queue_id: int) -> tuple:
    """A MessageQueue as a fastjson map key (written as an object, fields in fastjson's order)."""
    return (("brokerName", broker), ("queueId", queue_id), ("topic", topic))


def _body(doc: Any) -> bytes:
    return fastjson.dumps(doc).encode("utf-8")


def _attributes(text: str | None) -> dict[str, str]:
    """`+message.type=FIFO,+other=x` → {"message.type": "FIFO", ...}."""
    out = {}
    for item in (text or "").split(","):
        item = item.strip().lstrip("+-")
        if "=" in item:
            k, v = item.split("=", 1)
            out[k.strip()] = v.strip()
    return out


async def update_and_create_topic(
    self: RemotingBroker, conn: Connection, cmd: RemotingCommand
) -> RemotingCommand:
    h = CreateTopicRequestHeader.from_ext_fields(cmd.ext_fields)
    err = None if h.topic.startswith((RETRY_PREFIX, DLQ_PREFIX)) else topic_error(h.topic)
    if err:
        raise Refused(R.INVALID_PARAMETER, err)
    mtype = _attributes(h.attributes).get("message.type", "MIXED").upper()
    if mtype not in MESSAGE_TYPES:
        raise Refused(R.INVALID_PARAMETER, f"message.type {mtype} is not one of {', '.join(MESSAGE_TYPES)}")
    queues = max(h.read_queue_nums, h.write_queue_nums)
    if not 1 <= queues <= 1024:
        raise Refused(R.INVALID_PARAMETER, f"queue nums must be within 1..1024, got {queues}")
    self.broker.store.create_topic(h.topic, queues, h.perm & 6 or 6, mtype)
    return cmd.response(R.SUCCESS)


def _topic_config(name: str, cfg) -> dict:
    """A TopicConfig as fastjson writes it."""
    return {
        "attributes": {} if cfg.message_type == "MIXED" else {"message.type": cfg.message_type},
        "order": False,
        "perm": cfg.perm,
        "readQueueNums": cfg.queues,
        "topicFilterType": "SINGLE_TAG",
        "topicName": name,
        "topicSysFlag": 0,
        "writeQueueNums": cfg.queues,
    }


async def get_topic_config(self: RemotingBroker, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    """GET_TOPIC_CONFIG (mqadmin topicStatus reads it first): a TopicConfigAndQueueMapping."""
    topic = cmd.ext_fields.get("topic", "")
    cfg = self.broker.store.topics.get(topic)
    if cfg is None:
        raise Refused(R.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {topic}")
    return cmd.response(R.SUCCESS, body=_body(_topic_config(topic, cfg)))


async def get_all_topic_config(
    self: RemotingBroker, conn: Connection, cmd: RemotingCommand
) -> RemotingCommand:
    table = {name: _topic_config(name, cfg) for name, cfg in sorted(self.broker.store.topics.items())}
    doc = {"dataVersion": {"counter": len(table), "timestamp": _START_MS}, "topicConfigTable": table}
    return cmd.response(R.SUCCESS, body=_body(doc))


async def broker_runtime_info(
    self: RemotingBroker, conn: Connection, cmd: RemotingCommand
) -> RemotingCommand:
    """The KVTable `mqadmin clusterList`/`brokerStatus` print (`BrokerController`, `getBrokerRuntimeInfo`)."""
    stats = self.broker.store.stats()
    table = {
        "brokerVersionDesc": "V5_5_0",
        "brokerVersion": "513",
        "brokerActive": "true",
        "msgPutTotalTodayNow": str(stats["put_messages"]),
        "msgGetTotalTodayNow": str(stats["get_requests"]),
        "msgPutTotalTodayMorning": "0",
        "msgGetTotalTodayMorning": "0",
        "msgPutTotalYesterdayMorning": "0",
        "msgGetTotalYesterdayMorning": "0",
        "putTps": "0.0 0.0 0.0",
        "getTransferredTps": "0.0 0.0 0.0",
        "sendThreadPoolQueueSize": "0",
        "pullThreadPoolQueueSize": "0",
        "ackThreadPoolQueueSize": "0",
        "sendThreadPoolQueueHeadWaitTimeMills": "0",
        "pullThreadPoolQueueHeadWaitTimeMills": "0",
        "ackThreadPoolQueueHeadWaitTimeMills": "0",
        "pageCacheLockTimeMills": "0",
        "earliestMessageTimeStamp": str(_START_MS),
        "commitLogDiskRatio": "0.0",
        "commitLogMaxOffset": str(stats["commitlog_position"]),
        "commitLogMinOffset": "0",
        "bootTimestamp": str(_START_MS),
        "timerReadBehind": "0",
        "timerOffsetBehind": "0",
        "timerCongestNum": "0",
        "timerEnqueueTps": "0.0",
        "timerDequeueTps": "0.0",
    }
    return cmd.response(R.SUCCESS, body=_body({"table": table}))


async def topic_stats(self: RemotingBroker, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    h = GetTopicStatsInfoRequestHeader.from_ext_fields(cmd.ext_fields)
    rows = core_admin.topic_stats(self.broker, h.topic)
    if rows is None:
        raise Refused(R.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist")
    table = {
        _mq(h.topic, self.broker.name, r["queue"]): {
            "lastUpdateTimestamp": r["last_update_ms"],
            "maxOffset": r["max_offset"],
            "minOffset": r["min_offset"],
        }
        for r in rows
    }
    return cmd.response(R.SUCCESS, body=_body({"offsetTable": table, "topicPutTps": 0.0}))


async def consume_stats(self: RemotingBroker, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    h = GetConsumeStatsRequestHeader.from_ext_fields(cmd.ext_fields)
    topics = [t for t in (h.topic_list or "").split(";") if t] or [h.topic or None]
    table = {}
    for topic in topics:
        for r in core_admin.consume_stats(self.broker, h.consumer_group, topic):
            table[_mq(r["topic"], self.broker.name, r["queue"])] = {
                "brokerOffset": r["broker_offset"],
                "consumerOffset": r["consumer_offset"],
                "lastTimestamp": r["last_timestamp"],
                "pullOffset": r["consumer_offset"],
            }
    return cmd.response(R.SUCCESS, body=_body({"consumeTps": 0.0, "offsetTable": table}))


async def consumer_connections(
    self: RemotingBroker, conn: Connection, cmd: RemotingCommand
) -> RemotingCommand:
    h = GetConsumerConnectionListRequestHeader.from_ext_fields(cmd.ext_fields)
    members = self.cluster.clients.group_members(h.consumer_group)
    if not members:
        raise Refused(R.CONSUMER_NOT_ONLINE, f"the consumer group[{h.consumer_group}] not online")
    first = members[0][1]
    subs: dict[str, dict] = {}
    for _c, data in members:
        for topic, (kind, expr) in data.subscriptions.items():
            subs[topic] = {
                "classFilterMode": False,
                "codeSet": [],
                "expressionType": kind,
                "subString": expr,
                "subVersion": 0,
                "tagsSet": [],
                "topic": topic,
            }
    doc = {
        "connectionSet": [
            {"clientAddr": c.address, "clientId": c.client_id, "language": c.language or "JAVA",
             "version": int(c.version) if str(c.version).isdigit() else 0}
            for c, _d in members
        ],
        "consumeFromWhere": first.consume_from_where,
        "consumeType": first.consume_type,
        "messageModel": first.message_model,
        "subscriptionTable": subs,
    }  # fmt: skip
    return cmd.response(R.SUCCESS, body=_body(doc))


async def reset_offset(self: RemotingBroker, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    h = ResetOffsetRequestHeader.from_ext_fields(cmd.ext_fields)
    offsets = core_admin.reset_offsets(self.broker, h.group, h.topic, h.timestamp, h.is_force)
    if offsets is None:
        raise Refused(R.TOPIC_NOT_EXIST, f"Topic {h.topic} does not exist")
    table = {_mq(h.topic, self.broker.name, q): off for q, off in offsets.items()}
    body = _body({"offsetTable": table})
    # Online members move at once (RESET_CONSUMER_CLIENT_OFFSET, as `Broker2Client.resetOffset` sends it).
    ext = {
        "topic": h.topic,
        "group": h.group,
        "timestamp": str(h.timestamp),
        "isForce": str(h.is_force).lower(),
    }
    for cid in self.cluster.clients.members(h.group):
        c = self.client_conns.get(cid)
        if c is not None:
            c.request_oneway(Q.RESET_CONSUMER_CLIENT_OFFSET, ext, body)
    return cmd.response(R.SUCCESS, body=body)


async def topic_consumed_by(self: RemotingBroker, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    h = QueryTopicConsumeByWhoRequestHeader.from_ext_fields(cmd.ext_fields)
    groups = core_admin.groups_of_topic(self.cluster, self.broker, h.topic)
    return cmd.response(R.SUCCESS, body=_body({"groupList": groups}))


async def update_subscription_group(
    self: RemotingBroker, conn: Connection, cmd: RemotingCommand
) -> RemotingCommand:
    doc = _json_body(cmd, "SubscriptionGroupConfig")
    group = str(doc.get("groupName") or "")
    try:
        self.cluster.update_group(
            group,
            max_retries=doc.get("retryMaxTimes"),
            fifo=bool(doc["consumeMessageOrderly"]) if "consumeMessageOrderly" in doc else None,
        )
    except ValueError as e:
        raise Refused(R.SYSTEM_ERROR, str(e)) from None
    return cmd.response(R.SUCCESS)
