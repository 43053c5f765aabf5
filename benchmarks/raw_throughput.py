"""Raw emulator throughput on loopback, no Spark: batched SendMessage and bulk pull decoded to Arrow.

    python -m benchmarks.raw_throughput [--messages 500000] [--size 100] [--batch 1000] [--inflight 4]

Starts `python -m broker_emulator serve` as a subprocess (in-memory unless --data-dir), warms it up
(--warmup requests sent to and pulled from a topic of their own, so one-time lazy imports and first-call
costs of both processes are not timed), sends --messages bodies of --size bytes in SendMessage requests
of --batch messages (one queue each, up to --inflight requests outstanding), then bulk-pulls every queue
back and decodes each payload to Arrow. Prints messages acknowledged per second and messages decoded per second.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import grpc

from benchmarks import die_with_parent
from connector.clients import PullStatus, get_client
from connector.config import ClientConfig
from connector.options import DEFAULT_PULL_BATCH_SIZE
from connector.queues import RouteEntry
from connector.read_task import PULL_MAX_BYTES
from connector.worker_heap import keep_freed_memory
from rocketmq_protocol.extension import pb, pb_grpc
from rocketmq_protocol.grpc_v2 import definition_pb2 as d
from rocketmq_protocol.grpc_v2 import service_pb2 as s
from rocketmq_protocol.grpc_v2 import service_pb2_grpc as sg
from rocketmq_protocol.message_schema import ipc_to_table, table_to_ipc

TOPIC = "bench"
NAME_SERVER: str | None = None  # the last started emulator's name server (remoting), when it has one
WARMUP_TOPIC = "bench-warmup"
MD = [("x-mq-client-id", "bench@1"), ("x-mq-queue-id-explicit", "true")]


def start_emulator(
    queues: int,
    data_dir: str | None,
    *,
    brokers: int = 1,
    topics: Sequence[str] = (),
    options: Sequence[str] = (),
) -> tuple[subprocess.Popen, str]:
    """`python -m broker_emulator serve` with TOPIC (`queues` per broker), WARMUP_TOPIC (1 queue) and
    `topics` (NAME[:QUEUES]) on `brokers` brokers, and more `serve` `options`; returns the process and its
    `;`-separated endpoints. The name server it prints (its remoting front end), if any, is left in
    `NAME_SERVER`."""
    cmd = [
        sys.executable,
        die_with_parent.__file__,
        str(os.getpid()),
        sys.executable,
        "-m",
        "broker_emulator",
        "serve",
        "--port",
        "0",
        "--namesrv-port",
        "0",
        "--remoting-port",
        "0",
        "--brokers",
        str(brokers),
        "--queues",
        str(queues),
        "--topic",
        f"{TOPIC}:{queues}",
        "--topic",
        f"{WARMUP_TOPIC}:1",
        "--log-level",
        "WARNING",
    ]
    for t in topics:
        cmd += ["--topic", t]
    cmd += options
    cmd += ["--data-dir", data_dir] if data_dir else ["--in-memory"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:  # the emulator keeps printing; read its stdout in the background
        for line in proc.stdout:  # type: ignore[union-attr]
            lines.put(line)

    threading.Thread(target=pump, daemon=True, name="emulator-stdout").start()
    deadline = time.time() + 30
    endpoints = None
    global NAME_SERVER
    NAME_SERVER = None
    while time.time() < deadline:
        try:
            line = lines.get(timeout=0.5 if endpoints else max(deadline - time.time(), 0.01))
        except queue.Empty:
            if endpoints:
                return proc, endpoints  # no name-server line: an emulator without the remoting front end
            continue
        m = re.match(r"endpoints: (\S+)", line)
        if m:
            endpoints = m.group(1)
        m = re.match(r"name server: (\S+)", line)
        if m:
            NAME_SERVER = m.group(1)
        if endpoints and NAME_SERVER:
            return proc, endpoints
    if endpoints:
        return proc, endpoints
    proc.kill()
    raise RuntimeError("emulator did not start")


def build_requests(
    n: int, size: int, batch: int, queues: int, topic: str = TOPIC
) -> list[s.SendMessageRequest]:
    body = b"x" * size
    reqs = []
    now = int(time.time())
    for start in range(0, n, batch):
        q = (start // batch) % queues
        msgs = []
        for _ in range(start, min(start + batch, n)):
            sp = d.SystemProperties(
                message_id=uuid.uuid4().hex, queue_id=q, tag="bench", body_encoding=d.IDENTITY
            )
            sp.born_timestamp.seconds = now
            msgs.append(d.Message(topic=d.Resource(name=topic), body=body, system_properties=sp))
        reqs.append(s.SendMessageRequest(messages=msgs))
    return reqs


def warm_up(endpoint: str, requests: int, batch: int, pull_batch: int) -> None:
    """Sends `requests` requests to WARMUP_TOPIC and pulls them back (untimed)."""
    if requests <= 0:
        return
    bench_send(endpoint, build_requests(requests * batch, 100, batch, 1, WARMUP_TOPIC), 1)
    bench_pull(endpoint, 1, pull_batch, WARMUP_TOPIC)


def bench_send(endpoint: str, reqs: list[s.SendMessageRequest], inflight: int) -> float:
    ch = grpc.insecure_channel(endpoint, options=[("grpc.max_send_message_length", 256 << 20)])
    stub = sg.MessagingServiceStub(ch)
    total = sum(len(r.messages) for r in reqs)
    t0 = time.perf_counter()
    pending = []
    for r in reqs:
        pending.append(stub.SendMessage.future(r, metadata=MD, timeout=60))
        if len(pending) >= inflight:
            resp = pending.pop(0).result()
            assert resp.status.code == d.OK, resp.status
    for f in pending:
        assert f.result().status.code == d.OK
    dt = time.perf_counter() - t0
    ch.close()
    return total / dt


def bench_pull(endpoint: str, queues: int, max_messages: int, topic: str = TOPIC) -> tuple[float, int]:
    ch = grpc.insecure_channel(endpoint, options=[("grpc.max_receive_message_length", 256 << 20)])
    stub = pb_grpc.EmulatorServiceStub(ch)
    total = 0
    t0 = time.perf_counter()
    for q in range(queues):
        offset = 0
        while True:
            r = stub.BulkPull(
                pb.BulkPullRequest(
                    group="bench", topic=topic, queue_id=q, offset=offset, max_messages=max_messages
                ),
                timeout=60,
            )
            if r.code != d.OK:
                break
            table = ipc_to_table(r.arrow_ipc)
            total += table.num_rows
            offset = r.next_offset
    dt = time.perf_counter() - t0
    ch.close()
    return total / dt, total


#: What a read task asks each pull for by default (`pullBatchSize`, and at most 8 MiB of bodies).
READ_TASK_PULL = {"max_messages": DEFAULT_PULL_BATCH_SIZE, "max_bytes": PULL_MAX_BYTES}


def client_pull(
    endpoints: str,
    topic: str,
    max_messages: int,
    threads: int = 2,
    name_server: str | None = None,
    max_bytes: int = 0,
) -> tuple[float, int]:
    """The connector's client (`RocketMQClient.pull`: the bulk protocol, or remoting PULL_MESSAGE with a
    `name_server`) over every queue of `topic`, each answer decoded to an Arrow table; `threads` queues at a
    time (as many pulls in flight as Spark's read tasks have on this machine's two cores), with the malloc
    settings a read task's worker has (`connector/worker_heap.py`); `max_bytes`: a pull's cap on body bytes
    (0: the client's own): (messages/s, messages)."""
    keep_freed_memory()
    config = (
        ClientConfig(name_server=name_server)
        if name_server
        else ClientConfig(endpoints, pull_protocol="bulk")
    )
    client = get_client(config)
    queues = client.route(topic)
    starts = {q: client.min_offset(q) for q in queues}

    def drain(q: RouteEntry) -> int:
        offset, n = starts[q], 0
        while True:
            res = client.pull(q, offset, max_messages, group="bench", max_bytes=max_bytes)
            if res.status != PullStatus.FOUND:
                return n
            n += res.table.num_rows
            offset = res.next_offset

    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        total = sum(pool.map(drain, queues))
    return total / (time.perf_counter() - t0), total


def bulk_response_bytes(endpoints: str, topic: str) -> tuple[int, int]:
    """The bytes and messages of one bulk pull's Arrow payload as a read task asks for it (READ_TASK_PULL)
    from the first queue of `topic`: what `benchmarks.grpc_floor.response_floor` moves to set the gRPC
    transport's own cost beside the bulk pull's."""
    client = get_client(ClientConfig(endpoints, pull_protocol="bulk"))
    q = client.route(topic)[0]
    res = client.pull(q, client.min_offset(q), group="bench", **READ_TASK_PULL)
    return len(table_to_ipc(res.table)), res.table.num_rows


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=500_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--inflight", type=int, default=4)
    ap.add_argument("--queues", type=int, default=8)
    ap.add_argument("--pull-batch", type=int, default=8192)
    ap.add_argument("--warmup", type=int, default=2, help="untimed warm-up requests (0: none)")
    ap.add_argument("--data-dir", help="durable emulator storage (default: in-memory)")
    args = ap.parse_args(argv)
    proc, endpoint = start_emulator(args.queues, args.data_dir)
    try:
        warm_up(endpoint, args.warmup, args.batch, args.pull_batch)
        reqs = build_requests(args.messages, args.size, args.batch, args.queues)
        send_rate = bench_send(endpoint, reqs, args.inflight)
        pull_rate, pulled = bench_pull(endpoint, args.queues, args.pull_batch)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    if pulled != args.messages:
        raise SystemExit(f"pulled {pulled} messages, sent {args.messages}")
    result = {
        "messages": args.messages,
        "body_bytes": args.size,
        "batched_send_msgs_per_s": round(send_rate),
        "bulk_pull_msgs_per_s": round(pull_rate),
        "storage": "durable (sync flush)" if args.data_dir else "in-memory",
        "cpus": os.cpu_count(),
    }
    print(f"batched send : {send_rate:12,.0f} msgs/s acknowledged  (target >= 300,000)")
    print(f"bulk pull    : {pull_rate:12,.0f} msgs/s decoded to Arrow (target >= 1,000,000)")
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
