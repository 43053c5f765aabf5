"""Differential conformance of ACL refusals (tests/real/conformance_acl.py): the emulator with an ACL against
real RocketMQ with authentication and authorization on, over gRPC v2 (the 5.x proxy) and remoting (the 5.x
broker with ACL 2.0, the 4.9.x broker with plain_acl.yml). What the client observes must be equal except
the deviations listed in conformance.DEVIATIONS / conformance_remoting.DEVIATIONS (docs/deviations.md).

The real clusters with ACL are module-scoped fixtures: they start for this module only and stop after it.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from broker_emulator import Emulator
from tests.real import conformance as cf
from tests.real import conformance_acl as ca
from tests.real import conformance_remoting as cr
from tests.real import realcluster as rc

pytestmark = [pytest.mark.realbroker, pytest.mark.timeout(600)]

SCENARIO = "acl_refusals"


@pytest.fixture
def acl_emulator() -> Iterator[Emulator]:
    """One broker with the ACL of conformance_acl.py, serving gRPC and remoting (a fresh one per test:
    the scenarios read their topics from offset 0)."""
    emu = Emulator(brokers=1, queues=8, auto_create_topics=True, acl=ca.emulator_acl())
    emu.start(timeout=30)
    try:
        yield emu
    finally:
        emu.stop(timeout=30)


def _compare(label: str, emu_obs: dict, real_obs: dict, listed_table: dict, real_name: str) -> None:
    diff = cf.differences(emu_obs, real_obs)
    listed = {k: (e, r) for k, (e, r, _why) in listed_table.get(SCENARIO, {}).items()}
    e_flat, r_flat = cf.flatten(emu_obs), cf.flatten(real_obs)
    for key in sorted(set(e_flat) | set(r_flat)):
        mark = "same" if key not in diff else ("DEVIATION (listed)" if key in listed else "DIFFERENT")
        rc.TABLE.append(
            f"{label} | {SCENARIO} | {key} | {cf.compact(e_flat.get(key))} | {cf.compact(r_flat.get(key))} | {mark}"
        )
    rc.evidence(
        f"conformance {label} {SCENARIO}: "
        + ("same" if not diff else f"{len(diff)} difference(s): {sorted(diff)}")
    )
    assert diff == listed, (
        f"{SCENARIO}: emulator and {real_name} differ beyond docs/deviations.md\n"
        f"emulator: {emu_obs}\nreal:     {real_obs}\n"
        f"unlisted: { {k: v for k, v in diff.items() if listed.get(k) != v} }\n"
        f"listed but gone: { {k: v for k, v in listed.items() if diff.get(k) != v} }"
    )


def _observe_grpc(target: cf.Target) -> dict:
    client = cf.V2Client(target, ca.ADMIN)
    try:
        return ca.grpc_acl_refusals(client)
    finally:
        client.close()


def test_grpc_acl_refusals(acl_emulator: Emulator, rocketmq5_auth: rc.Cluster):
    emu_target = cf.Target(
        "emulator",
        acl_emulator.endpoints,
        create_topic=lambda name, queues, mtype: acl_emulator.create_topic(name, queues, mtype),
        create_group=lambda g, retries, fifo: acl_emulator.update_group(g, max_retries=retries, fifo=fifo),
    )
    real_target = cf.Target(
        f"rocketmq-{rocketmq5_auth.dist.version}",
        rocketmq5_auth.proxy_endpoint,
        create_topic=lambda name, queues, mtype: rocketmq5_auth.update_topic(name, queues, mtype),
        create_group=lambda g, retries, fifo: rocketmq5_auth.update_group(g, retries, fifo),
    )
    with ThreadPoolExecutor(2) as pool:
        emu_f = pool.submit(_observe_grpc, emu_target)
        real_f = pool.submit(_observe_grpc, real_target)
        emu_obs, real_obs = emu_f.result(), real_f.result()
    _compare("grpc", emu_obs, real_obs, cf.DEVIATIONS["grpc"], real_target.name)


def _remoting_target(name: str, namesrv: str, create_topic, create_group) -> cr.RemotingTarget:
    return cr.RemotingTarget(name, namesrv, create_topic=create_topic, create_group=create_group)


@pytest.mark.parametrize("version", ["5", "4"], ids=["remoting-5", "remoting-4"])
def test_remoting_acl_refusals(version: str, acl_emulator: Emulator, request: pytest.FixtureRequest):
    cluster: rc.Cluster = request.getfixturevalue("rocketmq5_auth" if version == "5" else "rocketmq4_acl")
    emu = _remoting_target(
        "emulator",
        acl_emulator.name_server,
        lambda name, queues: acl_emulator.create_topic(name, queues),
        lambda g, retries: acl_emulator.update_group(g, max_retries=retries),
    )
    real = _remoting_target(
        f"rocketmq-{cluster.dist.version}",
        cluster.namesrv,
        lambda name, queues: cluster.update_topic(name, queues),
        lambda g, retries: cluster.update_group(g, retries),
    )
    results: dict[str, Any] = {}
    with ThreadPoolExecutor(2) as pool:
        futures = {t.name: pool.submit(ca.remoting_acl_refusals, t) for t in (emu, real)}
        results = {k: f.result() for k, f in futures.items()}
    _compare(
        f"remoting {real.name}", results["emulator"], results[real.name], cr.DEVIATIONS[version], real.name
    )
