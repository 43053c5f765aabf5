"""The input columns of the rocketmq sink (README.md, 'Writer options'), checked on the driver (Spark types) and again on the
executors (Arrow types), so an unknown or mistyped column fails before any message is sent.

| column | Spark type | meaning |
|---|---|---|
| `body` | binary or string, required, non-null | the message body |
| `topic` | string | the row's topic; the `topic` option overrides it |
| `tags` | string | the message tag |
| `keys` | string or array<string> | the message keys |
| `properties` | map<string,string> | user properties |
| `messageGroup` | string | FIFO: rows of one group go to one queue, in order |
| `deliveryTimestamp` | timestamp | delayed delivery |

Column names match case-insensitively, as Spark resolves columns.
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    MapType,
    StringType,
    StructType,
    TimestampType,
)

from .errors import SinkInputError

__all__ = [
    "BODY",
    "DELIVERY_TIMESTAMP",
    "KEYS",
    "MESSAGE_GROUP",
    "PROPERTIES",
    "SINK_COLUMNS",
    "TAGS",
    "TOPIC",
    "check_arrow_schema",
    "check_spark_schema",
]

BODY, TOPIC, TAGS, KEYS = "body", "topic", "tags", "keys"
PROPERTIES, MESSAGE_GROUP, DELIVERY_TIMESTAMP = "properties", "messageGroup", "deliveryTimestamp"
SINK_COLUMNS = (BODY, TOPIC, TAGS, KEYS, PROPERTIES, MESSAGE_GROUP, DELIVERY_TIMESTAMP)

_EXPECTED = {
    BODY: "binary or string",
    TOPIC: "string",
    TAGS: "string",
    KEYS: "string or array<string>",
    PROPERTIES: "map<string,string>",
    MESSAGE_GROUP: "string",
    DELIVERY_TIMESTAMP: "timestamp",
}


def _spark_ok(name: str, t: DataType) -> bool:
    if name == BODY:
        return isinstance(t, BinaryType | StringType)
    if name == KEYS:
        return isinstance(t, StringType) or (
            isinstance(t, ArrayType) and isinstance(t.elementType, StringType)
        )
    if name == PROPERTIES:
        return (
            isinstance(t, MapType)
            and isinstance(t.keyType, StringType)
            and isinstance(t.valueType, StringType)
        )
    if name == DELIVERY_TIMESTAMP:
        return isinstance(t, TimestampType)
    return isinstance(t, StringType)


def _is_str(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def _is_bin(t: pa.DataType) -> bool:
    return pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t)


def _arrow_ok(name: str, t: pa.DataType) -> bool:
    if name == BODY:
        return _is_bin(t) or _is_str(t)
    if name == KEYS:
        return _is_str(t) or ((pa.types.is_list(t) or pa.types.is_large_list(t)) and _is_str(t.value_type))
    if name == PROPERTIES:
        return pa.types.is_map(t) and _is_str(t.key_type) and _is_str(t.item_type)
    if name == DELIVERY_TIMESTAMP:
        return pa.types.is_timestamp(t)
    return _is_str(t)


def _layout(
    fields: list[tuple[str, object]],
    type_ok: Callable[[str, object], bool],
    type_name: Callable[[object], str],
    require_topic: bool,
) -> dict[str, str]:
    canonical = {c.lower(): c for c in SINK_COLUMNS}
    layout: dict[str, str] = {}
    unknown: list[str] = []
    for name, dtype in fields:
        c = canonical.get(name.lower())
        if c is None:
            unknown.append(name)
            continue
        if c in layout:
            raise SinkInputError(
                f"rocketmq sink: columns '{layout[c]}' and '{name}' both map to '{c}' "
                "(column names are case-insensitive); keep one"
            )
        if not type_ok(c, dtype):
            raise SinkInputError(
                f"rocketmq sink: column '{name}' has type {type_name(dtype)}; expected {_EXPECTED[c]}"
                + (
                    " (cast it, e.g. col('" + name + "').cast('timestamp'))"
                    if c == DELIVERY_TIMESTAMP
                    else ""
                )
            )
        layout[c] = name
    if unknown:
        raise SinkInputError(
            f"rocketmq sink: unknown column{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(repr(u) for u in unknown)}; the accepted columns are {', '.join(SINK_COLUMNS)} "
            "(drop or rename the others, e.g. pack them into 'properties' or 'body')"
        )
    if BODY not in layout:
        raise SinkInputError(
            "rocketmq sink: the required column 'body' (binary or string) is missing; "
            f"the accepted columns are {', '.join(SINK_COLUMNS)}"
        )
    if require_topic and TOPIC not in layout:
        raise SinkInputError(
            "rocketmq sink: no topic: set option 'topic' or give the DataFrame a string column 'topic'"
        )
    return layout


def check_spark_schema(schema: StructType, topic_option: str | None) -> dict[str, str]:
    """Checks the DataFrame's schema on the driver; returns {sink column → DataFrame column name}."""
    return _layout(
        [(f.name, f.dataType) for f in schema.fields],
        _spark_ok,  # type: ignore[arg-type]
        lambda t: t.simpleString(),  # type: ignore[attr-defined]
        require_topic=topic_option is None,
    )


def check_arrow_schema(schema: pa.Schema, topic_option: str | None) -> dict[str, str]:
    """Checks a RecordBatch's schema on an executor (the same rules with Arrow types); returns the layout."""
    return _layout(
        [(f.name, f.type) for f in schema],
        _arrow_ok,  # type: ignore[arg-type]
        str,
        require_topic=topic_option is None,
    )
