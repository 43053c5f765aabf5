"""PULL_MESSAGE / LITE_PULL_MESSAGE with long polling, queue bounds and time lookups, consumer offsets and
VIEW_MESSAGE_BY_ID (apache/rocketmq `PullMessageProcessor`, `AdminBrokerProcessor`,
`ConsumerManageProcessor`): translation to the core's `pulling.pull` and the store's offsets."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from rocketmq_protocol.remoting.codes import ResponseCode as R
from rocketmq_protocol.remoting.flags import PullSysFlag
from rocketmq_protocol.remoting.frames import MAX_FRAME_LENGTH, RemotingCommand
from rocketmq_protocol.remoting.headers import (
    GetEarliestMsgStoretimeRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader,
    SearchOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    ViewMessageRequestHeader,
)

from ..core.filtering import FILTER_SQL, FILTER_TAG, FilterError, parse_filter
from ..core.pulling import pull
from ..core.store.message_store import FOUND
from .codes import pull_code
from .messages import stored_record_buffer, stored_records
from .record_cache import MIN_RECORDS, READ_AHEAD_BYTES, READ_AHEAD_RECORDS
from .server import Connection, Refused

if TYPE_CHECKING:
    from .broker import RemotingBroker

# Record bytes of one answer at most, whatever maxMsgNums and maxMsgBytes (body bytes) allow: its frame stays
# within the 16 MiB clients accept (MAX_FRAME_LENGTH, Java's `com.rocketmq.remoting.frameMaxLength`).
PULL_MAX_RECORD_BYTES = MAX_FRAME_LENGTH - (1 << 20)
# PullSysFlag bits as ints (an IntFlag operand makes `&` an enum operation, ~2 µs each on every pull).
_COMMIT_OFFSET, _SUSPEND, _SUBSCRIPTION = (
    int(PullSysFlag.COMMIT_OFFSET),
    int(PullSysFlag.SUSPEND),
    int(PullSysFlag.SUBSCRIPTION),
)
_FAQ = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."


def _queue(self: RemotingBroker, conn: Connection, topic: str, queue_id: int, *, read: bool = True) -> None:
    cfg = self.broker.store.topics.get(topic)
    if cfg is None:
        raise Refused(R.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!{_FAQ}")
    if read and not cfg.perm & 4:
        raise Refused(R.NO_PERMISSION, f"the topic[{topic}] pulling message is forbidden")
    if not 0 <= queue_id < cfg.queues:
        raise Refused(
            R.INVALID_PARAMETER,
            f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:[{cfg.queues}] "
            f"consumer:[{conn.peer}]",
        )


async def pull_message(self: RemotingBroker, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    h = PullMessageRequestHeader.from_ext_fields(cmd.ext_fields)
    topic, qid, group = h.topic, h.queue_id, h.consumer_group
    _queue(self, conn, topic, qid)
    if h.sys_flag & _SUBSCRIPTION or h.subscription:
        expr_type, expr = h.expression_type or "TAG", h.subscription or "*"
    else:
        expr_type, expr = self.cluster.clients.subscription(group, topic) or ("TAG", "*")
    try:
        flt = parse_filter(FILTER_SQL if expr_type.upper() == "SQL92" else FILTER_TAG, expr)
    except FilterError as e:
        raise Refused(R.SUBSCRIPTION_PARSE_FAILED, f"parse the consumer's subscription failed: {e}") from None
    store = self.broker.store
    if h.sys_flag & _COMMIT_OFFSET and h.commit_offset >= 0:
        store.set_consumer_offset(group, topic, qid, h.commit_offset)
    batch = min(max(h.max_msg_nums, 1), self.cluster.config.max_transfer_count)
    max_bytes = h.max_msg_bytes if h.max_msg_bytes and h.max_msg_bytes > 0 else None
    timeout = max(h.suspend_timeout_millis, 0) / 1000.0 if h.sys_flag & _SUSPEND else 0.0
    result = await pull(store, self.polling, topic, qid, h.queue_offset, batch, max_bytes, flt, timeout)
    header = PullMessageResponseHeader(
        suggest_which_broker_id=0,
        next_begin_offset=result.next_offset,
        min_offset=result.min_offset,
        max_offset=result.max_offset,
    )
    code = pull_code(result)
    body: bytes | memoryview = b""
    if result.status == FOUND and result.table is not None:
        records, starts = _records(self, topic, qid, result.table)
        fit = max(1, int(np.searchsorted(starts, PULL_MAX_RECORD_BYTES, side="right")) - 1)
        if fit < len(starts) - 1:  # the rest would overflow the frame: it is the next pull's
            header.next_begin_offset = result.table.column("queue_offset")[fit].as_py()
        body = memoryview(records)[: int(starts[fit])]
    return cmd.response(code, ext_fields=header.to_ext_fields(), body=body)


def _records(self: RemotingBroker, topic: str, qid: int, table: pa.Table) -> tuple[pa.Buffer, np.ndarray]:
    """The stored records of a pull's rows and where each starts: from the record cache when an earlier
    answer holds these offsets, else encoded (and kept, when the rows are consecutive offsets; a small
    pull's with a read-ahead, `record_cache.keep_ahead`)."""
    offsets = table.column("queue_offset")
    first, n = offsets[0].as_py(), table.num_rows
    consecutive = offsets[n - 1].as_py() - first == n - 1  # no row filtered out between them
    name = self.broker.name
    cluster = self.cluster.config.cluster_name
    if consecutive:
        cache = self.record_cache
        kept = cache.lookup(name, topic, qid, first, n)
        if kept is not None:
            return kept
        if n < MIN_RECORDS and cache.budget_bytes:
            ahead = self.broker.store.get(topic, qid, first, READ_AHEAD_RECORDS, READ_AHEAD_BYTES).table
            if ahead is not None and ahead.num_rows > n and ahead.column("queue_offset")[0].as_py() == first:
                records, starts = stored_record_buffer(ahead, topic, qid, self.broker, cluster)
                cache.keep_ahead(name, topic, qid, first, records, starts)
                return records, starts[: n + 1]
    records, starts = stored_record_buffer(table, topic, qid, self.broker, cluster)
    if consecutive:
        self.record_cache.keep(name, topic, qid, first, records, starts)
    return records, starts


async def get_max_offset(self: RemotingBroker, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    h = GetMaxOffsetRequestHeader.from_ext_fields(cmd.ext_fields)
    return cmd.response(
        R.SUCCESS, ext_fields={"offset": str(self.broker.store.min_max(h.topic, h.queue_id)[1])}
    )


async def get_min_offset(self: RemotingBroker, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    h = GetMinOffsetRequestHeader.from_ext_fields(cmd.ext_fields)
    return cmd.response(
        R.SUCCESS, ext_fields={"offset": str(self.broker.store.min_max(h.topic, h.queue_id)[0])}
    )


async def search_offset(self: RemotingBroker, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    """Lower boundary: the first offset stored at or after the time (the max offset when none is); upper:
    the last offset stored at or before it."""
    h = SearchOffsetRequestHeader.from_ext_fields(cmd.ext_fields)
    store = self.broker.store
    if (h.boundary_type or "lower").lower() == "upper":
        lo, hi = store.min_max(h.topic, h.queue_id)
        offset = max(min(store.search_offset(h.topic, h.queue_id, h.timestamp + 1) - 1, hi - 1), lo)
    else:
        offset = store.search_offset(h.topic, h.queue_id, h.timestamp)
    return cmd.response(R.SUCCESS, ext_fields={"offset": str(offset)})


async def earliest_store_time(
    self: RemotingBroker, conn: Connection, cmd: RemotingCommand
) -> RemotingCommand:
    h = GetEarliestMsgStoretimeRequestHeader.from_ext_fields(cmd.ext_fields)
    store = self.broker.store
    lo, _ = store.min_max(h.topic, h.queue_id)
    r = store.get(h.topic, h.queue_id, lo, 1)
    ts = -1
    if r.status == FOUND and r.table is not None:
        ts = int(r.table.column("store_timestamp").cast(pa.int64())[0].as_py())
    return cmd.response(R.SUCCESS, ext_fields={"timestamp": str(ts)})


async def query_consumer_offset(
    self: RemotingBroker, conn: Connection, cmd: RemotingCommand
) -> RemotingCommand:
    h = QueryConsumerOffsetRequestHeader.from_ext_fields(cmd.ext_fields)
    store = self.broker.store
    off = store.get_consumer_offset(h.consumer_group, h.topic, h.queue_id)
    if off is not None and off >= 0:
        return cmd.response(R.SUCCESS, ext_fields={"offset": str(off)})
    if h.set_zero_if_not_found is False:
        return cmd.response(R.QUERY_NOT_FOUND, "Not found, do not set to zero, maybe this group boot first")
    lo, hi = store.min_max(h.topic, h.queue_id)
    if lo <= 0 < hi:  # message 0 is still there ("in page cache"): a new group starts from it
        return cmd.response(R.SUCCESS, ext_fields={"offset": "0"})
    return cmd.response(R.QUERY_NOT_FOUND, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")


async def update_consumer_offset(
    self: RemotingBroker, conn: Connection, cmd: RemotingCommand
) -> RemotingCommand:
    h = UpdateConsumerOffsetRequestHeader.from_ext_fields(cmd.ext_fields)
    if h.topic not in self.broker.store.topics:
        raise Refused(R.TOPIC_NOT_EXIST, f"Topic {h.topic} not exist!")
    self.broker.store.set_consumer_offset(h.consumer_group, h.topic, h.queue_id, h.commit_offset)
    return cmd.response(R.SUCCESS)


async def view_message(self: RemotingBroker, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    """VIEW_MESSAGE_BY_ID: the message at a commit-log offset (an offset message id's last 8 bytes)."""
    h = ViewMessageRequestHeader.from_ext_fields(cmd.ext_fields)
    store = self.broker.store
    where = store.locate(h.offset)
    r = store.get(where[0], where[1], where[2], 1) if where is not None else None
    if (
        r is None
        or r.status != FOUND
        or r.table is None
        or r.table.column("queue_offset")[0].as_py() != where[2]
    ):
        raise Refused(R.SYSTEM_ERROR, f"can not find message by the offset, {h.offset}")
    body = stored_records(
        r.table.slice(0, 1), where[0], where[1], self.broker, self.cluster.config.cluster_name
    )
    return cmd.response(R.SUCCESS, body=body)
