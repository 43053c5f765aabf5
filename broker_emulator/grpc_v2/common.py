"""Per-RPC plumbing shared by the services: status objects, metadata, fault injection, access control."""

from __future__ import annotations

import asyncio
import functools
from urllib.parse import unquote

import grpc

from rocketmq_protocol.grpc_v2 import definition_pb2 as d
from rocketmq_protocol.grpc_v2.headers import CLIENT_ID_HEADER

from ..core.cluster import Broker
from .access import check_access
from .codes import code_of


def status(code: int, message: str | None = None) -> d.Status:
    """An in-band status; the message defaults to the code's name, as the proxy does."""
    return d.Status(code=code, message=message if message is not None else d.Code.Name(code))


OK = status(d.OK)


def metadata(context: grpc.aio.ServicerContext) -> dict[str, str]:
    md = context.invocation_metadata() or ()
    return {k: v for k, v in md if isinstance(v, str)}


async def apply_faults(broker: Broker, context: grpc.aio.ServicerContext) -> None:
    """`down` refuses the RPC with gRPC UNAVAILABLE; `latency_ms` delays it."""
    f = broker.faults.current
    if f.down:
        await context.abort(grpc.StatusCode.UNAVAILABLE, f"{broker.name} is down (injected fault)")
    if f.latency_ms > 0:
        await asyncio.sleep(f.latency_ms / 1000.0)


def duration_seconds(duration) -> float:
    return duration.seconds + duration.nanos / 1e9


def polling_timeout(requested_s: float, context: grpc.aio.ServicerContext, margin_s: float = 0.2) -> float:
    """The long-polling time, cut so the answer arrives before the client's gRPC deadline."""
    remaining = context.time_remaining()
    if remaining is not None:
        requested_s = min(requested_s, max(remaining - margin_s, 0.0))
    return max(requested_s, 0.0)


def client_id(context: grpc.aio.ServicerContext) -> str:
    return metadata(context).get(CLIENT_ID_HEADER, "").strip()


def peer_host(context: grpc.aio.ServicerContext) -> str:
    """The client's address without its port, as a RocketMQ proxy records it ("ipv4:1.2.3.4:5" → "1.2.3.4",
    "ipv6:[::1]:5" → "::1"); "" when gRPC does not say."""
    peer = context.peer() or ""
    kind, _, rest = peer.partition(":")
    if kind not in ("ipv4", "ipv6"):
        return ""
    host = rest.rpartition(":")[0]
    return unquote(host).strip("[]")


def client_id_required() -> d.Status:
    return status(d.CLIENT_ID_REQUIRED, f"metadata {CLIENT_ID_HEADER} is required")


async def refusal(service, rpc: str, request, context: grpc.aio.ServicerContext) -> d.Status | None:
    """The generic checks of every v2 RPC, in order: injected faults (`down` aborts the call), the ACL
    (UNAUTHORIZED / FORBIDDEN, docs/design.md 'Security') and the proxy's check that the request names its client
    (CLIENT_ID_REQUIRED). Returns the in-band status refusing the request, or None to serve it."""
    await apply_faults(service.broker, context)
    _, denied = check_access(service.cluster, rpc, request, context)
    if denied is not None:
        return status(code_of(denied), denied.message)
    if not client_id(context):
        return client_id_required()
    return None


def rpc(response_cls, *, stream: bool = False):
    """Wraps a v2 handler: a request `refusal` refuses gets the RPC's own response with that status."""

    def decorate(fn):
        if stream:

            @functools.wraps(fn)
            async def stream_wrapper(self, request, context):
                refused = await refusal(self, fn.__name__, request, context)
                if refused is not None:
                    yield response_cls(status=refused)
                    return
                async for item in fn(self, request, context):
                    yield item

            return stream_wrapper

        @functools.wraps(fn)
        async def wrapper(self, request, context):
            refused = await refusal(self, fn.__name__, request, context)
            if refused is not None:
                return response_cls(status=refused)
            return await fn(self, request, context)

        return wrapper

    return decorate
