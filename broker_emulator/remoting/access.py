"""ACL on remoting requests (docs/design.md, 'Security'): the AccessKey/Signature ext fields of RocketMQ's
`AclClientRPCHook` checked against the same ACL file as gRPC; missing or wrong credentials and missing
permissions are NO_PERMISSION with the reason in the remark (ACL 2.0 brokers, 5.3+)."""

from __future__ import annotations

from collections.abc import Callable

from rocketmq_protocol.remoting.codes import RequestCode as Q
from rocketmq_protocol.remoting.codes import ResponseCode as R
from rocketmq_protocol.remoting.frames import RemotingCommand
from rocketmq_protocol.remoting.signature import ACCESS_KEY, SIGNATURE, verify

from ..core.acl import Denied, Need, Perm, authorize
from ..core.cluster import Cluster


def _topic(field: str, perm: Perm) -> Callable[[dict[str, str]], tuple[Need, ...]]:
    return lambda ext: (Need("topic", ext[field], perm),) if ext.get(field) else ()


def _group(field: str) -> Callable[[dict[str, str]], tuple[Need, ...]]:
    return lambda ext: (Need("group", ext[field], Perm.SUB),) if ext.get(field) else ()


def _both(
    *parts: Callable[[dict[str, str]], tuple[Need, ...]],
) -> Callable[[dict[str, str]], tuple[Need, ...]]:
    return lambda ext: tuple(n for p in parts for n in p(ext))


# Per request code: the permissions its ext fields ask for (authentication alone for codes not listed).
NEEDS: dict[int, Callable[[dict[str, str]], tuple[Need, ...]]] = {
    Q.SEND_MESSAGE: _topic("topic", Perm.PUB),
    Q.SEND_MESSAGE_V2: _topic("b", Perm.PUB),
    Q.SEND_BATCH_MESSAGE: _topic("b", Perm.PUB),
    Q.END_TRANSACTION: _topic("topic", Perm.PUB),
    Q.PULL_MESSAGE: _both(_topic("topic", Perm.SUB), _group("consumerGroup")),
    Q.LITE_PULL_MESSAGE: _both(_topic("topic", Perm.SUB), _group("consumerGroup")),
    Q.QUERY_CONSUMER_OFFSET: _both(_topic("topic", Perm.SUB), _group("consumerGroup")),
    Q.UPDATE_CONSUMER_OFFSET: _both(_topic("topic", Perm.SUB), _group("consumerGroup")),
    Q.CONSUMER_SEND_MSG_BACK: _group("group"),
    Q.GET_MAX_OFFSET: _topic("topic", Perm.SUB),
    Q.GET_MIN_OFFSET: _topic("topic", Perm.SUB),
    Q.SEARCH_OFFSET_BY_TIMESTAMP: _topic("topic", Perm.SUB),
    Q.GET_EARLIEST_MSG_STORETIME: _topic("topic", Perm.SUB),
    Q.GET_CONSUMER_LIST_BY_GROUP: _group("consumerGroup"),
}
# Codes that change the cluster: only accounts with "admin": true.
ADMIN_ONLY = frozenset(
    {Q.UPDATE_AND_CREATE_TOPIC, Q.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, Q.INVOKE_BROKER_TO_RESET_OFFSET}
)


def refusal(cluster: Cluster, cmd: RemotingCommand) -> RemotingCommand | None:
    """NO_PERMISSION naming why the ACL refuses the request, or None to serve it (or without an ACL)."""
    acl = cluster.acl.current()
    if acl is None:
        return None
    ext = cmd.ext_fields
    ak = ext.get(ACCESS_KEY)
    if not ak or SIGNATURE not in ext:
        return cmd.response(
            R.NO_PERMISSION,
            f"request code {cmd.code} carries no {ACCESS_KEY}/{SIGNATURE} ext fields: the broker has an ACL, "
            "sign requests with credentials (AclClientRPCHook)",
        )
    account = acl.accounts.get(ak)
    if account is None:
        return cmd.response(R.NO_PERMISSION, f"access key {ak!r} is unknown")
    if not verify(cmd, account.secret_key):
        return cmd.response(R.NO_PERMISSION, f"signature mismatch for access key {ak!r} (wrong secret key?)")
    if cmd.code in ADMIN_ONLY and not account.admin:
        return cmd.response(
            R.NO_PERMISSION, f"access key {ak!r} may not run request code {cmd.code} (not an admin account)"
        )
    need = NEEDS.get(cmd.code)
    if need is not None:
        try:
            authorize(account, need(ext))
        except Denied as e:
            return cmd.response(R.NO_PERMISSION, e.message)
    return None
