"""Streaming ETL: RocketMQ → parse JSON orders and enrich them → parquet, with a checkpoint.

    python examples/streaming_etl.py                      # standalone: embedded emulator + demo orders
    python examples/streaming_etl.py --name-server 10.0.0.5:9876 --topic orders \\
        --output /data/orders --checkpoint /data/orders-ckpt [--no-available-now]   # a RocketMQ cluster
    python examples/streaming_etl.py --endpoints 127.0.0.1:8081 --topic orders ...     # gRPC v2 endpoints

The query's offsets live in `--checkpoint`, and the parquet sink records its committed files in
`<output>/_spark_metadata`, so running the job again with the same checkpoint continues where the last
run stopped: messages already written are not written again, new ones are (exactly-once end to end).

By default the job runs once with `Trigger.AvailableNow` (reads what is in the topic, then stops): the
shape of a scheduled batch-style job. `--no-available-now` runs micro-batches every 5 seconds until
Ctrl-C. `--name-server` reads a RocketMQ 4.x/5.x cluster through its name servers (the remoting protocol),
`--endpoints` gRPC v2 endpoints (a RocketMQ 5 proxy writes, the emulator reads and writes). Without either
it starts an embedded emulator, creates the topic and sends demo orders through the RocketMQ sink first;
`--demo-messages N` sends N demo orders to any cluster.
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
import uuid
from contextlib import ExitStack

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from spark_defaults import spark_session

from broker_emulator import Emulator

GROUP = "streaming-etl"
USD_TO_EUR = 0.92

# The JSON body of one order message.
ORDER_SCHEMA = "order_id STRING, customer STRING, amount DOUBLE, currency STRING, created_at TIMESTAMP"


def connection(name_server: str | None, endpoints: str | None) -> dict[str, str]:
    """The connector's connection option: `nameServer` (remoting) or `endpoints` (gRPC v2)."""
    return {"nameServer": name_server} if name_server else {"endpoints": endpoints or ""}


def send_demo_orders(spark: SparkSession, conn: dict[str, str], topic: str, count: int) -> None:
    """Writes `count` JSON orders to `topic` through the RocketMQ sink (order ids unique per call)."""
    run = uuid.uuid4().hex[:8]
    orders = spark.range(count).selectExpr(
        f"""to_json(named_struct(
                'order_id', concat('{run}-', id),
                'customer', concat('customer-', id % 7),
                'amount', round(5 + (id * 37 % 1000) / 10.0, 2),
                'currency', IF(id % 4 = 0, 'USD', 'EUR'),
                'created_at', timestamp_millis(1714557600000 + id * 1000)
            )) AS body""",
        "IF(id % 3 = 0, 'priority', 'standard') AS tags",
        f"concat('{run}-', id) AS keys",
    )
    orders.write.format("rocketmq").options(**conn).option("topic", topic).mode("append").save()
    print(f"sent {count} demo orders to topic '{topic}'")


def transform(messages: DataFrame) -> DataFrame:
    """Parses the JSON body into order columns and adds `amount_eur`, `is_large` and `order_date`.

    The message's coordinates (broker, queue, offset, message id) are kept for lineage; a body that is
    not a JSON order gives null order columns rather than failing the job.
    """
    parsed = messages.select(
        F.from_json(F.col("body").cast("string"), ORDER_SCHEMA).alias("order"),
        "tags",
        "messageId",
        "brokerName",
        "queueId",
        "queueOffset",
        "storeTimestamp",
    )
    return (
        parsed.select(
            "order.*", "tags", "messageId", "brokerName", "queueId", "queueOffset", "storeTimestamp"
        )
        .withColumn(
            "amount_eur",
            F.round(
                F.when(F.col("currency") == "USD", F.col("amount") * USD_TO_EUR).otherwise(F.col("amount")), 2
            ),
        )
        .withColumn("is_large", F.col("amount_eur") >= 50)
        .withColumn("order_date", F.to_date("created_at"))
    )


def start_query(
    spark: SparkSession,
    conn: dict[str, str],
    topic: str,
    output: str,
    checkpoint: str,
    available_now: bool,
    max_per_trigger: int | None,
) -> StreamingQuery:
    """Starts rocketmq → transform → parquet. On restart the checkpoint's offsets win over startingOffsets."""
    reader = (
        spark.readStream.format("rocketmq")
        .options(**conn)
        .option("topic", topic)
        .option("consumerGroup", GROUP)
        .option("startingOffsets", "earliest")
    )
    if max_per_trigger:
        reader = reader.option("maxMessagesPerTrigger", max_per_trigger)
    writer = (
        transform(reader.load())
        .writeStream.format("parquet")
        .option("path", output)
        .option("checkpointLocation", checkpoint)
        .outputMode("append")
        .queryName("orders_etl")
    )
    writer = (
        writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime="5 seconds")
    )
    return writer.start()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    target = p.add_mutually_exclusive_group()
    target.add_argument(
        "--name-server", help="RocketMQ name servers host:9876[;host:9876] (remoting: any 4.x/5.x cluster)"
    )
    target.add_argument("--endpoints", help="gRPC v2 endpoints host:port[;host:port]")
    p.add_argument("--topic", default="orders", help="topic to read (default: orders)")
    p.add_argument("--output", help="parquet output directory (default: a temporary directory)")
    p.add_argument("--checkpoint", help="checkpoint directory (default: <output>-checkpoint)")
    p.add_argument(
        "--available-now",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run once with Trigger.AvailableNow and stop (default); --no-available-now: every 5 s until Ctrl-C",
    )
    p.add_argument("--max-messages-per-trigger", type=int, help="maxMessagesPerTrigger of the source")
    p.add_argument(
        "--demo-messages",
        type=int,
        help="demo orders to send before the query starts (default: 1000 on the embedded emulator, else 0)",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    output = args.output or os.path.join(tempfile.mkdtemp(prefix="rocketmq-etl-"), "orders")
    checkpoint = args.checkpoint or output.rstrip("/") + "-checkpoint"
    given = args.name_server or args.endpoints
    demo = args.demo_messages if args.demo_messages is not None else (0 if given else 1000)

    with ExitStack() as stack:
        conn = connection(args.name_server, args.endpoints)
        if not given:
            emu = stack.enter_context(Emulator(brokers=2, queues=4))
            emu.create_topic(args.topic)
            conn = {"endpoints": emu.endpoints}
            print(f"embedded emulator endpoints: {emu.endpoints}")
        spark = spark_session("rocketmq-streaming-etl")
        stack.callback(spark.stop)
        spark.sparkContext.setLogLevel("ERROR")
        if demo:
            send_demo_orders(spark, conn, args.topic, demo)

        query = start_query(
            spark,
            conn,
            args.topic,
            output,
            checkpoint,
            args.available_now,
            args.max_messages_per_trigger,
        )
        print(f"query started: output={output} checkpoint={checkpoint}")
        try:
            query.awaitTermination()
        except KeyboardInterrupt:
            print("stopping the query (Ctrl-C)")
            query.stop()
        if query.exception() is not None:
            raise SystemExit(f"the query failed: {query.exception()}")

        new_rows = sum(p["numInputRows"] for p in query.recentProgress)
        for p in query.recentProgress:
            if p["numInputRows"]:
                print(f"micro-batch {p['batchId']}: {p['numInputRows']} messages")
        print(f"this run wrote {new_rows} new rows")
        result = spark.read.parquet(output)
        print(f"output holds {result.count()} rows")
        result.groupBy("tags").agg(
            F.count("*").alias("orders"),
            F.round(F.sum("amount_eur"), 2).alias("revenue_eur"),
            F.sum(F.col("is_large").cast("int")).alias("large_orders"),
        ).orderBy("tags").show()


if __name__ == "__main__":
    main()
