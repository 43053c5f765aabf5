"""Differential conformance of ACL refusals (tests/real/conformance_acl.py): the emulator with an ACL against
real RocketMQ with authentication and authorization on, over gRPC v2 (the 5.x proxy) and remoting (the 5.x
broker with ACL 2.0, the 4.9.x broker with plain_acl.yml). What the client observes must be equal except
the deviations listed in conformance.DEVIATIONS / conformance_remoting.DEVIATIONS (docs/deviations.md).

The real clusters with ACL are module-scoped fixtures: they start for this module only and stop after it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from broker_emulator import Emulator
from tests.real import conformance as cf
from tests.real import conformance_acl as ca
from tests.real import conformance_remoting as cr
from tests.real import observations as obs
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
    obs.check("grpc", SCENARIO, emu_obs, real_obs, cf.DEVIATIONS["grpc"], real_target.name)


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
    obs.check(
        f"remoting {real.name}",
        SCENARIO,
        results["emulator"],
        results[real.name],
        cr.DEVIATIONS[version],
        real.name,
    )


# ------------------------------------------------------------------------------- the connector itself
def _write(spark, namesrv: str, creds: tuple[str, str], n: int, prefix: str, topic: str = ca.CTOPIC) -> None:
    from pyspark.sql import functions as F

    df = spark.range(0, n, numPartitions=2).select(F.format_string(f"{prefix}-%04d", "id").alias("body"))
    df.write.format("rocketmq").options(
        nameServer=namesrv, topic=topic, accessKey=creds[0], secretKey=creds[1]
    ).mode("append").save()


def _read(spark, namesrv: str, creds: tuple[str, str], topic: str = ca.CTOPIC) -> list[str]:
    df = spark.read.format("rocketmq").options(
        nameServer=namesrv, topic=topic, consumerGroup=ca.CGROUP, accessKey=creds[0], secretKey=creds[1]
    )
    return sorted(r.body.decode() for r in df.load().select("body").collect())


def _stream(spark, namesrv: str, creds: tuple[str, str], checkpoint: str) -> list[str]:
    """An availableNow stream of the topic as the group (it commits the group's offsets at its end)."""
    name = f"acl_{uuid.uuid4().hex[:8]}"
    q = (
        spark.readStream.format("rocketmq")
        .options(nameServer=namesrv, topic=ca.CTOPIC, consumerGroup=ca.CGROUP, startingOffsets="earliest")
        .options(accessKey=creds[0], secretKey=creds[1])
        .load()
        .select("body")
        .writeStream.format("memory")
        .queryName(name)
        .trigger(availableNow=True)
        .option("checkpointLocation", checkpoint)
        .start()
    )
    try:
        assert q.awaitTermination(180), "the availableNow stream did not finish within 180 s"
    finally:
        q.stop()
    return sorted(r.body.decode() for r in spark.table(name).collect())


def _refused(action, *needles: str) -> str:
    """`action()` fails with the connector's ACL refusal; its text, which must hold every needle."""
    with pytest.raises(Exception) as e:
        action()
    text = str(e.value)
    assert "AccessDeniedError" in text or "was rejected" in text, text[-2000:]
    for needle in needles:
        assert needle in text, f"{needle!r} not in the error:\n{text[-2000:]}"
    return text


@pytest.mark.parametrize("version", ["5", "4"], ids=["rocketmq5-acl2", "rocketmq4-acl1"])
def test_the_connector_writes_and_reads_with_credentials(
    version: str, spark, request: pytest.FixtureRequest, tmp_path
):
    """`accessKey`/`secretKey` over `nameServer` against real brokers with ACL: acl-pub writes 300 rows,
    acl-sub reads exactly those (a batch read, then a stream that commits the group's offsets: they are the
    queues' ends); a wrong secret fails the write (without retrying ACL 1.0's SYSTEM_ERROR) and the read, naming the options;
    acl-sub cannot read a topic it has no permission on. With ACL 2.0 a permission migrated from SUB grants
    only the Sub action, and the reader's offset queries (GET_MIN/MAX_OFFSET, QUERY_CONSUMER_OFFSET) ask Get:
    the refusal says so, and once `mqadmin updateAcl` grants Sub,Get the read succeeds."""
    from connector.clients import new_client
    from connector.config import ClientConfig

    cluster: rc.Cluster = request.getfixturevalue("rocketmq5_auth" if version == "5" else "rocketmq4_acl")
    cluster.update_topic(ca.CTOPIC, 8)
    ns = cluster.namesrv
    _write(spark, ns, ca.PUB, 300, "acl")
    wrong = _refused(lambda: _write(spark, ns, ca.WRONG_SECRET, 10, "wrong"), "accessKey", "secretKey")
    assert "attempt(s)" not in wrong, f"an ACL refusal was retried:\n{wrong[-2000:]}"
    _refused(lambda: _read(spark, ns, ca.WRONG_SECRET), "rejected the credentials", "'accessKey'")
    if version == "5":
        text = _refused(lambda: _read(spark, ns, ca.SUB), "NO_PERMISSION", "Sub and Get on the topic")
        assert "acl-sub" in text
        for resource in (f"Topic:{ca.CTOPIC}", f"Group:{ca.CGROUP}"):
            out = cluster.mqadmin(
                "updateAcl", "-c", rc.CLUSTER_NAME, "-s", f"User:{ca.SUB[0]}", "-r", resource, "-a", "Sub,Get",
                "-d", "Allow",
            )  # fmt: skip
            assert "success" in out, out
    assert _read(spark, ns, ca.SUB) == [f"acl-{i:04d}" for i in range(300)]
    assert _stream(spark, ns, ca.SUB, str(tmp_path / "checkpoint")) == [f"acl-{i:04d}" for i in range(300)]
    client = new_client(ClientConfig(name_server=ns, access_key=ca.SUB[0], secret_key=ca.SUB[1]))
    try:
        queues = client.route(ca.CTOPIC)
        committed = {q.queue: client.get_committed(ca.CGROUP, q) for q in queues}
        ends = {q.queue: client.max_offset(q) for q in queues}
    finally:
        client.close()
    assert committed == ends and sum(ends.values()) == 300
    # a topic acl-sub has no permission on (with messages: 4.x checks pulls, not offset queries): refused
    cluster.update_topic(ca.OTHER_TOPIC, 2)
    _write(spark, ns, ca.ADMIN, 10, "audit", topic=ca.OTHER_TOPIC)
    _refused(lambda: _read(spark, ns, ca.SUB, topic=ca.OTHER_TOPIC), "refused the request", ca.OTHER_TOPIC)
