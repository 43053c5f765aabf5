"""The connector over `nameServer` against a real RocketMQ 5.x cluster of two masters (broker-a, broker-b),
4 queues per topic on each: what a one-broker cluster cannot show.

- write (also against the emulator's two brokers, driven the same way): one task's 8,000 rows land on the
  8 queues of both brokers; a batch read gives them back with each row's broker; an availableNow stream of a `consumerGroup` commits every queue's
  offset to that queue's own broker (`mqadmin consumerProgress`: no lag on any of the 8);
- a broker killed (`kill -9`) mid-write: the write succeeds, its later sends go to the other broker, and
  once the killed broker is back every row is there (at-least-once: only requests in flight when it
  died may come twice).
"""

from __future__ import annotations

import time
import uuid

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from tests.real import realcluster as rc
from tests.support.reading import await_done, reader
from tests.support.targets import NameServer
from tests.support.writing import bodies, read_topic, spark_thread

pytestmark = [pytest.mark.realbroker, pytest.mark.timeout(600)]

QUEUES = 4  # on each broker


def what(cluster: rc.Cluster) -> str:
    return "emulator" if hasattr(cluster, "emulator") else f"RocketMQ {cluster.dist.version}"


def new_topic(cluster: rc.Cluster) -> str:
    topic = f"two-brokers-{uuid.uuid4().hex[:10]}"
    cluster.update_topic(topic, QUEUES)
    return topic


def stored(cluster: rc.Cluster, topic: str) -> dict[tuple[str, int], int]:
    """(broker, queue id) → max offset, from the brokers that answer (the connector's client)."""
    from connector.clients import get_client
    from connector.config import ClientConfig

    client = get_client(ClientConfig(name_server=cluster.namesrv))
    out = {}
    for q in client.route(topic):
        try:
            out[(q.queue.broker, q.queue.queue_id)] = client.max_offset(q, timeout_ms=2000)
        except Exception:  # a broker that is down answers nothing
            continue
    return out


def on_broker(counts: dict[tuple[str, int], int], broker: str) -> int:
    return sum(n for (b, _), n in counts.items() if b == broker)


@pytest.fixture(params=["rocketmq5", "emulator"])
def any_two_brokers(request: pytest.FixtureRequest) -> rc.Cluster:
    """The real 2-broker cluster, then the emulator's two brokers driven the same way (mqadmin included)."""
    return request.getfixturevalue("two_brokers" if request.param == "rocketmq5" else "emulator_two_brokers")


def test_queues_of_both_brokers_written_read_and_committed(
    spark: SparkSession, any_two_brokers: rc.Cluster
) -> None:
    cluster = any_two_brokers
    topic, group, n = new_topic(cluster), f"two-{uuid.uuid4().hex[:8]}", 8_000
    df = spark.range(0, n, numPartitions=1).select(F.format_string("r-%05d", "id").alias("body"))
    df.write.format("rocketmq").option("nameServer", cluster.namesrv).option("topic", topic).mode(
        "append"
    ).save()
    # 1,000 per queue, unless a cold broker refused a request as busy (BrokerFastFailure's SYSTEM_BUSY) and
    # the retry went to the other broker, as RocketMQ's producer retries do
    deadline = time.monotonic() + 30
    counts = stored(cluster, topic)
    while sum(counts.values()) < n and time.monotonic() < deadline:
        time.sleep(0.2)  # the brokers dispatch to their consume queues asynchronously
        counts = stored(cluster, topic)
    assert set(counts) == {(b, q) for b in cluster.broker_names for q in range(QUEUES)}
    assert sum(counts.values()) == n and min(on_broker(counts, b) for b in cluster.broker_names) >= n // 4, (
        counts
    )

    rows = (
        reader(spark, NameServer(cluster.namesrv), topic)
        .select("body", "brokerName", "queueId", "queueOffset")
        .toArrow()
        .to_pylist()
    )
    assert sorted(r["body"] for r in rows) == [f"r-{i:05d}".encode() for i in range(n)]
    assert {(r["brokerName"], r["queueId"], r["queueOffset"]) for r in rows} == {
        (b, q, o) for (b, q), count in counts.items() for o in range(count)
    }

    query = (
        reader(
            spark,
            NameServer(cluster.namesrv),
            topic,
            stream=True,
            consumerGroup=group,
            startingOffsets="earliest",
        )
        .writeStream.format("noop")
        .trigger(availableNow=True)
        .start()
    )
    await_done(query, 180)
    assert query.exception() is None
    assert sum(p["numInputRows"] for p in query.recentProgress) == n
    # an availableNow query commits its last batch's end offsets when it stops
    deadline = time.monotonic() + 60
    progress = cluster.consumer_progress(group, topic)
    committed = {k: (v, v) for k, v in counts.items()}
    while time.monotonic() < deadline and progress != committed:
        time.sleep(1)
        progress = cluster.consumer_progress(group, topic)
    assert progress == committed, progress
    rc.evidence(
        f"{what(cluster)} (2 brokers): {n} rows written over {len(counts)} queues of "
        f"{cluster.broker_names} ({sorted(counts.values())}), read back exactly; consumerProgress of {group}: "
        f"no lag on {len(progress)} queues"
    )


def test_a_broker_killed_mid_write_moves_sends_to_the_other_broker(
    spark: SparkSession, two_brokers: rc.Cluster
) -> None:
    cluster = two_brokers
    topic, n = new_topic(cluster), 200_000
    batch, tasks = 20, 2
    df = spark.range(0, n, numPartitions=tasks).select(F.format_string("k-%06d", "id").alias("body"))
    errors: list[BaseException] = []

    def write() -> None:
        (
            df.write.format("rocketmq")
            .option("nameServer", cluster.namesrv)
            .option("topic", topic)
            .option("batchSize", str(batch))
            .option("maxInFlightRequests", "1")
            .option("sendMsgTimeoutMs", "10000")
            .mode("append")
            .save()
        )

    writer = spark_thread(spark, write, errors)
    restarted = False
    try:
        deadline = time.monotonic() + 120
        while on_broker(stored(cluster, topic), "broker-b") < 5_000:
            assert writer.is_alive() and time.monotonic() < deadline, (
                f"the write ended before the kill: {[str(e)[:3000] for e in errors]}"
            )
            time.sleep(0.01)
        cluster.stop_broker(1, kill=True)
        at_kill = on_broker(stored(cluster, topic), "broker-a")
        writer.join(300)
        assert not writer.is_alive(), "the write did not finish within 300 s of the kill"
        assert not errors, errors
        assert at_kill < n * 0.6, f"the kill came too late to be mid-write: broker-a held {at_kill}"
        cluster.start_broker(1)
        restarted = True
    finally:
        writer.join(60)
        if not restarted and all(p.name != "broker-b" for p in cluster.processes):
            cluster.start_broker(1)
    deadline = time.monotonic() + 60
    counts = stored(cluster, topic)
    while sum(counts.values()) < n and time.monotonic() < deadline:
        time.sleep(0.5)  # the restarted broker recovers its consume queues from the commit log
        counts = stored(cluster, topic)
    got = bodies(read_topic(NameServer(cluster.namesrv), topic))
    assert set(got) == {f"k-{i:06d}".encode() for i in range(n)}, f"{n - len(set(got))} rows missing"
    duplicates = len(got) - n
    # a request broker-b had stored but not answered when it died is sent again to broker-a
    assert 0 <= duplicates <= tasks * batch, duplicates
    on_a, on_b = on_broker(counts, "broker-a"), on_broker(counts, "broker-b")
    assert on_a + on_b == len(got)
    assert on_b < n * 0.4 < on_a, f"the sends after the kill did not move to broker-a: a {on_a}, b {on_b}"
    rc.evidence(
        f"RocketMQ {cluster.dist.version} (2 brokers): broker-b killed mid-write of {n} rows (broker-a then held "
        f"{at_kill}): write succeeded, {on_a} on broker-a and {on_b} on broker-b after its restart, "
        f"{duplicates} sent twice"
    )
