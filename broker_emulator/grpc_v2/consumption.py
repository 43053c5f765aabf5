"""POP-style consumption RPCs of apache.rocketmq.v2 (ReceiveMessage, Ack, ChangeInvisibleDuration,
ForwardMessageToDeadLetterQueue, QueryAssignment), mixed into MessagingService."""

from __future__ import annotations

import asyncio

from google.protobuf import timestamp_pb2

from rocketmq_protocol.grpc_v2 import definition_pb2 as d
from rocketmq_protocol.grpc_v2 import service_pb2 as s
from rocketmq_protocol.names import group_error, topic_error

from ..core.cluster import Broker, Cluster
from ..core.filtering import FilterError, parse_filter
from ..core.long_polling import LongPollingService
from ..core.pop import HIDDEN_PROPERTIES, InvalidHandle, PopService, retry_topic
from ..core.store.message_store import MessageStore
from .common import OK, duration_seconds, polling_timeout, rpc, status
from .messages import table_to_messages, wrap_namespace

MAX_INVISIBLE_MS = 12 * 3600 * 1000
MAX_RECEIVE_BATCH = 32
MAX_POLLING_S = 20.0  # the proxy's grpcClientConsumerMaxLongPollingTimeoutMillis
AUTO_RENEW_INVISIBLE_MS = 60_000


def _now_ts() -> timestamp_pb2.Timestamp:
    ts = timestamp_pb2.Timestamp()
    ts.GetCurrentTime()
    return ts


class ConsumptionRpcs:
    """Handlers needing `cluster`, `broker`, `store` and `polling` attributes (see MessagingService)."""

    cluster: Cluster
    broker: Broker
    store: MessageStore
    polling: LongPollingService

    @property
    def pop(self) -> PopService:
        assert self.broker.pop is not None
        return self.broker.pop

    def _check_topic_group(self, topic_res, group_res) -> tuple[str, str, int | None, str | None]:
        err = topic_error(topic_res.name)
        if err:
            return "", "", d.ILLEGAL_TOPIC, err
        err = group_error(group_res.name)
        if err:
            return "", "", d.ILLEGAL_CONSUMER_GROUP, err
        topic, group = wrap_namespace(topic_res), wrap_namespace(group_res)
        if topic not in self.store.topics:
            return topic, group, d.TOPIC_NOT_FOUND, f"topic {topic} is not served by {self.broker.name}"
        return topic, group, None, None

    @rpc(s.ReceiveMessageResponse, stream=True)
    async def ReceiveMessage(self, request, context):
        topic, group, code, msg = self._check_topic_group(request.message_queue.topic, request.group)
        invisible_ms = 0
        if code is None:
            if request.auto_renew:
                invisible_ms = AUTO_RENEW_INVISIBLE_MS
            else:
                invisible_ms = int(duration_seconds(request.invisible_duration) * 1000)
                lo = self.cluster.config.min_invisible_ms
                if not lo <= invisible_ms <= MAX_INVISIBLE_MS:
                    code, msg = (
                        d.ILLEGAL_INVISIBLE_TIME,
                        (f"invisible_duration {invisible_ms} ms is outside [{lo}, {MAX_INVISIBLE_MS}] ms"),
                    )
        if code is None:
            try:
                flt = parse_filter(request.filter_expression.type, request.filter_expression.expression)
            except FilterError as e:
                code, msg = d.ILLEGAL_FILTER_EXPRESSION, str(e)
        if code is not None:
            yield s.ReceiveMessageResponse(status=status(code, msg))
            yield s.ReceiveMessageResponse(delivery_timestamp=_now_ts())
            return
        group_cfg = self.cluster.group_config(group)
        batch = min(max(request.batch_size, 1), MAX_RECEIVE_BATCH)
        if request.HasField("long_polling_timeout"):
            shortest = self.cluster.config.min_long_polling_ms / 1000
            want = min(max(duration_seconds(request.long_polling_timeout), shortest), MAX_POLLING_S)
        else:
            want = MAX_POLLING_S
        timeout = polling_timeout(want, context, margin_s=0.5)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        keys = [(topic, -1), (retry_topic(group, topic), -1)]
        while True:
            result = self.pop.pop(group, topic, flt, batch, invisible_ms, group_cfg.fifo)
            if result.inflight:
                break
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            if self.polling.full():
                yield s.ReceiveMessageResponse(status=status(d.TOO_MANY_REQUESTS, "polling full"))
                yield s.ReceiveMessageResponse(delivery_timestamp=_now_ts())
                return
            await self.polling.wait(keys, flt, -1, remaining)
        if not result.inflight:
            yield s.ReceiveMessageResponse(status=status(d.MESSAGE_NOT_FOUND, "no new message"))
            yield s.ReceiveMessageResponse(delivery_timestamp=_now_ts())
            return
        ns = request.message_queue.topic.resource_namespace
        messages = table_to_messages(result.table, topic, ns, self.broker.name, 0, self.broker.endpoint)
        yield s.ReceiveMessageResponse(status=OK)
        for m, inf in zip(messages, result.inflight, strict=True):
            sp = m.system_properties
            sp.queue_id = inf.queue_id
            sp.receipt_handle = inf.handle(self.broker.name)
            sp.delivery_attempt = inf.reconsume_times + 1
            for k in HIDDEN_PROPERTIES.intersection(m.user_properties.keys()):
                del m.user_properties[k]
            yield s.ReceiveMessageResponse(message=m)
        yield s.ReceiveMessageResponse(delivery_timestamp=_now_ts())

    @rpc(s.AckMessageResponse)
    async def AckMessage(self, request, context):
        _topic, group, code, msg = self._check_topic_group(request.topic, request.group)
        if code is not None:
            return s.AckMessageResponse(status=status(code, msg))
        entries = []
        for e in request.entries:
            try:
                self.pop.ack(group, e.receipt_handle)
                st = status(d.OK)
            except InvalidHandle as err:
                st = status(d.INVALID_RECEIPT_HANDLE, str(err))
            entries.append(
                s.AckMessageResultEntry(message_id=e.message_id, receipt_handle=e.receipt_handle, status=st)
            )
        codes = {e.status.code for e in entries}
        if not entries:
            top = status(d.BAD_REQUEST, "no entry to acknowledge")
        elif len(codes) == 1:
            top = entries[0].status
        else:
            top = status(d.MULTIPLE_RESULTS, "entries have different results")
        return s.AckMessageResponse(status=top, entries=entries)

    @rpc(s.ChangeInvisibleDurationResponse)
    async def ChangeInvisibleDuration(self, request, context):
        _topic, group, code, msg = self._check_topic_group(request.topic, request.group)
        if code is None:
            invisible_ms = int(duration_seconds(request.invisible_duration) * 1000)
            if invisible_ms > MAX_INVISIBLE_MS or invisible_ms < 0:
                code, msg = d.ILLEGAL_INVISIBLE_TIME, f"invisible_duration {invisible_ms} ms exceeds 12 h"
        if code is not None:
            return s.ChangeInvisibleDurationResponse(
                status=status(code, msg), receipt_handle=request.receipt_handle
            )
        try:
            _, handle = self.pop.change_invisible(group, request.receipt_handle, invisible_ms)
        except InvalidHandle as err:
            return s.ChangeInvisibleDurationResponse(
                status=status(d.INVALID_RECEIPT_HANDLE, str(err)), receipt_handle=request.receipt_handle
            )
        return s.ChangeInvisibleDurationResponse(status=OK, receipt_handle=handle)

    @rpc(s.ForwardMessageToDeadLetterQueueResponse)
    async def ForwardMessageToDeadLetterQueue(self, request, context):
        _topic, group, code, msg = self._check_topic_group(request.topic, request.group)
        if code is not None:
            return s.ForwardMessageToDeadLetterQueueResponse(status=status(code, msg))
        try:
            self.pop.forward_to_dlq(group, request.receipt_handle)
        except InvalidHandle as err:
            return s.ForwardMessageToDeadLetterQueueResponse(
                status=status(d.INVALID_RECEIPT_HANDLE, str(err))
            )
        return s.ForwardMessageToDeadLetterQueueResponse(status=OK)

    @rpc(s.QueryAssignmentResponse)
    async def QueryAssignment(self, request, context):
        err = topic_error(request.topic.name) or group_error(request.group.name)
        if err:
            return s.QueryAssignmentResponse(status=status(d.BAD_REQUEST, err))
        topic, group = wrap_namespace(request.topic), wrap_namespace(request.group)
        route = self.cluster.route(topic)
        if not route:
            return s.QueryAssignmentResponse(
                status=status(d.TOPIC_NOT_FOUND, f"topic {topic} does not exist")
            )
        fifo = self.cluster.group_config(group).fifo
        out = []
        for b, cfg in route:
            if not cfg.perm & 4 or b.faults.current.down:
                continue
            broker_pb = d.Broker(
                name=b.name,
                id=0,
                endpoints=d.Endpoints(scheme=d.IPv4, addresses=[d.Address(host=b.host, port=b.port)]),
            )
            ids = range(cfg.queues) if fifo else [-1]
            for qid in ids:
                out.append(
                    d.Assignment(
                        message_queue=d.MessageQueue(
                            topic=request.topic,
                            id=qid,
                            permission=d.READ_WRITE,
                            broker=broker_pb,
                            accept_message_types=[d.NORMAL, d.FIFO, d.DELAY, d.TRANSACTION],
                        )
                    )
                )
        if not out:
            return s.QueryAssignmentResponse(status=status(d.FORBIDDEN, "no readable queue"))
        return s.QueryAssignmentResponse(status=OK, assignments=out)


__all__ = ["ConsumptionRpcs"]
