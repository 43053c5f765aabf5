"""The pull channel's SendMessage (`rocketmq_protocol.extension.pull_channel`): a v2 SendMessageRequest in a
remoting frame, answered by the broker's gRPC MessagingService as gRPC's SendMessage would be, with the
request's ext fields as the call's metadata. The remoting front end has already applied the broker's
injected faults (its gate); the ACL closes the channel, as it closes BulkPull's."""

from __future__ import annotations

from typing import TYPE_CHECKING

from google.protobuf.message import DecodeError

from rocketmq_protocol.grpc_v2.headers import CLIENT_ID_HEADER
from rocketmq_protocol.remoting.codes import ResponseCode as R
from rocketmq_protocol.remoting.frames import RemotingCommand

from ..grpc_v2.messaging import ReceivedSend
from .server import Connection, Handler, Refused

if TYPE_CHECKING:
    from ..core.cluster import Cluster
    from ..grpc_v2.messaging import MessagingService


class ChannelCall:
    """What SendMessage reads of a `grpc.aio.ServicerContext`, for a request that came over the channel."""

    __slots__ = ("_metadata", "_peer")

    def __init__(self, cmd: RemotingCommand, conn: Connection) -> None:
        self._metadata = tuple(cmd.ext_fields.items())
        self._peer = conn.peer

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata

    def peer(self) -> str:
        host, _, port = self._peer.rpartition(":")
        return f"ipv6:[{host}]:{port}" if ":" in host else f"ipv4:{self._peer}"


def send_handler(cluster: Cluster, messaging: MessagingService) -> Handler:
    """The channel's SendMessage handler for the broker `messaging` serves."""

    async def send(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        if cluster.acl.current() is not None:
            raise Refused(
                R.NO_PERMISSION, "the pull channel is closed while an ACL is on: use SendMessage over gRPC"
            )
        if not cmd.ext_fields.get(CLIENT_ID_HEADER, "").strip():
            raise Refused(R.SYSTEM_ERROR, f"ext field {CLIENT_ID_HEADER} (the v2 client id) is required")
        try:
            request = ReceivedSend(cmd.body or b"")
        except DecodeError as e:
            raise Refused(R.SYSTEM_ERROR, f"the body is not a SendMessageRequest: {e}") from None
        return cmd.response(
            R.SUCCESS, body=await messaging.send_answer_bytes(request, ChannelCall(cmd, conn))
        )

    return send
