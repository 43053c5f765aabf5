"""The write ceiling's sink, kept free of the connector's imports (the first-write measure runs it in a
fresh session whose imports it must not pay ahead) but for `connector.worker_heap` (standard library only):
its workers freeze their heap as the rocketmq writer's do, so it pays no full garbage collection after
each task that the writer does not."""

from __future__ import annotations

from connector.worker_heap import freeze_worker_heap


def discard_source() -> type:
    """The `discard` data source: a Python Arrow writer that counts its rows and drops them (the ceiling
    of the Python write path)."""
    from dataclasses import dataclass

    from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

    @dataclass
    class Count(WriterCommitMessage):
        rows: int

    class Discard(DataSourceArrowWriter):
        def write(self, iterator):  # type: ignore[no-untyped-def]
            freeze_worker_heap()
            return Count(sum(b.num_rows for b in iterator))

        def commit(self, messages):  # type: ignore[no-untyped-def]
            freeze_worker_heap()  # in Spark's commit process, as the rocketmq writer's commit

    class DiscardSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "discard"

        def writer(self, schema, overwrite):  # type: ignore[no-untyped-def]
            freeze_worker_heap()  # as the rocketmq source's hooks do, in Spark's processes
            return Discard()

    return DiscardSource


def busy_source() -> type:
    """The `busy` data source: a Python Arrow writer that drops its batches after spending option `us` µs of
    its own CPU per row (a busy loop on the thread's CPU clock): a sink that costs what this connector's
    writer costs in Python, but sends nothing and needs no broker on the same cores."""
    from dataclasses import dataclass

    from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

    @dataclass
    class Count(WriterCommitMessage):
        rows: int

    class Busy(DataSourceArrowWriter):
        def __init__(self, us_per_row: float) -> None:
            self.us_per_row = us_per_row

        def write(self, iterator):  # type: ignore[no-untyped-def]
            import time

            freeze_worker_heap()
            rows = 0
            for batch in iterator:
                rows += batch.num_rows
                until = time.thread_time() + batch.num_rows * self.us_per_row / 1e6
                while time.thread_time() < until:
                    pass
            return Count(rows)

        def commit(self, messages):  # type: ignore[no-untyped-def]
            freeze_worker_heap()  # in Spark's commit process, as the rocketmq writer's commit

    class BusySource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "busy"

        def writer(self, schema, overwrite):  # type: ignore[no-untyped-def]
            freeze_worker_heap()  # as the rocketmq source's hooks do, in Spark's processes
            return Busy(float(self.options.get("us", "0")))

    return BusySource
