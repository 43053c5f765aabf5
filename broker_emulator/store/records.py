"""Column layout of stored messages: the Arrow schema of consume-queue segments and of bulk-pull payloads."""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

# Columns served to clients by bulk pull (the "wire schema"); topic/broker/queue are implied by the request.
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
WIRE_COLUMNS = WIRE_SCHEMA.names


@dataclass
class MessageColumns:
    """Messages of one (topic, queue) append, held column-wise so a batch is built without per-row objects."""

    message_id: list[str] = field(default_factory=list)
    tag: list[str | None] = field(default_factory=list)
    keys: list[list[str]] = field(default_factory=list)
    body: list[bytes] = field(default_factory=list)
    properties: list[list[tuple[str, str]]] = field(default_factory=list)
    born_timestamp: list[int] = field(default_factory=list)
    born_host: list[str] = field(default_factory=list)
    reconsume_times: list[int] = field(default_factory=list)
    message_group: list[str | None] = field(default_factory=list)
    delivery_timestamp: list[int | None] = field(default_factory=list)
    message_type: list[int] = field(default_factory=list)
    tag_code: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.body)

    def append(
        self,
        *,
        message_id: str,
        tag: str | None,
        keys: list[str],
        body: bytes,
        properties: list[tuple[str, str]],
        born_timestamp: int,
        born_host: str,
        reconsume_times: int,
        message_group: str | None,
        delivery_timestamp: int | None,
        message_type: int,
        tag_code: int,
    ) -> None:
        self.message_id.append(message_id)
        self.tag.append(tag)
        self.keys.append(keys)
        self.body.append(body)
        self.properties.append(properties)
        self.born_timestamp.append(born_timestamp)
        self.born_host.append(born_host)
        self.reconsume_times.append(reconsume_times)
        self.message_group.append(message_group)
        self.delivery_timestamp.append(delivery_timestamp)
        self.message_type.append(message_type)
        self.tag_code.append(tag_code)

    def to_batch(self, base_offset: int, store_timestamp: int) -> pa.RecordBatch:
        """Builds the stored batch: offsets base..base+n-1, one store timestamp for the whole append."""
        n = len(self)
        arrays = [
            pa.array(range(base_offset, base_offset + n), pa.int64()),
            pa.array(self.message_id, pa.string()),
            pa.array(self.tag, pa.string()),
            pa.array(self.keys, pa.list_(pa.string())),
            pa.array(self.body, pa.binary()),
            pa.array(self.properties, pa.map_(pa.string(), pa.string())),
            pa.array(self.born_timestamp, pa.timestamp("ms")),
            pa.array([store_timestamp] * n, pa.timestamp("ms")),
            pa.array(self.born_host, pa.string()),
            pa.array(self.reconsume_times, pa.int32()),
            pa.array(self.message_group, pa.string()),
            pa.array(self.delivery_timestamp, pa.timestamp("ms")),
            pa.array(self.message_type, pa.int8()),
            pa.array(self.tag_code, pa.int32()),
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=WIRE_SCHEMA)


def batch_to_ipc(batch: pa.RecordBatch | pa.Table) -> bytes:
    """Serializes a batch or table as one Arrow IPC stream."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, WIRE_SCHEMA) as writer:
        if isinstance(batch, pa.Table):
            writer.write_table(batch)
        else:
            writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def ipc_to_table(payload: bytes | memoryview) -> pa.Table:
    """Reads an Arrow IPC stream written by `batch_to_ipc`."""
    return pa.ipc.open_stream(pa.py_buffer(payload)).read_all()
