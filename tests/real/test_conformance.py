"""Differential conformance: every scenario of conformance.py against the emulator and against real
RocketMQ over the same protocol; what the client observes must be equal, except the deviations listed in
conformance.DEVIATIONS (and docs/deviations.md), which must still be exactly as listed."""

from __future__ import annotations

import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from broker_emulator import Emulator
from tests.real import conformance as cf
from tests.real import observations as obs
from tests.real import realcluster as rc

pytestmark = [pytest.mark.realbroker, pytest.mark.timeout(600)]

PROTOCOLS = {"grpc": cf.V2Client}
CASES = [(p, sc) for p in PROTOCOLS for sc in cf.SCENARIOS if p in sc.protocols]
DOC = Path(__file__).resolve().parents[2] / "docs" / "deviations.md"


@pytest.fixture(scope="session")
def emulator_target() -> Iterator[cf.Target]:
    """One broker with 8 queues, like the real cluster; the proxy's timing defaults except a 3 s
    transaction check (the real broker is configured the same, see realcluster.Cluster)."""
    emu = Emulator(brokers=1, queues=8, transaction_check_ms=3000)
    emu.start(timeout=30)
    try:
        yield cf.Target(
            "emulator",
            emu.endpoints,
            create_topic=lambda name, queues, mtype: emu.create_topic(name, queues, mtype),
            create_group=lambda group, retries, fifo: emu.update_group(group, max_retries=retries, fifo=fifo),
        )
    finally:
        emu.stop(timeout=30)


@pytest.fixture(scope="module")
def real_grpc_target(rocketmq5: rc.Cluster) -> cf.Target:
    return cf.Target(
        f"rocketmq-{rocketmq5.dist.version}",
        rocketmq5.proxy_endpoint,
        create_topic=lambda name, queues, mtype: rocketmq5.update_topic(name, queues, mtype),
        create_group=lambda group, retries, fifo: rocketmq5.update_group(group, retries, fifo),
    )


def observe(client_cls, target: cf.Target, sc: cf.Scenario) -> dict:
    client = client_cls(target)
    try:
        return sc.run(client)
    finally:
        client.close()


@pytest.mark.parametrize(("protocol", "sc"), CASES, ids=[f"{p}-{sc.id}" for p, sc in CASES])
def test_scenario(protocol: str, sc: cf.Scenario, emulator_target: cf.Target, real_grpc_target: cf.Target):
    client_cls = PROTOCOLS[protocol]
    with ThreadPoolExecutor(
        2
    ) as pool:  # the scenarios mostly wait (invisible times, delays): run both at once
        emu_f = pool.submit(observe, client_cls, emulator_target, sc)
        real_f = pool.submit(observe, client_cls, real_grpc_target, sc)
        emu_obs, real_obs = emu_f.result(), real_f.result()
    obs.check(protocol, sc.id, emu_obs, real_obs, cf.DEVIATIONS[protocol], real_grpc_target.name)


def test_deviation_table_in_docs_matches_the_code():
    """docs/deviations.md lists exactly conformance.DEVIATIONS (protocol, scenario, observation, values)."""
    rows = set()
    for line in DOC.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 6 and cells[0] in PROTOCOLS:
            unquote = [re.sub(r"^`(.*)`$", r"\1", c) for c in cells[:5]]
            rows.add(tuple(unquote))
    expected = {
        (p, sc, key, obs.compact(e), obs.compact(r))
        for p, table in cf.DEVIATIONS.items()
        for sc, entries in table.items()
        for key, (e, r, _why) in entries.items()
    }
    assert rows == expected
