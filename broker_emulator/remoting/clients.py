"""HEART_BEAT, UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP, CHECK_CLIENT_CONFIG, LOCK/UNLOCK_BATCH_MQ
(apache/rocketmq `ClientManageProcessor`, `ConsumerManageProcessor`, `RebalanceLockManager`): translation
to the core's client registry (`core/clients.py`)."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from rocketmq_protocol.remoting import fastjson
from rocketmq_protocol.remoting.codes import RequestCode as Q
from rocketmq_protocol.remoting.codes import ResponseCode as R
from rocketmq_protocol.remoting.errors import JsonBodyError
from rocketmq_protocol.remoting.frames import RemotingCommand
from rocketmq_protocol.remoting.headers import (
    GetConsumerListByGroupRequestHeader,
    NotifyConsumerIdsChangedRequestHeader,
    UnregisterClientRequestHeader,
)

from ..core.clients import ConsumerGroupData
from ..core.filtering import FILTER_SQL, FILTER_TAG, FilterError, parse_filter
from ..core.retry import retry_topic
from .server import Connection, Refused

if TYPE_CHECKING:
    from .broker import RemotingBroker

LOCK_EXPIRY_S = 60.0  # rocketmq.broker.rebalance.lockMaxLiveTime


def _json_body(cmd: RemotingCommand, what: str) -> dict[str, Any]:
    try:
        doc = fastjson.loads(cmd.body or b"{}")
    except JsonBodyError as e:
        raise Refused(R.SYSTEM_ERROR, f"{what}: the body is not JSON ({e})") from None
    if not isinstance(doc, dict):
        raise Refused(R.SYSTEM_ERROR, f"{what}: the body is not a JSON object")
    return doc


def notify_changed(self: RemotingBroker, groups: set[str]) -> None:
    """NOTIFY_CONSUMER_IDS_CHANGED (oneway) to the members of each group, so they rebalance now."""
    for group in groups:
        header = NotifyConsumerIdsChangedRequestHeader(consumer_group=group).to_ext_fields()
        for cid in self.cluster.clients.members(group):
            conn = self.client_conns.get(cid)
            if conn is not None:
                conn.request_oneway(Q.NOTIFY_CONSUMER_IDS_CHANGED, header)


async def heart_beat(self: RemotingBroker, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    doc = _json_body(cmd, "HeartbeatData")
    cid = str(doc.get("clientID") or "")
    if not cid:
        raise Refused(R.SYSTEM_ERROR, "HeartbeatData has no clientID")
    producers = [str(p.get("groupName")) for p in doc.get("producerDataSet") or [] if isinstance(p, dict)]
    consumers: dict[str, ConsumerGroupData] = {}
    for c in doc.get("consumerDataSet") or []:
        if not isinstance(c, dict) or not c.get("groupName"):
            continue
        subs = {}
        for sd in c.get("subscriptionDataSet") or []:
            if isinstance(sd, dict) and sd.get("topic"):
                subs[str(sd["topic"])] = (
                    str(sd.get("expressionType") or "TAG"),
                    str(sd.get("subString") or "*"),
                )
        consumers[str(c["groupName"])] = ConsumerGroupData(
            consume_type=str(c.get("consumeType") or "CONSUME_PASSIVELY"),
            message_model=str(c.get("messageModel") or "CLUSTERING"),
            consume_from_where=str(c.get("consumeFromWhere") or "CONSUME_FROM_LAST_OFFSET"),
            subscriptions=subs,
        )
    store = self.broker.store
    for group in consumers:  # a consumer's heartbeat creates its group's retry topic (1 queue)
        if retry_topic(group) not in store.topics:
            store.create_topic(retry_topic(group), 1)
    conn.client_ids.add(cid)
    self.client_conns[cid] = conn
    language = cmd.language.name if hasattr(cmd.language, "name") else str(cmd.language)
    changed = self.cluster.clients.heartbeat(
        cid,
        self.broker.name,
        producer_groups=producers,
        consumer_groups=consumers,
        language=language,
        version=str(cmd.version),
        address=conn.peer,
    )
    notify_changed(self, changed)
    return cmd.response(R.SUCCESS, ext_fields={"IS_SUPPORT_HEART_BEAT_V2": "false", "IS_SUB_CHANGE": "true"})


async def unregister_client(self: RemotingBroker, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    h = UnregisterClientRequestHeader.from_ext_fields(cmd.ext_fields)
    changed = self.cluster.clients.unregister(h.client_id, h.producer_group, h.consumer_group)
    notify_changed(self, changed)
    return cmd.response(R.SUCCESS)


async def consumer_list(self: RemotingBroker, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    h = GetConsumerListByGroupRequestHeader.from_ext_fields(cmd.ext_fields)
    members = self.cluster.clients.members(h.consumer_group)
    if not members:
        raise Refused(R.SYSTEM_ERROR, f"no consumer for this group, {h.consumer_group}")
    return cmd.response(R.SUCCESS, body=json.dumps({"consumerIdList": members}).encode())


async def check_client_config(
    self: RemotingBroker, conn: Connection, cmd: RemotingCommand
) -> RemotingCommand:
    doc = _json_body(cmd, "CheckClientRequestBody")
    sd = doc.get("subscriptionData") or {}
    kind = str(sd.get("expressionType") or "TAG").upper()
    try:
        parse_filter(FILTER_SQL if kind == "SQL92" else FILTER_TAG, str(sd.get("subString") or "*"))
    except FilterError as e:
        raise Refused(R.SUBSCRIPTION_PARSE_FAILED, f"Parameter check error: {e}") from None
    return cmd.response(R.SUCCESS)


def _mq_key(mq: Any) -> tuple[str, str, int] | None:
    if not isinstance(mq, dict):
        return None
    try:
        return str(mq["topic"]), str(mq["brokerName"]), int(mq["queueId"])
    except (KeyError, TypeError, ValueError):
        return None


async def lock_batch(self: RemotingBroker, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    """Orderly push consumers lock their queues: granted when free, expired or already theirs."""
    doc = _json_body(cmd, "LockBatchRequestBody")
    group, cid = str(doc.get("consumerGroup")), str(doc.get("clientId"))
    now = time.monotonic()
    ok = []
    for mq in doc.get("mqSet") or []:
        key = _mq_key(mq)
        if key is None:
            continue
        owner = self.locks.get((group, *key))
        if owner is None or owner[0] == cid or now - owner[1] > LOCK_EXPIRY_S:
            self.locks[(group, *key)] = (cid, now)
            ok.append({"brokerName": key[1], "queueId": key[2], "topic": key[0]})
    return cmd.response(R.SUCCESS, body=json.dumps({"lockOKMQSet": ok}).encode())


async def unlock_batch(self: RemotingBroker, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    doc = _json_body(cmd, "UnlockBatchRequestBody")
    group, cid = str(doc.get("consumerGroup")), str(doc.get("clientId"))
    for mq in doc.get("mqSet") or []:
        key = _mq_key(mq)
        if key is not None and self.locks.get((group, *key), ("",))[0] == cid:
            del self.locks[(group, *key)]
    return cmd.response(R.SUCCESS)
