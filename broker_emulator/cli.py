"""Command line: `python -m broker_emulator serve ...` and `python -m broker_emulator admin ...`."""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import logging
import signal
import sys

from . import admin
from .core.acl import AclError
from .core.cluster import DEFAULT_DELAY_LEVELS, DEFAULT_MAX_TRANSFER_COUNT, ClusterConfig
from .core.retry import parse_delay_levels
from .remoting.record_cache import DEFAULT_BUDGET_BYTES
from .server import EmulatorServer


def _topic_arg(value: str) -> tuple[str, int | None]:
    name, _, queues = value.partition(":")
    if not name:
        raise argparse.ArgumentTypeError(f"--topic {value!r}: expected NAME[:QUEUES]")
    if queues:
        try:
            return name, int(queues)
        except ValueError:
            raise argparse.ArgumentTypeError(f"--topic {value!r}: QUEUES must be an integer") from None
    return name, None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rocketmq-emulator", description="RocketMQ broker emulator (gRPC v2 and remoting)"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("serve", help="run brokers in the foreground")
    p.add_argument("--brokers", type=int, default=1, help="number of brokers (broker-a, broker-b, ...)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument(
        "--port", type=int, default=8081, help="port of broker-a; broker i listens on port+i (0: any)"
    )
    p.add_argument(
        "--namesrv-port", type=int, default=9876, help="remoting name server port (0: any; default 9876)"
    )
    p.add_argument(
        "--remoting-port",
        type=int,
        default=10911,
        help="remoting port of broker-a; broker i listens on remoting-port+i (0: any; default 10911)",
    )
    store = p.add_mutually_exclusive_group()
    store.add_argument("--data-dir", help="durable storage directory")
    store.add_argument("--in-memory", action="store_true", help="keep everything in memory (default)")
    p.add_argument("--topic", action="append", default=[], type=_topic_arg, metavar="NAME[:QUEUES]")
    p.add_argument("--queues", type=int, default=8, help="default queues per broker for new topics")
    p.add_argument("--auto-create-topics", action="store_true")
    p.add_argument(
        "--flush",
        choices=["sync", "async"],
        default="sync",
        help="sync: acknowledge after fsync (group commit); async: flush every 200 ms "
        "(a kill -9 may lose the last 200 ms of acknowledged messages)",
    )
    p.add_argument("--retention-messages", type=int, help="keep at most N messages per queue")
    p.add_argument("--retention-hours", type=float, help="delete messages older than H hours")
    p.add_argument("--max-body-size", type=int, default=4 * 1024 * 1024)
    p.add_argument(
        "--remoting-cache-mb",
        type=int,
        default=DEFAULT_BUDGET_BYTES >> 20,
        help="memory for the encoded records of remoting pull answers, kept for later pulls of the same "
        f"offsets (default {DEFAULT_BUDGET_BYTES >> 20}; 0: encode every answer)",
    )
    p.add_argument(
        "--max-transfer-count",
        type=int,
        default=DEFAULT_MAX_TRANSFER_COUNT,
        help="messages a remoting PULL_MESSAGE answer holds at most (default "
        f"{DEFAULT_MAX_TRANSFER_COUNT}; a real broker's maxTransferCountOnMessageInMemory is 32)",
    )
    p.add_argument(
        "--min-invisible-ms",
        type=int,
        default=10_000,
        help="smallest ReceiveMessage invisible_duration accepted (the proxy's 10 s)",
    )
    p.add_argument(
        "--min-long-polling-ms",
        type=int,
        default=5_000,
        help="shortest time a ReceiveMessage with nothing to return is held (the proxy's 5 s)",
    )
    p.add_argument(
        "--max-retries",
        type=int,
        default=16,
        help="retries of a new consumer group before its DLQ (16: 17 deliveries)",
    )
    p.add_argument(
        "--transaction-check-ms",
        type=int,
        default=6000,
        help="how long a half message waits before the producer is asked to resolve it",
    )
    p.add_argument(
        "--delay-levels",
        default=DEFAULT_DELAY_LEVELS,
        help="delays of levels 1..N for remoting DELAY sends and consumer send-backs "
        '(messageDelayLevel, default "1s 5s 10s 30s 1m ... 2h")',
    )
    p.add_argument(
        "--acl",
        metavar="FILE",
        help="JSON ACL (accounts, topic and group permissions): every RPC must then be signed; "
        "the file is re-read when it changes (or on `admin reload-acl`)",
    )
    p.add_argument("--tls-cert", help="PEM certificate: serve TLS")
    p.add_argument("--tls-key", help="PEM private key for --tls-cert")
    p.add_argument("--log-level", default="INFO")
    admin.build_parser(sub)
    return parser


def _tune_memory() -> None:
    """Keeps large allocations on the heap: a bulk-pull answer is copied several times, and glibc's default
    (mmap for blocks over 128 KiB, trimmed at once) makes every copy fault in fresh pages. Measured: about
    1.5-2x more bulk-pull throughput. Not glibc: nothing to do.

    Linux: no transparent huge pages for this process (PR_SET_THP_DISABLE), as Redis and MongoDB advise for
    a store. The store grows with every message it keeps, and a 2 MiB page faulted in from memory the host
    of a virtual machine took back costs far more than its 512 small pages (2.2 against 0.4 s of kernel
    time per GiB on the project's machine; docs/benchmark-history.md, Findings). A 1,000,000-row write's
    kernel time in the emulator: 0.14-0.19 s without, 0.15-0.62 s with them."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:
        return
    m_trim_threshold, m_mmap_threshold = -1, -3
    libc.mallopt(m_mmap_threshold, 32 * 1024 * 1024)
    libc.mallopt(m_trim_threshold, 256 * 1024 * 1024)
    if sys.platform == "linux":
        pr_set_thp_disable = 41
        libc.prctl(pr_set_thp_disable, 1, 0, 0, 0)


async def _serve(args: argparse.Namespace) -> int:
    if args.brokers < 1:
        print("error: --brokers must be >= 1", file=sys.stderr)
        return 2
    if not 0 <= args.min_long_polling_ms <= 20_000:
        print(
            f"error: --min-long-polling-ms {args.min_long_polling_ms}: expected 0 to 20000", file=sys.stderr
        )
        return 2
    if bool(args.tls_cert) != bool(args.tls_key):
        print("error: --tls-cert and --tls-key go together", file=sys.stderr)
        return 2
    cert = key = None
    if args.tls_cert:
        with open(args.tls_cert, "rb") as f:
            cert = f.read()
        with open(args.tls_key, "rb") as f:
            key = f.read()
    config = ClusterConfig(
        brokers=args.brokers,
        default_queues=args.queues,
        data_dir=args.data_dir,
        host=args.host,
        auto_create_topics=args.auto_create_topics,
        max_body_size=args.max_body_size,
        flush=args.flush,
        retention_messages=args.retention_messages,
        retention_hours=args.retention_hours,
        min_invisible_ms=args.min_invisible_ms,
        max_transfer_count=args.max_transfer_count,
        min_long_polling_ms=args.min_long_polling_ms,
        max_retries=args.max_retries,
        transaction_check_ms=args.transaction_check_ms,
        delay_levels=args.delay_levels,
        acl=args.acl,
    )
    if args.max_transfer_count < 1:
        print(f"error: --max-transfer-count: {args.max_transfer_count} is not a count of messages (>= 1)",
              file=sys.stderr)  # fmt: skip
        return 2
    try:
        parse_delay_levels(args.delay_levels)
    except ValueError as e:
        print(f"error: --delay-levels: {e}", file=sys.stderr)
        return 2
    try:
        server = EmulatorServer(
            config,
            args.port,
            cert,
            key,
            namesrv_port=args.namesrv_port,
            remoting_port=args.remoting_port,
            record_cache_bytes=args.remoting_cache_mb << 20,  # RecordCache reads < 0 as 0
        )
    except AclError as e:
        print(f"error: --acl: {e}", file=sys.stderr)
        return 2
    try:
        await server.start()
    except OSError as e:
        print(f"error: cannot listen: {e} (choose other ports, or 0 for free ones)", file=sys.stderr)
        await server.stop()
        return 2
    for name, queues in args.topic:
        server.cluster.create_topic(name, queues)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(
            sig, stop.set
        )  # before the endpoints are printed: a caller may signal at once
    for b in server.cluster.brokers:
        print(f"{b.name} listening on {b.endpoint} (remoting {b.host}:{b.remoting_port})", flush=True)
    print(f"name server: {server.name_server}", flush=True)
    print(f"endpoints: {server.endpoints}", flush=True)
    await stop.wait()
    print("stopping: flushing stores", flush=True)
    await server.stop()
    print("stopped", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        _tune_memory()
        logging.basicConfig(
            level=args.log_level.upper(),
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
            stream=sys.stderr,
        )
        return asyncio.run(_serve(args))
    return admin.run(args)


if __name__ == "__main__":
    sys.exit(main())
