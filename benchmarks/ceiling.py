"""The read ceiling: a Python data source yielding the reader's own Arrow batches from memory.

`format("bench_ceiling")` with the `rocketmq` reader's options (`endpoints`, `topic`) pulls ONE batch of
the topic on the driver, converts it to the reader's schema exactly as a read task does, and plans one
partition per queue of the topic (the rocketmq reader's default), each yielding that batch from memory
until it has produced its queue's message count. What Spark and the Python worker cost for those rows is
all it measures: the rocketmq reader's figure over this one is the fraction of the ceiling it reaches.

`readStream.format("bench_ceiling")` serves the same partitions as ONE micro-batch through a Python
`DataSourceStreamReader`, so the stream read is compared with a stream that pays the same per-query
costs (Spark's streaming runner process, checkpoint writes), not with a batch job.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.types import StructType

from connector.options import DEFAULT_PULL_BATCH_SIZE
from connector.schema import ARROW_BATCH_ROWS
from connector.worker_heap import freeze_worker_heap

NAME = "bench_ceiling"


@dataclass(frozen=True)
class CeilingPartition(InputPartition):
    """One queue's worth of rows, served from `batch_ipc` (the batch serialized once, on the driver)."""

    batch_ipc: bytes
    rows: int


NAME_SERVER_PREFIX = "nameServer="  # marks a remoting target among the endpoints strings below


def pulled_batch(endpoints: str, topic: str, rows: int) -> tuple[pa.RecordBatch, list[int]]:
    """One pull of up to `rows` messages of the topic's first queue in the reader's schema, and every
    queue's message count."""
    from connector.clients import get_client
    from connector.config import ClientConfig
    from connector.schema import to_record_batches

    if endpoints.startswith(NAME_SERVER_PREFIX):
        config = ClientConfig(name_server=endpoints.removeprefix(NAME_SERVER_PREFIX))
    else:
        config = ClientConfig(endpoints)
    client = get_client(config)
    queues = client.route(topic)
    counts = [client.max_offset(q) - client.min_offset(q) for q in queues]
    first = queues[0]
    res = client.pull(first, client.min_offset(first), rows, group="bench-ceiling")
    batches = to_record_batches(res.table, first.topic, first.broker, first.queue_id)
    return pa.concat_batches(batches), counts


class CeilingReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        lowered = {k.lower(): v for k, v in options.items()}  # Spark may lowercase option keys
        ns = lowered.get("nameserver")
        self.endpoints = NAME_SERVER_PREFIX + ns if ns else lowered["endpoints"]
        self.topic = lowered["topic"]
        # The batches the rocketmq reader hands Spark: a pull's rows, sliced to ARROW_BATCH_ROWS.
        pull = int(lowered.get("pullbatchsize", DEFAULT_PULL_BATCH_SIZE))
        self.batch_rows = min(pull, ARROW_BATCH_ROWS)

    def partitions(self) -> list[InputPartition]:
        return _plan(self.endpoints, self.topic, self.batch_rows)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _serve(partition)


def _plan(endpoints: str, topic: str, batch_rows: int) -> list[InputPartition]:
    batch, counts = pulled_batch(endpoints, topic, batch_rows)
    ipc = batch_ipc(batch)
    return [CeilingPartition(ipc, n) for n in counts]


def batch_ipc(batch: pa.RecordBatch) -> bytes:
    """`batch` as an Arrow IPC stream of its own: how it travels to a worker or a server process."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as w:
        w.write_batch(batch)
    return sink.getvalue().to_pybytes()


def _serve(partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """The partition's rows from memory, in a worker whose heap is frozen as the rocketmq reader's is (else
    the ceiling would pay a full garbage collection after every task that the reader does not)."""
    assert isinstance(partition, CeilingPartition)
    freeze_worker_heap()
    batch = pa.ipc.open_stream(partition.batch_ipc).read_next_batch()
    left = partition.rows
    while left > 0:
        out = batch if left >= batch.num_rows else batch.slice(0, left)
        left -= out.num_rows
        yield out


class CeilingStreamReader(DataSourceStreamReader):
    """The whole topic as one micro-batch: offset {"batch": 0} before it, {"batch": 1} after it."""

    def __init__(self, options: dict[str, str]) -> None:
        self.reader = CeilingReader(options)

    def initialOffset(self) -> dict:
        return {"batch": 0}

    def latestOffset(self) -> dict:
        return {"batch": 1}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return self.reader.partitions() if start["batch"] < end["batch"] else []

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _serve(partition)

    def commit(self, end: dict) -> None:
        pass


class CeilingSource(DataSource):
    """`spark.read.format("bench_ceiling")`: the reader's batches from memory (see the module doc)."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        freeze_worker_heap()  # as the rocketmq source's hooks do, in Spark's processes
        from connector.schema import SCHEMA

        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        freeze_worker_heap()  # as the rocketmq source's hooks do, in Spark's processes
        return CeilingReader(dict(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        freeze_worker_heap()  # as the rocketmq source's hooks do, in Spark's processes
        return CeilingStreamReader(dict(self.options))
