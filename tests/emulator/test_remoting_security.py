"""ACL on remoting (broker_emulator/remoting/access.py): the AccessKey/Signature ext fields of RocketMQ's
AclClientRPCHook, checked against the same ACL as gRPC. Missing or wrong credentials and missing permissions
are NO_PERMISSION with the reason in the remark; the name server checks nothing, as RocketMQ's."""

from __future__ import annotations

import pytest

from rocketmq_protocol.extension import pb
from rocketmq_protocol.extension.pull_channel import BULK_PULL_CODE, SEND_MESSAGE_CODE
from rocketmq_protocol.remoting.codes import RequestCode as Q
from rocketmq_protocol.remoting.codes import ResponseCode as R
from tests.support.remoting import RemotingClient

ACL = {
    "accounts": [
        {"accessKey": "app", "secretKey": "app-secret", "topics": {"orders": "PUB_SUB"}, "groups": {"readers": "SUB"}},
        {"accessKey": "reader", "secretKey": "reader-secret", "topics": {"orders": "SUB"}, "groups": {"*": "SUB"}},
        {"accessKey": "ops", "secretKey": "ops-secret", "topics": {"*": "PUB_SUB"}, "groups": {"*": "SUB"},
         "admin": True},
    ]
}  # fmt: skip


@pytest.fixture(scope="module")
def emu():
    from broker_emulator import Emulator

    with Emulator(brokers=1, queues=2, acl=ACL) as e:
        e.create_topic("orders", 2)
        yield e


def _broker(emu, credentials=None) -> RemotingClient:
    return RemotingClient(f"127.0.0.1:{emu.cluster.brokers[0].remoting_port}", credentials=credentials)


def test_unsigned_and_wrongly_signed_requests_are_refused(emu):
    with _broker(emu) as c:
        r = c.send_message("orders", b"x")
        assert r.code == R.NO_PERMISSION and "AccessKey/Signature" in r.remark
    with _broker(emu, ("app", "wrong")) as c:
        r = c.send_message("orders", b"x")
        assert r.code == R.NO_PERMISSION and "signature mismatch" in r.remark
    with _broker(emu, ("nobody", "x")) as c:
        r = c.pull("orders", 0, 0)
        assert r.code == R.NO_PERMISSION and "unknown" in r.remark


def test_signed_requests_within_their_permissions_pass(emu):
    with _broker(emu, ("app", "app-secret")) as c:
        assert c.send_message("orders", b"hello", queue_id=0).code == R.SUCCESS
        assert c.pull("orders", 0, 0, group="readers").code == R.SUCCESS
    with _broker(emu, ("reader", "reader-secret")) as c:
        r = c.send_message("orders", b"x")
        assert r.code == R.NO_PERMISSION and "lacks PUB on topic 'orders'" in r.remark
        assert c.pull("orders", 0, 0, group="any").code == R.SUCCESS
    with _broker(emu, ("app", "app-secret")) as c:
        r = c.pull("orders", 0, 0, group="others")
        assert r.code == R.NO_PERMISSION and "group 'others'" in r.remark


def test_admin_codes_need_an_admin_account(emu):
    create = {"topic": "made", "defaultTopic": "TBW102", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6,
              "topicFilterType": "SINGLE_TAG", "order": False}  # fmt: skip
    with _broker(emu, ("app", "app-secret")) as c:
        r = c.call(Q.UPDATE_AND_CREATE_TOPIC, create)
        assert r.code == R.NO_PERMISSION and "not an admin" in r.remark
    with _broker(emu, ("ops", "ops-secret")) as c:
        assert c.call(Q.UPDATE_AND_CREATE_TOPIC, create).code == R.SUCCESS


def test_the_name_server_checks_nothing(emu):
    with RemotingClient(emu.name_server) as c:
        assert c.call(Q.GET_ROUTEINFO_BY_TOPIC, {"topic": "orders"}).code == R.SUCCESS


def test_the_pull_channel_is_closed_under_an_acl(emu):
    """BulkPull in remoting frames carries no v2 signature: refused unsigned (the ACL's check of every request)
    and signed (no BulkPull fields are signed), so an ACL'd emulator serves bulk pulls over gRPC only."""
    request = pb.BulkPullRequest(
        group="readers", topic="orders", queue_id=0, max_messages=1
    ).SerializeToString()
    with _broker(emu) as c:
        r = c.call(BULK_PULL_CODE, {}, request)
        assert r.code == R.NO_PERMISSION and "AccessKey/Signature" in r.remark
    with _broker(emu, ("app", "app-secret")) as c:
        r = c.call(BULK_PULL_CODE, {}, request)
        assert r.code == R.NO_PERMISSION and "pull channel" in r.remark
        # SendMessage over the channel likewise, signed or not: v2 sends go over gRPC, where they are signed
        r = c.call(SEND_MESSAGE_CODE, {"x-mq-client-id": "c1"}, b"")
        assert r.code == R.NO_PERMISSION and "pull channel" in r.remark
    with _broker(emu) as c:
        r = c.call(SEND_MESSAGE_CODE, {"x-mq-client-id": "c1"}, b"")
        assert r.code == R.NO_PERMISSION and "AccessKey/Signature" in r.remark
