"""Fixtures of the `realbroker` tests: real Apache RocketMQ clusters (one per version, stopped
once the last test of tests/real/ has run, so they do not idle through the reliability and Spark tests).

`ROCKETMQ_REAL=required` (CI sets it in .ci/run) turns "Java or Maven unavailable" into a failure;
otherwise such a machine skips these tests with the reason. `ROCKETMQ_REAL=skip` skips them outright.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator

import pytest

from tests.real import realcluster as rc


def _unavailable(reason: str):
    mode = os.environ.get("ROCKETMQ_REAL", "").strip().lower()
    if mode == "required":
        pytest.fail(f"ROCKETMQ_REAL=required but real RocketMQ is unavailable: {reason}", pytrace=False)
    pytest.skip(f"real RocketMQ unavailable: {reason}")


def _cluster(
    version: str, tmp_path_factory: pytest.TempPathFactory, label: str = "", **kwargs
) -> Iterator[rc.Cluster]:
    if os.environ.get("ROCKETMQ_REAL", "").strip().lower() in ("skip", "0", "no", "false"):
        pytest.skip("ROCKETMQ_REAL=skip")
    t0 = time.monotonic()
    try:
        dist = rc.fetch(version)
    except rc.Unavailable as e:
        _unavailable(str(e))
    took = time.monotonic() - t0
    if dist.fetched_now:
        rc.evidence(
            f"RocketMQ {version}: Maven fetch {dist.fetch_seconds:.1f} s (cold, into {rc.cache_root()})"
        )
    else:
        rc.evidence(
            f"RocketMQ {version}: reused the cache ({took:.1f} s; its fetch took {dist.fetch_seconds:.1f} s)"
        )
    work = tmp_path_factory.mktemp(f"rocketmq-{version}{label.replace(' ', '-')}")
    cluster = rc.Cluster(dist, work, **kwargs)
    cluster.start()  # StartFailed carries the tail of the failing process's logs
    rc.evidence(
        f"RocketMQ {version}{label}: cluster started in {cluster.start_seconds:.1f} s "
        f"(name server {cluster.namesrv}, broker {', '.join(cluster.broker_addrs)}"
        + (f", proxy gRPC {cluster.proxy_endpoint})" if cluster.grpc_port else ")")
        + f"; jars: {', '.join(f'{k} {v}' for k, v in dist.jar_versions().items() if k in _SHOWN)}"
    )
    try:
        yield cluster
    finally:
        cluster.stop()
        for store in work.glob("store*"):  # keep the logs, drop the mapped store files
            shutil.rmtree(store, ignore_errors=True)


_SHOWN = {"rocketmq-namesrv", "rocketmq-broker", "rocketmq-proxy", "rocketmq-tools", "rocketmq-client"}


@pytest.fixture(scope="package")
def rocketmq5(tmp_path_factory: pytest.TempPathFactory) -> Iterator[rc.Cluster]:
    """A running RocketMQ 5.x (newest served) name server + broker + proxy (cluster mode, gRPC v2)."""
    yield from _cluster(rc.ROCKETMQ5_VERSION, tmp_path_factory)


@pytest.fixture(scope="package")
def rocketmq4(tmp_path_factory: pytest.TempPathFactory) -> Iterator[rc.Cluster]:
    """A running RocketMQ 4.9.x name server + broker (4.x has no proxy)."""
    yield from _cluster(rc.ROCKETMQ4_VERSION, tmp_path_factory)


@pytest.fixture(scope="module")
def rocketmq5_auth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[rc.Cluster]:
    """A RocketMQ 5.x cluster with authentication and authorization on (ACL 2.0) in broker and proxy, its
    users those of tests/real/conformance_acl.py. Module scope: it runs only while the ACL tests do."""
    from tests.real import conformance_acl as ca

    yield from _cluster(
        rc.ROCKETMQ5_VERSION,
        tmp_path_factory,
        label=" with ACL 2.0",
        broker_conf=ca.broker5_auth_conf(),
        proxy_conf=ca.proxy5_auth_conf(),
        home_files={"conf/plain_acl.yml": ca.plain_acl_yaml(), "conf/tools.yml": ca.tools_yaml()},
        admin_credentials=ca.ADMIN,
    )


@pytest.fixture(scope="module")
def rocketmq4_acl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[rc.Cluster]:
    """A RocketMQ 4.9.x name server + broker with aclEnable and the plain_acl.yml of conformance_acl.py."""
    from tests.real import conformance_acl as ca

    yield from _cluster(
        rc.ROCKETMQ4_VERSION,
        tmp_path_factory,
        label=" with plain_acl.yml",
        broker_conf=ca.broker4_acl_conf(),
        home_files={"conf/plain_acl.yml": ca.plain_acl_yaml()},
        admin_credentials=ca.ADMIN,
    )


@pytest.fixture(scope="module")
def busy_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[rc.Cluster]:
    """A RocketMQ 5.x name server + broker (no proxy) whose send queue refuses requests that waited over 1 ms
    (`BrokerFastFailure`'s SYSTEM_BUSY). Module scope: only tests/real/test_real_flow_control.py runs it."""
    yield from _cluster(
        rc.ROCKETMQ5_VERSION,
        tmp_path_factory,
        label=" with waitTimeMillsInSendQueue=1",
        with_proxy=False,
        broker_conf={"waitTimeMillsInSendQueue": "1"},
    )


@pytest.fixture(scope="module")
def two_brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[rc.Cluster]:
    """A RocketMQ 5.x name server and two masters, broker-a and broker-b (no proxy). Module scope: only
    tests/real/test_real_two_brokers.py runs it."""
    yield from _cluster(
        rc.ROCKETMQ5_VERSION, tmp_path_factory, label=" with 2 brokers", with_proxy=False, brokers=2
    )


@pytest.fixture(scope="module", params=["5", "4"], ids=lambda v: f"rocketmq{v}")
def tls_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple]:
    """A name server + broker (no proxy) serving TLS, permissive, with a certificate of ours (apache/rocketmq
    `TlsSystemConfig` properties, test mode off): (cluster, CA file). Module scope: only its tests run it."""
    from tests.support.tls import self_signed_certificate

    version = rc.ROCKETMQ5_VERSION if request.param == "5" else rc.ROCKETMQ4_VERSION
    _pem, _key, cert_file, key_file = self_signed_certificate(tmp_path_factory.mktemp("real-tls"))
    props = {
        "tls.test.mode.enable": "false",
        "tls.server.mode": "permissive",
        "tls.server.need.client.auth": "none",
        "tls.server.certPath": str(cert_file),
        "tls.server.keyPath": str(key_file),
    }
    for cluster in _cluster(version, tmp_path_factory, label=" with TLS", with_proxy=False, jvm_props=props):
        yield cluster, cert_file


@pytest.fixture(scope="module")
def emulator_two_brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[rc.Cluster]:
    """The emulator with two brokers (broker-a, broker-b) as a `Cluster`, for the same tests as `two_brokers`."""
    yield from _emulator_cluster(tmp_path_factory, "emulator-two-brokers", brokers=2)


@pytest.fixture(scope="package")
def emulator_remoting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[rc.Cluster]:
    """The emulator's remoting front end driven by the RocketMQ 5.x client and tools jars
    (tests/real/emulator_target.py)."""
    yield from _emulator_cluster(tmp_path_factory, "emulator-remoting")


def _emulator_cluster(
    tmp_path_factory: pytest.TempPathFactory, label: str, brokers: int = 1
) -> Iterator[rc.Cluster]:
    if os.environ.get("ROCKETMQ_REAL", "").strip().lower() in ("skip", "0", "no", "false"):
        pytest.skip("ROCKETMQ_REAL=skip")
    from tests.real.emulator_target import EmulatorCluster

    try:
        dist = rc.fetch(rc.ROCKETMQ5_VERSION)
    except rc.Unavailable as e:
        _unavailable(str(e))
    cluster = EmulatorCluster(dist, tmp_path_factory.mktemp(label), brokers=brokers)
    cluster.start()
    named = ", ".join(f"{n} {a}" for n, a in zip(cluster.broker_names, cluster.broker_addrs, strict=True))
    rc.evidence(f"emulator (remoting): name server {cluster.namesrv}, {named}")
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(params=["5", "4", "emulator"], ids=lambda v: v if v == "emulator" else f"rocketmq{v}")
def real_cluster(request: pytest.FixtureRequest) -> rc.Cluster:
    """Each of the two clusters in turn, then the emulator over remoting (the same drivers against all)."""
    if request.param == "emulator":
        return request.getfixturevalue("emulator_remoting")
    return request.getfixturevalue(f"rocketmq{request.param}")


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    lines = rc.EVIDENCE
    if lines:
        terminalreporter.section("real RocketMQ")
        for line in lines:
            terminalreporter.write_line(line)
    if rc.TABLE:
        terminalreporter.section(
            "differential table (protocol | scenario | observation | emulator | real | verdict)"
        )
        for line in rc.TABLE:
            terminalreporter.write_line(line)
