"""`spark.read.format("rocketmq")`: a backfill of the offsets between the starting and ending positions."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from .clients import get_client
from .errors import OptionError
from .offsets import to_json
from .options import ReaderOptions, parse_reader_options
from .planning import build_partitions
from .positions import discover_queues, fetch_bounds, resolve_end, resolve_start
from .queues import OffsetRange
from .read_task import read_partition
from .schema import check_user_schema

log = logging.getLogger(__name__)

__all__ = ["RocketMQBatchReader"]


class RocketMQBatchReader(DataSourceReader):
    """Options are validated here, on the driver, before any task runs; offsets are resolved in
    `partitions()` (driver) and read in `read()` (executors)."""

    def __init__(self, options: Mapping[str, Any], schema: StructType | None) -> None:
        check_user_schema(schema)
        self.opts: ReaderOptions = parse_reader_options(options, streaming=False)

    def partitions(self) -> list[InputPartition]:
        opts = self.opts
        client = get_client(opts.client_config)
        queues = discover_queues(client, opts)
        infos = list(queues.values())
        bounds = fetch_bounds(client, infos, opts.pull_timeout_ms)
        starts = resolve_start(client, opts, queues, bounds)
        ends = resolve_end(client, opts, queues, bounds)
        for key in queues:
            if ends[key] < starts[key]:
                raise OptionError(
                    f"queue {key}: the starting offset {starts[key]} (option 'startingOffsets'/"
                    f"'startingTimestamp') is after the ending offset {ends[key]} (option 'endingOffsets'/"
                    "'endingTimestamp'): expected a start <= the end"
                )
        log.info("batch read of %s: from %s until %s", ", ".join(opts.topics), to_json(starts), to_json(ends))
        ranges = [OffsetRange(k, starts[k], ends[k]) for k in queues]
        return list(build_partitions(opts, ranges, queues))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(partition)
