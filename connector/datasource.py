"""The `rocketmq` Python data source: wires Spark's reader/writer hooks to the connector's modules.

Modules are imported inside the hooks so that `import pyspark_rocketmq` stays cheap: Spark imports it
in every Python worker that looks up data sources.
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


class RocketMQDataSource(DataSource):
    """`spark.read/readStream/write/writeStream.format("rocketmq")` (options: see README)."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def schema(self) -> StructType:
        from .schema import SCHEMA

        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        from .batch_reader import RocketMQBatchReader

        return RocketMQBatchReader(self.options, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from .stream_reader import RocketMQStreamReader

        return RocketMQStreamReader(self.options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from .writer import RocketMQBatchWriter

        return RocketMQBatchWriter(self.options, schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from .writer import RocketMQStreamWriter

        return RocketMQStreamWriter(self.options, schema, overwrite)
