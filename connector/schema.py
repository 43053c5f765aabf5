"""The reader's fixed schema (SPEC §4.2) and the vectorized conversion of pulled messages into it.

`SCHEMA` is built in code (`StructType.fromDDL` needs an active session); `ARROW_SCHEMA` is exactly what
Spark expects from `read()` (`to_arrow_schema(SCHEMA, timezone="UTC")`: nullability, `timestamp[us, UTC]`,
map entries `struct<key not null, value>`), so batches pass Spark's equality check with no per-row work.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_schema
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

ARROW_SCHEMA: pa.Schema = to_arrow_schema(SCHEMA, timezone="UTC")

_T = {f.name: f.type for f in ARROW_SCHEMA}
_EMPTY_KEYS = pa.scalar([], type=_T["keys"])
_EMPTY_PROPERTIES = pa.scalar([], type=_T["properties"])


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


def _convert(
    batch: pa.RecordBatch, topic: pa.Scalar, broker: pa.Scalar, queue_id: pa.Scalar
) -> pa.RecordBatch:
    n = batch.num_rows
    col = batch.column
    ts = _T["bornTimestamp"]
    arrays = [
        pa.repeat(topic, n),
        pa.repeat(broker, n),
        pa.repeat(queue_id, n),
        col("queue_offset"),
        col("message_id"),
        col("tag"),
        _no_nulls(col("keys").cast(_T["keys"]), _EMPTY_KEYS),
        _no_nulls(col("body"), pa.scalar(b"", pa.binary())),
        _no_nulls(col("properties").cast(_T["properties"]), _EMPTY_PROPERTIES),
        col("born_timestamp").cast(ts),
        col("store_timestamp").cast(ts),
        col("born_host"),
        _no_nulls(col("reconsume_times").cast(pa.int32()), pa.scalar(0, pa.int32())),
        col("message_group"),
        col("delivery_timestamp").cast(ts),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)


def to_record_batches(
    table: pa.Table | pa.RecordBatch, topic: str, broker: str, queue_id: int
) -> list[pa.RecordBatch]:
    """A pulled table (`connector.protocol.wire.WIRE_SCHEMA`) of one queue → RecordBatches of ARROW_SCHEMA.

    Columns are cast or repeated as whole arrays (no per-message Python); empty input gives no batches.
    """
    batches = [table] if isinstance(table, pa.RecordBatch) else table.to_batches()
    t = pa.scalar(topic, pa.string())
    b = pa.scalar(broker, pa.string())
    q = pa.scalar(queue_id, pa.int32())
    return [_convert(batch, t, b, q) for batch in batches if batch.num_rows]
