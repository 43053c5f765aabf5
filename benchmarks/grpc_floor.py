"""What gRPC itself costs, with nothing done with the bytes: the floor under the emulator's SendMessage and
BulkPull CPU per message, and under the reader's.

    python -m benchmarks.grpc_floor [--bytes 281000] [--requests 800] [--in-flight 8]
    python -m benchmarks.grpc_floor --response 6900000 [--message-bytes 210]

A `grpc.aio` server in its own process answers each unary call with 20 bytes; a client sends `--requests`
requests of `--bytes` bytes (the default: 1,250 of the writer's 225-byte messages) with `--in-flight` calls
outstanding. Prints the server's CPU per request and per KiB, and per message for the default size.

`--response N` turns it around, as a bulk pull does: each call is answered with the same N bytes, held
ready by the server, to a client calling from two threads (a read task's pulls on this machine's two cores
are two at a time). Prints the CPU of each side per response and per `--message-bytes` message, and the same
for the bytes sent over a plain socket (an asyncio server, length-prefixed answers read into one buffer per
answer): what the emulator's pull channel moves them with instead.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import socket
import struct
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager

import grpc
import psutil

from benchmarks.cpu_time import client_cpu
from benchmarks.socket_io import read_exact, read_into

_METHOD = "/bench.Floor/Call"
_LIMIT = 64 << 20


_OPTIONS = [("grpc.max_receive_message_length", _LIMIT), ("grpc.max_send_message_length", _LIMIT)]
MIN_FLOOR_BYTES = 400 << 20  # a socket client reads 400 MiB in ~0.1 s of CPU here


def _serve(port_out: mp.Queue, answer_bytes: int = 20) -> None:
    async def main() -> None:
        server = grpc.aio.server(options=_OPTIONS)
        answer = b"ok" * (answer_bytes // 2) + b"k" * (answer_bytes % 2)

        async def call(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
            return answer

        handler = grpc.unary_unary_rpc_method_handler(call)
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("bench.Floor", {"Call": handler}),)
        )
        port_out.put(server.add_insecure_port("127.0.0.1:0"))
        await server.start()
        await server.wait_for_termination()

    asyncio.run(main())


def measure(size: int, requests: int, in_flight: int) -> float:
    """Server CPU seconds per request of `size` bytes."""
    ports: mp.Queue = mp.Queue()
    proc = mp.Process(target=_serve, args=(ports,), daemon=True)
    proc.start()
    try:
        port = ports.get(timeout=30)
        server = psutil.Process(proc.pid)
        payload = b"x" * size
        with grpc.insecure_channel(f"127.0.0.1:{port}", options=_OPTIONS) as ch:
            call = ch.unary_unary(_METHOD)
            for _ in range(20):
                call(payload, timeout=30)
            cpu0 = sum(server.cpu_times()[:2])
            pending: list[grpc.Future] = []
            for _ in range(requests):
                pending.append(call.future(payload, timeout=30))
                if len(pending) >= in_flight:
                    pending.pop(0).result()
            for f in pending:
                f.result()
            time.sleep(0.05)
            return (sum(server.cpu_times()[:2]) - cpu0) / requests
    finally:
        proc.kill()
        proc.join(10)


def _answered(
    serve: Callable[[mp.Queue, int], None],
    size: int,
    caller: Callable[[int, int], AbstractContextManager[Callable[[int], None]]],
    responses: int,
    threads: int,
) -> tuple[float, float]:
    """Starts `serve` (answering `size` bytes) in its own process; `caller(port, size)` gives a function making
    that many calls; CPU seconds per response of the server and of this process, calling from `threads`
    threads after 4 unmeasured calls. Small responses are asked for more often, so that at least
    MIN_FLOOR_BYTES move: CPU times count in 10 ms ticks."""
    responses = max(responses, -(-MIN_FLOOR_BYTES // max(size, 1)))
    ports: mp.Queue = mp.Queue()
    proc = mp.Process(target=serve, args=(ports, size), daemon=True)
    proc.start()
    try:
        port = ports.get(timeout=30)
        server = psutil.Process(proc.pid)
        with caller(port, size) as calls:
            calls(4)
            server0 = sum(server.cpu_times()[:2])
            per_thread = responses // threads
            with client_cpu() as mine, ThreadPoolExecutor(threads) as pool:
                list(pool.map(calls, [per_thread] * threads))
            time.sleep(0.05)
            done = per_thread * threads
            return (sum(server.cpu_times()[:2]) - server0) / done, mine.seconds / done
    finally:
        proc.kill()
        proc.join(10)


@contextmanager
def _grpc_caller(port: int, size: int) -> Iterator[Callable[[int], None]]:
    with grpc.insecure_channel(f"127.0.0.1:{port}", options=_OPTIONS) as ch:
        call = ch.unary_unary(_METHOD)

        def calls(count: int) -> None:
            for _ in range(count):
                if len(call(b"", timeout=60)) != size:
                    raise RuntimeError("the floor server answered a response of another size")

        yield calls


def response_floor(size: int, responses: int = 60, threads: int = 2) -> tuple[float, float]:
    """CPU seconds per response of `size` bytes (a bulk pull's, answered from memory) of the server and of
    this process, the client, calling from `threads` threads."""
    return _answered(_serve, size, _grpc_caller, responses, threads)


def _serve_socket(port_out: mp.Queue, answer_bytes: int) -> None:
    async def main() -> None:
        frame = struct.pack(">I", answer_bytes) + b"x" * answer_bytes

        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                while True:
                    await reader.readexactly(4)
                    writer.write(frame)
                    await writer.drain()
            except (asyncio.IncompleteReadError, ConnectionError):
                writer.close()

        server = await asyncio.start_server(answer, "127.0.0.1", 0)
        port_out.put(server.sockets[0].getsockname()[1])
        await server.serve_forever()

    asyncio.run(main())


@contextmanager
def _socket_caller(port: int, size: int) -> Iterator[Callable[[int], None]]:
    def calls(count: int) -> None:
        with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
            head = bytearray(4)
            for _ in range(count):
                sock.sendall(b"pull")
                read_into(sock, memoryview(head))
                (length,) = struct.unpack(">I", head)
                if length != size:
                    raise RuntimeError("the floor server answered a response of another size")
                read_exact(sock, length)

    yield calls


def socket_floor(size: int, responses: int = 60, threads: int = 2) -> tuple[float, float]:
    """As `response_floor`, over a plain socket: each request (4 bytes) is answered with a 4-byte length and
    the same `size` bytes, read into a new buffer; CPU seconds per response of the server and of this
    process."""
    return _answered(_serve_socket, size, _socket_caller, responses, threads)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bytes", type=int, default=281_000)
    ap.add_argument("--requests", type=int, default=800)
    ap.add_argument("--in-flight", type=int, default=8)
    ap.add_argument("--response", type=int, default=0, help="answer every call with this many bytes")
    ap.add_argument("--message-bytes", type=int, default=210, help="with --response: bytes per message")
    args = ap.parse_args(argv)
    if args.response:
        per_msg = args.message_bytes / args.response * 1e6
        for label, floor in (("gRPC", response_floor), ("plain socket", socket_floor)):
            server, client = floor(args.response)
            print(
                f"{label}, {args.response:,}-byte responses, CPU per response: server {server * 1e6:,.0f} µs, "
                f"client {client * 1e6:,.0f} µs"
            )
            print(
                f"  per {args.message_bytes}-byte message: server {server * per_msg:.3f} µs, client "
                f"{client * per_msg:.3f} µs"
            )
        return
    per_request = measure(args.bytes, args.requests, args.in_flight)
    print(f"grpc.aio server CPU: {per_request * 1e6:,.0f} µs per {args.bytes:,}-byte request")
    print(f"                     {per_request * 1e6 / (args.bytes / 1024):.2f} µs per KiB")
    print(f"                     {per_request * 1e6 / (args.bytes / 225):.3f} µs per 225-byte message")


if __name__ == "__main__":
    main()
