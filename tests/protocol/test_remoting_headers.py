"""Typed custom headers, JSON bodies (routes, admin tables) and the ACL signature."""

from __future__ import annotations

import dataclasses

import pytest

from rocketmq_protocol.remoting import fastjson, headers
from rocketmq_protocol.remoting.codes import RequestCode, Version
from rocketmq_protocol.remoting.errors import JsonBodyError, MissingFieldError
from rocketmq_protocol.remoting.frames import RemotingCommand
from rocketmq_protocol.remoting.headers import (
    CustomHeader,
    GetMaxOffsetRequestHeader,
    PullMessageRequestHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
    UnregisterClientRequestHeader,
    send_header_from_ext_fields,
)
from rocketmq_protocol.remoting.route import BrokerData, QueueData, TopicRouteData
from rocketmq_protocol.remoting.signature import calculate_signature, content_to_sign, sign, verify

HEADER_CLASSES = [
    c for c in vars(headers).values()
    if isinstance(c, type) and issubclass(c, CustomHeader) and dataclasses.is_dataclass(c) and not c.__name__.startswith("_")
]  # fmt: skip


def _sample(cls):
    values = {}
    for f in dataclasses.fields(cls):
        kind = str(f.type)
        values[f.name] = 7 if "int" in kind else True if "bool" in kind else f"v-{f.name}"
    return cls(**values)


@pytest.mark.parametrize("cls", HEADER_CLASSES, ids=lambda c: c.__name__)
def test_every_header_round_trips(cls):
    header = _sample(cls)
    fields = header.to_ext_fields()
    assert all(isinstance(v, str) for v in fields.values())
    assert cls.from_ext_fields(fields) == header


def test_required_fields_and_types_are_checked():
    with pytest.raises(
        MissingFieldError, match=r"PullMessageRequestHeader: the custom field <consumerGroup> is missing"
    ):
        PullMessageRequestHeader.from_ext_fields({"topic": "T"})
    good = PullMessageRequestHeader("g", "T", 0, 0, 32, 6, 0, 20000, 0).to_ext_fields()
    with pytest.raises(MissingFieldError, match=r"<queueOffset> is not an integer: 'x'"):
        PullMessageRequestHeader.from_ext_fields({**good, "queueOffset": "x"})
    with pytest.raises(MissingFieldError, match="<clientID>"):
        UnregisterClientRequestHeader.from_ext_fields({})
    assert UnregisterClientRequestHeader(client_id="c").to_ext_fields() == {"clientID": "c"}


def test_wire_names_and_java_booleans():
    h = GetMaxOffsetRequestHeader(topic="T", queue_id=3, committed=False, bname="broker-a")
    assert h.to_ext_fields() == {"bname": "broker-a", "topic": "T", "queueId": "3", "committed": "false"}
    assert GetMaxOffsetRequestHeader.from_ext_fields(
        {"topic": "T", "queueId": "1", "committed": "TRUE"}
    ).committed
    assert not GetMaxOffsetRequestHeader.from_ext_fields(
        {"topic": "T", "queueId": "1", "committed": "yes"}
    ).committed


def test_send_header_v1_v2_conversion():
    v1 = SendMessageRequestHeader(
        "P", "T", "TBW102", 4, 1, 0, 1700000000000, 0, "a\x01b\x02", batch=True, bname="b1"
    )
    v2 = v1.to_v2()
    assert v2.to_ext_fields() == {"a": "P", "b": "T", "c": "TBW102", "d": "4", "e": "1", "f": "0",
                                  "g": "1700000000000", "h": "0", "i": "a\x01b\x02", "m": "true", "n": "b1"}  # fmt: skip
    assert v2.to_v1() == v1
    assert send_header_from_ext_fields(RequestCode.SEND_BATCH_MESSAGE, v2.to_ext_fields()) == v1
    assert send_header_from_ext_fields(RequestCode.SEND_MESSAGE, v1.to_ext_fields()) == v1
    with pytest.raises(MissingFieldError, match="<a>"):
        SendMessageRequestHeaderV2.from_ext_fields({})


def test_fastjson_reads_its_dialect():
    assert fastjson.loads(b'{"brokerAddrs":{0:"a:1", -1 :"b:2"}}') == {"brokerAddrs": {0: "a:1", -1: "b:2"}}
    doc = fastjson.loads('{"t":{{"queueId":1,"topic":"T"}:{"x":1.5}}, "ok":[true,null]}')
    ((key, value),) = doc["t"].items()
    assert dict(key) == {"queueId": 1, "topic": "T"} and value == {"x": 1.5} and doc["ok"] == [True, None]
    assert fastjson.dumps(doc) == '{"t":{{"queueId":1,"topic":"T"}:{"x":1.5}},"ok":[true,null]}'
    assert fastjson.dumps({1: "a"}, quote_keys=True) == '{"1":"a"}'
    for bad in ('{"a":', '{0:"a",}', "[1 2]", '{"a":1} x', "{" * 300, b"\xff"):
        with pytest.raises(JsonBodyError):
            fastjson.loads(bad)


def test_route_model():
    route = TopicRouteData(
        queue_datas=[QueueData("b", 2, 2, perm=4), QueueData("a", 2, 3)],
        broker_datas=[BrokerData("C", "a", {1: "h:2", 0: "h:1"}), BrokerData("C", "b", {1: "h:3"})],
    )
    assert route.subscribe_queues() == [("a", 0), ("a", 1), ("b", 0), ("b", 1)]
    assert route.publish_queues() == [("a", 0), ("a", 1), ("a", 2)]  # b: read-only and no master
    assert route.broker_addr("a") == "h:1"
    standard = route.to_json()
    assert b'"brokerAddrs":{"0":"h:1","1":"h:2"}' in standard
    assert b'"brokerAddrs":{1:"h:2",0:"h:1"}' in route.to_json(standard=False)
    assert TopicRouteData.from_json(standard) == TopicRouteData.from_json(route.to_json(standard=False))
    old = TopicRouteData.from_json(
        '{"queueDatas":[{"brokerName":"a","readQueueNums":1,"writeQueueNums":1,"perm":6,"topicSynFlag":2}]}'
    )
    assert old.queue_datas[0].topic_sys_flag == 2
    with pytest.raises(JsonBodyError):
        TopicRouteData.from_json('{"brokerDatas":[{"brokerAddrs":{"x":"h"}}]}')


def test_signature_sign_and_verify():
    # Test vector: extFields {topic, AccessKey}, secret 12345678 (JDK javax.crypto gives the same).
    assert (
        calculate_signature(
            content_to_sign({"topic": "TopicTest", "AccessKey": "rocketmq2"}, None), "12345678"
        )
        == "GeeGoP9mRvDhoVp4PD5omX0prgE="
    )
    assert (
        calculate_signature(
            content_to_sign({"topic": "TopicTest", "AccessKey": "rocketmq2"}, b"hello"), "12345678"
        )
        == "VCoakk8D+zaEPRCyxQHvWUF4988="
    )
    cmd = RemotingCommand(RequestCode.PULL_MESSAGE, ext_fields={"topic": "T", "b": "2", "B": "1"}, body=b"x")
    sign(cmd, "ak", "sk", security_token="tok")
    assert set(cmd.ext_fields) == {"topic", "b", "B", "AccessKey", "SecurityToken", "Signature"}
    assert verify(cmd, "sk") and not verify(cmd, "other")
    cmd.ext_fields["topic"] = "U"
    assert not verify(cmd, "sk")
    old = RemotingCommand(12, version=Version.V4_9_3, ext_fields={"key": "k", "_UNIQUE_KEY_QUERY": "true"})
    signature = calculate_signature(content_to_sign({"key": "k", "AccessKey": "ak"}, None), "sk")
    old.ext_fields.update(AccessKey="ak", Signature=signature)
    assert verify(old, "sk")
    assert not verify(RemotingCommand(1), "sk")
