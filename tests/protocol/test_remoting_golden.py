"""The remoting codec against bytes written by Apache RocketMQ's own Java encoders (tests/protocol/golden/).

Each golden is decoded and compared with what Java's decoder read from it (manifest.json), then encoded
again and compared byte for byte. tests/protocol/java/GoldenBytes.java wrote them (5.5.0 and 5.3.3).
"""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path

import pytest

from rocketmq_protocol.remoting import fastjson
from rocketmq_protocol.remoting.codes import SerializeType
from rocketmq_protocol.remoting.frames import decode_frame, encode_frame
from rocketmq_protocol.remoting.headers import (
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    send_header_from_ext_fields,
)
from rocketmq_protocol.remoting.message_codec import decode_batch, decode_stored, encode_batch, encode_stored
from rocketmq_protocol.remoting.message_id import (
    create_offset_message_id,
    decode_offset_message_id,
    join_offset_message_ids,
    parse_uniq_id,
)
from rocketmq_protocol.remoting.properties import HIDDEN_FROM_READER, decode_properties
from rocketmq_protocol.remoting.route import ClusterInfo, TopicList, TopicRouteData
from rocketmq_protocol.remoting.signature import calculate_signature, content_to_sign, verify

# Every decode runs with each stored-record decoder (tests/protocol/conftest.py).
pytestmark = pytest.mark.usefixtures("stored_decoder")

GOLDEN = Path(__file__).parent / "golden"
VERSIONS = sorted(p.name for p in GOLDEN.glob("rocketmq-*"))
STYLE = {"rocketmq-5.5.0": "fastjson2", "rocketmq-5.3.3": "fastjson1"}


def test_goldens_present():
    assert VERSIONS == ["rocketmq-5.3.3", "rocketmq-5.5.0"]


def manifest(version: str) -> dict:
    return json.loads((GOLDEN / version / "manifest.json").read_text())


def frame_files():
    for v in VERSIONS:
        for f in sorted((GOLDEN / v).glob("frame_*.bin")):
            yield pytest.param(v, f.name, id=f"{v}/{f.name}")


@pytest.mark.parametrize(("version", "name"), list(frame_files()))
def test_frame_decodes_like_java_and_reencodes(version: str, name: str):
    data = (GOLDEN / version / name).read_bytes()
    view = manifest(version)[name]
    cmd = decode_frame(data)
    assert cmd.code == view["code"]
    assert cmd.language.name == view["language"]
    assert (cmd.version, cmd.opaque, cmd.flag, cmd.remark) == (
        view["version"],
        view["opaque"],
        view["flag"],
        view["remark"],
    )
    assert cmd.ext_fields == (view["ext_fields"] or {})
    assert cmd.body == view["body"].encode("latin-1")
    assert cmd.serialize_type == SerializeType[view["serialize_type"]]
    again = encode_frame(cmd, json_style=STYLE[version])
    if name == "frame_signed_send_v2.rocketmq.bin":
        # Java writes the typed header fields and then extFields, into which the ACL hook had copied the
        # same fields: each key twice. Decoding keeps the last; re-encoding writes each key once.
        assert len(again) < len(data)
        assert decode_frame(again).ext_fields == cmd.ext_fields
    else:
        assert again == data


@pytest.mark.parametrize("version", VERSIONS)
def test_typed_headers_of_golden_frames(version: str):
    d = GOLDEN / version
    pull = PullMessageRequestHeader.from_ext_fields(
        decode_frame((d / "frame_pull.json.bin").read_bytes()).ext_fields
    )
    assert (pull.consumer_group, pull.queue_id, pull.queue_offset, pull.sys_flag) == (
        "spark-group",
        3,
        1234567890123,
        22,
    )
    assert pull.bname == "broker-a" and pull.max_msg_bytes == 2**31 - 1
    v2 = decode_frame((d / "frame_send_v2.rocketmq.bin").read_bytes())
    v1 = decode_frame((d / "frame_send_v1.json.bin").read_bytes())
    assert send_header_from_ext_fields(v2.code, v2.ext_fields) == SendMessageRequestHeader.from_ext_fields(
        v1.ext_fields
    )
    assert send_header_from_ext_fields(v2.code, v2.ext_fields).to_v2().to_ext_fields() == v2.ext_fields
    resp = decode_frame((d / "frame_send_response.json.bin").read_bytes())
    header = SendMessageResponseHeader.from_ext_fields(resp.ext_fields)
    assert (header.queue_id, header.queue_offset, header.msg_id) == (
        1,
        42,
        "7F00000100002A9F0000000000000000",
    )
    pr = decode_frame((d / "frame_pull_response.rocketmq.bin").read_bytes())
    assert PullMessageResponseHeader.from_ext_fields(pr.ext_fields).next_begin_offset == 100


def _host(h: str) -> str:
    host, _, port = h.rpartition(":")
    return f"{ipaddress.ip_address(host.strip('[]'))}:{port}"


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", ["stored_messages.bin", "stored_v2.bin"])
def test_stored_messages_decode_like_java(version: str, name: str):
    data = (GOLDEN / version / name).read_bytes()
    rows = decode_stored(data).to_pylist()
    views = manifest(version)[name]
    assert len(rows) == len(views)
    for row, view in zip(rows, views, strict=True):
        for key in ("topic", "queue_id", "queue_offset", "commitlog_offset", "sysflag", "flag", "body_crc",
                    "reconsume_times", "prepared_transaction_offset"):  # fmt: skip
            assert row[key] == view[key], key
        assert row["body"].hex().upper() == view["body_hex"]
        assert row["born_timestamp"].timestamp() * 1000 == view["born_timestamp"]
        assert row["store_timestamp"].timestamp() * 1000 == view["store_timestamp"]
        assert _host(row["born_host"]) == _host(view["born_host"])
        assert _host(row["store_host"]) == _host(view["store_host"])
        assert row["message_id"] == view["msg_id"]
        assert row["tags"] == view["tags"]
        assert " ".join(row["keys"]) == (view["keys"] or "")
        assert dict(row["properties"]) == {
            k: v for k, v in view["properties"].items() if k not in HIDDEN_FROM_READER
        }
        assert decode_properties(row["raw_properties"]) == view["properties"]
    first = rows[0] if name == "stored_messages.bin" else None
    if first:
        assert first["message_group"] == "group-7"
        assert rows[2]["delivery_timestamp"].timestamp() * 1000 == 1700000600000
        assert rows[3]["body"] == (GOLDEN / version / "stored_plain_body.bin").read_bytes()  # inflated


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", ["stored_messages.bin", "stored_v2.bin"])
@pytest.mark.parametrize("given_crc", [True, False])
def test_stored_messages_reencode_to_the_same_bytes(version: str, name: str, given_crc: bool):
    data = (GOLDEN / version / name).read_bytes()
    t = decode_stored(data, decompress=False)
    again = encode_stored(
        topic=t["topic"], queue_id=t["queue_id"], queue_offset=t["queue_offset"],
        commitlog_offset=t["commitlog_offset"], body=t["body"], properties=t["raw_properties"],
        born_timestamp=t["born_timestamp"], store_timestamp=t["store_timestamp"], born_host=t["born_host"],
        store_host=t["store_host"], sysflag=t["sysflag"], flag=t["flag"], reconsume_times=t["reconsume_times"],
        prepared_transaction_offset=t["prepared_transaction_offset"], body_crc=t["body_crc"] if given_crc else None,
    )  # fmt: skip
    assert again == data


@pytest.mark.parametrize("version", VERSIONS)
def test_batch_decodes_like_java_and_reencodes(version: str):
    data = (GOLDEN / version / "batch.bin").read_bytes()
    batch = decode_batch(data)
    views = manifest(version)["batch.bin"]
    assert batch.num_rows == len(views) == 4
    for row, view in zip(batch.to_pylist(), views, strict=True):
        assert row["flag"] == view["flag"]
        assert row["body"].hex().upper() == view["body_hex"]
        assert decode_properties(row["raw_properties"]) == view["properties"]
    assert encode_batch(batch["body"], batch["raw_properties"], batch["flag"]) == data


@pytest.mark.parametrize("version", VERSIONS)
def test_route_and_admin_bodies(version: str):
    d = GOLDEN / version
    plain, standard = (d / "route_plain.json").read_bytes(), (d / "route_standard.json").read_bytes()
    assert b'{0:"127.0.0.1:10911"' in plain and b'{"0":"127.0.0.1:10911"' in standard
    for body, is_standard in ((plain, False), (standard, True)):
        route = TopicRouteData.from_json(body)
        assert route.broker_datas[0].broker_addrs == {0: "127.0.0.1:10911", 1: "127.0.0.1:10915"}
        assert route.to_json(standard=is_standard) == body
    assert route.publish_queues() == [(b, q) for b in ("broker-a", "broker-b") for q in range(4)]
    cluster = (d / "cluster_info.json").read_bytes()
    assert ClusterInfo.from_json(cluster).to_json() == cluster
    assert ClusterInfo.from_json(cluster).cluster_addr_table == {"DefaultCluster": ["broker-a", "broker-b"]}
    topics = (d / "topic_list.json").read_bytes()
    assert TopicList.from_json(topics).to_json() == topics
    for name in ("topic_stats.json", "consume_stats.json"):
        body = (d / name).read_bytes()
        doc = fastjson.loads(body)
        assert fastjson.dumps(doc).encode() == body
        (key,) = doc["offsetTable"]
        assert dict(key)["topic"] == "TopicTest"


@pytest.mark.parametrize("version", VERSIONS)
def test_signatures_and_ids(version: str):
    man = manifest(version)
    for case in man["signatures"]:
        body = None if case["body"] is None else case["body"].encode()
        assert (
            calculate_signature(content_to_sign(case["ext_fields"], body), case["secret"])
            == case["signature"]
        )
    for t in ("json", "rocketmq"):
        cmd = decode_frame((GOLDEN / version / f"frame_signed_send_v2.{t}.bin").read_bytes())
        assert verify(cmd, "12345678") and not verify(cmd, "1234567")
    ids = man["offset_ids"]
    assert create_offset_message_id("127.0.0.1", 10911, 123456) == ids["offset_v4"]
    assert create_offset_message_id("2001:db8::10", 10911, 1 << 40) == ids["offset_v6"]
    # A batch send's msgId, built column-wise: Java's ids joined by commas.
    assert join_offset_message_ids("127.0.0.1", 10911, [123456, 0, 123456]) == ",".join(
        [ids["offset_v4"], create_offset_message_id("127.0.0.1", 10911, 0), ids["offset_v4"]]
    )
    assert join_offset_message_ids("2001:db8::10", 10911, [1 << 40]) == ids["offset_v6"]
    assert decode_offset_message_id(ids["offset_v6"]).commit_log_offset == 1 << 40
    uniq = json.loads((GOLDEN / version / "uniq_ids.json").read_text())
    for u in uniq["ids"]:
        info = parse_uniq_id(u["id"])
        assert info.pid == u["pid"]
        assert ipaddress.ip_address(info.ip) == ipaddress.ip_address(u["ip"])
