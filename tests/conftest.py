"""Shared fixtures: the emulator is the pytest plugin's (`rocketmq_emulator`, broker_emulator/pytest_plugin.py);
here a fresh topic per test, gRPC stub factories whose channels are closed at teardown, and one Spark
session for the whole test session."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import grpc
import pytest

from broker_emulator import Emulator
from examples.spark_defaults import spark_session
from rocketmq_protocol.extension import pb_grpc
from rocketmq_protocol.grpc_v2 import service_pb2_grpc as sg
from tests.support.helpers import unique_name
from tests.support.targets import PROTOCOLS, target_of


@pytest.fixture
def topic(rocketmq_emulator: Emulator) -> str:
    """A new topic (4 queues on each broker) with a unique name."""
    name = unique_name("topic")
    rocketmq_emulator.create_topic(name)
    return name


@pytest.fixture(params=PROTOCOLS)
def protocol(request: pytest.FixtureRequest) -> str:
    """Each protocol the connector speaks: `grpc` (option `endpoints`) and `remoting` (option `nameServer`)."""
    return request.param


@pytest.fixture
def target(rocketmq_emulator: Emulator, protocol: str) -> str:
    """The session emulator as the connector reaches it over `protocol` (tests/support/targets.py)."""
    return target_of(rocketmq_emulator, protocol)


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


SPARK_APP = "pyspark-rocketmq-tests"


def pytest_collection_finish(session: pytest.Session) -> None:
    """Starts the test session's Spark before any test runs when a selected test needs it: its JVM is launched
    by a fork of this process, which must not happen while the session emulator's gRPC threads run (gRPC skips
    its fork handlers then, and the JVM sometimes never started: examples/quickstart.py)."""
    if any("spark" in getattr(item, "fixturenames", ()) for item in session.items):
        spark_session(SPARK_APP)


@pytest.fixture(scope="session")
def spark():
    """One local[2] SparkSession for the whole test session, configured from spark-defaults.conf."""
    session = spark_session(SPARK_APP)
    try:
        yield session
    finally:
        session.stop()
