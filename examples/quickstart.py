"""Quickstart: an embedded 2-broker RocketMQ emulator, messages written through the Spark sink, streamed
back by the Spark source with a running aggregate, then the result table and the consumer group's lag.

    python examples/quickstart.py
"""

from __future__ import annotations

import logging

from spark_defaults import spark_session

from broker_emulator import Emulator
from broker_emulator.admin import AdminClient

TOPIC = "orders"
GROUP = "quickstart"
COUNT = 10_000


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    # Spark first: its JVM is started by a fork of this process, which must not happen while the embedded
    # emulator's gRPC threads run (gRPC: "Other threads are currently calling into gRPC, skipping fork()
    # handlers", then the JVM sometimes never started).
    spark = spark_session("rocketmq-quickstart")
    spark.sparkContext.setLogLevel("ERROR")
    with Emulator(brokers=2, queues=4) as emu:
        emu.create_topic(TOPIC)
        print(f"emulator endpoints: {emu.endpoints}")
        try:
            orders = spark.range(COUNT).selectExpr(
                "concat('order-', id) AS body",
                "CASE WHEN id % 3 = 0 THEN 'paid' WHEN id % 3 = 1 THEN 'shipped' ELSE 'created' END AS tags",
                "concat('order-', id) AS keys",
            )
            (
                orders.write.format("rocketmq")
                .option("endpoints", emu.endpoints)
                .option("topic", TOPIC)
                .mode("append")
                .save()
            )
            print(f"wrote {COUNT} messages through the sink")

            stream = (
                spark.readStream.format("rocketmq")
                .option("endpoints", emu.endpoints)
                .option("topic", TOPIC)
                .option("startingOffsets", "earliest")
                .option("consumerGroup", GROUP)
                .option("maxMessagesPerTrigger", 4000)
                .load()
            )
            counts = stream.groupBy("tags").count()
            query = (
                counts.writeStream.outputMode("complete")
                .format("memory")
                .queryName("order_counts")
                .trigger(availableNow=True)
                .start()
            )
            if not query.awaitTermination(180):
                query.stop()
                raise SystemExit("the streaming query did not finish within 180 s")
            for p in query.recentProgress:
                if p["numInputRows"]:
                    print(f"micro-batch {p['batchId']}: {p['numInputRows']} messages")
            print("\nmessages per tag (running aggregate):")
            spark.sql("SELECT tags, `count` FROM order_counts ORDER BY tags").show()
        finally:
            spark.stop()

        admin = AdminClient(emu.endpoints)
        try:
            rows = admin.call("lag", group=GROUP)
        finally:
            admin.close()
        print(f"consumer group '{GROUP}' lag:")
        print(f"{'broker':<10}{'queue':>6}{'committed':>11}{'max':>7}{'lag':>6}")
        for r in rows:
            print(f"{r['broker']:<10}{r['queue']:>6}{r['committed']:>11}{r['max_offset']:>7}{r['lag']:>6}")
        print(f"total lag: {sum(r['lag'] for r in rows)}")
    print("emulator stopped")


if __name__ == "__main__":
    main()
