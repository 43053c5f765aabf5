"""The one place the realbroker tests take the generated `apache.rocketmq.v2` modules from (the
`rocketmq-python-client` package's `rocketmq.grpc_protocol`), so they can be repointed in one line."""

from __future__ import annotations

from rocketmq.grpc_protocol import definition_pb2, service_pb2, service_pb2_grpc

d = definition_pb2
s = service_pb2
sg = service_pb2_grpc

__all__ = ["d", "definition_pb2", "s", "service_pb2", "service_pb2_grpc", "sg"]
