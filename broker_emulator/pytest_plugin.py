"""pytest plugin (entry point `pytest11`): fixtures for pipeline integration tests against an emulator.

- `rocketmq_emulator`: an in-memory 2-broker emulator started once per test session (lazily, only
  for sessions that use it) and stopped at the end; `.endpoints` is what the connector's `endpoints`
  option takes.
- `rocketmq_topic`: a factory creating a fresh, uniquely named topic per call:
  `topic = rocketmq_topic()` or `rocketmq_topic("orders", queues=4)`.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator

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
