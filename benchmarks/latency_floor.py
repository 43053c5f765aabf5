"""The latency floor: the same send → `foreachBatch` probe over a Python stream source with no broker.

`readStream.format("bench_latency_floor")` reads the lines appended to a local file (`path` option): its
latest offset is the file's line count, and a micro-batch is one partition reading those lines. Spark's
own per-micro-batch costs for a Python data source (the streaming runner's calls, planning, one Python
read task, the checkpoint writes) are all it measures, so the rocketmq reader's latency over this one
shows what the connector and the broker add.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.types import BinaryType, StructField, StructType

from connector.worker_heap import freeze_worker_heap

NAME = "bench_latency_floor"


@dataclass(frozen=True)
class LinesPartition(InputPartition):
    """Lines [first, end) of the file at `path`."""

    path: str
    first: int
    end: int


def _lines(path: str) -> list[bytes]:
    with open(path, "rb") as f:
        return f.read().split(b"\n")[:-1]


class FloorStreamReader(DataSourceStreamReader):
    def __init__(self, path: str) -> None:
        self.path = path

    def initialOffset(self) -> dict:
        return {"lines": len(_lines(self.path))}

    def latestOffset(self) -> dict:
        return {"lines": len(_lines(self.path))}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        if end["lines"] <= start["lines"]:
            return []
        return [LinesPartition(self.path, start["lines"], end["lines"])]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, LinesPartition)
        freeze_worker_heap()  # as the rocketmq reader does: no full collection of the whole heap per task
        lines = _lines(partition.path)[partition.first : partition.end]
        yield pa.record_batch([pa.array(lines, pa.binary())], names=["body"])

    def commit(self, end: dict) -> None:
        pass


class FloorSource(DataSource):
    """`readStream.format("bench_latency_floor").option("path", FILE)`: the file's lines as `body`."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        freeze_worker_heap()  # as the rocketmq source's hooks do, in Spark's processes
        return StructType([StructField("body", BinaryType())])

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        freeze_worker_heap()  # as the rocketmq source's hooks do, in Spark's processes
        return FloorStreamReader(self.options["path"])


def latency_floor(spark: SparkSession, samples: int, interval_s: float) -> tuple[float, float]:
    """p50 and p99 in seconds of append → visible in a `foreachBatch` (`spark_reads.probe_latency`)."""
    from benchmarks.spark_reads import probe_latency

    spark.dataSource.register(FloorSource)
    with tempfile.NamedTemporaryFile(prefix="bench-latency-floor-", suffix=".lines") as spool:

        def send(body: bytes) -> None:
            with open(spool.name, "ab") as f:
                f.write(body + b"\n")

        stream = spark.readStream.format(NAME).option("path", spool.name).load()
        return probe_latency(stream, send, samples, interval_s)
