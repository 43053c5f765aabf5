"""Apache's Java client and mqadmin against real RocketMQ 5.x and 4.9.x (remoting, through the name
server): the drivers of tests/real/java/ produce in every mode and read back with a lite pull consumer
and a push consumer, and mqadmin's views agree. These same drivers are what the emulator's remoting
front end is checked with, so they are first shown to behave as expected against the real thing."""

from __future__ import annotations

import base64
import uuid
from collections import defaultdict

import pytest

from tests.real import realcluster as rc

pytestmark = [pytest.mark.realbroker, pytest.mark.timeout(900)]


def new_topic(cluster: rc.Cluster, prefix: str, queues: int = 8) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    cluster.create_topics([(name, queues, None)])
    return name


def expected(i: int) -> dict:
    return {
        "bodyText": f"body-{i}",
        "tags": "Tag" + "ABC"[i % 3],
        "keys": f"k-{i}",
        "properties": {"index": str(i)},
    }


def sent_ok(lines: list[dict], n: int) -> dict[str, dict]:
    sends = [x for x in lines if "status" in x]
    assert len(sends) == n, lines[-3:]
    assert {x["status"] for x in sends} == {"SEND_OK"}
    by_id = {x["msgId"]: x for x in sends}
    assert len(by_id) == n, "message ids are not unique"
    return by_id


def pulled(lines: list[dict]) -> list[dict]:
    done = lines[-1]
    assert done.get("event") == "done", lines[-3:]
    return [x for x in lines if "event" not in x]


def test_produce_single_batch_orderly_and_lite_pull_them_all(real_cluster: rc.Cluster):
    c = real_cluster
    topic = new_topic(c, "java-modes")
    single = sent_ok(c.java_driver("Produce", topic, "60", "single"), 60)
    batch = sent_ok(c.java_driver("Produce", topic, "64", "batch", "16"), 64)
    orderly = sent_ok(c.java_driver("Produce", topic, "40", "orderly", "4"), 40)
    sends = {**single, **batch, **orderly}
    assert len(sends) == 164

    got = pulled(c.java_driver("LitePull", topic, f"lp-{topic}", "164", "90"))
    assert len(got) == 164, "lite pull read a different number of messages"
    by_id = {m["msgId"]: m for m in got}
    assert set(by_id) == set(sends)
    for mid, m in by_id.items():
        s = sends[mid]
        i = s["i"]
        assert {k: m[k] for k in ("bodyText", "tags", "keys", "properties")} == expected(i)
        assert (m["broker"], m["queueId"], m["queueOffset"]) == (s["broker"], s["queueId"], s["queueOffset"])
        assert base64.b64decode(m["body"]) == f"body-{i}".encode()
        assert m["reconsumeTimes"] == 0

    # Orderly: each message group on one queue, in the order sent.
    groups: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    for mid, s in orderly.items():
        groups[s["group"]].append((s["i"], s["queueId"], by_id[mid]["queueOffset"]))
    for g, items in groups.items():
        assert len({q for _, q, _ in items}) == 1, g
        assert [o for _, _, o in sorted(items)] == sorted(o for _, _, o in items), g

    # mqadmin: the topic is listed, routed to broker-a with 8 queues, and counted.
    out_list, out_route, out_status = c.mqadmin_batch(
        [["topicList"], ["topicRoute", "-t", topic], ["topicStatus", "-t", topic]]
    )
    assert topic in out_list.split()
    assert '"brokerName":"broker-a"' in out_route and '"readQueueNums":8' in out_route
    assert rc.topic_status_total(out_status) == 164

    # The lite pull consumer committed its offsets: consumerProgress shows no lag.
    progress = c.mqadmin("consumerProgress", "-g", f"lp-{topic}")
    assert rc.diff_total(progress) == 0, progress

    # queryMsgByOffset finds one message where the producer said it went.
    s = next(iter(single.values()))
    out = c.mqadmin(
        "queryMsgByOffset",
        "-t",
        topic,
        "-b",
        s["broker"],
        "-i",
        str(s["queueId"]),
        "-o",
        str(s["queueOffset"]),
    )
    assert s["msgId"] in out or f"body-{s['i']}" in out, out


def test_delayed_messages_arrive_after_their_delay(real_cluster: rc.Cluster):
    c = real_cluster
    topic = new_topic(c, "java-delay", 4)
    # Level 3 of the clusters' messageDelayLevel ("1s 1s 2s ...") is 2 s.
    sends = sent_ok(c.java_driver("Produce", topic, "6", "delay", "3"), 6)
    got = pulled(c.java_driver("LitePull", topic, f"lp-{topic}", "6", "60"))
    assert {m["msgId"] for m in got} == set(sends)
    for m in got:
        assert m["storeTimestamp"] - m["bornTimestamp"] >= 1500, m


def test_transactions_commit_rollback_and_check_back(real_cluster: rc.Cluster):
    c = real_cluster
    committed, rolled_back, checked = (
        new_topic(c, f"java-tx-{k}", 4) for k in ("commit", "rollback", "check")
    )
    commit = sent_ok(c.java_driver("Produce", committed, "5", "tx-commit"), 5)
    assert {x["localState"] for x in commit.values()} == {"COMMIT_MESSAGE"}
    rollback = sent_ok(c.java_driver("Produce", rolled_back, "5", "tx-rollback"), 5)
    assert {x["localState"] for x in rollback.values()} == {"ROLLBACK_MESSAGE"}
    lines = c.java_driver("Produce", checked, "3", "tx-check", "60", timeout=120)
    check = sent_ok(lines, 3)
    checks = [x for x in lines if x.get("event") == "check"]
    assert {x["msgId"] for x in checks} == set(check), "the broker did not check back every half message"

    assert {
        m["msgId"] for m in pulled(c.java_driver("LitePull", committed, f"lp-{committed}", "5", "60"))
    } == set(commit)
    assert {
        m["msgId"] for m in pulled(c.java_driver("LitePull", checked, f"lp-{checked}", "3", "60"))
    } == set(check)
    # Nothing of the rolled-back transaction becomes visible.
    gone = pulled(c.java_driver("LitePull", rolled_back, f"lp-{rolled_back}", "1", "5"))
    assert gone == []


def test_push_consumer_reconsume_later_retries_then_dead_letters(real_cluster: rc.Cluster):
    c = real_cluster
    topic = new_topic(c, "java-retry", 4)
    group = f"push-{topic}"
    sends = sent_ok(c.java_driver("Produce", topic, "3", "single"), 3)
    max_reconsume = 1
    lines = c.java_driver(
        "PushConsume", topic, group, str(max_reconsume), str(3 * (max_reconsume + 1)), "120"
    )
    deliveries = [x for x in lines if "event" not in x]
    seen: dict[str, list[int]] = defaultdict(list)
    for d in deliveries:
        assert d["topic"] == topic  # the client restores the original topic of a retried message
        seen[d["msgId"]].append(d["reconsumeTimes"])
    assert set(seen) == set(sends)
    for mid, times in seen.items():
        assert sorted(times) == list(range(max_reconsume + 1)), (mid, times)

    dlq = pulled(c.java_driver("LitePull", f"%DLQ%{group}", f"dlq-{group}", "3", "60"))
    assert {m["msgId"] for m in dlq} == set(sends)
    assert all(m["realTopic"] == topic or m["realTopic"] is None for m in dlq)
