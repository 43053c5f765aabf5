"""The emulator's remoting front end (broker_emulator/remoting/), driven with the shared codec as the client
(tests/support/remoting.py): every request code it serves, with the codes, headers and bodies a RocketMQ
broker and name server answer (docs/protocols.md, 'Remoting')."""

from __future__ import annotations

import json
import time
import zlib

import pytest

from broker_emulator.remoting.pulling import PULL_MAX_RECORD_BYTES
from rocketmq_protocol.remoting import fastjson
from rocketmq_protocol.remoting.codes import RequestCode as Q
from rocketmq_protocol.remoting.codes import ResponseCode as R
from rocketmq_protocol.remoting.frames import MAX_FRAME_LENGTH
from rocketmq_protocol.remoting.message_codec import encode_batch
from rocketmq_protocol.remoting.message_id import decode_offset_message_id
from rocketmq_protocol.remoting.properties import encode_properties
from rocketmq_protocol.remoting.route import ClusterInfo, TopicList
from tests.support.helpers import unique_name
from tests.support.remoting import RemotingClient, messages


@pytest.fixture
def namesrv(rocketmq_emulator):
    with RemotingClient(rocketmq_emulator.name_server) as c:
        yield c


@pytest.fixture
def broker_a(rocketmq_emulator, namesrv):
    with RemotingClient(f"127.0.0.1:{rocketmq_emulator.cluster.broker('broker-a').remoting_port}") as c:
        yield c


def _props(**kw: str) -> dict[str, str]:
    return {"WAIT": "true", **kw}


# ------------------------------------------------------------------------------------------ name server
def test_route_lists_every_broker_with_its_remoting_address(rocketmq_emulator, namesrv, topic):
    route = namesrv.route(topic)
    assert [(q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm) for q in route.queue_datas] == [
        ("broker-a", 4, 4, 6),
        ("broker-b", 4, 4, 6),
    ]
    for b in rocketmq_emulator.cluster.brokers:
        assert route.broker_addr(b.name) == f"127.0.0.1:{b.remoting_port}"
    assert {bd.cluster for bd in route.broker_datas} == {"DefaultCluster"}


def test_route_json_standard_for_new_clients_and_bare_ids_for_old(namesrv, topic):
    new = namesrv.call(Q.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    assert b'"brokerAddrs":{"0":' in new.body
    json.loads(new.body)  # standard JSON
    old = RemotingClient(namesrv.addr)
    try:
        cmd_opaque = old.send(Q.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        # version ≥ 401 is what the codec sends; accept bare keys too: fastjson parses either
        assert fastjson.loads(old.wait(cmd_opaque).body)["queueDatas"]
    finally:
        old.close()


def test_unknown_topic_route_is_topic_not_exist(namesrv):
    r = namesrv.call(Q.GET_ROUTEINFO_BY_TOPIC, {"topic": unique_name("nope")})
    assert r.code == R.TOPIC_NOT_EXIST and "No topic route info" in r.remark


def test_cluster_info_and_topic_lists(rocketmq_emulator, namesrv, topic):
    info = ClusterInfo.from_json(namesrv.call(Q.GET_BROKER_CLUSTER_INFO).body)
    assert info.cluster_addr_table == {"DefaultCluster": ["broker-a", "broker-b"]}
    assert info.broker_addr_table["broker-b"].master_addr.endswith(
        str(rocketmq_emulator.cluster.broker("broker-b").remoting_port)
    )
    assert topic in TopicList.from_json(namesrv.call(Q.GET_ALL_TOPIC_LIST_FROM_NAMESERVER).body).topic_list
    by_cluster = namesrv.call(Q.GET_TOPICS_BY_CLUSTER, {"cluster": "DefaultCluster"})
    assert topic in TopicList.from_json(by_cluster.body).topic_list
    system = TopicList.from_json(namesrv.call(Q.GET_SYSTEM_TOPIC_LIST_FROM_NS).body).topic_list
    assert "DefaultCluster" in system and "broker-a" in system
    assert (
        namesrv.call(Q.GET_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": topic}).code
        == R.QUERY_NOT_FOUND
    )
    assert namesrv.call(Q.PUT_KV_CONFIG, {"namespace": "x", "key": "k", "value": "v"}).code == R.SUCCESS


def test_unknown_codes_are_not_supported(namesrv, broker_a):
    for c in (namesrv, broker_a):
        r = c.call(4242)
        assert r.code == R.REQUEST_CODE_NOT_SUPPORTED and "request type 4242 not supported" in r.remark
        assert r.is_response


# ------------------------------------------------------------------------------------------ send + pull
def test_send_v2_then_pull_every_field(rocketmq_emulator, broker_a, topic):
    r = broker_a.send_message(
        topic,
        b"hello",
        queue_id=2,
        properties=_props(TAGS="TagA", KEYS="k1 k2", UNIQ_KEY="AB01", color="red"),
    )
    assert r.code == R.SUCCESS, r.remark
    assert (r.ext_fields["queueId"], r.ext_fields["queueOffset"], r.ext_fields["transactionId"]) == (
        "2",
        "0",
        "AB01",
    )
    b = rocketmq_emulator.cluster.broker("broker-a")
    mid = decode_offset_message_id(r.ext_fields["msgId"])
    assert (mid.host, mid.port) == ("127.0.0.1", b.remoting_port)

    p = broker_a.pull(topic, 2, 0)
    assert p.code == R.SUCCESS
    assert p.ext_fields == {
        "suggestWhichBrokerId": "0",
        "nextBeginOffset": "1",
        "minOffset": "0",
        "maxOffset": "1",
    }
    row = messages(p).to_pylist()[0]
    assert (row["topic"], row["queue_id"], row["queue_offset"], row["body"]) == (topic, 2, 0, b"hello")
    assert (row["message_id"], row["tags"], row["keys"], row["properties"]) == (
        "AB01",
        "TagA",
        ["k1", "k2"],
        [("color", "red")],
    )
    assert row["commitlog_offset"] == mid.commit_log_offset
    assert row["store_host"] == f"127.0.0.1:{b.remoting_port}"
    assert "CLUSTER\x01DefaultCluster" in row["raw_properties"]

    # VIEW_MESSAGE_BY_ID finds it by the commit-log offset of its offset message id.
    v = broker_a.call(Q.VIEW_MESSAGE_BY_ID, {"offset": mid.commit_log_offset})
    assert v.code == R.SUCCESS and messages(v).to_pylist()[0]["body"] == b"hello"
    assert (
        broker_a.call(Q.VIEW_MESSAGE_BY_ID, {"offset": mid.commit_log_offset + 10**6}).code == R.SYSTEM_ERROR
    )


def test_send_v1_names_compressed_body_and_broker_generated_id(broker_a, topic):
    body = b"z" * 5000
    ext = {"producerGroup": "pg", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
           "queueId": 1, "sysFlag": 0x301, "bornTimestamp": int(time.time() * 1000), "flag": 0,
           "properties": encode_properties({"WAIT": "true"})}  # fmt: skip
    r = broker_a.call(Q.SEND_MESSAGE, ext, zlib.compress(body))
    assert r.code == R.SUCCESS, r.remark
    row = messages(broker_a.pull(topic, 1, 0)).to_pylist()[0]
    assert row["body"] == body
    assert len(row["message_id"]) == 32  # a UNIQ_KEY the broker made


def test_batch_lands_on_one_queue_with_consecutive_offsets(broker_a, topic):
    props = [encode_properties({"UNIQ_KEY": f"ID{i:030d}", "TAGS": "T", "i": str(i)}) for i in range(5)]
    body = encode_batch([f"b{i}".encode() for i in range(5)], props)
    r = broker_a.send_message(topic, body, queue_id=3, code=Q.SEND_BATCH_MESSAGE,
                              properties={"WAIT": "true", "UNIQ_KEY": "BATCHLEVEL"})  # fmt: skip
    assert r.code == R.SUCCESS, r.remark
    assert len(r.ext_fields["msgId"].split(",")) == 5
    rows = messages(broker_a.pull(topic, 3, 0)).to_pylist()
    assert [x["queue_offset"] for x in rows] == [0, 1, 2, 3, 4]
    assert [x["message_id"] for x in rows] == [f"ID{i:030d}" for i in range(5)]  # inner ids win
    assert [dict(x["properties"])["i"] for x in rows] == [str(i) for i in range(5)]


def test_batch_messages_without_uniq_key_are_pulled_without_one(broker_a, topic):
    """Apache's Go client sends batches whose messages carry no UNIQ_KEY: a real broker stores none (the
    consumer's MsgId is then the offset message id); a single message without one gets one made."""
    props = [encode_properties({"TAGS": "T", "i": str(i)}) for i in range(3)]
    props[1] = encode_properties({"TAGS": "T", "i": "1", "UNIQ_KEY": "C0A8000100002A9F0000000000000001"})
    r = broker_a.send_message(topic, encode_batch([b"a", b"b", b"c"], props), queue_id=2,
                              code=Q.SEND_BATCH_MESSAGE, properties={"WAIT": "true"})  # fmt: skip
    assert r.code == R.SUCCESS, r.remark
    offset_ids = r.ext_fields["msgId"].split(",")
    assert len(offset_ids) == 3
    # message_id: the UNIQ_KEY, else (as a client decodes it) the offset message id
    rows = messages(broker_a.pull(topic, 2, 0)).to_pylist()
    assert [x["message_id"] for x in rows] == [
        offset_ids[0],
        "C0A8000100002A9F0000000000000001",
        offset_ids[2],
    ]

    r = broker_a.send_message(topic, b"single", queue_id=2, properties={"WAIT": "true"})
    assert r.code == R.SUCCESS, r.remark
    made = messages(broker_a.pull(topic, 2, 3)).to_pylist()[0]["message_id"]
    assert len(made) == 32 and made != r.ext_fields["msgId"]  # a UNIQ_KEY the broker made


def test_batch_refusals(broker_a, topic):
    good = encode_batch([b"x"], [""])
    r = broker_a.send_message(topic, good, code=Q.SEND_BATCH_MESSAGE, properties={"DELAY": "2"})
    assert r.code == R.MESSAGE_ILLEGAL
    r = broker_a.send_message(topic, b"\x00\x00\x00\x05garbage", code=Q.SEND_BATCH_MESSAGE)
    assert r.code == R.SYSTEM_ERROR and "BatchDecodeError" in r.remark
    r = broker_a.send_message(topic, good, code=Q.SEND_BATCH_MESSAGE, sys_flag=0x4)
    assert r.code == R.MESSAGE_ILLEGAL
    # A batch body of maxMessageSize (4 MiB) is stored; one byte more is refused, as 5.x brokers refuse it.
    records = [b"y" * 1002] * 4096
    r = broker_a.send_message(topic, encode_batch(records, [""] * 4096), code=Q.SEND_BATCH_MESSAGE)
    assert r.code == R.SUCCESS, r.remark
    over = encode_batch([*records[:-1], b"y" * 1003], [""] * 4096)
    r = broker_a.send_message(topic, over, code=Q.SEND_BATCH_MESSAGE)
    assert r.code == R.SYSTEM_ERROR and "message body size exceeded" in r.remark, r.remark


def test_send_refusals(broker_a, topic):
    assert broker_a.send_message(unique_name("missing"), b"x").code == R.TOPIC_NOT_EXIST
    r = broker_a.send_message(topic, b"x", queue_id=4)
    assert r.code == R.INVALID_PARAMETER and "queueId[4] is illegal" in r.remark
    assert broker_a.send_message("bad topic!", b"x").code == R.INVALID_PARAMETER
    assert broker_a.send_message("TBW102", b"x").code == R.NO_PERMISSION
    assert broker_a.send_message(topic, b"x" * (4 * 1024 * 1024 + 1)).code == R.MESSAGE_ILLEGAL
    assert broker_a.send_message(topic, b"").code == R.SYSTEM_ERROR  # the 5.x store refuses an empty body
    # The proxy's message rules are not a broker's: a tag with '|' is stored (and filtered by its hash).
    assert broker_a.send_message(topic, b"x", properties={"TAGS": "a|b"}).code == R.SUCCESS
    r = broker_a.call(Q.SEND_MESSAGE_V2, {"b": topic})  # required fields missing
    assert r.code == R.SYSTEM_ERROR and "is missing" in r.remark


def test_round_robin_and_message_group(broker_a, topic):
    qs = [int(broker_a.send_message(topic, b"x").ext_fields["queueId"]) for _ in range(4)]
    assert sorted(qs) == list(range(4))
    same = {broker_a.send_message(topic, b"x", properties={"__SHARDINGKEY": "order-1"}).ext_fields["queueId"]
            for _ in range(4)}  # fmt: skip
    assert len(same) == 1


def test_pull_statuses_and_offsets(broker_a, topic):
    assert broker_a.pull(topic, 0, 0).code == R.PULL_NOT_FOUND  # empty queue, offset 0
    r = broker_a.pull(topic, 0, 3)
    assert r.code == R.PULL_OFFSET_MOVED and r.ext_fields["nextBeginOffset"] == "0"
    for i in range(3):
        broker_a.send_message(topic, f"m{i}".encode(), queue_id=0, properties={"TAGS": "TagB"})
    r = broker_a.pull(topic, 0, 3)
    assert r.code == R.PULL_NOT_FOUND and r.ext_fields["nextBeginOffset"] == "3"
    r = broker_a.pull(topic, 0, 7)
    assert r.code == R.PULL_OFFSET_MOVED and r.ext_fields["nextBeginOffset"] == "3"
    r = broker_a.pull(topic, 0, 0, subscription="TagA")
    assert r.code == R.PULL_RETRY_IMMEDIATELY and r.ext_fields["nextBeginOffset"] == "3"
    r = broker_a.pull(topic, 0, 1, max_nums=1, subscription="TagA || TagB")
    assert r.code == R.SUCCESS and [x["queue_offset"] for x in messages(r).to_pylist()] == [1]
    assert r.ext_fields["nextBeginOffset"] == "2"
    assert broker_a.pull(unique_name("missing"), 0, 0).code == R.TOPIC_NOT_EXIST
    r = broker_a.pull(topic, 99, 0)
    assert r.code == R.INVALID_PARAMETER and "queueId[99] is illegal" in r.remark
    r = broker_a.pull(topic, 0, 0, subscription="a >", expression_type="SQL92")
    assert r.code == R.SUBSCRIPTION_PARSE_FAILED


def test_pull_answer_stays_within_a_frame_clients_accept(broker_a, topic):
    """maxMsgNums covers 20 MiB of 1 MiB bodies: the answer stops before its frame would pass the 16 MiB
    clients accept, and nextBeginOffset names the first message left for the next pull."""
    body = bytes(range(256)) * 4096  # 1 MiB
    for i in range(20):
        assert broker_a.send_message(topic, body, queue_id=0, properties={"i": str(i)}).code == R.SUCCESS
    got: list[dict] = []
    counts = []
    while len(got) < 20:
        r = broker_a.pull(topic, 0, len(got), max_nums=32)
        assert r.code == R.SUCCESS
        assert len(r.body) <= PULL_MAX_RECORD_BYTES < MAX_FRAME_LENGTH
        rows = messages(r).to_pylist()
        assert int(r.ext_fields["nextBeginOffset"]) == len(got) + len(rows)
        got += rows
        counts.append(len(rows))
    assert counts == [14, 6]  # 15 MiB of records hold 14 of 1 MiB and a few hundred bytes each
    assert [m["queue_offset"] for m in got] == list(range(20))
    assert all(m["body"] == body for m in got)


def test_sql92_filter(broker_a, topic):
    for i in range(4):
        broker_a.send_message(topic, b"x", queue_id=1, properties={"n": str(i)})
    r = broker_a.pull(topic, 1, 0, subscription="n >= 2", expression_type="SQL92")
    assert [dict(x["properties"])["n"] for x in messages(r).to_pylist()] == ["2", "3"]


def test_queue_bounds_and_time_lookups(broker_a, topic):
    assert broker_a.call(Q.GET_MAX_OFFSET, {"topic": topic, "queueId": 0}).ext_fields["offset"] == "0"
    r = broker_a.call(Q.GET_EARLIEST_MSG_STORETIME, {"topic": topic, "queueId": 0})
    assert r.ext_fields["timestamp"] == "-1"
    before = int(time.time() * 1000) - 1
    for _ in range(3):
        broker_a.send_message(topic, b"x", queue_id=0)
    after = int(time.time() * 1000) + 1000
    assert broker_a.call(Q.GET_MAX_OFFSET, {"topic": topic, "queueId": 0}).ext_fields["offset"] == "3"
    assert broker_a.call(Q.GET_MIN_OFFSET, {"topic": topic, "queueId": 0}).ext_fields["offset"] == "0"
    search = {"topic": topic, "queueId": 0}
    assert (
        broker_a.call(Q.SEARCH_OFFSET_BY_TIMESTAMP, {**search, "timestamp": before}).ext_fields["offset"]
        == "0"
    )
    assert (
        broker_a.call(Q.SEARCH_OFFSET_BY_TIMESTAMP, {**search, "timestamp": after}).ext_fields["offset"]
        == "3"
    )
    upper = {**search, "timestamp": after, "boundaryType": "upper"}
    assert broker_a.call(Q.SEARCH_OFFSET_BY_TIMESTAMP, upper).ext_fields["offset"] == "2"
    ts = int(broker_a.call(Q.GET_EARLIEST_MSG_STORETIME, search).ext_fields["timestamp"])
    assert before <= ts <= after


def test_consumer_offsets(broker_a, topic):
    group = unique_name("g")
    q = {"consumerGroup": group, "topic": topic, "queueId": 0}
    assert broker_a.call(Q.QUERY_CONSUMER_OFFSET, q).code == R.QUERY_NOT_FOUND  # empty queue
    broker_a.send_message(topic, b"x", queue_id=0)
    assert broker_a.call(Q.QUERY_CONSUMER_OFFSET, q).ext_fields["offset"] == "0"  # message 0 still there
    r = broker_a.call(Q.QUERY_CONSUMER_OFFSET, {**q, "setZeroIfNotFound": False})
    assert r.code == R.QUERY_NOT_FOUND
    assert broker_a.call(Q.UPDATE_CONSUMER_OFFSET, {**q, "commitOffset": 1}).code == R.SUCCESS
    assert broker_a.call(Q.QUERY_CONSUMER_OFFSET, q).ext_fields["offset"] == "1"
    broker_a.send(Q.UPDATE_CONSUMER_OFFSET, {**q, "commitOffset": 0}, oneway=True)  # Java's way: oneway
    deadline = time.monotonic() + 5
    while broker_a.call(Q.QUERY_CONSUMER_OFFSET, q).ext_fields["offset"] != "0":
        assert time.monotonic() < deadline
    r = broker_a.call(Q.UPDATE_CONSUMER_OFFSET, {**q, "topic": unique_name("missing"), "commitOffset": 1})
    assert r.code == R.TOPIC_NOT_EXIST
    # A pull with COMMIT_OFFSET stores the offset it carries.
    broker_a.pull(topic, 0, 1, group=group, sys_flag=0x5, commit_offset=1)
    assert broker_a.call(Q.QUERY_CONSUMER_OFFSET, q).ext_fields["offset"] == "1"


# ------------------------------------------------------------------------------------------ clients
def test_heartbeat_consumer_list_notify_and_unregister(rocketmq_emulator, broker_a, topic):
    group = unique_name("g")
    addr = broker_a.addr
    with RemotingClient(addr) as other:
        r = broker_a.heartbeat("c1@1", consumer_group=group, topic=topic, expression="TagA")
        assert r.code == R.SUCCESS
        assert f"%RETRY%{group}" in rocketmq_emulator.cluster.broker("broker-a").store.topics
        lst = broker_a.call(Q.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group})
        assert json.loads(lst.body) == {"consumerIdList": ["c1@1"]}
        other.heartbeat("c2@2", consumer_group=group, topic=topic)
        notice = broker_a.wait_request(Q.NOTIFY_CONSUMER_IDS_CHANGED)
        assert notice.ext_fields["consumerGroup"] == group and notice.is_oneway
        assert json.loads(broker_a.call(Q.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group}).body) == {
            "consumerIdList": ["c1@1", "c2@2"]
        }
        # A pull without the SUBSCRIPTION flag uses the heartbeat's subscription (TagA).
        broker_a.send_message(topic, b"x", queue_id=0, properties={"TAGS": "TagB"})
        assert (
            broker_a.pull(topic, 0, 0, group=group, sys_flag=0, subscription="").code
            == R.PULL_RETRY_IMMEDIATELY
        )
        r = broker_a.call(Q.UNREGISTER_CLIENT, {"clientID": "c2@2", "consumerGroup": group})
        assert r.code == R.SUCCESS
    assert json.loads(broker_a.call(Q.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group}).body) == {
        "consumerIdList": ["c1@1"]
    }
    r = broker_a.call(Q.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": unique_name("none")})
    assert r.code == R.SYSTEM_ERROR and "no consumer for this group" in r.remark


def test_closed_connection_leaves_the_group(broker_a, topic):
    group = unique_name("g")
    c = RemotingClient(broker_a.addr)
    c.heartbeat("gone@1", consumer_group=group, topic=topic)
    c.close()
    deadline = time.monotonic() + 5
    while broker_a.call(Q.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group}).code == R.SUCCESS:
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_check_client_config_and_queue_locks(broker_a, topic):
    body = {"clientId": "c", "group": "g", "subscriptionData": {"topic": topic, "subString": "a > 1",
                                                                 "expressionType": "SQL92"}}  # fmt: skip
    assert broker_a.call(Q.CHECK_CLIENT_CONFIG, body=json.dumps(body).encode()).code == R.SUCCESS
    body["subscriptionData"]["subString"] = "a >"
    assert (
        broker_a.call(Q.CHECK_CLIENT_CONFIG, body=json.dumps(body).encode()).code
        == R.SUBSCRIPTION_PARSE_FAILED
    )
    mq = {"topic": topic, "brokerName": "broker-a", "queueId": 0}
    lock = {"consumerGroup": "g", "clientId": "c1", "mqSet": [mq]}
    assert json.loads(broker_a.call(Q.LOCK_BATCH_MQ, body=json.dumps(lock).encode()).body)["lockOKMQSet"] == [
        mq
    ]
    other = {**lock, "clientId": "c2"}
    assert (
        json.loads(broker_a.call(Q.LOCK_BATCH_MQ, body=json.dumps(other).encode()).body)["lockOKMQSet"] == []
    )
    assert broker_a.call(Q.UNLOCK_BATCH_MQ, body=json.dumps(lock).encode()).code == R.SUCCESS
    assert json.loads(broker_a.call(Q.LOCK_BATCH_MQ, body=json.dumps(other).encode()).body)[
        "lockOKMQSet"
    ] == [mq]
    assert broker_a.call(Q.HEART_BEAT, body=b"not json").code == R.SYSTEM_ERROR


# ------------------------------------------------------------------------------------------ admin
def test_admin_codes(rocketmq_emulator, broker_a, namesrv):
    name = unique_name("adm")
    create = {"topic": name, "defaultTopic": "TBW102", "readQueueNums": 3, "writeQueueNums": 3, "perm": 6,
              "topicFilterType": "SINGLE_TAG", "order": False, "attributes": "+message.type=FIFO"}  # fmt: skip
    assert broker_a.call(Q.UPDATE_AND_CREATE_TOPIC, create).code == R.SUCCESS
    route = namesrv.route(name)
    assert [(q.broker_name, q.read_queue_nums) for q in route.queue_datas] == [("broker-a", 3)]
    cfg = fastjson.loads(broker_a.call(Q.GET_TOPIC_CONFIG, {"topic": name}).body)
    assert (cfg["readQueueNums"], cfg["attributes"]) == (3, {"message.type": "FIFO"})
    assert name in fastjson.loads(broker_a.call(Q.GET_ALL_TOPIC_CONFIG).body)["topicConfigTable"]

    broker_a.send_message(name, b"x", queue_id=1, properties={"__SHARDINGKEY": "g"})
    stats = fastjson.loads(broker_a.call(Q.GET_TOPIC_STATS_INFO, {"topic": name}).body)["offsetTable"]
    by_q = {dict(k)["queueId"]: v for k, v in stats.items()}
    assert by_q[1]["maxOffset"] == 1 and by_q[1]["lastUpdateTimestamp"] > 0 and by_q[0]["maxOffset"] == 0
    assert broker_a.call(Q.GET_TOPIC_STATS_INFO, {"topic": unique_name("x")}).code == R.TOPIC_NOT_EXIST

    group = unique_name("g")
    broker_a.call(
        Q.UPDATE_CONSUMER_OFFSET, {"consumerGroup": group, "topic": name, "queueId": 1, "commitOffset": 0}
    )
    cs = fastjson.loads(broker_a.call(Q.GET_CONSUME_STATS, {"consumerGroup": group}).body)["offsetTable"]
    q1 = next(v for k, v in cs.items() if dict(k)["queueId"] == 1)
    assert (q1["brokerOffset"], q1["consumerOffset"]) == (1, 0)
    assert json.loads(broker_a.call(Q.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": name}).body)["groupList"] == [
        group
    ]
    assert (
        broker_a.call(Q.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group}).code == R.CONSUMER_NOT_ONLINE
    )
    broker_a.heartbeat("adm@1", consumer_group=group, topic=name)
    conn = fastjson.loads(broker_a.call(Q.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group}).body)
    assert [c["clientId"] for c in conn["connectionSet"]] == ["adm@1"] and name in conn["subscriptionTable"]

    reset = {"group": group, "topic": name, "timestamp": -1, "isForce": True}
    body = fastjson.loads(broker_a.call(Q.INVOKE_BROKER_TO_RESET_OFFSET, reset).body)["offsetTable"]
    assert {dict(k)["queueId"]: v for k, v in body.items()} == {0: 0, 1: 1, 2: 0}
    assert broker_a.wait_request(Q.RESET_CONSUMER_CLIENT_OFFSET).ext_fields["group"] == group
    cs = fastjson.loads(broker_a.call(Q.GET_CONSUME_STATS, {"consumerGroup": group, "topic": name}).body)
    assert next(v for k, v in cs["offsetTable"].items() if dict(k)["queueId"] == 1)["consumerOffset"] == 1

    kv = fastjson.loads(broker_a.call(Q.GET_BROKER_RUNTIME_INFO).body)["table"]
    assert kv["brokerActive"] == "true" and kv["putTps"].split()[0] == "0.0"

    sub = {"groupName": group, "retryMaxTimes": 3, "consumeMessageOrderly": False}
    assert (
        broker_a.call(Q.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=json.dumps(sub).encode()).code == R.SUCCESS
    )
    assert rocketmq_emulator.cluster.group_config(group).max_retries == 3
