"""Apache's Java producer with AclClientRPCHook (RocketMQ 5.x client, unchanged) against the emulator's
remoting front end with an ACL: a signature by the right secret is accepted, a wrong secret and a missing
permission are refused with NO_PERMISSION (16), as an ACL 2.0 broker answers."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from tests.real import realcluster as rc
from tests.real.emulator_target import EmulatorCluster

pytestmark = [pytest.mark.realbroker, pytest.mark.timeout(600)]

ACL = {
    "accounts": [
        {"accessKey": "etl", "secretKey": "etl-secret", "topics": {"orders": "PUB", "audit": "SUB"}},
    ]
}


def test_java_acl_signatures_are_verified():
    try:
        dist = rc.fetch(rc.ROCKETMQ5_VERSION)
    except rc.Unavailable as e:
        pytest.skip(f"real RocketMQ unavailable: {e}")
    cluster = EmulatorCluster(dist, Path(tempfile.mkdtemp(prefix="emu-acl-")), acl=ACL)
    cluster.start()
    try:
        cluster.emulator.create_topic("orders", 4)
        cluster.emulator.create_topic("audit", 4)
        ok = cluster.java_driver("AclProduce", "orders", "etl", "etl-secret")
        wrong = cluster.java_driver("AclProduce", "orders", "etl", "not-the-secret")
        forbidden = cluster.java_driver("AclProduce", "audit", "etl", "etl-secret")
    finally:
        cluster.stop()
    assert ok == [{"status": "SEND_OK", "queueId": ok[0]["queueId"]}], ok
    assert wrong[0]["code"] == 16 and "signature mismatch" in wrong[0]["error"], wrong
    assert forbidden[0]["code"] == 16 and "lacks PUB on topic 'audit'" in forbidden[0]["error"], forbidden
    rc.evidence("Java AclClientRPCHook against the emulator: signed OK, wrong secret 16, no PUB 16")
