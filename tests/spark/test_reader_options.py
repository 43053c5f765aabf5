"""Every invalid reader option fails on the driver before any Spark job runs, with a message naming the
option, the bad value and what is accepted: the whole table against the data source exactly as Spark's
driver-side workers call it (options in a lowercasing CaseInsensitiveDict, reader(), partitions()), and
representative cases through the real Spark session, checking that no Spark job was submitted."""

from __future__ import annotations

import uuid

import pytest
from pyspark.errors import PySparkException
from pyspark.sql.datasource import CaseInsensitiveDict

from connector.datasource import RocketMQDataSource
from connector.errors import ConnectorError, OptionError
from connector.schema import SCHEMA
from tests.support.reading import reader

BATCH_CASES = [
    ({"pullBatchSize": "0"}, "'pullBatchSize'='0'", "from 1 to 65536"),
    ({"pullTimeoutMs": "soon"}, "'pullTimeoutMs'='soon'", "an integer from 1"),
    ({"numPartitions": "-3"}, "'numPartitions'='-3'", "an integer from 1"),
    ({"maxMessagesPerPartition": "1e3"}, "'maxMessagesPerPartition'='1e3'", "a positive integer"),
    ({"startingOffsets": "newest"}, "'startingOffsets'='newest'", "earliest, latest, group, or JSON"),
    ({"startingOffsets": "latest"}, "'startingOffsets'='latest'", "reads nothing in a batch query"),
    ({"startingOffsets": '{"other": {"broker-a": {"0": 1}}}'}, "'startingOffsets'", "not other"),
    ({"startingOffsets": '{"TOPIC": {"broker-a": {"x": 1}}}'}, "'startingOffsets'", "queue id 'x'"),
    ({"endingOffsets": '{"TOPIC": {"broker-a": {"0": -2}}}'}, "'endingOffsets'", "no -2 (earliest)"),
    ({"startingTimestamp": "yesterday"}, "'startingTimestamp'='yesterday'", "an integer >= 0"),
    ({"startingTimestamp": "20", "endingTimestamp": "10"}, "'startingTimestamp'=20", "start <= the end"),
    ({"filterType": "regex"}, "'filterType'='regex'", "one of 'tag', 'sql'"),
    ({"filterType": "sql"}, "'filterExpression' is required", "SQL92"),
    ({"filterExpression": "A | B"}, "'filterExpression'='A | B'", "'||'"),
    ({"allocateStrategy": "hash"}, "'allocateStrategy'='hash'", "'averagely', 'averagelyByCircle'"),
    ({"failOnDataLoss": "maybe"}, "'failOnDataLoss'='maybe'", "'true' or 'false'"),
    ({"pullProtocol": "http"}, "'pullProtocol'='http'", "'auto', 'bulk', 'standard'"),
    ({"endpoints": "localhost"}, "'endpoints'='localhost'", "host:port"),
    ({"consumerGroup": "bad group"}, "'consumerGroup'='bad group'", "[a-zA-Z0-9_%|-]"),
    ({"accessKey": "ak"}, "'secretKey' is required", "accessKey"),
    ({"tlsCaFile": "/nonexistent/ca.pem"}, "'tlsCaFile'='/nonexistent/ca.pem'", "readable PEM"),
    (
        {"maxMessagesPerTriger": "5"},
        "unknown option 'maxmessagespertriger'",
        "did you mean 'maxMessagesPerTrigger'",
    ),
    ({"batchSize": "5"}, "'batchsize' is not valid for the reader", "'batchSize' is an option of the writer"),
    (
        {"topic": "no_such_topic_here"},
        "'no_such_topic_here' of option 'topic' does not exist",
        "TOPIC_NOT_FOUND",
    ),
    (
        {"startingOffsets": '{"TOPIC": {"broker-z": {"0": 1}}}'},
        "names queues that do not exist",
        "broker-z/0",
    ),
]

STREAM_CASES = [
    ({"endingOffsets": "latest"}, "'endingOffsets' is not valid in streaming queries", "AvailableNow"),
    ({"maxTriggerDelay": "soon"}, "'maxTriggerDelay'='soon'", "a duration such as"),
    (
        {"minMessagesPerTrigger": "50", "maxMessagesPerTrigger": "10"},
        "'minMessagesPerTrigger'=50",
        "min <= max",
    ),
]


SPARK_CASES = [BATCH_CASES[0], BATCH_CASES[4], BATCH_CASES[-2], BATCH_CASES[-1]]


def _fill(options: dict[str, str], topic: str) -> dict[str, str]:
    return {k: v.replace("TOPIC", topic) for k, v in options.items()}


def _source(endpoints: str, topic: str, options: dict[str, str]) -> RocketMQDataSource:
    """The data source as Spark builds it: option keys lowercased, values strings."""
    return RocketMQDataSource(CaseInsensitiveDict({"endpoints": endpoints, "topic": topic, **options}))


@pytest.mark.parametrize(("options", "names", "accepted"), BATCH_CASES, ids=[str(c[0]) for c in BATCH_CASES])
def test_invalid_batch_option_message(rocketmq_emulator, topic, options, names, accepted) -> None:
    with pytest.raises((OptionError, ConnectorError)) as e:
        _source(rocketmq_emulator.endpoints, topic, _fill(options, topic)).reader(SCHEMA).partitions()
    assert names in str(e.value) and accepted in str(e.value), str(e.value)


@pytest.mark.parametrize(
    ("options", "names", "accepted"), STREAM_CASES, ids=[str(c[0]) for c in STREAM_CASES]
)
def test_invalid_stream_option_message(rocketmq_emulator, topic, options, names, accepted) -> None:
    with pytest.raises(OptionError) as e:
        _source(rocketmq_emulator.endpoints, topic, _fill(options, topic)).streamReader(SCHEMA)
    assert names in str(e.value) and accepted in str(e.value), str(e.value)


def _no_job_ran(spark, run) -> PySparkException:
    """Runs `run` in a fresh job group; returns its error after checking no Spark job was submitted."""
    sc = spark.sparkContext
    group = f"options-{uuid.uuid4().hex}"
    sc.setJobGroup(group, "invalid option")
    try:
        with pytest.raises(PySparkException) as e:
            run()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    assert list(sc.statusTracker().getJobIdsForGroup(group)) == []
    return e.value


@pytest.mark.parametrize(("options", "names", "accepted"), SPARK_CASES, ids=[str(c[0]) for c in SPARK_CASES])
def test_invalid_batch_option_fails_before_any_job(
    spark, rocketmq_emulator, topic, options, names, accepted
) -> None:
    opts = {"topic": topic, **_fill(options, topic)}
    endpoints = opts.pop("endpoints", rocketmq_emulator.endpoints)
    t = opts.pop("topic")
    error = _no_job_ran(spark, lambda: reader(spark, endpoints, t, **opts).collect())
    assert names in str(error) and accepted in str(error), str(error)


@pytest.mark.parametrize(("options", "names", "accepted"), STREAM_CASES[:1], ids=["endingOffsets"])
def test_invalid_stream_option_fails_the_query_before_any_job(
    spark, rocketmq_emulator, topic, options, names, accepted, tmp_path
) -> None:
    df = reader(spark, rocketmq_emulator.endpoints, topic, stream=True, **_fill(options, topic))

    def run() -> None:
        query = (
            df.writeStream.format("noop")
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        try:
            if not query.awaitTermination(60):
                raise AssertionError("the query with an invalid option kept running")
        finally:
            query.stop()

    error = _no_job_ran(spark, run)
    assert names in str(error) and accepted in str(error), str(error)
