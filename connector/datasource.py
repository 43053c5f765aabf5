"""The `rocketmq` Python data source: wires Spark's reader/writer hooks to the connector's modules.

Modules are imported inside the hooks so that `import pyspark_rocketmq` stays cheap: Spark imports it
in every Python worker that looks up data sources. Each hook runs in a process of Spark's (creating the
source, planning a read, creating a writer), whose heap it freezes first (`worker_heap`).
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType


def _freeze_spark_process_heap() -> None:
    from .worker_heap import freeze_worker_heap

    freeze_worker_heap()


class RocketMQDataSource(DataSource):
    """`spark.read/readStream/write/writeStream.format("rocketmq")` (options: see README)."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def schema(self) -> StructType:
        _freeze_spark_process_heap()
        from .schema import SCHEMA

        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        _freeze_spark_process_heap()
        from .batch_reader import RocketMQBatchReader

        return RocketMQBatchReader(self.options, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        _freeze_spark_process_heap()
        from .stream_reader import RocketMQStreamReader

        return RocketMQStreamReader(self.options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        _freeze_spark_process_heap()
        from .writer import RocketMQBatchWriter

        return RocketMQBatchWriter(self.options, schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        _freeze_spark_process_heap()
        from .writer import RocketMQStreamWriter

        return RocketMQStreamWriter(self.options, schema, overwrite)
