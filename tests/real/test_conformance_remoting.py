"""Differential conformance over remoting: every scenario of conformance_remoting.py against the emulator's
remoting front end and against real RocketMQ 5.x and 4.9.x brokers; what the client observes must be equal,
except the deviations listed in conformance_remoting.DEVIATIONS (and docs/deviations.md, "Remoting"),
which must still be exactly as listed."""

from __future__ import annotations

import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from broker_emulator import Emulator
from tests.real import conformance_remoting as cr
from tests.real import observations as obs
from tests.real import realcluster as rc

pytestmark = [pytest.mark.realbroker, pytest.mark.timeout(600)]

VERSIONS = {"5": rc.ROCKETMQ5_VERSION, "4": rc.ROCKETMQ4_VERSION}
DOC = Path(__file__).resolve().parents[2] / "docs" / "deviations.md"
# The real clusters' broker.conf (realcluster.Cluster.broker_properties).
DELAY_LEVELS = "1s 1s 2s 2s 3s 3s 4s 4s 5s 5s 6s 6s 7s 7s 8s 8s 9s 9s"


@pytest.fixture(scope="session")
def emulator_remoting_target() -> Iterator[cr.RemotingTarget]:
    emu = Emulator(
        brokers=1, queues=8, auto_create_topics=True, delay_levels=DELAY_LEVELS, transaction_check_ms=3000
    )
    emu.start(timeout=30)
    try:
        yield cr.RemotingTarget(
            "emulator",
            emu.name_server,
            create_topic=lambda name, queues: emu.create_topic(name, queues),
            create_group=lambda group, retries: emu.update_group(group, max_retries=retries),
        )
    finally:
        emu.stop(timeout=30)


def _real_target(cluster: rc.Cluster) -> cr.RemotingTarget:
    return cr.RemotingTarget(
        f"rocketmq-{cluster.dist.version}",
        cluster.namesrv,
        create_topic=lambda name, queues: cluster.update_topic(name, queues),
        create_group=lambda group, retries: cluster.update_group(group, retries),
    )


def observe(target: cr.RemotingTarget, sc: cr.Scenario) -> dict:
    session = cr.Session(target)
    try:
        return sc.run(session)
    finally:
        session.close()


CASES = [(v, sc) for v in VERSIONS for sc in cr.SCENARIOS]


@pytest.mark.parametrize(("version", "sc"), CASES, ids=[f"remoting-{v}-{sc.id}" for v, sc in CASES])
def test_scenario(version: str, sc: cr.Scenario, emulator_remoting_target, request: pytest.FixtureRequest):
    real = _real_target(request.getfixturevalue(f"rocketmq{version}"))
    with ThreadPoolExecutor(2) as pool:
        emu_f = pool.submit(observe, emulator_remoting_target, sc)
        real_f = pool.submit(observe, real, sc)
        emu_obs, real_obs = emu_f.result(), real_f.result()
    obs.check(f"remoting {real.name}", sc.id, emu_obs, real_obs, cr.DEVIATIONS[version], real.name)


def test_remoting_deviation_table_in_docs_matches_the_code():
    """docs/deviations.md's "Remoting" rows are exactly conformance_remoting.DEVIATIONS."""
    rows = set()
    for line in DOC.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        m = re.fullmatch(r"remoting (\d)\.x", cells[0]) if cells else None
        if m and len(cells) >= 6:
            rows.add((m.group(1), *(re.sub(r"^`(.*)`$", r"\1", c) for c in cells[1:5])))
    expected = {
        (v, sc, key, obs.compact(e), obs.compact(r))
        for v, table in cr.DEVIATIONS.items()
        for sc, entries in table.items()
        for key, (e, r, _why) in entries.items()
    }
    assert rows == expected


@pytest.mark.parametrize("version", list(VERSIONS))
def test_an_emulator_capped_at_32_answers_pulls_as_the_real_broker(
    version: str, request: pytest.FixtureRequest
):
    """With `max_transfer_count=32` (`serve --max-transfer-count 32`) the pull_batch_cap deviation is gone:
    the emulator's answers hold what a real broker's do."""
    real = _real_target(request.getfixturevalue(f"rocketmq{version}"))
    (sc,) = [s for s in cr.SCENARIOS if s.id == "pull_batch_cap"]
    with Emulator(brokers=1, queues=8, auto_create_topics=True, max_transfer_count=32) as emu:
        capped = cr.RemotingTarget(
            "emulator-capped",
            emu.name_server,
            create_topic=lambda name, queues: emu.create_topic(name, queues),
            create_group=lambda group, retries: emu.update_group(group, max_retries=retries),
        )
        emu_obs = observe(capped, sc)
    real_obs = observe(real, sc)
    assert obs.differences(emu_obs, real_obs) == {}, (emu_obs, real_obs)
    rc.evidence(f"pull_batch_cap, emulator with max_transfer_count=32 vs {real.name}: same ({emu_obs})")
