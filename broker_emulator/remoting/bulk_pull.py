"""The pull channel's one request (`rocketmq_protocol.extension.pull_channel`): the extension's BulkPull in a
remoting frame, translated to the same reply gRPC's BulkPull gives."""

from __future__ import annotations

from typing import TYPE_CHECKING

from google.protobuf.message import DecodeError

from rocketmq_protocol.extension import pb
from rocketmq_protocol.remoting.codes import ResponseCode as R
from rocketmq_protocol.remoting.frames import RemotingCommand

from ..extension.service import bulk_pull_reply
from .server import Connection, Refused

if TYPE_CHECKING:
    from .broker import RemotingBroker


async def bulk_pull(self: RemotingBroker, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    """Refused under an ACL: the channel carries no v2 signature, and remoting's signs no BulkPull fields."""
    if self.cluster.acl.current() is not None:
        raise Refused(
            R.NO_PERMISSION, "the pull channel is closed while an ACL is on: use BulkPull over gRPC"
        )
    try:
        request = pb.BulkPullRequest.FromString(bytes(cmd.body or b""))
    except DecodeError as e:
        raise Refused(R.SYSTEM_ERROR, f"the body is not a BulkPullRequest: {e}") from None
    wait_s = max(request.long_polling_timeout_ms, 0) / 1000.0
    return cmd.response(R.SUCCESS, body=await bulk_pull_reply(self.broker, self.polling, request, wait_s))
