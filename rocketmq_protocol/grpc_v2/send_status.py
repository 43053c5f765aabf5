"""A SendMessageResponse read for its status first: an OK answer to a batch carries one entry per message (id,
offset), which a producer that only needs "all stored" would otherwise parse into thousands of objects
(~250 µs for 4,096 entries here, ~18 µs for the status alone)."""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message

from . import definition_pb2 as d
from . import service_pb2 as s

__all__ = ["decode_send_response"]

_FILE = "rocketmq_protocol/grpc_v2/send_status.proto"
_PACKAGE = "rocketmq_protocol.grpc_v2"


def _status_only_class() -> type:
    """`message SendMessageStatus { apache.rocketmq.v2.Status status = 1; }`: SendMessageResponse's field 1
    alone; its other fields stay unparsed bytes (protobuf keeps unknown fields as they are)."""
    pool = descriptor_pool.Default()
    try:
        desc = pool.FindMessageTypeByName(f"{_PACKAGE}.SendMessageStatus")
    except KeyError:
        proto = descriptor_pb2.FileDescriptorProto(
            name=_FILE, package=_PACKAGE, syntax="proto3", dependency=[d.DESCRIPTOR.name]
        )
        status = s.SendMessageResponse.DESCRIPTOR.fields_by_name["status"]
        message = proto.message_type.add(name="SendMessageStatus")
        message.field.add(
            name="status",
            number=status.number,
            type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
            type_name=f".{status.message_type.full_name}",
            label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
        )
        pool.Add(proto)
        desc = pool.FindMessageTypeByName(f"{_PACKAGE}.SendMessageStatus")
    return message_factory.GetMessageClass(desc)


_StatusOnly = _status_only_class()


def decode_send_response(raw: bytes) -> Message:
    """The response with its `status` read: a SendMessageResponse (entries too) unless the status is OK, then
    only the status (a `SendMessageStatus`)."""
    head = _StatusOnly.FromString(raw)
    if head.status.code == d.OK:
        return head
    return s.SendMessageResponse.FromString(raw)
