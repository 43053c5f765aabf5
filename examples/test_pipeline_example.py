"""A user's pipeline integration test, written with only the pytest plugin's fixtures.

Installing pyspark-rocketmq registers the plugin (entry point `pytest11`), so no conftest is needed:
`rocketmq_emulator` is an in-memory 2-broker emulator shared by the session, `rocketmq_topic()` creates
a fresh topic per call. The SparkSession fixture is the user's own.

    python -m pytest examples/test_pipeline_example.py -q
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from broker_emulator import Emulator

ORDER_SCHEMA = "order_id STRING, customer STRING, amount DOUBLE"

ORDERS = [
    {"order_id": "o-1", "customer": "alice", "amount": 10.0},
    {"order_id": "o-2", "customer": "bob", "amount": 25.5},
    {"order_id": "o-3", "customer": "alice", "amount": 4.5},
    {"order_id": "o-4", "customer": "carol", "amount": 100.0},
    {"order_id": "o-5", "customer": "bob", "amount": 0.5},
]
EXPECTED = {"alice": (2, 14.5), "bob": (2, 26.0), "carol": (1, 100.0)}


# --- the pipeline under test (in a real project: imported from the user's package) -------------------


def revenue_per_customer(messages: DataFrame) -> DataFrame:
    """Parses JSON order messages and sums the orders and revenue of each customer."""
    orders = messages.select(F.from_json(F.col("body").cast("string"), ORDER_SCHEMA).alias("o")).select("o.*")
    return orders.groupBy("customer").agg(
        F.count("*").alias("orders"), F.round(F.sum("amount"), 2).alias("revenue")
    )


# --- fixtures -----------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """A local[2] session for the test session; an already active session is reused (and left running)."""
    active = SparkSession.getActiveSession()
    if active is not None:
        yield active
        return
    session = (
        SparkSession.builder.master("local[2]")
        .appName("pipeline-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def orders_topic(spark: SparkSession, rocketmq_emulator: Emulator, rocketmq_topic: Callable[..., str]) -> str:
    """A fresh topic holding ORDERS, written through the RocketMQ sink."""
    topic = rocketmq_topic("orders")
    rows = [(json.dumps(o), o["order_id"]) for o in ORDERS]
    (
        spark.createDataFrame(rows, "body STRING, keys STRING")
        .write.format("rocketmq")
        .option("endpoints", rocketmq_emulator.endpoints)
        .option("topic", topic)
        .mode("append")
        .save()
    )
    return topic


def as_dict(df: DataFrame) -> dict[str, tuple[int, float]]:
    return {r["customer"]: (r["orders"], r["revenue"]) for r in df.collect()}


# --- tests --------------------------------------------------------------------------------------------


def test_pipeline_on_a_batch_read(
    spark: SparkSession, rocketmq_emulator: Emulator, orders_topic: str
) -> None:
    messages = (
        spark.read.format("rocketmq")
        .option("endpoints", rocketmq_emulator.endpoints)
        .option("topic", orders_topic)
        .load()
    )
    assert as_dict(revenue_per_customer(messages)) == EXPECTED


def test_pipeline_as_a_stream(
    spark: SparkSession, rocketmq_emulator: Emulator, orders_topic: str, tmp_path
) -> None:
    messages = (
        spark.readStream.format("rocketmq")
        .option("endpoints", rocketmq_emulator.endpoints)
        .option("topic", orders_topic)
        .option("startingOffsets", "earliest")
        .load()
    )
    query = (
        revenue_per_customer(messages)
        .writeStream.outputMode("complete")
        .format("memory")
        .queryName("revenue_per_customer")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(120), "the AvailableNow query did not finish within 120 s"
        assert query.exception() is None
        assert as_dict(spark.table("revenue_per_customer")) == EXPECTED
    finally:
        query.stop()
