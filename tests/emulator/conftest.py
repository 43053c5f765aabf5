"""Fixtures of the emulator's in-process tests."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """A fresh event loop for handlers run with `run_until_complete`, closed afterwards."""
    lp = asyncio.new_event_loop()
    yield lp
    lp.close()
