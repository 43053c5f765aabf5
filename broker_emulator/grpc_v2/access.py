"""What each RPC needs from the ACL (docs/design.md, 'Security'), and the one check every service runs before serving."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import grpc

from ..core.acl import Account, Denied, Need, Perm
from ..core.cluster import Cluster
from .messages import wrap_namespace

log = logging.getLogger(__name__)


def _topic(resource, perm: Perm) -> tuple[Need, ...]:
    name = wrap_namespace(resource)
    return (Need("topic", name, perm),) if resource.name else ()


def _group(resource) -> tuple[Need, ...]:
    return (Need("group", wrap_namespace(resource), Perm.SUB),) if resource.name else ()


def _consume(topic, group) -> tuple[Need, ...]:
    return _topic(topic, Perm.SUB) + _group(group)


def _send(request) -> tuple[Need, ...]:
    return _topic(request.messages[0].topic, Perm.PUB) if request.messages else ()


def _heartbeat(request) -> tuple[Need, ...]:
    return _group(request.group) if request.HasField("group") and request.client_type != 1 else ()


def _telemetry(command) -> tuple[Need, ...]:
    """A Telemetry settings command, as the proxy authorizes it: PUB on each topic a producer publishes to;
    SUB on a consumer's group and on each topic it subscribes to. Other commands need authentication only."""
    if not command.HasField("settings"):
        return ()
    st = command.settings
    needs: tuple[Need, ...] = ()
    if st.HasField("publishing"):
        needs += tuple(n for t in st.publishing.topics for n in _topic(t, Perm.PUB))
    if st.HasField("subscription"):
        needs += _group(st.subscription.group)
        needs += tuple(n for e in st.subscription.subscriptions for n in _topic(e.topic, Perm.SUB))
    return needs


def _bulk_pull(request) -> tuple[Need, ...]:
    needs = (Need("topic", request.topic, Perm.SUB),) if request.topic else ()
    return needs + ((Need("group", request.group, Perm.SUB),) if request.group else ())


# Per RPC: the permissions its request needs (authentication alone for RPCs not listed).
NEEDS: dict[str, Callable[[Any], tuple[Need, ...]]] = {
    "QueryRoute": lambda r: _topic(r.topic, Perm.NONE),  # any permission on the topic
    "Heartbeat": _heartbeat,
    "Telemetry": _telemetry,  # per command of the stream
    "SendMessage": _send,
    "EndTransaction": lambda r: _topic(r.topic, Perm.PUB),
    "ReceiveMessage": lambda r: _consume(r.message_queue.topic, r.group),
    "AckMessage": lambda r: _consume(r.topic, r.group),
    "ChangeInvisibleDuration": lambda r: _consume(r.topic, r.group),
    "ForwardMessageToDeadLetterQueue": lambda r: _consume(r.topic, r.group),
    "QueryAssignment": lambda r: _consume(r.topic, r.group),
    "PullMessage": lambda r: _consume(r.message_queue.topic, r.group),
    "GetOffset": lambda r: _consume(r.message_queue.topic, r.group),
    "UpdateOffset": lambda r: _consume(r.message_queue.topic, r.group),
    "QueryOffset": lambda r: _topic(r.message_queue.topic, Perm.SUB),
    "BulkPull": _bulk_pull,
    "QueueOffsets": lambda r: (Need("topic", r.topic, Perm.SUB),),
}


def check_access(
    cluster: Cluster, rpc: str, request: Any, context: grpc.aio.ServicerContext
) -> tuple[Account | None, Denied | None]:
    """(the caller's account, None) when the ACL lets the request through (account None without an ACL),
    else (None, why it is refused)."""
    guard = cluster.acl
    if not guard.enabled:
        return None, None
    md = {k: v for k, v in (context.invocation_metadata() or ()) if isinstance(v, str)}
    needs = NEEDS[rpc](request) if rpc in NEEDS and request is not None else ()
    try:
        return guard.check(md, needs), None
    except Denied as e:
        log.info("%s refused (%s): %s", rpc, e.kind.value, e.message)
        return None, e
