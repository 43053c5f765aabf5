"""What gRPC itself costs a Python server per request, with nothing done with the request: the floor under
the emulator's SendMessage (and BulkPull) CPU per message.

    python -m benchmarks.grpc_floor [--bytes 281000] [--requests 800] [--in-flight 8]

A `grpc.aio` server in its own process answers each unary call with 20 bytes; a client sends `--requests`
requests of `--bytes` bytes (the default: 1,250 of the writer's 225-byte messages) with `--in-flight` calls
outstanding. Prints the server's CPU per request and per KiB, and per message for the default size.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import time

import grpc
import psutil

_METHOD = "/bench.Floor/Call"
_LIMIT = 64 << 20


def _serve(port_out: mp.Queue) -> None:
    async def main() -> None:
        server = grpc.aio.server(options=[("grpc.max_receive_message_length", _LIMIT)])

        async def call(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
            return b"ok" * 10

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
        with grpc.insecure_channel(
            f"127.0.0.1:{port}", options=[("grpc.max_send_message_length", _LIMIT)]
        ) as ch:
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


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bytes", type=int, default=281_000)
    ap.add_argument("--requests", type=int, default=800)
    ap.add_argument("--in-flight", type=int, default=8)
    args = ap.parse_args(argv)
    per_request = measure(args.bytes, args.requests, args.in_flight)
    print(f"grpc.aio server CPU: {per_request * 1e6:,.0f} µs per {args.bytes:,}-byte request")
    print(f"                     {per_request * 1e6 / (args.bytes / 1024):.2f} µs per KiB")
    print(f"                     {per_request * 1e6 / (args.bytes / 225):.3f} µs per 225-byte message")


if __name__ == "__main__":
    main()
