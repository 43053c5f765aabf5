"""Fixtures of the protocol tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rocketmq_protocol.remoting import message_codec


@pytest.fixture(scope="module", params=["c", "numpy"])
def stored_decoder(request: pytest.FixtureRequest) -> Iterator[str]:
    """The module's tests run once with each decoder of stored records: the C scan of the common layout
    (`_stored_scan`, where it is built) and the numpy path alone. Module-scoped so that hypothesis tests
    may use it."""
    built = message_codec._stored_scan
    if request.param == "c" and built is None:
        pytest.skip("the C scan (rocketmq_protocol/remoting/_stored_scan.c) is not built here")
    if request.param == "numpy":
        message_codec._stored_scan = None
    try:
        yield request.param
    finally:
        message_codec._stored_scan = built
