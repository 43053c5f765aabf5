"""The connector over `nameServer` against a real RocketMQ cluster (`python -m benchmarks --real-name-server
HOST:PORT`, e.g. a cluster started by `tests/real/rocketmq.sh start`): write, raw pull → Arrow, and the
availableNow stream read → noop beside its ceiling (the same batches from memory).

The topic is created on every broker of the cluster with 8 queues (UPDATE_AND_CREATE_TOPIC, as
`mqadmin updateTopic` does); the data is written by the connector's sink over remoting.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from benchmarks import spark_reads
from benchmarks.raw_throughput import READ_TASK_PULL, client_pull
from benchmarks.table import Row, read_row

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

QUEUES = 8


def create_topic(name_server: str, topic: str, queues: int = QUEUES) -> None:
    """UPDATE_AND_CREATE_TOPIC on every master broker of the cluster (found through TBW102's route)."""
    from connector.clients import get_client
    from connector.clients.remoting import RemotingClient
    from connector.config import ClientConfig
    from rocketmq_protocol.remoting.codes import RequestCode
    from rocketmq_protocol.remoting.headers import CreateTopicRequestHeader

    client = get_client(ClientConfig(name_server=name_server))
    assert isinstance(client, RemotingClient)
    brokers = {e.broker: e.endpoint for e in client.route("TBW102")}
    header = CreateTopicRequestHeader(
        topic=topic,
        default_topic="TBW102",
        read_queue_nums=queues,
        write_queue_nums=queues,
        perm=6,
        topic_filter_type="SINGLE_TAG",
        order=False,
    )
    for name, address in brokers.items():
        resp = client.connection(address).request(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext_fields())
        cmd = resp.result(30)
        if cmd.code != 0:
            raise RuntimeError(
                f"creating topic {topic} on {name} ({address}) failed: {cmd.code} {cmd.remark}"
            )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the brokers register the topic with the name servers
        try:
            if len(client.route(topic)) >= queues * len(brokers):
                return
        except Exception:  # not routed yet
            pass
        time.sleep(0.5)
    raise RuntimeError(f"topic {topic} did not appear in the name servers' routes")


def measures(
    spark: SparkSession, name_server: str, n: int, size: int, repeat: int, log: Callable[[str], None]
) -> list[Row]:
    conn = {"nameServer": name_server}
    topic = f"bench-real-{uuid.uuid4().hex[:8]}"
    warm = f"bench-real-warm-{uuid.uuid4().hex[:8]}"
    create_topic(name_server, topic)
    create_topic(name_server, warm, 1)
    body = f"lpad(cast(id AS string), {size}, 'x') AS body"
    spark.range(100).selectExpr(body).write.format("rocketmq").options(**conn).option("topic", warm).mode(
        "append"
    ).save()
    log(f"real: write of {n:,} × {size} B over nameServer {name_server}")
    df = spark.range(0, n, numPartitions=2).selectExpr(body)
    t0 = time.perf_counter()
    df.write.format("rocketmq").options(**conn).option("topic", topic).mode("append").save()
    write_rate = n / (time.perf_counter() - t0)
    rows = [Row("real 5.x: write → rocketmq (nameServer)", write_rate, "rows/s", "reported")]
    time.sleep(2)  # the broker's consume queues catch up with the commit log
    log(f"real: remoting pull → Arrow of {n:,}")
    rate, pulled = client_pull("", topic, name_server=name_server, **READ_TASK_PULL)
    if pulled != n:
        raise RuntimeError(f"real remoting pull read {pulled} messages, wrote {n}")
    rows.append(Row("real 5.x: remoting pull → Arrow", rate, "msgs/s", "reported"))
    spark_reads.stream_read(spark, conn, warm, 100)  # warm-up
    ceiling = stream = 0.0
    for r in range(repeat):
        log(f"real: stream ceiling and stream read of {n:,} (run {r + 1} of {repeat})")
        ceiling = max(ceiling, spark_reads.ceiling_stream_read(spark, conn, topic, n))
        stream = max(stream, spark_reads.stream_read(spark, conn, topic, n))
    rows.append(Row("real 5.x: stream read ceiling", ceiling, "msgs/s", "—"))
    rows.append(read_row("real 5.x: stream read → noop (nameServer)", stream, ceiling))
    return rows
