"""The generated `apache.rocketmq.v2` modules the realbroker tests use: the shared package's
(`rocketmq_protocol.grpc_v2`)."""

from __future__ import annotations

from rocketmq_protocol.grpc_v2 import definition_pb2, service_pb2, service_pb2_grpc

d = definition_pb2
s = service_pb2
sg = service_pb2_grpc

__all__ = ["d", "definition_pb2", "s", "service_pb2", "service_pb2_grpc", "sg"]
