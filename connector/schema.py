"""The reader's fixed schema (README.md, 'Schema') and the vectorized conversion of pulled messages into it.

`SCHEMA` is built in code (`StructType.fromDDL` needs an active session); `ARROW_SCHEMA` is exactly what
Spark expects from `read()` (`to_arrow_schema(SCHEMA, timezone="UTC")`: nullability, `timestamp[us, UTC]`,
map entries `struct<key not null, value>`), so batches pass Spark's equality check with no per-row work.

Importing this module converts no Python value to Arrow (pyarrow then imports pandas, a second under load):
the driver-side processes that plan reads (Spark's streaming source runner, started afresh for every
query) never pay for it. So ARROW_SCHEMA is spelled out in pyarrow instead of derived with
`pyspark.sql.pandas.types.to_arrow_schema` (tests/test_reader_task.py checks that both agree), and the
fill values are built on first use.
"""

from __future__ import annotations

from functools import cache, lru_cache

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from rocketmq_protocol.arrow_values import binary_scalar, empty_scalar, int_scalar, repeat_scalar

from .errors import OptionError

__all__ = ["ARROW_SCHEMA", "SCHEMA", "check_user_schema", "to_record_batches"]

SCHEMA = StructType(
    [
        StructField("topic", StringType(), nullable=False),
        StructField("brokerName", StringType(), nullable=False),
        StructField("queueId", IntegerType(), nullable=False),
        StructField("queueOffset", LongType(), nullable=False),
        StructField("messageId", StringType(), nullable=True),
        StructField("tags", StringType(), nullable=True),
        StructField("keys", ArrayType(StringType(), containsNull=False), nullable=False),
        StructField("body", BinaryType(), nullable=False),
        StructField(
            "properties", MapType(StringType(), StringType(), valueContainsNull=False), nullable=False
        ),
        StructField("bornTimestamp", TimestampType(), nullable=True),
        StructField("storeTimestamp", TimestampType(), nullable=True),
        StructField("bornHost", StringType(), nullable=True),
        StructField("reconsumeTimes", IntegerType(), nullable=False),
        StructField("messageGroup", StringType(), nullable=True),
        StructField("deliveryTimestamp", TimestampType(), nullable=True),
    ]
)

_TS = pa.timestamp("us", tz="UTC")
ARROW_SCHEMA: pa.Schema = pa.schema(
    [
        pa.field("topic", pa.string(), nullable=False),
        pa.field("brokerName", pa.string(), nullable=False),
        pa.field("queueId", pa.int32(), nullable=False),
        pa.field("queueOffset", pa.int64(), nullable=False),
        pa.field("messageId", pa.string()),
        pa.field("tags", pa.string()),
        pa.field("keys", pa.list_(pa.field("element", pa.string(), nullable=False)), nullable=False),
        pa.field("body", pa.binary(), nullable=False),
        pa.field(
            "properties", pa.map_(pa.string(), pa.field("value", pa.string(), nullable=False)), nullable=False
        ),
        pa.field("bornTimestamp", _TS),
        pa.field("storeTimestamp", _TS),
        pa.field("bornHost", pa.string()),
        pa.field("reconsumeTimes", pa.int32(), nullable=False),
        pa.field("messageGroup", pa.string()),
        pa.field("deliveryTimestamp", _TS),
    ]
)

_T = {f.name: f.type for f in ARROW_SCHEMA}


@cache
def _fills() -> dict[str, pa.Scalar]:
    """The values that replace nulls in non-nullable columns (built on first use, see the module doc)."""
    return {
        "keys": empty_scalar(_T["keys"]),
        "body": binary_scalar(b""),
        "properties": empty_scalar(_T["properties"]),
        "reconsumeTimes": int_scalar(0),
    }


def check_user_schema(schema: StructType | None) -> None:
    """Rejects a user-supplied schema (`.schema(...)`): the source's schema is fixed, like Kafka's."""
    if schema is None or schema == SCHEMA:
        return
    raise OptionError(
        "the rocketmq source has a fixed schema and does not accept a user-specified schema; remove "
        f".schema(...). Got: {schema.simpleString()}. The fixed schema is: {SCHEMA.simpleString()}"
    )


def _no_nulls(arr: pa.Array, fill: pa.Scalar) -> pa.Array:
    return arr if arr.null_count == 0 else pc.fill_null(arr, fill)


def _cast(arr: pa.Array, type_: pa.DataType) -> pa.Array:
    """`arr.cast(type_)`, skipped where it has nothing to convert (a cast costs ~6-10 µs of pyarrow's Python
    even then: a whole-null column, as `deliveryTimestamp` mostly is, or one of the type already)."""
    if arr.type == type_:
        return arr
    if arr.null_count == len(arr):
        return pa.nulls(len(arr), type_)
    return arr.cast(type_)


def _relabel(arr: pa.Array, type_: pa.DataType) -> pa.Array:
    """keys and properties as ARROW_SCHEMA types them: they differ from MESSAGE_SCHEMA's only in their child
    fields' names and nullability, so a view relabels their buffers as they are; one whose children hold a
    null (which a view refuses to mark non-nullable) is cast as before."""
    try:
        return arr.view(type_)
    except pa.ArrowInvalid:
        return arr.cast(type_)


def _convert(batch: pa.RecordBatch, queue: tuple[pa.Array, pa.Array, pa.Array]) -> pa.RecordBatch:
    n = batch.num_rows
    col = batch.column
    ts = _T["bornTimestamp"]
    fill = _fills()
    topic, broker, queue_id = (a if len(a) == n else a.slice(0, n) for a in queue)
    arrays = [
        topic,
        broker,
        queue_id,
        col("queue_offset"),
        col("message_id"),
        col("tag"),
        _no_nulls(_relabel(col("keys"), _T["keys"]), fill["keys"]),
        _no_nulls(col("body"), fill["body"]),
        _no_nulls(_relabel(col("properties"), _T["properties"]), fill["properties"]),
        _cast(col("born_timestamp"), ts),
        _cast(col("store_timestamp"), ts),
        col("born_host"),
        _no_nulls(_cast(col("reconsume_times"), pa.int32()), fill["reconsumeTimes"]),
        col("message_group"),
        _cast(col("delivery_timestamp"), ts),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)


#: Rows per Arrow batch handed to Spark (a pull of more is sliced, without copying).
ARROW_BATCH_ROWS = 8192


def to_record_batches(
    table: pa.Table | pa.RecordBatch, topic: str, broker: str, queue_id: int
) -> list[pa.RecordBatch]:
    """A pulled table (`rocketmq_protocol.message_schema.MESSAGE_SCHEMA`) of one queue → RecordBatches of ARROW_SCHEMA.

    Columns are cast as whole arrays and the queue's columns sliced from ones made once per queue (no
    per-message Python); empty input gives no batches.
    Batches have at most ARROW_BATCH_ROWS rows: Spark's JVM pays per batch it receives and handles batches
    much larger than that more slowly (a Python source yielding 32,768-row batches read ~15% slower than
    8,192). A table's chunks (the bulk pull's stored chunks) are kept when they average half that or more
    (4,096-row chunks read 2-15% faster kept than joined into 8,192-row batches) and joined when smaller
    (one batch per 8,192-row pull read ~8% faster than ~1,000-row chunks).
    """
    if isinstance(table, pa.Table) and table.num_columns:
        chunks = table.column(0).num_chunks
        if chunks > 1 and table.num_rows < chunks * (ARROW_BATCH_ROWS // 2):
            table = table.combine_chunks()  # small stored chunks: joined, then cut to ARROW_BATCH_ROWS
    if isinstance(table, pa.RecordBatch):
        batches = (
            [table]
            if table.num_rows <= ARROW_BATCH_ROWS
            else pa.Table.from_batches([table]).to_batches(ARROW_BATCH_ROWS)
        )
    else:
        batches = table.to_batches(ARROW_BATCH_ROWS)
    queue = _queue_columns(topic, broker, queue_id)
    return [_convert(batch, queue) for batch in batches if batch.num_rows]


@lru_cache(maxsize=16)
def _queue_columns(topic: str, broker: str, queue_id: int) -> tuple[pa.Array, pa.Array, pa.Array]:
    """The topic, brokerName and queueId columns of a full batch of one queue's rows, made once per queue a
    worker reads (a smaller batch takes a slice): repeating them for every batch cost ~2% of a read task's
    CPU."""
    return (
        repeat_scalar(binary_scalar(topic, pa.string()), ARROW_BATCH_ROWS),
        repeat_scalar(binary_scalar(broker, pa.string()), ARROW_BATCH_ROWS),
        pa.repeat(int_scalar(queue_id), ARROW_BATCH_ROWS),
    )
