"""pytest plugin (entry point `pytest11`): fixtures for pipeline integration tests against an emulator.

- `rocketmq_emulator`: an in-memory 2-broker emulator started once per test session (lazily, only
  for sessions that use it) and stopped at the end; `.endpoints` is what the connector's `endpoints`
  option takes (gRPC v2), `.name_server` what its `nameServer` option and remoting clients take.
- `rocketmq_topic`: a factory creating a fresh, uniquely named topic per call:
  `topic = rocketmq_topic()` or `rocketmq_topic("orders", queues=4)`.
- `rocketmq_emulator_factory`: a factory starting a private emulator for one test (fault injection,
  retention, ACL, TLS...): `emu = rocketmq_emulator_factory(brokers=1, queues=2, retention_messages=10)`;
  every emulator it started is stopped at the end of the test.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from .embedded import Emulator


@pytest.fixture(scope="session")
def rocketmq_emulator() -> Iterator[Emulator]:
    """A running in-memory Emulator(brokers=2, queues=4) shared by the test session."""
    emu = Emulator(brokers=2, queues=4)
    emu.start()
    try:
        yield emu
    finally:
        emu.stop()


@pytest.fixture
def rocketmq_topic(rocketmq_emulator: Emulator, request: pytest.FixtureRequest) -> Callable[..., str]:
    """Factory: `rocketmq_topic(prefix=<test name>, queues=4)` creates a new topic and returns its name."""

    def create(prefix: str | None = None, queues: int = 4) -> str:
        base = re.sub(r"[^a-zA-Z0-9_-]", "_", prefix or request.node.name)[:80]
        name = f"{base}-{uuid.uuid4().hex[:8]}"
        rocketmq_emulator.create_topic(name, queues)
        return name

    return create


@pytest.fixture
def rocketmq_emulator_factory() -> Iterator[Callable[..., Emulator]]:
    """Factory: `rocketmq_emulator_factory(**Emulator options)` → a started private emulator, stopped at teardown."""
    started: list[Emulator] = []

    def start(**options: Any) -> Emulator:
        emu = Emulator(**options)
        emu.start(timeout=30)
        started.append(emu)
        return emu

    yield start
    for emu in reversed(started):
        emu.stop(timeout=30)
