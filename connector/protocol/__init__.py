"""Stubs of the emulator's extension service (`rocketmq_emulator.v1`): bulk pull and admin."""

from . import emulator_v1_pb2 as pb
from . import emulator_v1_pb2_grpc as pb_grpc

__all__ = ["pb", "pb_grpc"]
