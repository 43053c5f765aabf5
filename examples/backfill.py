"""Backfill: a batch read of one time window of a topic, written to parquet.

    python examples/backfill.py                           # standalone: embedded emulator, two bursts
    python examples/backfill.py --name-server 10.0.0.5:9876 --topic orders --output /data/backfill \\
        --start 2024-05-01T00:00:00Z --end 2024-05-02T00:00:00Z   # a RocketMQ 4.x/5.x cluster
    python examples/backfill.py --endpoints 127.0.0.1:8081 ...      # gRPC v2 endpoints (the emulator)

The window is `[start, end)` of the messages' store time: `startingTimestamp` starts each queue at the
first message stored at or after `--start`, `endingTimestamp` ends it before the first message stored
at or after `--end`. `--start` / `--end` take epoch milliseconds or ISO-8601 (a zone-less time is UTC).
The output directory is overwritten, so running a backfill again for the same window is idempotent.

Without `--name-server` or `--endpoints` it starts an embedded emulator, sends two bursts of messages a couple of seconds
apart through the RocketMQ sink and backfills only the first burst's window.
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
import time
from contextlib import ExitStack
from datetime import UTC, datetime

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from spark_defaults import spark_session

from broker_emulator import Emulator

FIRST_BURST = 600
SECOND_BURST = 400
GAP_S = 2.0


def to_epoch_ms(value: str) -> int:
    """Epoch milliseconds from `1714521600000` or an ISO-8601 time (`2024-05-01T00:00:00Z`; no zone = UTC)."""
    if value.isdigit():
        return int(value)
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return int(parsed.timestamp() * 1000)


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def send_burst(spark: SparkSession, conn: dict[str, str], topic: str, count: int, tag: str) -> None:
    """Sends `count` messages tagged `tag` through the RocketMQ sink."""
    (
        spark.range(count)
        .selectExpr(f"concat('{tag}-', id) AS body", f"'{tag}' AS tags", f"concat('{tag}-', id) AS keys")
        .write.format("rocketmq")
        .options(**conn)
        .option("topic", topic)
        .mode("append")
        .save()
    )
    print(f"sent {count} messages tagged '{tag}'")


def read_window(
    spark: SparkSession, conn: dict[str, str], topic: str, start_ms: int, end_ms: int
) -> DataFrame:
    """The messages of `topic` stored in `[start_ms, end_ms)`, body decoded as a string."""
    return (
        spark.read.format("rocketmq")
        .options(**conn)
        .option("topic", topic)
        .option("startingTimestamp", start_ms)
        .option("endingTimestamp", end_ms)
        .load()
        .select(
            "topic",
            "brokerName",
            "queueId",
            "queueOffset",
            "messageId",
            "tags",
            "keys",
            F.col("body").cast("string").alias("body"),
            "storeTimestamp",
        )
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    target = p.add_mutually_exclusive_group()
    target.add_argument(
        "--name-server", help="RocketMQ name servers host:9876[;host:9876] (remoting: any 4.x/5.x cluster)"
    )
    target.add_argument("--endpoints", help="gRPC v2 endpoints host:port[;host:port]")
    p.add_argument("--topic", default="orders", help="topic to read (default: orders)")
    p.add_argument("--output", help="parquet output directory, overwritten (default: a temporary directory)")
    p.add_argument("--start", help="window start (inclusive): epoch ms or ISO-8601")
    p.add_argument("--end", help="window end (exclusive): epoch ms or ISO-8601")
    args = p.parse_args(argv)
    if (args.name_server or args.endpoints) and not (args.start and args.end):
        p.error("--start and --end are required with --name-server or --endpoints")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    output = args.output or os.path.join(tempfile.mkdtemp(prefix="rocketmq-backfill-"), "window")

    with ExitStack() as stack:
        spark = spark_session("rocketmq-backfill")
        stack.callback(spark.stop)
        spark.sparkContext.setLogLevel("ERROR")
        conn = {"nameServer": args.name_server} if args.name_server else {"endpoints": args.endpoints or ""}
        if not (args.name_server or args.endpoints):
            emu = stack.enter_context(Emulator(brokers=2, queues=4))
            emu.create_topic(args.topic)
            conn = {"endpoints": emu.endpoints}
            print(f"embedded emulator endpoints: {emu.endpoints}")
            start_ms = int(time.time() * 1000)
            send_burst(spark, conn, args.topic, FIRST_BURST, "first-burst")
            end_ms = int(time.time() * 1000) + 1
            time.sleep(GAP_S)
            send_burst(spark, conn, args.topic, SECOND_BURST, "second-burst")
        if args.start:
            start_ms = to_epoch_ms(args.start)
        if args.end:
            end_ms = to_epoch_ms(args.end)

        print(f"backfilling [{iso(start_ms)}, {iso(end_ms)}) of topic '{args.topic}' into {output}")
        read_window(spark, conn, args.topic, start_ms, end_ms).write.mode("overwrite").parquet(output)

        result = spark.read.parquet(output)
        print(f"backfilled {result.count()} messages")
        result.groupBy("tags").agg(
            F.count("*").alias("messages"),
            F.min("storeTimestamp").alias("first_stored"),
            F.max("storeTimestamp").alias("last_stored"),
        ).orderBy("tags").show(truncate=False)


if __name__ == "__main__":
    main()
