"""SEND_MESSAGE / SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE, END_TRANSACTION and the CHECK_TRANSACTION_STATE
check-back, CONSUMER_SEND_MSG_BACK (apache/rocketmq `SendMessageProcessor`, `EndTransactionProcessor`,
`AbstractTransactionalMessageCheckListener`): translation to the core's `sending.send`,
`TransactionService` and `retry.send_back`."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import numpy as np

from rocketmq_protocol.names import DLQ_PREFIX, RETRY_PREFIX, topic_error
from rocketmq_protocol.remoting.codes import RequestCode as Q
from rocketmq_protocol.remoting.codes import ResponseCode as R
from rocketmq_protocol.remoting.codes import Version
from rocketmq_protocol.remoting.flags import MessageSysFlag
from rocketmq_protocol.remoting.frames import RemotingCommand
from rocketmq_protocol.remoting.headers import (
    CheckTransactionStateRequestHeader,
    ConsumerSendMsgBackRequestHeader,
    EndTransactionRequestHeader,
    SendMessageResponseHeader,
    send_header_from_ext_fields,
)
from rocketmq_protocol.remoting.message_id import create_offset_message_id, join_offset_message_ids
from rocketmq_protocol.remoting.properties import DELAY, PGROUP, decode_properties

from ..core.delay import TIMER_TOPIC
from ..core.parked import Parked
from ..core.retry import parse_delay_levels, send_back
from ..core.sending import send
from ..core.transactions import HALF_TOPIC
from .messages import send_columns, stored_records
from .server import Connection, Refused

if TYPE_CHECKING:
    from .broker import RemotingBroker

log = logging.getLogger(__name__)

_FAQ = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."


def _check_topic(topic: str) -> None:
    err = topic_error(topic)
    if err and "system topic" in err:
        raise Refused(R.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden.")
    if err and not topic.startswith((RETRY_PREFIX, DLQ_PREFIX)):
        raise Refused(R.INVALID_PARAMETER, err)


async def send_message(self: RemotingBroker, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    h = send_header_from_ext_fields(cmd.code, cmd.ext_fields)
    batch = cmd.code == Q.SEND_BATCH_MESSAGE or bool(h.batch)
    topic = h.topic
    _check_topic(topic)
    if batch:
        if topic.startswith(RETRY_PREFIX):
            raise Refused(R.MESSAGE_ILLEGAL, "Retry Group is not supported for batching")
        if h.sys_flag & MessageSysFlag.TRANSACTION_PREPARED:
            raise Refused(R.MESSAGE_ILLEGAL, "batch message does not support transaction")
        if DELAY in decode_properties(h.properties or ""):
            raise Refused(R.MESSAGE_ILLEGAL, "batch message does not support delay message")
    store = self.broker.store
    if topic not in store.topics and topic.startswith(RETRY_PREFIX):
        store.create_topic(topic, 1)  # createTopicInSendMessageBackMethod
    cfg = store.topics.get(topic)
    if cfg is None and not self.cluster.ensure_topic(topic):
        raise Refused(R.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!{_FAQ}")
    cfg = store.topics.get(topic)
    if cfg is None:
        raise Refused(R.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!{_FAQ}")
    if h.queue_id >= cfg.queues:
        raise Refused(
            R.INVALID_PARAMETER,
            f"request queueId[{h.queue_id}] is illegal, topic {topic} has {cfg.queues} queues Producer: {conn.peer}",
        )
    levels = parse_delay_levels(self.cluster.config.delay_levels)
    cols = send_columns(h, cmd.body, batch=batch, born_host=conn.peer, delay_levels=levels)
    explicit = h.queue_id >= 0
    if explicit:
        cols.queue_id = [h.queue_id] * cols.n
    now = int(time.time() * 1000)
    result, end = send(
        self.cluster,
        self.broker,
        topic,
        cols,
        explicit_queue=explicit,
        producer=h.producer_group,
        proxy_checks=False,  # a broker checks only the body (docs/deviations.md, "Remoting")
        batch_bytes=len(cmd.body or b"") if batch else None,
    )
    await store.wait_durable(end)
    # Where each message went: its queue, the timer topic (delayed) or the half topic (transactional).
    n = cols.n
    txs = result.transaction_ids or [""] * n
    offsets = np.asarray(result.offsets, np.int64)
    commit = np.empty(n, np.int64)
    half = np.fromiter((bool(t) for t in txs), bool, n) if result.transaction_ids else np.zeros(n, bool)
    due = cols.delivery_timestamp
    timer = np.fromiter((d is not None and d > now for d in due), bool, n) if due else np.zeros(n, bool)
    timer &= ~half
    normal = ~(half | timer)
    if half.any():
        commit[half] = store.commit_offsets(HALF_TOPIC, 0, offsets[half])
    if timer.any():
        commit[timer] = store.commit_offsets(TIMER_TOPIC, 0, offsets[timer])
    for qid in np.unique(result.queue_ids[normal]) if normal.any() else []:
        rows = normal & (result.queue_ids == qid)
        commit[rows] = store.commit_offsets(topic, int(qid), offsets[rows])
    header = SendMessageResponseHeader(
        msg_id=join_offset_message_ids(self.broker.host, self.broker.remoting_port, commit),
        queue_id=int(result.queue_ids[0]),
        queue_offset=int(result.offsets[0]),
        transaction_id=txs[0] or result.message_ids[0].as_py(),
    )
    ext = header.to_ext_fields()
    ext.update({"MSG_REGION": "DefaultRegion", "TRACE_ON": "true"})
    return cmd.response(R.SUCCESS, ext_fields=ext)


async def end_transaction(self: RemotingBroker, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    h = EndTransactionRequestHeader.from_ext_fields(cmd.ext_fields)
    kind = h.commit_or_rollback & MessageSysFlag.TRANSACTION_ROLLBACK
    if kind == 0:  # TRANSACTION_NOT_TYPE: the producer does not know yet; the broker will ask again
        return cmd.response(R.SUCCESS)
    tx = self.broker.transactions
    assert tx is not None
    key = h.transaction_id
    if not key or key not in tx.parked.pending:
        where = self.broker.store.locate(h.commit_log_offset)
        key = next(
            (
                k
                for k, p in tx.parked.pending.items()
                if where is not None and where[0] == HALF_TOPIC and p.offset == where[2]
            ),
            key,
        )
    parked = tx.end(key or "", commit=kind == MessageSysFlag.TRANSACTION_COMMIT) if key else None
    if parked is None:
        raise Refused(R.SYSTEM_ERROR, "Find prepared transaction message failed")
    return cmd.response(R.SUCCESS)


def check_back(self: RemotingBroker, transaction_id: str, parked: Parked) -> bool:
    """Asks a producer of the half message's group (property PGROUP), over its own connection, whether to
    commit (CHECK_TRANSACTION_STATE, oneway; the producer answers with END_TRANSACTION)."""
    store = self.broker.store
    r = store.get(HALF_TOPIC, 0, parked.offset, 1)
    if r.table is None or not r.count:
        return False
    props = dict(r.table.column("properties")[0].as_py() or [])
    group = props.get(PGROUP) or parked.producer
    conns = [c for cid in self.cluster.clients.producers_of(group) for c in [self.client_conns.get(cid)] if c]
    conns = [c for c in conns if not c.closed]
    if not conns:
        return False
    commit = int(store.commit_offsets(HALF_TOPIC, 0, np.array([parked.offset]))[0])
    body = stored_records(
        r.table, parked.topic, parked.queue_id, self.broker, self.cluster.config.cluster_name, commit=[commit]
    )
    header = CheckTransactionStateRequestHeader(
        tran_state_table_offset=parked.offset,
        commit_log_offset=commit,
        topic=parked.topic,
        msg_id=parked.message_id,
        transaction_id=transaction_id,
        offset_msg_id=create_offset_message_id(self.broker.host, self.broker.remoting_port, commit),
    )
    header.bname = self.broker.name
    return conns[0].request_oneway(Q.CHECK_TRANSACTION_STATE, header.to_ext_fields(), body)


async def consumer_send_back(self: RemotingBroker, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    h = ConsumerSendMsgBackRequestHeader.from_ext_fields(cmd.ext_fields)
    honour_max = cmd.version >= Version.V3_4_9 and h.max_reconsume_times is not None
    target = send_back(
        self.cluster,
        self.broker,
        h.group,
        h.offset,
        h.delay_level,
        h.max_reconsume_times if honour_max else None,
        h.origin_msg_id,
    )
    log.debug("%s: send-back of %d for %s went to %s", self.broker.name, h.offset, h.group, target)
    return cmd.response(R.SUCCESS)
