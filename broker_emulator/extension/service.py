"""rocketmq_emulator.v1.EmulatorService: unary bulk pull (Arrow IPC), every queue's bounds of a topic in one
call, and the admin verbs."""

from __future__ import annotations

import json
import logging

import grpc
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketmq_protocol.extension import pb
from rocketmq_protocol.extension.bulk_pull_wire import encode_response
from rocketmq_protocol.grpc_v2 import definition_pb2 as d
from rocketmq_protocol.limits import RESERVED_PROPERTY_KEYS
from rocketmq_protocol.names import group_error, topic_error

from ..core.admin import ADMIN_VERBS, MUTATING_ADMIN_VERBS, ClusterAdmin, queue_bounds
from ..core.cluster import Broker, Cluster
from ..core.filtering import FilterError, parse_filter
from ..core.long_polling import LongPollingService
from ..core.pulling import pull
from ..grpc_v2.access import check_access
from ..grpc_v2.codes import code_of, pull_status
from ..grpc_v2.common import apply_faults, polling_timeout

log = logging.getLogger(__name__)

BULK_MAX_MESSAGES = 65536
BULK_DEFAULT_MAX_BYTES = 16 * 1024 * 1024
SERVICE = pb.DESCRIPTOR.services_by_name["EmulatorService"].full_name


def _refusal(code: int, message: str) -> bytes | memoryview:
    return encode_response(code, message, 0, 0, 0, 0, None)


class ExtensionService:
    """rocketmq_emulator.v1.EmulatorService of one broker."""

    def __init__(
        self, cluster: Cluster, broker: Broker, polling: LongPollingService, *, pull_channel: bool = True
    ) -> None:
        self.cluster = cluster
        self.broker = broker
        self.store = broker.store
        self.polling = polling
        self.admin = ClusterAdmin(cluster)
        self.pull_channel = pull_channel  # False when the gRPC port serves TLS

    def add_to_server(self, server: grpc.aio.Server) -> None:
        """Registers this service. BulkPull hands gRPC the response it serialized itself
        (`bulk_pull_wire.encode_response`: the Arrow payload is written once, not copied into a protobuf
        message and out of it again)."""
        handlers = {
            "BulkPull": grpc.unary_unary_rpc_method_handler(
                self.bulk_pull_bytes, request_deserializer=pb.BulkPullRequest.FromString
            ),
            "QueueOffsets": grpc.unary_unary_rpc_method_handler(
                self.QueueOffsets,
                request_deserializer=pb.QueueOffsetsRequest.FromString,
                response_serializer=pb.QueueOffsetsResponse.SerializeToString,
            ),
            "Admin": grpc.unary_unary_rpc_method_handler(
                self.Admin,
                request_deserializer=pb.AdminRequest.FromString,
                response_serializer=pb.AdminResponse.SerializeToString,
            ),
            "PullChannel": grpc.unary_unary_rpc_method_handler(
                self.PullChannel,
                request_deserializer=pb.PullChannelRequest.FromString,
                response_serializer=pb.PullChannelResponse.SerializeToString,
            ),
        }
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))

    async def bulk_pull_bytes(self, request, context) -> bytes:
        """BulkPull's serialized response."""
        await apply_faults(self.broker, context)
        _, denied = check_access(self.cluster, "BulkPull", request, context)
        if denied is not None:
            return _refusal(code_of(denied), denied.message)
        wait_s = polling_timeout(request.long_polling_timeout_ms / 1000.0, context)
        reply = await bulk_pull_reply(self.broker, self.polling, request, wait_s)
        return reply if isinstance(reply, bytes) else b"".join(reply)

    async def PullChannel(self, request, context):
        """The broker's remoting address, which serves BulkPull in remoting frames, while it is plaintext and
        without an ACL (the channel has neither TLS nor v2 signatures); otherwise no address."""
        await apply_faults(self.broker, context)
        _, denied = check_access(self.cluster, "PullChannel", request, context)
        if denied is not None:
            return pb.PullChannelResponse(code=code_of(denied), message=denied.message)
        if not self.pull_channel or self.cluster.acl.current() is not None:
            return pb.PullChannelResponse(code=d.OK, message="no pull channel: TLS or an ACL is on")
        port = self.broker.remoting_port
        if not port:
            return pb.PullChannelResponse(code=d.OK, message="no pull channel: remoting is not serving yet")
        return pb.PullChannelResponse(code=d.OK, message="OK", address=f"{self.broker.host}:{port}")

    async def QueueOffsets(self, request, context):
        """Min and max offset of every queue of the topic on this broker (QueryOffset BEGINNING and END of
        each, in one call)."""
        await apply_faults(self.broker, context)
        _, denied = check_access(self.cluster, "QueueOffsets", request, context)
        if denied is not None:
            return pb.QueueOffsetsResponse(code=code_of(denied), message=denied.message)
        err = topic_error(request.topic)
        if err:
            return pb.QueueOffsetsResponse(code=d.BAD_REQUEST, message=err)
        bounds = queue_bounds(self.broker, request.topic)
        if bounds is None:
            return pb.QueueOffsetsResponse(
                code=d.TOPIC_NOT_FOUND, message=f"topic {request.topic} is not served by {self.broker.name}"
            )
        queues = [pb.QueueOffset(queue_id=qid, min_offset=lo, max_offset=hi) for qid, lo, hi in bounds]
        return pb.QueueOffsetsResponse(code=d.OK, message="OK", queues=queues)

    async def Admin(self, request, context):
        account, denied = check_access(self.cluster, "Admin", request, context)
        if denied is not None:
            return pb.AdminResponse(code=code_of(denied), message=denied.message)
        if account is not None and not account.admin and request.verb in MUTATING_ADMIN_VERBS:
            return pb.AdminResponse(
                code=d.FORBIDDEN,
                message=f"access key {account.access_key!r} may not run admin verb {request.verb!r} "
                f'(verbs {", ".join(sorted(MUTATING_ADMIN_VERBS))} need "admin": true in its ACL account)',
            )
        try:
            args = json.loads(request.args_json) if request.args_json else {}
            verb = ADMIN_VERBS.get(request.verb)
            if verb is None:
                return pb.AdminResponse(code=d.BAD_REQUEST, message=f"unknown admin verb {request.verb!r}")
            result = verb.run(self.admin, **args)
        except (ValueError, KeyError, TypeError) as e:
            return pb.AdminResponse(code=d.BAD_REQUEST, message=str(e))
        return pb.AdminResponse(code=d.OK, message="OK", result_json=json.dumps(result))


async def bulk_pull_reply(
    broker: Broker, polling: LongPollingService, request: pb.BulkPullRequest, wait_s: float
) -> bytes | list[bytes | memoryview]:
    """The serialized BulkPullResponse to an admitted request (access and faults already applied), holding it
    up to `wait_s` for messages, whichever channel it came over: gRPC's BulkPull or the pull channel. A
    response with a payload comes in pieces, the rows' buffers uncopied among them (joined for gRPC)."""
    store = broker.store
    topic = request.topic
    err = topic_error(topic) or group_error(request.group)
    if err:
        return _refusal(d.BAD_REQUEST, err)
    cfg = store.topics.get(topic)
    if cfg is None:
        return _refusal(d.TOPIC_NOT_FOUND, f"topic {topic} is not served by {broker.name}")
    qid = request.queue_id
    if not 0 <= qid < cfg.queues:
        return _refusal(d.BAD_REQUEST, f"queue id {qid} of topic {topic} is outside 0..{cfg.queues - 1}")
    try:
        flt = parse_filter(request.filter.type, request.filter.expression)
    except FilterError as e:
        return _refusal(d.ILLEGAL_FILTER_EXPRESSION, str(e))
    n = min(max(request.max_messages, 1), BULK_MAX_MESSAGES)
    max_bytes = request.max_bytes if request.max_bytes > 0 else BULK_DEFAULT_MAX_BYTES
    # Whole stored segments: each is one record batch in the answer and one batch handed to Spark.
    result = await pull(
        store, polling, topic, qid, request.offset, n, max_bytes, flt, max(wait_s, 0.0), whole_segments=True
    )
    code, msg = pull_status(result)
    rows = without_system_properties(result.table) if result.table is not None else None
    return encode_response(
        code, msg, result.next_offset, result.min_offset, result.max_offset, result.count, rows, copy=False
    )


_RESERVED = pa.array(sorted(RESERVED_PROPERTY_KEYS), pa.string())


def without_system_properties(table: pa.Table) -> pa.Table:
    """The rows with the reserved properties a remoting producer or a send-back stored (WAIT, DELAY, PGROUP,
    RETRY_TOPIC, ...) left out of `properties`, as every other reader sees them (the proxy's user
    properties, the remoting reader's map). Rows without any are returned as they are (one vectorized test)."""
    col = table.column("properties")
    if col.null_count == len(col) or not any(len(c.keys) for c in col.chunks):
        return table
    chunks, changed = [], False
    for chunk in col.chunks:
        offsets = chunk.offsets.to_numpy()
        first, last = int(offsets[0]), int(offsets[-1])
        keys, items = chunk.keys.slice(first, last - first), chunk.items.slice(first, last - first)
        keep = pc.invert(pc.is_in(keys, value_set=_RESERVED))
        if pc.all(keep).as_py() is not False:
            chunks.append(chunk)
            continue
        changed = True
        kept_per_row = np.add.reduceat(
            np.append(keep.to_numpy(zero_copy_only=False), False).astype(np.int32), offsets[:-1] - first
        ) * (np.diff(offsets) > 0)
        new_offsets = np.zeros(len(offsets), np.int32)
        np.cumsum(kept_per_row, out=new_offsets[1:])
        chunks.append(
            pa.MapArray.from_arrays(
                pa.array(new_offsets), keys.filter(keep), items.filter(keep), mask=chunk.is_null()
            )
        )
    if not changed:
        return table
    idx = table.schema.get_field_index("properties")
    return table.set_column(idx, table.schema.field(idx), pa.chunked_array(chunks, col.type))
