"""A POP message is revived only once its deadline has passed on the wall clock its receipt handle expires
by: a revive timer that fires early (the loop's monotonic clock ahead of the wall clock) waits, so an ack
in between cannot "succeed" on a message that is then redelivered."""

from __future__ import annotations

import asyncio
import time

import pytest

from broker_emulator.core import pop as pop_module
from broker_emulator.core.filtering import parse_filter
from broker_emulator.core.pop import PopService
from broker_emulator.core.store.message_store import MessageStore
from tests.support.helpers import plain_columns


def test_a_revive_timer_that_fires_before_the_wall_clock_deadline_waits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def scenario() -> None:
        store = MessageStore("broker-a", None)
        store.create_topic("t", 1)
        store.append("t", 0, plain_columns(["m0"], b"b"))
        service = PopService("broker-a", store, None, lambda _group: 16, asyncio.get_running_loop())
        result = service.pop("g", "t", parse_filter(1, "*"), 1, 300, False)
        assert len(service.inflight) == 1, result
        real = time.time
        monkeypatch.setattr(pop_module.time, "time", lambda: real() - 0.4)  # the wall clock lags
        await asyncio.sleep(
            0.45
        )  # the timer (0.3 s) has fired; the lagging wall clock is before the deadline
        assert len(service.inflight) == 1 and service.revived == 0
        monkeypatch.setattr(pop_module.time, "time", real)
        await asyncio.sleep(0.4)  # the re-armed timer (0.4 s after the first) fires: the deadline has passed
        assert not service.inflight and service.revived == 1

    asyncio.run(scenario())
