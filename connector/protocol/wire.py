"""Arrow layout of BulkPull payloads (`BulkPullResponse.arrow_ipc`): the extension protocol's wire schema.

Topic, broker and queue are implied by the request; timestamps are epoch milliseconds; `tag_code` is
the Java `String.hashCode` of the tag (0 when untagged); `message_type` is the v2 MessageType number.
"""

from __future__ import annotations

import pyarrow as pa

WIRE_SCHEMA = pa.schema(
    [
        ("queue_offset", pa.int64()),
        ("message_id", pa.string()),
        ("tag", pa.string()),
        ("keys", pa.list_(pa.string())),
        ("body", pa.binary()),
        ("properties", pa.map_(pa.string(), pa.string())),
        ("born_timestamp", pa.timestamp("ms")),
        ("store_timestamp", pa.timestamp("ms")),
        ("born_host", pa.string()),
        ("reconsume_times", pa.int32()),
        ("message_group", pa.string()),
        ("delivery_timestamp", pa.timestamp("ms")),
        ("message_type", pa.int8()),
        ("tag_code", pa.int32()),
    ]
)


def decode_payload(payload: bytes | memoryview) -> pa.Table:
    """Reads one BulkPull payload (an Arrow IPC stream) without copying the buffers."""
    return pa.ipc.open_stream(pa.py_buffer(payload)).read_all()
