"""Delayed and transactional sends and consumer send-back over remoting (broker_emulator/remoting/sending.py,
broker_emulator/core/retry.py): DELAY levels, half messages with END_TRANSACTION and the broker's
CHECK_TRANSACTION_STATE on the producer's own connection, retries through %RETRY%{group} and the DLQ."""

from __future__ import annotations

import time

import pytest

from rocketmq_protocol.remoting.codes import RequestCode as Q
from rocketmq_protocol.remoting.codes import ResponseCode as R
from rocketmq_protocol.remoting.message_id import decode_offset_message_id
from tests.support.helpers import unique_name, wait_until
from tests.support.remoting import RemotingClient, messages

LEVELS = "1s 1s 2s 2s 3s 3s 4s 4s 5s 5s 6s 6s 7s 7s 8s 8s 9s 9s"


@pytest.fixture(scope="module")
def emu():
    from broker_emulator import Emulator

    with Emulator(brokers=1, queues=2, delay_levels=LEVELS, transaction_check_ms=500, max_retries=2) as e:
        yield e


@pytest.fixture
def topic(emu) -> str:
    name = unique_name("t")
    emu.create_topic(name, 2)
    return name


@pytest.fixture
def client(emu):
    with RemotingClient(f"127.0.0.1:{emu.cluster.brokers[0].remoting_port}") as c:
        yield c


def _count(client: RemotingClient, topic: str, queue_id: int = 0) -> int:
    r = client.call(Q.GET_MAX_OFFSET, {"topic": topic, "queueId": queue_id})
    return int(r.ext_fields["offset"])


def test_delay_level_makes_the_message_visible_later(client, topic):
    sent = time.time()
    r = client.send_message(topic, b"later", queue_id=0, properties={"DELAY": "3"})  # level 3 = 2 s
    assert r.code == R.SUCCESS, r.remark
    assert _count(client, topic) == 0
    wait_until(lambda: _count(client, topic) == 1, timeout=10)
    assert time.time() - sent >= 1.8
    row = messages(client.pull(topic, 0, 0)).to_pylist()[0]
    assert row["body"] == b"later"
    assert (row["store_timestamp"].timestamp() - sent) >= 1.8


def test_timer_property_deliver_ms(client, topic):
    due = int(time.time() * 1000) + 1000
    client.send_message(topic, b"t", queue_id=1, properties={"TIMER_DELIVER_MS": str(due)})
    wait_until(lambda: _count(client, topic, 1) == 1, timeout=10)
    assert time.time() * 1000 >= due - 5


def test_transaction_commit_and_rollback(client, topic):
    props = {"TRAN_MSG": "true", "PGROUP": "txg"}
    committed = client.send_message(topic, b"c", queue_id=0, properties=props, sys_flag=0x4)
    rolled = client.send_message(topic, b"r", queue_id=0, properties=props, sys_flag=0x4)
    assert committed.code == rolled.code == R.SUCCESS
    assert _count(client, topic) == 0
    for resp, kind in ((committed, 8), (rolled, 12)):
        ext = {"producerGroup": "txg", "tranStateTableOffset": resp.ext_fields["queueOffset"],
               "commitLogOffset": decode_offset_message_id(resp.ext_fields["msgId"]).commit_log_offset,
               "commitOrRollback": kind, "msgId": resp.ext_fields["msgId"],
               "transactionId": resp.ext_fields["transactionId"], "topic": topic}  # fmt: skip
        client.send(Q.END_TRANSACTION, ext, oneway=True)
    wait_until(lambda: _count(client, topic) == 1, timeout=5)
    rows = messages(client.pull(topic, 0, 0)).to_pylist()
    assert [r["body"] for r in rows] == [b"c"]
    assert rows[0]["sysflag"] & 0x8  # TRANSACTION_COMMIT_TYPE


def test_unresolved_half_message_is_checked_back_on_the_producers_connection(client, topic):
    assert client.heartbeat("producer@1", producer_group="txcheck").code == R.SUCCESS
    r = client.send_message(topic, b"q", queue_id=1, properties={"TRAN_MSG": "true", "PGROUP": "txcheck",
                                                                   "UNIQ_KEY": "TXUNIQ"}, sys_flag=0x4)  # fmt: skip
    check = client.wait_request(Q.CHECK_TRANSACTION_STATE, timeout=10)
    assert check.is_oneway
    assert check.ext_fields["transactionId"] == r.ext_fields["transactionId"]
    assert check.ext_fields["msgId"] == "TXUNIQ"
    half = messages(check.body).to_pylist()[0]
    assert (half["topic"], half["queue_id"], half["body"]) == (topic, 1, b"q")
    assert "PGROUP\x01txcheck\x02" in half["raw_properties"]
    # The producer answers as Java does: END_TRANSACTION (oneway) from the check.
    ext = {"producerGroup": "txcheck", "tranStateTableOffset": check.ext_fields["tranStateTableOffset"],
           "commitLogOffset": check.ext_fields["commitLogOffset"], "commitOrRollback": 8, "msgId": "TXUNIQ",
           "transactionId": check.ext_fields["transactionId"], "fromTransactionCheck": True}  # fmt: skip
    client.send(Q.END_TRANSACTION, ext, oneway=True)
    wait_until(lambda: _count(client, topic, 1) == 1, timeout=5)


def test_send_back_retries_with_delay_then_dead_letters(emu, client, topic):
    group = unique_name("g")
    client.send_message(topic, b"fail-me", queue_id=0, properties={"UNIQ_KEY": "ORIGID", "TAGS": "T"})
    row = messages(client.pull(topic, 0, 0, group=group)).to_pylist()[0]
    retry = f"%RETRY%{group}"
    t0 = time.time()
    r = client.call(Q.CONSUMER_SEND_MSG_BACK, {"offset": row["commitlog_offset"], "group": group, "delayLevel": 0,
                                               "originMsgId": "ORIGID", "originTopic": topic,
                                               "maxReconsumeTimes": 2})  # fmt: skip
    assert r.code == R.SUCCESS, r.remark
    # Level 3 + reconsumeTimes 0 = level 3 = 2 s with these levels.
    wait_until(
        lambda: retry in emu.cluster.brokers[0].store.topics and _count(client, retry) == 1, timeout=10
    )
    assert time.time() - t0 >= 1.8
    again = messages(client.pull(retry, 0, 0, group=group)).to_pylist()[0]
    assert (again["message_id"], again["reconsume_times"], again["tags"]) == ("ORIGID", 1, "T")
    assert f"RETRY_TOPIC\x01{topic}\x02" in again["raw_properties"]
    assert "ORIGIN_MESSAGE_ID\x01ORIGID\x02" in again["raw_properties"]
    # Second failure: delay level given explicitly (1 = 1 s).
    client.call(Q.CONSUMER_SEND_MSG_BACK, {"offset": again["commitlog_offset"], "group": group, "delayLevel": 1,
                                           "maxReconsumeTimes": 2})  # fmt: skip
    wait_until(lambda: _count(client, retry) == 2, timeout=10)
    third = messages(client.pull(retry, 0, 1, group=group)).to_pylist()[0]
    assert third["reconsume_times"] == 2
    # Third failure: reconsumeTimes 2 >= max 2 → %DLQ%group.
    client.call(Q.CONSUMER_SEND_MSG_BACK, {"offset": third["commitlog_offset"], "group": group, "delayLevel": 0,
                                           "maxReconsumeTimes": 2})  # fmt: skip
    dlq = f"%DLQ%{group}"
    wait_until(lambda: dlq in emu.cluster.brokers[0].store.topics and _count(client, dlq) == 1, timeout=5)
    dead = messages(client.pull(dlq, 0, 0, group=group)).to_pylist()[0]
    assert (dead["body"], dead["reconsume_times"]) == (b"fail-me", 3), dead
    assert "RETRY_TOPIC\x01" + topic in dead["raw_properties"]


def test_send_back_of_an_unknown_offset_fails(client):
    r = client.call(Q.CONSUMER_SEND_MSG_BACK, {"offset": 123, "group": "g", "delayLevel": 0})
    assert r.code == R.SYSTEM_ERROR and "look message by offset failed" in r.remark


def test_negative_delay_level_goes_straight_to_the_dlq(emu, client, topic):
    group = unique_name("g")
    client.send_message(topic, b"poison", queue_id=1)
    row = messages(client.pull(topic, 1, 0)).to_pylist()[0]
    client.call(
        Q.CONSUMER_SEND_MSG_BACK, {"offset": row["commitlog_offset"], "group": group, "delayLevel": -1}
    )
    assert _count(client, f"%DLQ%{group}") == 1
