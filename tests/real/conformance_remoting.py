"""Differential conformance over remoting: scenarios run against the emulator's remoting front end and against
real RocketMQ brokers (5.x and 4.9.x, through their name servers), comparing what a remoting client observes:
response codes, header fields present, offsets and counts — never ids, hosts or clock values.

The client is the shared codec's (tests/support/remoting.py). `DEVIATIONS` lists, per scenario, the
observations known to differ and why; docs/deviations.md ("Remoting") shows the same table and
test_conformance_remoting.py keeps the two equal.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rocketmq_protocol.remoting import fastjson
from rocketmq_protocol.remoting.codes import RequestCode as Q
from rocketmq_protocol.remoting.codes import ResponseCode as R
from rocketmq_protocol.remoting.message_codec import encode_batch
from rocketmq_protocol.remoting.message_id import decode_offset_message_id
from rocketmq_protocol.remoting.properties import encode_properties
from tests.real.observations import Deviations
from tests.support.remoting import RemotingClient, messages


@dataclass
class RemotingTarget:
    """A cluster under test: its name server and how to create topics and groups on it."""

    name: str
    namesrv: str
    create_topic: Callable[[str, int], None]
    create_group: Callable[[str, int], None]  # (group, max retries)
    notes: dict[str, Any] = field(default_factory=dict)


class Session:
    """A name-server client and a client of the broker serving a topic (broker-a)."""

    def __init__(self, target: RemotingTarget) -> None:
        self.target = target
        self.ns = RemotingClient(target.namesrv)
        self._brokers: dict[str, RemotingClient] = {}

    def topic(self, queues: int = 4) -> str:
        name = f"rc-{uuid.uuid4().hex[:10]}"
        self.target.create_topic(name, queues)
        return name

    def broker(self, topic: str) -> RemotingClient:
        route = self.ns.route(topic)
        addr = route.broker_addr("broker-a")
        assert addr, route
        if addr not in self._brokers:
            self._brokers[addr] = RemotingClient(addr)
        return self._brokers[addr]

    def close(self) -> None:
        self.ns.close()
        for c in self._brokers.values():
            c.close()


def name(code: int) -> str:
    try:
        return R(code).name
    except ValueError:
        return f"CODE_{code}"


def wait_for(pred: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.1)
    return False


def max_offset(b: RemotingClient, topic: str, q: int) -> int:
    r = b.call(Q.GET_MAX_OFFSET, {"topic": topic, "queueId": q})
    return int(r.ext_fields.get("offset", -1)) if r.code == R.SUCCESS else -1


def pull_found(b: RemotingClient, topic: str, q: int, offset: int, **kw: Any) -> list[dict]:
    """The messages at `offset`, pulling again for a few seconds while a real broker's dispatch catches up."""
    deadline = time.monotonic() + 10
    while True:
        r = b.pull(topic, q, offset, **kw)
        if r.code == R.SUCCESS or time.monotonic() > deadline:
            return messages(r).to_pylist() if r.code == R.SUCCESS else []
        time.sleep(0.2)


def pulled(r) -> dict:
    out = {"code": name(r.code)}
    for k in ("nextBeginOffset", "minOffset", "maxOffset", "suggestWhichBrokerId"):
        if k in r.ext_fields:
            out[k] = int(r.ext_fields[k])
    if r.code == R.SUCCESS:
        rows = messages(r).to_pylist()
        out["offsets"] = [x["queue_offset"] for x in rows]
        out["bodies"] = [x["body"].decode() for x in rows]
    return out


# ----------------------------------------------------------------------------------------------- scenarios
@dataclass(frozen=True)
class Scenario:
    id: str
    run: Callable[[Session], dict]


SCENARIOS: list[Scenario] = []


def scenario(fn: Callable[[Session], dict]) -> Callable[[Session], dict]:
    SCENARIOS.append(Scenario(fn.__name__, fn))
    return fn


@scenario
def route_shape(c: Session) -> dict:
    t = c.topic(4)
    r = c.ns.call(Q.GET_ROUTEINFO_BY_TOPIC, {"topic": t})
    doc = json.loads(r.body)
    qd = next(q for q in doc["queueDatas"] if q["brokerName"] == "broker-a")
    bd = next(b for b in doc["brokerDatas"] if b["brokerName"] == "broker-a")
    missing = c.ns.call(Q.GET_ROUTEINFO_BY_TOPIC, {"topic": f"nope-{uuid.uuid4().hex[:8]}"})
    return {
        "code": name(r.code),
        "keys": sorted(doc),
        "queueData": qd,
        "brokerData.keys": sorted(bd),
        "brokerAddrs.keys": sorted(bd["brokerAddrs"]),
        "cluster": bd["cluster"],
        "unknown": name(missing.code),
        "unknown.remark_prefix": (missing.remark or "")[:40],
    }


@scenario
def send_single(c: Session) -> dict:
    t = c.topic(4)
    b = c.broker(t)
    r = b.send_message(t, b"hello", queue_id=1, properties={"UNIQ_KEY": uuid.uuid4().hex.upper(),
                                                              "WAIT": "true", "TAGS": "TagA", "KEYS": "k1"})  # fmt: skip
    mid = decode_offset_message_id(r.ext_fields["msgId"])
    wait_for(
        lambda: max_offset(b, t, 1) >= 1, 5
    )  # a real broker dispatches to the consume queue asynchronously
    p = b.pull(t, 1, 0)
    row = messages(p).to_pylist()[0]
    raw = row["raw_properties"]
    return {
        "code": name(r.code),
        "ext_keys": sorted(r.ext_fields),
        "queueId": r.ext_fields["queueId"],
        "queueOffset": r.ext_fields["queueOffset"],
        "msgId.len": len(r.ext_fields["msgId"]),
        "msgId.matches_commitlog_offset": mid.commit_log_offset == row["commitlog_offset"],
        "pulled": pulled(p),
        "pulled.property_names": sorted(
            x.split("\x01")[0] for x in raw.split("\x02") if x and x.split("\x01")[0] not in ("__CRC32#",)
        ),
        "pulled.sysflag": row["sysflag"],
        "pulled.reconsume_times": row["reconsume_times"],
    }


@scenario
def send_batch(c: Session) -> dict:
    t = c.topic(4)
    b = c.broker(t)
    ids = [uuid.uuid4().hex.upper() for _ in range(3)]
    body = encode_batch(
        [f"b{i}".encode() for i in range(3)], [encode_properties({"UNIQ_KEY": i}) for i in ids]
    )
    r = b.send_message(t, body, queue_id=2, code=Q.SEND_BATCH_MESSAGE, properties={"WAIT": "true"})
    wait_for(lambda: max_offset(b, t, 2) >= 3, 5)
    rows = pull_found(b, t, 2, 0)
    return {
        "code": name(r.code),
        "msgIds": len(r.ext_fields.get("msgId", "").split(",")),
        "queueOffset": r.ext_fields.get("queueOffset"),
        "pulled.offsets": [x["queue_offset"] for x in rows],
        "pulled.ids_kept": [x["message_id"] for x in rows] == ids,
    }


@scenario
def send_refusals(c: Session) -> dict:
    t = c.topic(4)
    b = c.broker(t)
    out = {}
    out["queue_out_of_range"] = name(b.send_message(t, b"x", queue_id=4).code)
    out["bad_topic_name"] = name(b.send_message("bad topic!", b"x").code)
    out["system_topic"] = name(b.send_message("SCHEDULE_TOPIC_XXXX", b"x").code)
    out["too_large"] = name(b.send_message(t, b"x" * (4 * 1024 * 1024 + 1)).code)
    out["empty_body"] = name(b.send_message(t, b"").code)
    out["tag_with_bar"] = name(b.send_message(t, b"x", properties={"TAGS": "a|b"}).code)
    out["batch_with_delay"] = name(
        b.send_message(
            t, encode_batch([b"x"], [""]), code=Q.SEND_BATCH_MESSAGE, properties={"DELAY": "1"}
        ).code
    )
    out["batch_to_retry_topic"] = name(
        b.send_message("%RETRY%g", encode_batch([b"x"], [""]), code=Q.SEND_BATCH_MESSAGE).code
    )
    # A batch body of exactly maxMessageSize (4 MiB: 4,096 records of 1,024 bytes) is stored; one byte more
    # is refused ("message body size exceeded").
    records = [b"y" * 1002] * 4096
    out["batch_of_4_mib"] = name(
        b.send_message(t, encode_batch(records, [""] * 4096), code=Q.SEND_BATCH_MESSAGE).code
    )
    over = encode_batch([*records[:-1], b"y" * 1003], [""] * 4096)
    out["batch_over_4_mib"] = name(b.send_message(t, over, code=Q.SEND_BATCH_MESSAGE).code)
    out["missing_header_field"] = name(b.call(Q.SEND_MESSAGE_V2, {"b": t}).code)
    auto = f"auto-{uuid.uuid4().hex[:8]}"
    out["unknown_topic_auto_created"] = name(b.send_message(auto, b"x").code)
    out["unknown_code"] = name(b.call(4242).code)
    return out


@scenario
def pull_statuses(c: Session) -> dict:
    t = c.topic(4)
    b = c.broker(t)
    out = {"empty@0": pulled(b.pull(t, 0, 0)), "empty@3": pulled(b.pull(t, 0, 3))}
    for i in range(3):
        b.send_message(t, f"m{i}".encode(), queue_id=0, properties={"TAGS": "TagB", "n": str(i)})
    wait_for(lambda: max_offset(b, t, 0) >= 3, 5)
    out["found@1"] = pulled(b.pull(t, 0, 1, max_nums=1))
    out["at_max"] = pulled(b.pull(t, 0, 3))
    out["above_max"] = pulled(b.pull(t, 0, 7))
    out["tag_no_match"] = pulled(b.pull(t, 0, 0, subscription="TagA"))
    out["tag_match"] = pulled(b.pull(t, 0, 0, subscription="TagA || TagB"))
    out["sql92"] = pulled(b.pull(t, 0, 0, subscription="n >= 1", expression_type="SQL92"))
    out["sql92_bad"] = name(b.pull(t, 0, 0, subscription="n >", expression_type="SQL92").code)
    out["unknown_topic"] = name(b.pull(f"nope-{uuid.uuid4().hex[:8]}", 0, 0).code)
    out["bad_queue"] = name(b.pull(t, 9, 0).code)
    return out


@scenario
def pull_batch_cap(c: Session) -> dict:
    t = c.topic(4)
    b = c.broker(t)
    body = encode_batch([f"m{i}".encode() for i in range(40)], [""] * 40)
    b.send_message(t, body, queue_id=0, code=Q.SEND_BATCH_MESSAGE)
    wait_for(lambda: max_offset(b, t, 0) >= 40, 5)
    r = b.pull(t, 0, 0, max_nums=64)
    return {
        "code": name(r.code),
        "count": len(messages(r)),
        "nextBeginOffset": int(r.ext_fields["nextBeginOffset"]),
    }


@scenario
def long_polling(c: Session) -> dict:
    t = c.topic(4)
    b = c.broker(t)
    t0 = time.monotonic()
    timed_out = b.pull(t, 0, 0, sys_flag=0x6, suspend_ms=1000, timeout=15)
    waited = time.monotonic() - t0
    with RemotingClient(b.addr) as sender:
        held = b.send_pull(t, 1, 0, sys_flag=0x6, suspend_ms=10_000)
        time.sleep(0.5)
        t1 = time.monotonic()
        sender.send_message(t, b"wake", queue_id=1)
        woken = b.wait(held, timeout=15)
        woke_after = time.monotonic() - t1
    return {
        "timeout": pulled(timed_out),
        "timeout.held_at_least_1s": waited >= 0.9,
        "woken": pulled(woken),
        "woken.within_1s": woke_after < 1.0,
    }


@scenario
def offsets_and_time(c: Session) -> dict:
    t = c.topic(4)
    b = c.broker(t)
    q = {"topic": t, "queueId": 0}
    out = {
        "earliest_empty": b.call(Q.GET_EARLIEST_MSG_STORETIME, q).ext_fields.get("timestamp"),
        "max_empty": b.call(Q.GET_MAX_OFFSET, q).ext_fields.get("offset"),
    }
    before = int(time.time() * 1000) - 5000
    for i in range(3):
        b.send_message(t, f"m{i}".encode(), queue_id=0)
    wait_for(lambda: max_offset(b, t, 0) >= 3, 5)
    after = int(time.time() * 1000) + 5000
    out["min"] = b.call(Q.GET_MIN_OFFSET, q).ext_fields.get("offset")
    out["max"] = b.call(Q.GET_MAX_OFFSET, q).ext_fields.get("offset")
    out["search_before"] = b.call(Q.SEARCH_OFFSET_BY_TIMESTAMP, {**q, "timestamp": before}).ext_fields.get(
        "offset"
    )
    out["search_after"] = b.call(Q.SEARCH_OFFSET_BY_TIMESTAMP, {**q, "timestamp": after}).ext_fields.get(
        "offset"
    )
    out["earliest_code"] = name(b.call(Q.GET_EARLIEST_MSG_STORETIME, q).code)
    out["unknown_topic_max"] = b.call(Q.GET_MAX_OFFSET, {"topic": f"nope-{uuid.uuid4().hex[:6]}", "queueId": 0}).ext_fields.get("offset")  # fmt: skip
    return out


@scenario
def consumer_offsets(c: Session) -> dict:
    t = c.topic(4)
    b = c.broker(t)
    g = f"g-{uuid.uuid4().hex[:8]}"
    c.target.create_group(g, 16)
    q = {"consumerGroup": g, "topic": t, "queueId": 0}
    out = {"query_empty_queue": name(b.call(Q.QUERY_CONSUMER_OFFSET, q).code)}
    b.send_message(t, b"x", queue_id=0)
    wait_for(lambda: max_offset(b, t, 0) >= 1, 5)
    r = b.call(Q.QUERY_CONSUMER_OFFSET, q)
    out["query_new_group"] = [name(r.code), r.ext_fields.get("offset")]
    r = b.call(Q.QUERY_CONSUMER_OFFSET, {**q, "setZeroIfNotFound": False})
    out["query_no_zero"] = name(r.code)
    out["update"] = name(b.call(Q.UPDATE_CONSUMER_OFFSET, {**q, "commitOffset": 1}).code)
    r = b.call(Q.QUERY_CONSUMER_OFFSET, q)
    out["query_after_update"] = [name(r.code), r.ext_fields.get("offset")]
    never = {**q, "consumerGroup": f"never-{uuid.uuid4().hex[:8]}", "commitOffset": 1}
    out["update_never_created_group"] = name(b.call(Q.UPDATE_CONSUMER_OFFSET, never).code)
    out["update_unknown_topic"] = name(
        b.call(
            Q.UPDATE_CONSUMER_OFFSET, {**q, "topic": f"nope-{uuid.uuid4().hex[:6]}", "commitOffset": 1}
        ).code
    )
    b.pull(t, 0, 1, group=g, sys_flag=0x5, commit_offset=0)
    out["after_pull_with_commit_flag"] = b.call(Q.QUERY_CONSUMER_OFFSET, q).ext_fields.get("offset")
    return out


@scenario
def clients(c: Session) -> dict:
    t = c.topic(4)
    b = c.broker(t)
    g = f"g-{uuid.uuid4().hex[:8]}"
    cid = f"127.0.0.1@{uuid.uuid4().hex[:6]}"
    hb = b.heartbeat(cid, consumer_group=g, topic=t)
    lst = b.call(Q.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": g})
    conn = b.call(Q.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": g})
    conn_doc = fastjson.loads(conn.body) if conn.code == R.SUCCESS else {}
    unreg = b.call(Q.UNREGISTER_CLIENT, {"clientID": cid, "consumerGroup": g})
    after = b.call(Q.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": g})
    retry_route = c.ns.call(Q.GET_ROUTEINFO_BY_TOPIC, {"topic": f"%RETRY%{g}"})
    return {
        "heartbeat": name(hb.code),
        "list": [name(lst.code), json.loads(lst.body).get("consumerIdList") == [cid] if lst.body else None],
        "connection": name(conn.code),
        "connection.keys": sorted(conn_doc),
        "unregister": name(unreg.code),
        "list_after": name(after.code),
        "retry_topic_routed": name(retry_route.code),
    }


@scenario
def send_back_retry_dlq(c: Session) -> dict:
    t = c.topic(4)
    b = c.broker(t)
    g = f"g-{uuid.uuid4().hex[:8]}"
    c.target.create_group(g, 16)
    b.heartbeat(f"127.0.0.1@{uuid.uuid4().hex[:6]}", consumer_group=g, topic=t)
    b.send_message(t, b"fail", queue_id=0, properties={"UNIQ_KEY": uuid.uuid4().hex.upper(), "TAGS": "T"})
    wait_for(lambda: max_offset(b, t, 0) >= 1, 5)
    row = pull_found(b, t, 0, 0, group=g)[0]
    back = b.call(Q.CONSUMER_SEND_MSG_BACK, {"offset": row["commitlog_offset"], "group": g, "delayLevel": 2,
                                             "originMsgId": row["message_id"], "originTopic": t,
                                             "maxReconsumeTimes": 1})  # fmt: skip
    retry = f"%RETRY%{g}"
    arrived = wait_for(lambda: max_offset(b, retry, 0) >= 1, 20)
    out: dict[str, Any] = {"send_back": name(back.code), "retry_arrived": arrived}
    if arrived:
        again = pull_found(b, retry, 0, 0, group=g)[0]
        props = again["raw_properties"]
        out["retry.reconsume_times"] = again["reconsume_times"]
        out["retry.same_id"] = again["message_id"] == row["message_id"]
        out["retry.has_RETRY_TOPIC"] = f"RETRY_TOPIC\x01{t}\x02" in props
        out["retry.has_ORIGIN_MESSAGE_ID"] = "ORIGIN_MESSAGE_ID\x01" in props
        out["retry.tags"] = again["tags"]
        back2 = b.call(Q.CONSUMER_SEND_MSG_BACK, {"offset": again["commitlog_offset"], "group": g, "delayLevel": 0,
                                                  "originMsgId": row["message_id"], "originTopic": t,
                                                  "maxReconsumeTimes": 1})  # fmt: skip
        out["send_back_2"] = name(back2.code)
        print(f"{c.target.name} send_back_2: {back2.code} {back2.remark}")
        dlq = f"%DLQ%{g}"
        out["dlq_arrived"] = wait_for(lambda: max_offset(b, dlq, 0) >= 1, 20)
        if out["dlq_arrived"]:
            dead = pull_found(b, dlq, 0, 0, group=g)[0]
            out["dlq.reconsume_times"] = dead["reconsume_times"]
            out["dlq.body"] = dead["body"].decode()
    bad = b.call(Q.CONSUMER_SEND_MSG_BACK, {"offset": 1 << 50, "group": g, "delayLevel": 0})
    out["unknown_offset"] = name(bad.code)
    return out


@scenario
def delayed(c: Session) -> dict:
    t = c.topic(4)
    b = c.broker(t)
    t0 = time.monotonic()
    r = b.send_message(t, b"later", queue_id=1, properties={"DELAY": "3", "WAIT": "true"})  # 2 s here
    invisible = max_offset(b, t, 1) == 0
    arrived = wait_for(lambda: max_offset(b, t, 1) == 1, 20)
    took = time.monotonic() - t0
    row = (pull_found(b, t, 1, 0) or [{}])[0] if arrived else {}
    return {
        "code": name(r.code),
        "invisible_at_first": invisible,
        "arrived": arrived,
        "after_about_2s": 1.5 <= took <= 8,
        "body": row.get("body", b"").decode(),
        "has_DELAY_property": "DELAY\x01" in row.get("raw_properties", ""),
    }


@scenario
def transactions(c: Session) -> dict:
    t = c.topic(4)
    b = c.broker(t)
    out = {}
    for kind, flag in (("commit", 8), ("rollback", 12)):
        props = {"TRAN_MSG": "true", "PGROUP": "tx-g", "UNIQ_KEY": uuid.uuid4().hex.upper(), "WAIT": "true"}
        r = b.send_message(t, kind.encode(), queue_id=0 if kind == "commit" else 1, properties=props, sys_flag=0x4,
                           group="tx-g")  # fmt: skip
        out[f"{kind}.send"] = name(r.code)
        out[f"{kind}.invisible"] = max_offset(b, t, 0 if kind == "commit" else 1) == 0
        ext = {"producerGroup": "tx-g", "tranStateTableOffset": r.ext_fields["queueOffset"],
               "commitLogOffset": decode_offset_message_id(r.ext_fields["msgId"]).commit_log_offset,
               "commitOrRollback": flag, "msgId": props["UNIQ_KEY"], "transactionId": r.ext_fields.get("transactionId"),
               "fromTransactionCheck": False}  # fmt: skip
        b.send(Q.END_TRANSACTION, ext, oneway=True)
    out["commit.visible"] = wait_for(lambda: max_offset(b, t, 0) == 1, 10)
    time.sleep(1)
    out["rollback.still_invisible"] = max_offset(b, t, 1) == 0
    if out["commit.visible"]:
        row = pull_found(b, t, 0, 0)[0]
        out["commit.sysflag"] = row["sysflag"]
        out["commit.body"] = row["body"].decode()
    return out


@scenario
def admin(c: Session) -> dict:
    t = c.topic(4)
    b = c.broker(t)
    b.send_message(t, b"x", queue_id=2)
    wait_for(lambda: max_offset(b, t, 2) >= 1, 5)
    stats = b.call(Q.GET_TOPIC_STATS_INFO, {"topic": t})
    doc = fastjson.loads(stats.body)
    q2 = next(v for k, v in doc["offsetTable"].items() if dict(k)["queueId"] == 2)
    g = f"g-{uuid.uuid4().hex[:8]}"
    c.target.create_group(g, 16)
    b.call(Q.UPDATE_CONSUMER_OFFSET, {"consumerGroup": g, "topic": t, "queueId": 2, "commitOffset": 0})
    cs = b.call(Q.GET_CONSUME_STATS, {"consumerGroup": g, "topic": t})
    cdoc = fastjson.loads(cs.body) if cs.code == R.SUCCESS else {}
    entry = next((v for k, v in cdoc.get("offsetTable", {}).items() if dict(k)["queueId"] == 2), {})
    who = b.call(Q.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": t})
    cfg = b.call(Q.GET_TOPIC_CONFIG, {"topic": t})
    cfg_doc = fastjson.loads(cfg.body) if cfg.code == R.SUCCESS else {}
    kv = b.call(Q.GET_BROKER_RUNTIME_INFO)
    table = fastjson.loads(kv.body).get("table", {}) if kv.code == R.SUCCESS else {}
    return {
        "topic_stats": name(stats.code),
        "topic_stats.keys": sorted(doc),
        "topic_stats.queues": len(doc["offsetTable"]),
        "topic_stats.q2": sorted(q2),
        "topic_stats.q2.max": q2["maxOffset"],
        "consume_stats": name(cs.code),
        "consume_stats.entry_keys": sorted(entry),
        "consume_stats.offsets": [entry.get("brokerOffset"), entry.get("consumerOffset")],
        "consume_by_who": [
            name(who.code),
            g in json.loads(who.body).get("groupList", []) if who.body else None,
        ],
        "topic_config": name(cfg.code),
        "topic_config.queues": [
            cfg_doc.get("readQueueNums"),
            cfg_doc.get("writeQueueNums"),
            cfg_doc.get("perm"),
        ],
        "runtime_info": name(kv.code),
        "runtime_info.has_clusterList_keys": all(k in table for k in CLUSTER_LIST_KEYS),
        "cluster_info": name(c.ns.call(Q.GET_BROKER_CLUSTER_INFO).code),
        "topic_list_has_topic": t in TopicListCache.get(c),
    }


# What `mqadmin clusterList` (5.x) reads from GET_BROKER_RUNTIME_INFO.
CLUSTER_LIST_KEYS = ("putTps", "getTransferredTps", "brokerVersionDesc", "earliestMessageTimeStamp",
                     "commitLogDiskRatio", "pageCacheLockTimeMills")  # fmt: skip


class TopicListCache:
    @staticmethod
    def get(c: Session) -> list[str]:
        r = c.ns.call(Q.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        return list(fastjson.loads(r.body).get("topicList", []))


_SQL = (
    "a SQL92 subscription that does not parse: the real broker answers the pull SUCCESS (its filter falls back "
    "without telling the client); the emulator refuses it with SUBSCRIPTION_PARSE_FAILED so the mistake is seen"
)
_CAP = (
    "a real broker returns at most 32 messages per pull from page cache (maxTransferCountOnMessageInMemory); the "
    "emulator honours maxMsgNums up to 32768 (and 15 MiB of records), which Java clients handle (they ask for 32 or fewer by default) "
    "and which spares readers that ask for more a round trip per 32 messages; `serve --max-transfer-count 32` "
    "answers as a real broker does"
)
_GROUP = (
    "the real 5.x broker refuses an offset commit for a group never created (no pull, heartbeat or updateSubGroup "
    "yet); the emulator creates groups on first use of any kind, as its gRPC UpdateOffset does"
)
_V4 = "RocketMQ 4.9.x behaviour; the emulator follows 5.x here (as RocketMQ 5.5.0 answers)"

_GET = (
    "ACL 2.0 asks the Get action for GET_MAX_OFFSET (and the other offset lookups annotated with Action.GET), "
    "which a user granted SUB only (as plain_acl.yml migrated to 5.x gives) lacks; the emulator's ACL has PUB "
    'and SUB only (docs/design.md, "Security") and lets SUB on the topic read its offsets, as RocketMQ 4.x does'
)
_ACL1 = (
    "RocketMQ 4.9.x behaviour (ACL 1.0: the AclException of its PlainPermissionManager is answered SYSTEM_ERROR, "
    "the exception text in the remark); the emulator answers NO_PERMISSION, as RocketMQ 5.5.0 (ACL 2.0) does"
)
_ACL1_GET = (
    "RocketMQ 4.9.x behaviour (ACL 1.0 checks only the signature for GET_MAX_OFFSET); the emulator asks SUB "
    "on the topic, and RocketMQ 5.5.0 refuses it too (it asks the Get action)"
)
_ACL1_REFUSED = (
    "send.sub", "send.unknown_key", "send.unsigned", "send.wrong_secret", "pull.pub", "pull.unknown_key",
    "pull.unsigned", "pull.wrong_secret", "max_offset.unsigned", "create_topic.pub", "create_topic.unsigned",
)  # fmt: skip

# Per real version ("5", "4") and scenario: observation → (emulator, real, why). The "acl_refusals" entries are
# those of tests/real/conformance_acl.py (run by test_conformance_acl.py against brokers with an ACL).
DEVIATIONS: dict[str, Deviations] = {
    "5": {
        "pull_statuses": {"sql92_bad": ("SUBSCRIPTION_PARSE_FAILED", "SUCCESS", _SQL)},
        "consumer_offsets": {
            "update_never_created_group": ("SUCCESS", "SUBSCRIPTION_GROUP_NOT_EXIST", _GROUP)
        },
        "pull_batch_cap": {"count": (40, 32, _CAP), "nextBeginOffset": (40, 32, _CAP)},
        "acl_refusals": {"max_offset.sub": ("SUCCESS", "NO_PERMISSION", _GET)},
    },
    "4": {
        "acl_refusals": {
            **{key: ("NO_PERMISSION", "SYSTEM_ERROR", _ACL1) for key in _ACL1_REFUSED},
            "max_offset.pub": ("NO_PERMISSION", "SUCCESS", _ACL1_GET),
        },
        "route_shape": {
            "brokerData.keys": (
                ["brokerAddrs", "brokerName", "cluster", "enableActingMaster"],
                ["brokerAddrs", "brokerName", "cluster"],
                _V4 + " (BrokerData.enableActingMaster is a 5.x field)",
            )
        },
        "send_single": {
            "ext_keys": (
                ["MSG_REGION", "TRACE_ON", "msgId", "queueId", "queueOffset", "transactionId"],
                ["MSG_REGION", "TRACE_ON", "msgId", "queueId", "queueOffset"],
                _V4 + " (5.x answers every send with transactionId)",
            ),
            "pulled.property_names": (
                ["CLUSTER", "KEYS", "MSG_REGION", "TAGS", "TRACE_ON", "UNIQ_KEY", "WAIT"],
                ["CLUSTER", "KEYS", "TAGS", "UNIQ_KEY"],
                _V4 + " (5.x stores WAIT, MSG_REGION and TRACE_ON with the message)",
            ),
        },
        "send_refusals": {
            "bad_topic_name": ("INVALID_PARAMETER", "SYSTEM_ERROR", _V4),
            "queue_out_of_range": ("INVALID_PARAMETER", "SYSTEM_ERROR", _V4),
            "empty_body": ("SYSTEM_ERROR", "SUCCESS", _V4 + " (the 5.x store refuses an empty body)"),
            "batch_to_retry_topic": (
                "MESSAGE_ILLEGAL",
                "SUCCESS",
                _V4 + " (5.x refuses batches to retry topics)",
            ),
            "batch_over_4_mib": (
                "SYSTEM_ERROR",
                "MESSAGE_ILLEGAL",
                _V4 + " (both refuse it; 5.x as SYSTEM_ERROR)",
            ),
        },
        "pull_statuses": {
            "bad_queue": ("INVALID_PARAMETER", "SYSTEM_ERROR", _V4),
            "sql92_bad": ("SUBSCRIPTION_PARSE_FAILED", "SUCCESS", _SQL),
        },
        "pull_batch_cap": {"count": (40, 32, _CAP), "nextBeginOffset": (40, 32, _CAP)},
        "offsets_and_time": {
            "search_after": (
                "3",
                "2",
                _V4 + " (a time after the last message: 4.x answers the last offset, 5.x the max)",
            )
        },
        "consumer_offsets": {
            "query_empty_queue": ("QUERY_NOT_FOUND", "SUCCESS", _V4),
            "query_no_zero": (
                "QUERY_NOT_FOUND",
                "SUCCESS",
                _V4 + " (setZeroIfNotFound is a 5.x header field)",
            ),
            "update_unknown_topic": ("TOPIC_NOT_EXIST", "SUCCESS", _V4),
        },
        "admin": {
            "consume_stats.entry_keys": (
                ["brokerOffset", "consumerOffset", "lastTimestamp", "pullOffset"],
                ["brokerOffset", "consumerOffset", "lastTimestamp"],
                _V4 + " (OffsetWrapper.pullOffset is a 5.x field)",
            ),
            "runtime_info.has_clusterList_keys": (
                True,
                False,
                _V4 + " (5.x mqadmin clusterList reads more keys)",
            ),
            "topic_config": (
                "SUCCESS",
                "REQUEST_CODE_NOT_SUPPORTED",
                _V4 + " (GET_TOPIC_CONFIG is a 5.x code)",
            ),
            "topic_config.queues": ([4, 4, 6], [None, None, None], _V4 + " (GET_TOPIC_CONFIG is a 5.x code)"),
            "topic_stats.keys": (["offsetTable", "topicPutTps"], ["offsetTable"], _V4),
        },
    },
}
