"""The write ceiling's sink, kept free of the connector's imports (the first-write measure runs it in a
fresh session whose imports it must not pay ahead)."""

from __future__ import annotations


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
            return Count(sum(b.num_rows for b in iterator))

    class DiscardSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "discard"

        def writer(self, schema, overwrite):  # type: ignore[no-untyped-def]
            return Discard()

    return DiscardSource
