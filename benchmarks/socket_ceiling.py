"""The read ceiling over a socket: the ceiling's batches, sent to each read task over loopback TCP by a
server process that does nothing else.

`format("bench_socket_ceiling")` plans as `bench_ceiling` does (one partition per queue, each its queue's
message count) and takes one more option, `ceilingServer` (`host:port` of `serving`). A read task
connects, asks for its partition's rows and reads back answers of up to PULL_ROWS rows, each a whole
Arrow IPC stream of the ceiling's 8,192-row batch (its last cut short), read into one buffer as a pull's
answer is, the next one read by a second thread while these are yielded (as a read task keeps its next
pull in flight); it yields the batches without converting them. The server holds the answers ready and
writes them back to back with no request per answer.

So it measures the ceiling plus only moving the reader's own batches from another process over a socket
on the same two cores: no broker's work, no decoding, no conversion. Its rate over the ceiling's is what a
read over a socket would reach here if moving the bytes were all it did.
"""

from __future__ import annotations

import multiprocessing as mp
import socket
import socketserver
import struct
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from benchmarks.ceiling import CeilingReader, batch_ipc, pulled_batch
from benchmarks.socket_io import read_exact
from connector.options import DEFAULT_PULL_BATCH_SIZE
from connector.schema import ARROW_BATCH_ROWS
from connector.worker_heap import freeze_worker_heap

NAME = "bench_socket_ceiling"
_ROWS = struct.Struct(">Q")  # a task's request: its partition's rows
_LENGTH = struct.Struct(">I")  # before each answer: its length in bytes
#: The rows of one answer: as many as a read task's pull asks for.
PULL_ROWS = DEFAULT_PULL_BATCH_SIZE


@dataclass(frozen=True)
class SocketCeilingPartition(InputPartition):
    server: str
    rows: int


def _answer(batch: pa.RecordBatch, rows: int) -> bytes:
    """An answer of `rows` rows: a length, then an IPC stream of `batch` repeated (the last one sliced)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as w:
        left = rows
        while left > 0:
            part = batch if left >= batch.num_rows else batch.slice(0, left)
            w.write_batch(part)
            left -= part.num_rows
    body = sink.getvalue()
    return _LENGTH.pack(body.size) + body.to_pybytes()


def _serve(port_out: mp.Queue, batch_ipc: bytes) -> None:
    batch = pa.ipc.open_stream(batch_ipc).read_next_batch()
    full = _answer(batch, PULL_ROWS)
    tails: dict[int, bytes] = {}

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            head = self.request.recv(_ROWS.size, socket.MSG_WAITALL)
            if len(head) < _ROWS.size:
                return
            (left,) = _ROWS.unpack(head)
            while left > 0:
                take = min(left, PULL_ROWS)
                if take == PULL_ROWS:
                    self.request.sendall(full)
                else:
                    if take not in tails:
                        tails[take] = _answer(batch, take)
                    self.request.sendall(tails[take])
                left -= take

    class Server(socketserver.ThreadingTCPServer):
        daemon_threads = True
        allow_reuse_address = True

    with Server(("127.0.0.1", 0), Handler) as server:
        port_out.put(server.server_address[1])
        server.serve_forever()


@dataclass(frozen=True)
class BatchServer:
    address: str  # host:port, the `ceilingServer` option
    pid: int


@contextmanager
def serving(endpoints: str, topic: str) -> Iterator[BatchServer]:
    """`with serving(endpoints, topic) as server:` a server process holding the ceiling's batch of the
    topic (as `bench_ceiling` plans it), stopped by its pid on leaving."""
    batch, _ = pulled_batch(endpoints, topic, min(PULL_ROWS, ARROW_BATCH_ROWS))
    ctx = mp.get_context("spawn")  # the caller runs Spark's gateway threads: no fork
    ports: mp.Queue = ctx.Queue()
    proc = ctx.Process(target=_serve, args=(ports, batch_ipc(batch)), daemon=True)
    proc.start()
    try:
        yield BatchServer(f"127.0.0.1:{ports.get(timeout=60)}", proc.pid)
    finally:
        proc.kill()
        proc.join(10)


class SocketCeilingReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.ceiling = CeilingReader(options)
        self.server = {k.lower(): v for k, v in options.items()}["ceilingserver"]

    def partitions(self) -> list[InputPartition]:
        _, counts = pulled_batch(self.ceiling.endpoints, self.ceiling.topic, self.ceiling.batch_rows)
        return [SocketCeilingPartition(self.server, n) for n in counts]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The partition's rows, the next answer read by a second thread while this one's are yielded (as
        a read task keeps its next pull in flight)."""
        assert isinstance(partition, SocketCeilingPartition)
        freeze_worker_heap()
        host, port = partition.server.rsplit(":", 1)
        with (
            socket.create_connection((host, int(port)), timeout=60) as sock,
            ThreadPoolExecutor(1, thread_name_prefix="socket-ceiling") as pool,
        ):

            def answer() -> bytearray:
                (size,) = _LENGTH.unpack(read_exact(sock, _LENGTH.size))
                return read_exact(sock, size)

            sock.sendall(_ROWS.pack(partition.rows))
            answers = -(-partition.rows // PULL_ROWS)
            pending = pool.submit(answer)
            for i in range(answers):
                body = pending.result()
                if i + 1 < answers:
                    pending = pool.submit(answer)
                yield from pa.ipc.open_stream(pa.py_buffer(body))


class SocketCeilingSource(DataSource):
    """`spark.read.format("bench_socket_ceiling")`: the ceiling's batches over a socket (module doc)."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        freeze_worker_heap()
        from connector.schema import SCHEMA

        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        freeze_worker_heap()
        return SocketCeilingReader(dict(self.options))
