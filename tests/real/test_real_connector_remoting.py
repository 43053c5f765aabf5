"""The connector over `nameServer` (RocketMQ's remoting protocol) against real RocketMQ 5.x and 4.9.x brokers.

- write then read back: 10,000 rows with tags, keys and properties through the sink land 1,250 on each
  of the 8 queues (the writer spreads a task's rows over the queues) and a batch read gives them back
  exactly, column by column; a tag filter and a time window read the right subsets;
- a streaming read (examples/streaming_etl.py, rocketmq → parquet with a checkpoint) killed with
  `kill -9` mid-stream and restarted from its checkpoint writes exactly the input, once;
- the broker restarted during a streaming read: the query rides through (pulls retried within
  `pullTimeoutMs`) and its parquet output equals the input;
- the group offsets the stream commits (UPDATE_CONSUMER_OFFSET) are what `mqadmin consumerProgress`
  shows, with no lag left.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from tests.real import realcluster as rc

pytestmark = [pytest.mark.realbroker, pytest.mark.timeout(900)]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ETL = os.path.join(ROOT, "examples", "streaming_etl.py")
N_ROWS = 10_000
QUEUES = 8


@pytest.fixture(params=["5", "4"], ids=lambda v: f"rocketmq{v}")
def real_cluster(request: pytest.FixtureRequest) -> rc.Cluster:
    """Each real cluster in turn (the emulator's remoting front end is covered by the suites run over both
    protocols; this module restarts real broker JVMs)."""
    return request.getfixturevalue(f"rocketmq{request.param}")


def new_topic(cluster: rc.Cluster, queues: int = QUEUES) -> str:
    name = f"remoting-{uuid.uuid4().hex[:10]}"
    cluster.create_topics([(name, queues, None)])
    return name


def rows_df(spark: SparkSession, n: int, prefix: str):
    return spark.range(0, n, numPartitions=1).select(
        F.format_string(f"{prefix}-%05d", "id").alias("body"),
        F.concat(F.lit("Tag"), F.substring(F.lit("ABC"), (F.col("id") % 3 + 1).cast("int"), 1)).alias("tags"),
        F.array(F.format_string("k-%d", "id"), F.lit("common")).alias("keys"),
        F.create_map(F.lit("index"), F.col("id").cast("string")).alias("properties"),
    )


def read(spark: SparkSession, cluster: rc.Cluster, topic: str, **options: str):
    r = spark.read.format("rocketmq").option("nameServer", cluster.namesrv).option("topic", topic)
    return r.options(**options).load()


def test_write_then_read_back_exactly(spark: SparkSession, real_cluster: rc.Cluster) -> None:
    topic = new_topic(real_cluster)
    df = rows_df(spark, N_ROWS, "row")
    started_ms = int(time.time() * 1000)
    df.write.format("rocketmq").option("nameServer", real_cluster.namesrv).option("topic", topic).mode(
        "append"
    ).save()
    # one task wrote 10,000 rows: spread over the 8 queues, 1,250 each
    from connector.clients import get_client
    from connector.config import ClientConfig

    client = get_client(ClientConfig(name_server=real_cluster.namesrv))
    queues = client.route(topic)
    deadline = time.monotonic() + 30
    while sum(client.max_offset(q) for q in queues) < N_ROWS and time.monotonic() < deadline:
        time.sleep(0.2)  # the broker dispatches to its consume queues asynchronously
    per_queue = {q.queue_id: client.max_offset(q) for q in queues}
    assert per_queue == dict.fromkeys(range(QUEUES), N_ROWS // QUEUES), per_queue

    got = read(spark, real_cluster, topic).toArrow()
    assert got.num_rows == N_ROWS
    rows = sorted(got.to_pylist(), key=lambda r: r["body"])
    assert [r["body"] for r in rows] == [f"row-{i:05d}".encode() for i in range(N_ROWS)]
    for i, r in enumerate(rows):
        assert r["tags"] == "Tag" + "ABC"[i % 3]
        assert r["keys"] == [f"k-{i}", "common"]
        assert dict(r["properties"]) == {"index": str(i)}
        assert r["topic"] == topic and r["brokerName"] == rc.BROKER_NAME
        assert r["reconsumeTimes"] == 0 and r["messageGroup"] is None and r["deliveryTimestamp"] is None
        assert r["storeTimestamp"].timestamp() * 1000 >= started_ms - 1000
    assert len({r["messageId"] for r in rows}) == N_ROWS
    assert {(r["queueId"], r["queueOffset"]) for r in rows} == {
        (q, o) for q in range(QUEUES) for o in range(N_ROWS // QUEUES)
    }

    tagged = read(spark, real_cluster, topic, filterExpression="TagB || TagC").toArrow()
    assert tagged.num_rows == sum(1 for i in range(N_ROWS) if i % 3)
    assert set(tagged.column("tags").to_pylist()) == {"TagB", "TagC"}

    # a time window: everything stored before now, nothing after
    now = int(time.time() * 1000) + 1
    assert read(spark, real_cluster, topic, endingTimestamp=str(now)).count() == N_ROWS
    assert read(spark, real_cluster, topic, startingTimestamp=str(now)).count() == 0


# ------------------------------------------------------------------------------------------ streaming
def committed_rows(output: str, columns: list[str]) -> list[dict]:
    """Rows of the parquet files the file sink committed (its `_spark_metadata` log)."""
    from tests.reliability.test_reliability_stream import committed_files

    rows: list[dict] = []
    for path in committed_files(output):
        rows += pq.read_table(path, columns=columns).to_pylist()
    return rows


def send_orders(spark: SparkSession, cluster: rc.Cluster, topic: str, n: int, run: str) -> list[str]:
    ids = [f"{run}-{i}" for i in range(n)]
    orders = spark.range(n, numPartitions=2).selectExpr(
        f"""to_json(named_struct('order_id', concat('{run}-', id), 'customer', 'c', 'amount', 10.0,
             'currency', 'EUR', 'created_at', CAST(NULL AS TIMESTAMP))) AS body"""
    )
    orders.write.format("rocketmq").option("nameServer", cluster.namesrv).option("topic", topic).mode(
        "append"
    ).save()
    return ids


def commits(checkpoint: str) -> int:
    d = os.path.join(checkpoint, "commits")
    return len([f for f in os.listdir(d) if f.isdigit()]) if os.path.isdir(d) else 0


def test_streaming_read_killed_and_restarted_from_its_checkpoint_is_exact(
    spark: SparkSession, real_cluster: rc.Cluster, tmp_path
) -> None:
    topic = new_topic(real_cluster, 4)
    expected = send_orders(spark, real_cluster, topic, 1200, "r0")  # 4 batches of 300
    output, checkpoint = str(tmp_path / "orders"), str(tmp_path / "ckpt")
    cmd = [sys.executable, ETL, "--name-server", real_cluster.namesrv, "--topic", topic, "--output", output]
    cmd += ["--checkpoint", checkpoint, "--max-messages-per-trigger", "300"]
    for run in range(2):  # killed once mid-way, then run to the end (the emulator's test kills 3 times)
        log_path = tmp_path / f"run{run}.log"
        with open(log_path, "w") as log:
            proc = subprocess.Popen(
                cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
            try:
                if run == 1:
                    assert proc.wait(300) == 0, log_path.read_text()[-4000:]
                    break
                before = commits(checkpoint)
                deadline = time.monotonic() + 240
                while (
                    commits(checkpoint) <= before + 1 and proc.poll() is None and time.monotonic() < deadline
                ):
                    time.sleep(0.1)
                assert proc.poll() is None, f"run {run} ended early:\n{log_path.read_text()[-4000:]}"
                time.sleep(0.7)  # usually mid-way through the next batch
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)
                expected += send_orders(spark, real_cluster, topic, 200, f"r{run + 1}")  # arrives while down
            finally:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(30)
    assert f"output holds {len(expected)} rows" in log_path.read_text()
    got = [r["order_id"] for r in committed_rows(output, ["order_id"])]
    assert len(got) == len(set(got)), f"{len(got) - len(set(got))} duplicated rows"
    assert set(got) == set(expected)


def test_broker_restart_mid_stream_and_group_offsets_in_consumer_progress(
    spark: SparkSession, real_cluster: rc.Cluster, tmp_path
) -> None:
    topic = new_topic(real_cluster, 4)
    group = f"spark-remoting-{uuid.uuid4().hex[:8]}"
    expected = send_orders(spark, real_cluster, topic, 1000, "a")
    output, checkpoint = str(tmp_path / "out"), str(tmp_path / "ckpt")
    df = (
        spark.readStream.format("rocketmq")
        .option("nameServer", real_cluster.namesrv)
        .option("topic", topic)
        .option("consumerGroup", group)
        .option("startingOffsets", "earliest")
        .option("pullTimeoutMs", "60000")
        .load()
    )
    query = (
        df.select(F.get_json_object(F.col("body").cast("string"), "$.order_id").alias("order_id"))
        .writeStream.format("parquet")
        .option("path", output)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="500 milliseconds")
        .start()
    )

    def wait_rows(n: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if (
                os.path.isdir(os.path.join(output, "_spark_metadata"))
                and len(committed_rows(output, ["order_id"])) >= n
            ):
                return
            assert query.isActive, f"query ended: {query.exception()}"
            time.sleep(0.5)
        raise AssertionError(f"timed out waiting for {n} rows")

    try:
        wait_rows(len(expected), 180)
        real_cluster.restart_broker()
        expected += send_orders(spark, real_cluster, topic, 1000, "b")
        wait_rows(len(expected), 240)
        assert query.isActive and query.exception() is None
        # the end offsets of the last batch are committed to the group when the next batch starts planning
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            progress = real_cluster.consumer_progress(group, topic)
            if (
                progress
                and all(b == c for b, c in progress.values())
                and sum(b for b, _ in progress.values()) == len(expected)
            ):
                break
            time.sleep(1)
    finally:
        query.stop()
    got = [r["order_id"] for r in committed_rows(output, ["order_id"])]
    assert len(got) == len(set(got)), f"{len(got) - len(set(got))} duplicated rows"
    assert set(got) == set(expected)
    progress = real_cluster.consumer_progress(group, topic)
    assert {k[1] for k in progress} == {0, 1, 2, 3}, progress
    assert all(b == c for b, c in progress.values()), f"lag left in consumerProgress: {progress}"
    assert sum(b for b, _ in progress.values()) == len(expected)
    rc.evidence(
        f"RocketMQ {real_cluster.dist.version}: consumerProgress of {group}: "
        + json.dumps({f"{b}/{q}": c for (b, q), (_, c) in sorted(progress.items())})
    )


def test_a_brokers_bounds_in_one_request_are_each_queues_bounds(real_cluster: rc.Cluster) -> None:
    """GET_TOPIC_STATS_INFO (what a stream asks at each trigger, one request per broker) gives every queue
    the min and max offset GET_MIN_OFFSET / GET_MAX_OFFSET give, on a real broker."""
    from connector.clients.remoting import RemotingClient
    from connector.config import ClientConfig
    from connector.options import parse_writer_options
    from connector.positions import fetch_bounds
    from connector.producer import Producer
    from connector.sink_rows import RowChecker

    topic = new_topic(real_cluster)
    client = RemotingClient(ClientConfig(name_server=real_cluster.namesrv))
    try:
        producer = Producer(
            parse_writer_options({"nameServer": real_cluster.namesrv, "topic": topic}), client=client
        )
        bodies = pa.record_batch([pa.array([f"b{i}".encode() for i in range(37)])], names=["body"])
        for rows in RowChecker({"body": "body"}, topic, 1 << 20).check(bodies, 0):
            producer.send(rows)
        assert producer.flush().messages == 37
        route = client.route(topic)
        expected = {q.queue: (client.min_offset(q), client.max_offset(q)) for q in route}
        assert sum(hi - lo for lo, hi in expected.values()) == 37
        for broker in {q.queue.broker for q in route}:
            queues = [q for q in route if q.queue.broker == broker]
            assert client.broker_bounds(queues) == {q.queue: expected[q.queue] for q in queues}
        assert fetch_bounds(client, route, 10_000) == expected
    finally:
        client.close()


def test_a_streams_first_commits_keep_every_queues_offset(real_cluster: rc.Cluster) -> None:
    """A real broker creates a group's offset table of a topic with a get-then-put
    (ConsumerOffsetManager.commitOffset), so parallel first commits can lose a queue's offset (1 in 30 fresh
    groups of 8 queues by hand; one CI run lost one). The stream reader's first commit to each broker goes
    one queue first: every queue of 100 fresh groups keeps its offset."""
    from connector.clients import get_client
    from connector.stream_reader import RocketMQStreamReader

    topic = new_topic(real_cluster)
    lost = {}
    for n in range(100):
        group = f"first-commit-{n}-{uuid.uuid4().hex[:6]}"
        opts = {"nameServer": real_cluster.namesrv, "topic": topic, "consumerGroup": group}
        reader = RocketMQStreamReader(opts, None)
        queues = reader._refresh_queues(missing_ok=False)
        reader._commit_group({q: 0 for q in queues})
        assert reader._committed == {q: 0 for q in queues}, "a commit failed (logged above)"
        client = get_client(reader.opts.client_config)
        got = {q: client.get_committed(group, e) for q, e in queues.items()}
        lost.update({(group, q.queue_id): v for q, v in got.items() if v != 0})
    assert lost == {}


def test_a_missing_topic_names_both_the_name_server_and_the_topic(
    spark: SparkSession, real_cluster: rc.Cluster
) -> None:
    with pytest.raises(Exception) as e:
        read(spark, real_cluster, f"missing-{uuid.uuid4().hex[:6]}").count()
    text = str(e.value)
    assert "does not exist" in text and f"name server {real_cluster.namesrv}" in text, text[-2000:]
    assert re.search(r"TOPIC_NOT_EXIST \(17\)", text), text[-2000:]


def test_message_groups_and_delayed_delivery(spark: SparkSession, real_cluster: rc.Cluster) -> None:
    """Rows of a message group land on one queue in order (read back with their messageGroup); a delayed
    row is invisible until its time (5.x: the exact time, as a timer message; 4.x: the first of the broker's
    delay levels at or after it)."""
    topic = new_topic(real_cluster)
    n, groups = 2000, 8
    df = spark.range(0, n, numPartitions=1).select(
        F.format_string("g-%05d", "id").alias("body"),
        F.format_string("group-%d", F.col("id") % groups).alias("messageGroup"),
    )
    df.write.format("rocketmq").option("nameServer", real_cluster.namesrv).option("topic", topic).mode(
        "append"
    ).save()
    # the delayed row through the producer itself (a Spark job could take longer than the delay)
    import pyarrow as pa

    from connector.clients import get_client
    from connector.config import ClientConfig
    from connector.options import parse_writer_options
    from connector.producer import Producer
    from connector.sink_rows import RowChecker

    options = parse_writer_options({"nameServer": real_cluster.namesrv, "topic": topic})
    checker = RowChecker({"body": "body", "deliveryTimestamp": "deliveryTimestamp"}, topic, 1 << 22)
    due = int(time.time() * 1000) + 4000
    batch = pa.record_batch(
        [pa.array([b"late"]), pa.array([due * 1000], pa.timestamp("us", tz="UTC"))],
        names=["body", "deliveryTimestamp"],
    )
    producer = Producer(options)
    for checked in checker.check(batch, 0):
        producer.send(checked)
    producer.flush()
    client = get_client(ClientConfig(name_server=real_cluster.namesrv))

    def bodies_now() -> set[bytes]:
        out: set[bytes] = set()
        for q in client.route(topic):
            r = client.pull(q, 0, 8192, group="delay-check")
            out.update(r.table.column("body").to_pylist())
        return out

    assert b"late" not in bodies_now(), "the delayed message is visible before its time"
    rows = read(spark, real_cluster, topic).where("body != 'late'").toArrow().to_pylist()
    by_group: dict[str, list[tuple[int, int, int]]] = {}
    for r in rows:
        by_group.setdefault(r["messageGroup"], []).append(
            (r["queueId"], r["queueOffset"], int(r["body"][2:]))
        )
    assert set(by_group) == {f"group-{g}" for g in range(groups)}
    for g, items in by_group.items():
        assert len({q for q, _, _ in items}) == 1, f"{g} spans several queues"
        assert [i for _, _, i in sorted(items)] == sorted(i for _, _, i in items), f"{g} out of order"
    deadline = time.monotonic() + 60
    while b"late" not in bodies_now():
        assert time.monotonic() < deadline, "the delayed message never became visible"
        time.sleep(0.2)
    assert time.time() * 1000 >= due - 1000  # not before its time (4.x: a delay level at or after it)
    late = read(spark, real_cluster, topic).where("body = 'late'").collect()
    if real_cluster.dist.major >= 5:
        assert int(late[0]["deliveryTimestamp"].timestamp() * 1000) // 1000 == due // 1000


def test_a_java_push_consumer_of_the_same_group_keeps_every_queue(
    spark: SparkSession, rocketmq5: rc.Cluster
) -> None:
    """The reader never joins `consumerGroup`'s rebalance: a Java DefaultMQPushConsumer of the same group
    keeps all 4 queues while a stream of that group reads and commits, so it receives every message sent
    before and after the stream ran (a phantom member would have taken half of its queues)."""
    from concurrent.futures import ThreadPoolExecutor

    cluster = rocketmq5
    topic = new_topic(cluster, 4)
    group = f"shared-{uuid.uuid4().hex[:8]}"
    half = 100
    with ThreadPoolExecutor(1) as pool:
        java = pool.submit(
            cluster.java_driver, "PushConsume", topic, group, "0", str(2 * half), "150", "CONSUME_SUCCESS",
            timeout=200,
        )  # fmt: skip
        time.sleep(8)  # the consumer starts, heartbeats and rebalances (it takes every queue)
        expected = send_orders(spark, cluster, topic, half, "before")
        query = (
            spark.readStream.format("rocketmq")
            .option("nameServer", cluster.namesrv)
            .option("topic", topic)
            .option("consumerGroup", group)
            .option("startingOffsets", "earliest")
            .load()
            .writeStream.format("memory")
            .queryName(f"shared_{uuid.uuid4().hex[:8]}")
            .trigger(availableNow=True)
            .start()
        )
        try:
            assert query.awaitTermination(180), "the availableNow stream did not finish within 180 s"
            assert query.exception() is None
            read = spark.sql(f"SELECT count(*) AS n FROM {query.name}").collect()[0]["n"]
        finally:
            query.stop()
        assert read == half
        time.sleep(3)  # past the stream's commit; Java's rebalance runs every 20 s
        expected += send_orders(spark, cluster, topic, half, "after")
        lines = java.result(timeout=200)
    got = [json.loads(m["bodyText"])["order_id"] for m in lines if "bodyText" in m]
    queues = {m["queueId"] for m in lines if "bodyText" in m}
    assert sorted(set(got)) == sorted(expected), f"the Java consumer missed {len(set(expected) - set(got))}"
    assert queues == {0, 1, 2, 3}, queues
    rc.evidence(
        f"RocketMQ {cluster.dist.version}: a Java push consumer of {group} received all {len(set(got))} messages "
        f"on queues {sorted(queues)} while a stream of the same group read and committed {read}"
    )


def test_a_real_broker_refuses_the_emulators_pull_channel_codes(real_cluster: rc.Cluster) -> None:
    """The emulator's pull channel uses request codes 50001 (BulkPull) and 50002 (SendMessage), none of Apache
    RocketMQ's: a real broker answers them REQUEST_CODE_NOT_SUPPORTED instead of mistaking them for requests
    of its own."""
    from rocketmq_protocol.extension import pb
    from rocketmq_protocol.extension.pull_channel import BULK_PULL_CODE, SEND_MESSAGE_CODE
    from rocketmq_protocol.grpc_v2 import definition_pb2 as d
    from rocketmq_protocol.grpc_v2 import service_pb2 as s
    from rocketmq_protocol.remoting.codes import ResponseCode
    from tests.support.remoting import RemotingClient

    topic = new_topic(real_cluster)
    pull = pb.BulkPullRequest(group="g", topic=topic, queue_id=0, max_messages=1).SerializeToString()
    send = s.SendMessageRequest(
        messages=[d.Message(topic=d.Resource(name=topic), body=b"x", system_properties=d.SystemProperties())]
    ).SerializeToString()
    with RemotingClient(real_cluster.broker_addr) as broker:
        for code, body in ((BULK_PULL_CODE, pull), (SEND_MESSAGE_CODE, send)):
            r = broker.call(code, {"x-mq-client-id": "c1"}, body)
            assert r.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED, (code, r.code, r.remark)
