"""BulkPull payloads (`BulkPullResponse.arrow_ipc`): one Arrow IPC stream of MESSAGE_SCHEMA rows."""

from __future__ import annotations

import pyarrow as pa

from ..message_schema import MESSAGE_SCHEMA


def encode_payload(batch: pa.RecordBatch | pa.Table) -> bytes:
    """Serializes a batch or table as one Arrow IPC stream.

    The stream is sized first (a mock write copies nothing) and then written into one buffer of exactly
    that size, instead of a growing one that is copied at every doubling.
    """

    def write(sink: pa.NativeFile) -> None:
        with pa.ipc.new_stream(sink, MESSAGE_SCHEMA) as writer:
            if isinstance(batch, pa.Table):
                writer.write_table(batch)
            else:
                writer.write_batch(batch)

    mock = pa.MockOutputStream()
    write(mock)
    buf = pa.allocate_buffer(mock.size())
    write(pa.FixedSizeBufferWriter(buf))
    return buf.to_pybytes()


def decode_payload(payload: bytes | memoryview) -> pa.Table:
    """Reads one BulkPull payload without copying the buffers."""
    return pa.ipc.open_stream(pa.py_buffer(payload)).read_all()
