"""apache.rocketmq.v2.MessagingService of one emulated broker (one endpoint)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import grpc
from google.protobuf import duration_pb2

from rocketmq_protocol.grpc_v2 import definition_pb2 as d
from rocketmq_protocol.grpc_v2 import service_pb2 as s
from rocketmq_protocol.grpc_v2 import service_pb2_grpc
from rocketmq_protocol.grpc_v2.headers import (
    CLIENT_ID_HEADER,
    CLIENT_VERSION_HEADER,
    EXPLICIT_QUEUE_HEADER,
    LANGUAGE_HEADER,
)
from rocketmq_protocol.names import group_error, topic_error

from ..core.cluster import Broker, Cluster
from ..core.errors import BrokerError, ErrorKind
from ..core.filtering import FilterError, parse_filter
from ..core.long_polling import LongPollingService
from ..core.pulling import pull
from ..core.send_columns import SendColumns
from ..core.sending import SendResult, send
from ..core.validation import accept_message_types
from .access import check_access
from .codes import code_of, pull_status
from .common import (
    OK,
    apply_faults,
    client_id,
    duration_seconds,
    metadata,
    peer_host,
    polling_timeout,
    refusal,
    rpc,
    status,
)
from .consumption import ConsumptionRpcs
from .messages import (
    proxy_batch_bytes,
    send_columns,
    send_response_bytes,
    table_to_messages,
    wrap_namespace,
)
from .uniform_send import uniform_send

log = logging.getLogger(__name__)

PULL_MAX_BATCH = 1024
RETRY_DELAYS_S = [1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200]
CLIENT_TYPES = {
    1: "PRODUCER",
    2: "PUSH_CONSUMER",
    3: "SIMPLE_CONSUMER",
    4: "PULL_CONSUMER",
    5: "LITE_PUSH",
    6: "LITE_SIMPLE",
}


class ReceivedSend:
    """A SendMessageRequest as received: the bytes, and either the parsed request (`send_columns` reads its
    columns from the bytes instead of re-serializing it) or, for messages of one layout (`uniform_send`),
    its first message alone and the columns of all."""

    __slots__ = ("columns", "raw", "request")

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        uniform = uniform_send(raw)
        if uniform is None:
            self.request, self.columns = s.SendMessageRequest.FromString(raw), None
        else:
            self.request, self.columns = uniform


def _dur(seconds: float) -> duration_pb2.Duration:
    return duration_pb2.Duration(seconds=int(seconds), nanos=int((seconds - int(seconds)) * 1e9))


class MessagingService(ConsumptionRpcs, service_pb2_grpc.MessagingServiceServicer):
    """Serves one broker; routes and client registration are answered for the whole cluster."""

    def __init__(self, cluster: Cluster, broker: Broker, polling: LongPollingService) -> None:
        self.cluster = cluster
        self.broker = broker
        self.store = broker.store
        self.polling = polling

    # ------------------------------------------------------------------ helpers
    def _client_id(self, context) -> str:
        return metadata(context).get(CLIENT_ID_HEADER, "")

    def _queue_route(self, topic: str, namespace: str) -> list[d.MessageQueue]:
        out = []
        name = topic[len(namespace) + 1 :] if namespace and topic.startswith(namespace + "%") else topic
        for b, cfg in self.cluster.route(topic):
            if b.faults.current.read_only or not cfg.perm & 2:
                perm = d.READ if cfg.perm & 4 else d.NONE
            else:
                perm = d.READ_WRITE if cfg.perm & 4 else d.WRITE
            broker_pb = d.Broker(
                name=b.name,
                id=0,
                endpoints=d.Endpoints(scheme=d.IPv4, addresses=[d.Address(host=b.host, port=b.port)]),
            )
            types = accept_message_types(cfg.message_type)
            for qid in range(cfg.queues):
                out.append(
                    d.MessageQueue(
                        topic=d.Resource(name=name, resource_namespace=namespace),
                        id=qid,
                        permission=perm,
                        broker=broker_pb,
                        accept_message_types=types,
                    )
                )
        return out

    def _check_queue(self, mq) -> tuple[str, int, int | None, str | None]:
        """(stored topic, queue id, error code, error message) for a request's message_queue."""
        topic = wrap_namespace(mq.topic)
        err = topic_error(mq.topic.name)
        if err:
            return topic, mq.id, d.ILLEGAL_TOPIC, err
        cfg = self.store.topics.get(topic)
        if cfg is None:
            return topic, mq.id, d.TOPIC_NOT_FOUND, f"topic {topic} is not served by {self.broker.name}"
        if not 0 <= mq.id < cfg.queues:
            return (
                topic,
                mq.id,
                d.BAD_REQUEST,
                (f"queue id {mq.id} of topic {topic} is outside 0..{cfg.queues - 1} on {self.broker.name}"),
            )
        return topic, mq.id, None, None

    # ------------------------------------------------------------------ route / clients
    @rpc(s.QueryRouteResponse)
    async def QueryRoute(self, request, context):
        err = topic_error(request.topic.name)
        if err:
            return s.QueryRouteResponse(status=status(d.ILLEGAL_TOPIC, err))
        topic = wrap_namespace(request.topic)
        if not self.cluster.topic_exists(topic):
            return s.QueryRouteResponse(status=status(d.TOPIC_NOT_FOUND, f"topic {topic} does not exist"))
        return s.QueryRouteResponse(
            status=OK, message_queues=self._queue_route(topic, request.topic.resource_namespace)
        )

    @rpc(s.HeartbeatResponse)
    async def Heartbeat(self, request, context):
        cid = self._client_id(context)
        ctype = CLIENT_TYPES.get(request.client_type)
        if ctype is None:
            return s.HeartbeatResponse(
                status=status(d.UNRECOGNIZED_CLIENT_TYPE, f"client type {request.client_type}")
            )
        group = wrap_namespace(request.group) if request.HasField("group") else ""
        if ctype != "PRODUCER":
            err = group_error(request.group.name)
            if err:
                return s.HeartbeatResponse(status=status(d.ILLEGAL_CONSUMER_GROUP, err))
        md = metadata(context)
        self.cluster.clients.touch(
            cid,
            self.broker.name,
            client_type=ctype,
            group=group,
            language=md.get(LANGUAGE_HEADER),
            version=md.get(CLIENT_VERSION_HEADER),
        )
        return s.HeartbeatResponse(status=OK)

    def _settings_reply(self, settings: d.Settings) -> d.Settings:
        """The proxy's merged settings: producer publishing limits, consumer subscription and backoff."""
        out = d.Settings()
        out.CopyFrom(settings)
        out.metric.on = False
        if settings.HasField("publishing"):
            out.publishing.max_body_size = self.cluster.config.max_body_size
            out.publishing.validate_message_type = True
            out.backoff_policy.CopyFrom(
                d.RetryPolicy(
                    max_attempts=3,
                    exponential_backoff=d.ExponentialBackoff(initial=_dur(0.01), max=_dur(1), multiplier=2.0),
                )
            )
        elif settings.HasField("subscription"):
            group_cfg = self.cluster.group_config(wrap_namespace(settings.subscription.group))
            out.subscription.receive_batch_size = 32
            out.subscription.long_polling_timeout.CopyFrom(_dur(20))
            out.subscription.fifo = group_cfg.fifo
            out.backoff_policy.CopyFrom(
                d.RetryPolicy(
                    max_attempts=group_cfg.max_attempts,
                    customized_backoff=d.CustomizedBackoff(next=[_dur(x) for x in RETRY_DELAYS_S]),
                )
            )
        return out

    def _register_settings(self, cid: str, settings: d.Settings, md: dict[str, str]) -> None:
        ctype = CLIENT_TYPES.get(settings.client_type, "UNKNOWN")
        group, topics = "", []
        if settings.HasField("publishing"):
            topics = [wrap_namespace(t) for t in settings.publishing.topics]
        if settings.HasField("subscription"):
            group = wrap_namespace(settings.subscription.group)
            topics = [wrap_namespace(e.topic) for e in settings.subscription.subscriptions]
        self.cluster.clients.touch(
            cid,
            self.broker.name,
            client_type=ctype,
            group=group,
            topics=topics,
            language=md.get(LANGUAGE_HEADER),
            version=md.get(CLIENT_VERSION_HEADER),
            settings=settings,
        )

    async def Telemetry(self, request_iterator, context) -> AsyncIterator[s.TelemetryCommand]:
        await apply_faults(self.broker, context)
        # The ACL is checked per command, as the proxy does: a refused command gets a TelemetryCommand with
        # the refusing status (UNAUTHORIZED, or FORBIDDEN for settings naming a topic or group the account
        # may not use) and the stream stays open. A stream that fails authentication is never registered.
        _, denied = check_access(self.cluster, "Telemetry", s.TelemetryCommand(), context)
        md = metadata(context)
        cid = md.get(CLIENT_ID_HEADER, "")
        outbound: asyncio.Queue = asyncio.Queue()
        if cid and denied is None:
            self.broker.telemetry[cid] = (outbound, None)

        async def read_commands() -> None:
            try:
                async for cmd in request_iterator:
                    _, refused = check_access(self.cluster, "Telemetry", cmd, context)
                    if refused is not None:
                        await outbound.put(
                            s.TelemetryCommand(status=status(code_of(refused), refused.message))
                        )
                        continue
                    if cmd.HasField("settings"):
                        st = cmd.settings
                        if not st.HasField("publishing") and not st.HasField("subscription"):
                            await outbound.put(
                                s.TelemetryCommand(
                                    status=status(
                                        d.BAD_REQUEST,
                                        "there is no publishing or subscription data in settings",
                                    )
                                )
                            )
                            continue
                        self._register_settings(cid, st, md)
                        if cid:
                            self.broker.telemetry[cid] = (outbound, st)
                        await outbound.put(s.TelemetryCommand(status=OK, settings=self._settings_reply(st)))
                    else:
                        self.cluster.clients.touch(cid, self.broker.name)
            except (asyncio.CancelledError, grpc.aio.AioRpcError):
                pass
            finally:
                await outbound.put(None)

        reader = asyncio.ensure_future(read_commands())
        try:
            while True:
                item = await outbound.get()
                if item is None:
                    break
                yield item
        finally:
            reader.cancel()
            entry = self.broker.telemetry.get(cid)
            if entry is not None and entry[0] is outbound:
                del self.broker.telemetry[cid]

    @rpc(s.NotifyClientTerminationResponse)
    async def NotifyClientTermination(self, request, context):
        cid = self._client_id(context)
        self.cluster.clients.remove(cid)
        self.broker.telemetry.pop(cid, None)
        return s.NotifyClientTerminationResponse(status=OK)

    # ------------------------------------------------------------------ send
    async def SendMessage(self, request, context):
        return s.SendMessageResponse.FromString(await self.send_message_bytes(request, context))

    async def send_message_bytes(self, request, context) -> bytes:
        """SendMessage answering with the serialized SendMessageResponse (see `add_to_server`); `request` is a
        SendMessageRequest or a `ReceivedSend` (the request and the bytes it was parsed from)."""
        refused = await refusal(
            self, "SendMessage", request.request if isinstance(request, ReceivedSend) else request, context
        )
        if refused is not None:
            return s.SendMessageResponse(status=refused).SerializeToString()
        return await self.send_answer_bytes(request, context)

    async def send_answer_bytes(self, request, context) -> bytes:
        """SendMessage's serialized answer to a request the generic checks (`refusal`) let through: the pull
        channel's SendMessage (`broker_emulator/remoting/channel_send.py`) makes its own."""
        raw = cols = None
        if isinstance(request, ReceivedSend):
            raw, cols, request = request.raw, request.columns, request.request
        try:
            result = await self._send(request, context, raw, cols)
        except BrokerError as e:
            return s.SendMessageResponse(status=status(code_of(e), e.message)).SerializeToString()
        if result.transaction_ids is None:
            return send_response_bytes(result.message_ids, result.offsets)
        resp = s.SendMessageResponse.FromString(send_response_bytes(result.message_ids, result.offsets))
        for entry, tx in zip(resp.entries, result.transaction_ids, strict=True):
            entry.transaction_id = tx
        return resp.SerializeToString()

    def add_to_server(self, server: grpc.aio.Server) -> None:
        """Registers this service like `service_pb2_grpc.add_MessagingServiceServicer_to_server`, except that
        SendMessage hands `send_message_bytes`' result to gRPC as is (no parse and re-serialization of the
        response). Its handler is registered first, so it shadows the generated one."""
        send = grpc.unary_unary_rpc_method_handler(self.send_message_bytes, request_deserializer=ReceivedSend)
        service = s.DESCRIPTOR.services_by_name["MessagingService"].full_name
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(service, {"SendMessage": send}),)
        )
        service_pb2_grpc.add_MessagingServiceServicer_to_server(self, server)

    async def _send(
        self, request, context, raw: bytes | None = None, cols: SendColumns | None = None
    ) -> SendResult:
        """The request's messages, read column by column (or `cols`, already read), stored by the broker core;
        BrokerError otherwise."""
        msgs = request.messages
        if not msgs:
            raise BrokerError(ErrorKind.MESSAGE_CORRUPTED, "the request holds no message")
        first = msgs[0].topic
        err = topic_error(first.name)
        if err:
            raise BrokerError(ErrorKind.ILLEGAL_TOPIC, err)
        if cols is None:
            cols = send_columns(request, raw)
        if not cols.topics_match:
            for i, m in enumerate(msgs):
                if m.topic.name != first.name or m.topic.resource_namespace != first.resource_namespace:
                    raise BrokerError(
                        ErrorKind.MESSAGE_CORRUPTED,
                        f"message #{i} is for topic {m.topic.name!r}, message #0 for {first.name!r}",
                    )
        explicit = metadata(context).get(EXPLICIT_QUEUE_HEADER, "").lower() == "true"
        stored = wrap_namespace(first)
        result, end = send(
            self.cluster,
            self.broker,
            stored,
            cols,
            explicit_queue=explicit,
            producer=client_id(context),
            batch_bytes=proxy_batch_bytes(cols, stored, peer_host(context)) if cols.n > 1 else None,
        )
        await self.store.wait_durable(end)
        return result

    @rpc(s.EndTransactionResponse)
    async def EndTransaction(self, request, context):
        if not request.transaction_id.strip():
            return s.EndTransactionResponse(
                status=status(d.INVALID_TRANSACTION_ID, "transaction_id is blank")
            )
        err = topic_error(request.topic.name)
        if err:
            return s.EndTransactionResponse(status=status(d.ILLEGAL_TOPIC, err))
        if request.resolution not in (d.COMMIT, d.ROLLBACK):
            return s.EndTransactionResponse(status=status(d.BAD_REQUEST, f"resolution {request.resolution}"))
        assert self.broker.transactions is not None
        parked = self.broker.transactions.end(request.transaction_id, commit=request.resolution == d.COMMIT)
        if parked is None:
            return s.EndTransactionResponse(
                status=status(
                    d.INVALID_TRANSACTION_ID,
                    f"transaction {request.transaction_id} is unknown on {self.broker.name} or already resolved",
                )
            )
        return s.EndTransactionResponse(status=OK)

    # ------------------------------------------------------------------ pull / offsets
    @rpc(s.PullMessageResponse, stream=True)
    async def PullMessage(self, request, context):
        topic, qid, code, msg = self._check_queue(request.message_queue)
        if code is None:
            err = group_error(request.group.name)
            if err:
                code, msg = d.BAD_REQUEST, err
        if code is not None:
            yield s.PullMessageResponse(status=status(code, msg))
            return
        try:
            flt = parse_filter(request.filter_expression.type, request.filter_expression.expression)
        except FilterError as e:
            yield s.PullMessageResponse(status=status(d.ILLEGAL_FILTER_EXPRESSION, str(e)))
            return
        batch = min(max(request.batch_size, 1), PULL_MAX_BATCH) if request.batch_size else 32
        timeout = polling_timeout(duration_seconds(request.long_polling_timeout), context)
        result = await pull(self.store, self.polling, topic, qid, request.offset, batch, None, flt, timeout)
        code, msg = pull_status(result)
        yield s.PullMessageResponse(status=status(code, msg))
        if result.table is not None:
            ns = request.message_queue.topic.resource_namespace
            for m in table_to_messages(result.table, topic, ns, self.broker.name, qid, self.broker.endpoint):
                yield s.PullMessageResponse(message=m)
        yield s.PullMessageResponse(next_offset=result.next_offset)

    @rpc(s.GetOffsetResponse)
    async def GetOffset(self, request, context):
        topic, qid, code, msg = self._check_queue(request.message_queue)
        if code is not None:
            return s.GetOffsetResponse(status=status(code, msg))
        group = wrap_namespace(request.group)
        off = self.store.get_consumer_offset(group, topic, qid)
        if off is None:
            return s.GetOffsetResponse(
                status=status(d.OFFSET_NOT_FOUND, f"group {group} has no offset for {topic}:{qid}")
            )
        return s.GetOffsetResponse(status=OK, offset=off)

    @rpc(s.UpdateOffsetResponse)
    async def UpdateOffset(self, request, context):
        topic, qid, code, msg = self._check_queue(request.message_queue)
        if code is None:
            err = group_error(request.group.name)
            if err:
                code, msg = d.ILLEGAL_CONSUMER_GROUP, err
            elif request.offset < 0:
                code, msg = d.ILLEGAL_OFFSET, f"offset {request.offset} is negative"
        if code is not None:
            return s.UpdateOffsetResponse(status=status(code, msg))
        self.store.set_consumer_offset(wrap_namespace(request.group), topic, qid, request.offset)
        return s.UpdateOffsetResponse(status=OK)

    @rpc(s.QueryOffsetResponse)
    async def QueryOffset(self, request, context):
        topic, qid, code, msg = self._check_queue(request.message_queue)
        if code is not None:
            return s.QueryOffsetResponse(status=status(code, msg))
        lo, hi = self.store.min_max(topic, qid)
        policy = request.query_offset_policy
        if policy == d.BEGINNING:
            return s.QueryOffsetResponse(status=OK, offset=lo)
        if policy == d.END:
            return s.QueryOffsetResponse(status=OK, offset=hi)
        if policy == d.TIMESTAMP:
            if not request.HasField("timestamp"):
                return s.QueryOffsetResponse(
                    status=status(d.BAD_REQUEST, "TIMESTAMP policy needs a timestamp")
                )
            ts = request.timestamp.seconds * 1000 + request.timestamp.nanos // 1_000_000
            return s.QueryOffsetResponse(status=OK, offset=self.store.search_offset(topic, qid, ts))
        return s.QueryOffsetResponse(status=status(d.BAD_REQUEST, f"unknown query_offset_policy {policy}"))
