"""A write, a batch read and two streaming queries through format("rocketmq") under one Spark deployment
mode, run as its own process by tests/spark/test_deploy_modes.py (a SparkContext per process).

    python -m tests.spark.cluster_job --mode connect|local-cluster --endpoints H:P --topic A --sink-topic B --out DIR

Prints one line `RESULT {json}` with what it observed; the test checks the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from examples.spark_defaults import spark_session

FIRST, SECOND = 200, 50
WAIT_S = 120


def session(mode: str):
    if mode == "connect":
        return spark_session("rocketmq-connect-test", remote="local[2]")
    return spark_session("rocketmq-local-cluster-test", master="local-cluster[2,1,1024]")


def executor_count(spark, mode: str) -> int:
    """Executors registered with the driver (local-cluster: separate JVMs); waits for both to come up."""
    if mode == "connect":
        return -1  # the Connect client has no SparkContext to ask
    sc = spark.sparkContext
    deadline = time.monotonic() + WAIT_S
    while True:
        n = sc._jsc.sc().getExecutorMemoryStatus().size() - 1  # minus the driver's block manager
        if n >= 2 or time.monotonic() > deadline:
            return n
        time.sleep(0.5)


def write_batch(spark, endpoints: str, topic: str, start: int, count: int) -> None:
    df = spark.range(start, start + count).selectExpr(
        "concat('m-', cast(id as string)) as body", "if(id % 2 = 0, 'even', 'odd') as tags"
    )
    df.write.format("rocketmq").mode("append").option("endpoints", endpoints).option("topic", topic).save()


def read_bodies(spark, endpoints: str, topic: str) -> tuple[list[str], int]:
    df = spark.read.format("rocketmq").option("endpoints", endpoints).option("topic", topic).load()
    rows = df.selectExpr("cast(body as string) as b", "brokerName", "queueId").collect()
    return [r.b for r in rows], len({(r.brokerName, r.queueId) for r in rows})


def run_stream(spark, args: argparse.Namespace) -> None:
    """rocketmq(A) → rocketmq(B) and rocketmq(A) → parquet, each AvailableNow from its checkpoint."""
    src = (
        spark.readStream.format("rocketmq")
        .option("endpoints", args.endpoints)
        .option("topic", args.topic)
        .option("startingOffsets", "earliest")
        .option("consumerGroup", f"{args.topic}-etl")
        .load()
    )
    relay = (
        src.selectExpr("body", "tags")
        .writeStream.format("rocketmq")
        .option("endpoints", args.endpoints)
        .option("topic", args.sink_topic)
        .option("checkpointLocation", os.path.join(args.out, "relay-checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    files = (
        src.selectExpr("cast(body as string) as body", "queueId", "queueOffset", "brokerName")
        .writeStream.format("parquet")
        .option("path", os.path.join(args.out, "parquet"))
        .option("checkpointLocation", os.path.join(args.out, "parquet-checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    for q in (relay, files):
        if not q.awaitTermination(WAIT_S):
            q.stop()
            raise SystemExit(f"streaming query {q.name or q.id} did not finish in {WAIT_S} s")
        if q.exception() is not None:
            raise SystemExit(f"streaming query failed: {q.exception()}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--mode", choices=("connect", "local-cluster"), required=True)
    p.add_argument("--endpoints", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--sink-topic", required=True)
    p.add_argument("--out", required=True)
    args = p.parse_args()

    spark = session(args.mode)
    result: dict = {
        "mode": args.mode,
        "session": type(spark).__module__,
        "executors": executor_count(spark, args.mode),
    }

    write_batch(spark, args.endpoints, args.topic, 0, FIRST)
    bodies, queues = read_bodies(spark, args.endpoints, args.topic)
    result.update(batch_read=len(bodies), batch_distinct=len(set(bodies)), queues_with_data=queues)

    run_stream(spark, args)  # first run: the FIRST messages
    write_batch(spark, args.endpoints, args.topic, FIRST, SECOND)
    run_stream(spark, args)  # second run resumes from the checkpoints: only the SECOND ones

    relayed, _ = read_bodies(spark, args.endpoints, args.sink_topic)
    result.update(relayed=len(relayed), relayed_distinct=len(set(relayed)))
    parquet = spark.read.parquet(os.path.join(args.out, "parquet")).collect()
    result.update(
        parquet=len(parquet),
        parquet_distinct=len({r.body for r in parquet}),
        parquet_positions_distinct=len({(r.brokerName, r.queueId, r.queueOffset) for r in parquet}),
        expected=sorted(f"m-{i}" for i in range(FIRST + SECOND)) == sorted(r.body for r in parquet),
        relay_expected=sorted(f"m-{i}" for i in range(FIRST + SECOND)) == sorted(relayed),
    )
    spark.stop()
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
