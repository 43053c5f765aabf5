"""The emulator's extension service `rocketmq_emulator.v1` (BulkPull, Admin): proto and stubs; a BulkPull payload
is `rocketmq_protocol.message_schema.table_to_ipc` of the rows."""

from . import emulator_v1_pb2 as pb
from . import emulator_v1_pb2_grpc as pb_grpc

__all__ = ["pb", "pb_grpc"]
