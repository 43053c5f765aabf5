"""The Arrow layout of stored messages: the emulator's consume-queue segments and commit-log records, the
bulk-pull payload (Arrow IPC, `table_to_ipc`), and the table a client's pull decodes into before the reader
turns it into Spark rows.

Topic, broker and queue are implied by where the rows come from; timestamps are epoch milliseconds;
`tag_code` is the Java `String.hashCode` of the tag (0 when untagged); `message_type` is the v2 MessageType
number (1 NORMAL, 2 FIFO, 3 DELAY, 4 TRANSACTION).
"""

from __future__ import annotations

import pyarrow as pa

MESSAGE_SCHEMA = pa.schema(
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

# `message_type` values (the numbers of apache.rocketmq.v2 MessageType).
NORMAL, FIFO, DELAY, TRANSACTION = 1, 2, 3, 4
MESSAGE_TYPE_NAMES = {NORMAL: "NORMAL", FIFO: "FIFO", DELAY: "DELAY", TRANSACTION: "TRANSACTION"}


def write_ipc(rows: pa.RecordBatch | pa.Table, sink: pa.NativeFile) -> int:
    """Writes `rows` to `sink` as one Arrow IPC stream of MESSAGE_SCHEMA; the bytes written."""
    start = sink.tell()
    with pa.ipc.new_stream(sink, MESSAGE_SCHEMA) as writer:
        if isinstance(rows, pa.Table):
            writer.write_table(rows)
        else:
            writer.write_batch(rows)
    return sink.tell() - start


class _Gather:
    """A write-only file that keeps what it is given: Arrow's IPC writer hands it the arrays' buffers as views
    of their own memory (small pieces, the metadata and padding, as bytes)."""

    def __init__(self) -> None:
        self.parts: list[memoryview] = []
        self.size = 0
        self.closed = False

    def write(self, data: bytes | pa.Buffer) -> int:
        view = memoryview(data)
        self.parts.append(view)
        self.size += view.nbytes
        return view.nbytes

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def ipc_parts(rows: pa.RecordBatch | pa.Table) -> list[memoryview]:
    """`rows` as one Arrow IPC stream of MESSAGE_SCHEMA in pieces whose concatenation is the stream, the
    arrays' buffers among them not copied: for a socket that sends the pieces as they are."""
    sink = _Gather()
    write_ipc(rows, pa.PythonFile(sink, mode="w"))
    return sink.parts


def table_to_ipc(rows: pa.RecordBatch | pa.Table) -> bytes:
    """Serializes a batch or table as one Arrow IPC stream.

    The stream is sized first (a mock write copies nothing) and then written into one buffer of exactly
    that size, instead of a growing one that is copied at every doubling.
    """
    buf = pa.allocate_buffer(write_ipc(rows, pa.MockOutputStream()))
    write_ipc(rows, pa.FixedSizeBufferWriter(buf))
    return buf.to_pybytes()


def ipc_to_table(payload: bytes | memoryview) -> pa.Table:
    """Reads one Arrow IPC stream of MESSAGE_SCHEMA rows without copying the buffers."""
    return pa.ipc.open_stream(pa.py_buffer(payload)).read_all()
