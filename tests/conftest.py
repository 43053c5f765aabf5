"""Fixtures of the emulator tests: one embedded 2-broker emulator per session, a fresh topic per test,
and gRPC stub factories whose channels are closed at teardown. No Spark here."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator

import grpc
import pytest

from broker_emulator import Emulator
from rocketmq_protocol.extension import pb_grpc
from rocketmq_protocol.grpc_v2 import service_pb2_grpc as sg

# `from helpers import ...` works whether pytest puts tests/ or the project root on sys.path.
_TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)

from helpers import unique_name  # noqa: E402

# The Spark settings live in spark-defaults.conf and are read by examples/spark_defaults.py (one reader).
_EXAMPLES_DIR = os.path.join(os.path.dirname(_TESTS_DIR), "examples")
if _EXAMPLES_DIR not in sys.path:
    sys.path.append(_EXAMPLES_DIR)

from spark_defaults import spark_session  # noqa: E402

SESSION_BROKERS = 2
SESSION_QUEUES = 4


@pytest.fixture(scope="session")
def emulator() -> Iterator[Emulator]:
    """A running in-memory Emulator(brokers=2, queues=4) shared by the whole session."""
    emu = Emulator(brokers=SESSION_BROKERS, queues=SESSION_QUEUES)
    emu.start(timeout=30)
    try:
        yield emu
    finally:
        for b in emu.brokers:
            b.clear_faults()
        emu.stop(timeout=30)


@pytest.fixture
def topic(emulator: Emulator) -> str:
    """A new topic (4 queues on each broker) with a unique name."""
    name = unique_name("topic")
    emulator.create_topic(name)
    return name


@pytest.fixture
def grpc_channel() -> Iterator[Callable[[str], grpc.Channel]]:
    """Factory: an insecure channel to `host:port`, closed at teardown."""
    channels: list[grpc.Channel] = []

    def make(endpoint: str) -> grpc.Channel:
        ch = grpc.insecure_channel(endpoint)
        channels.append(ch)
        return ch

    yield make
    for ch in channels:
        ch.close()


@pytest.fixture
def v2_stub(grpc_channel: Callable[[str], grpc.Channel]) -> Callable[[str], sg.MessagingServiceStub]:
    """Factory: `v2_stub(endpoint)` → apache.rocketmq.v2.MessagingService stub."""

    def make(endpoint: str) -> sg.MessagingServiceStub:
        return sg.MessagingServiceStub(grpc_channel(endpoint))

    return make


@pytest.fixture
def ext_stub(grpc_channel: Callable[[str], grpc.Channel]) -> Callable[[str], pb_grpc.EmulatorServiceStub]:
    """Factory: `ext_stub(endpoint)` → rocketmq_emulator.v1.EmulatorService stub (bulk pull, admin)."""

    def make(endpoint: str) -> pb_grpc.EmulatorServiceStub:
        return pb_grpc.EmulatorServiceStub(grpc_channel(endpoint))

    return make


@pytest.fixture(scope="session")
def spark():
    """One local[2] SparkSession for the whole test session, configured from spark-defaults.conf."""
    session = spark_session("pyspark-rocketmq-tests")
    try:
        yield session
    finally:
        session.stop()
