"""Long-poll wake-up : a bulk pull held at a queue's end is answered after a send to that queue.

Each try starts the connector client's pull (long polling 5 s) in a thread, waits until the emulator
reports it held (admin `stats`), sends one message to the queue and times send → pull answered."""

from __future__ import annotations

import json
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import grpc

from connector.clients import PullStatus, get_client
from connector.config import ClientConfig
from rocketmq_protocol.extension import pb, pb_grpc
from rocketmq_protocol.grpc_v2 import definition_pb2 as d
from rocketmq_protocol.grpc_v2 import service_pb2 as s
from rocketmq_protocol.grpc_v2 import service_pb2_grpc as sg

HOLD_MS = 5000
MD = [("x-mq-client-id", "bench-poll@1"), ("x-mq-queue-id-explicit", "true")]


def _held(admin: pb_grpc.EmulatorServiceStub) -> int:
    resp = admin.Admin(pb.AdminRequest(verb="stats"), timeout=10)
    return json.loads(resp.result_json)["held_requests"]


def wake_up(endpoints: str, topic: str, tries: int) -> list[float]:
    """Send → held pull answered, in seconds, for each of `tries` tries on the topic's first queue."""
    client = get_client(ClientConfig(endpoints))
    queue = client.route(topic)[0]
    channel = grpc.insecure_channel(queue.endpoint)
    admin, sender = pb_grpc.EmulatorServiceStub(channel), sg.MessagingServiceStub(channel)
    offset = client.max_offset(queue)
    out = []
    try:
        with ThreadPoolExecutor(1) as pool:
            for _ in range(tries):
                before = _held(admin)

                def pull(at: int = offset):  # type: ignore[no-untyped-def]
                    res = client.pull(queue, at, 32, group="bench-poll", long_polling_ms=HOLD_MS)
                    return res, time.perf_counter()

                fut = pool.submit(pull)
                deadline = time.monotonic() + 5
                while _held(admin) <= before and not fut.done() and time.monotonic() < deadline:
                    time.sleep(0.002)
                sp = d.SystemProperties(message_id=uuid.uuid4().hex, queue_id=queue.queue_id)
                msg = d.Message(topic=d.Resource(name=topic), body=b"wake", system_properties=sp)
                t0 = time.perf_counter()
                resp = sender.SendMessage(s.SendMessageRequest(messages=[msg]), metadata=MD, timeout=10)
                if resp.status.code != d.OK:
                    raise RuntimeError(f"send failed: {resp.status}")
                res, t_done = fut.result(timeout=HOLD_MS / 1000 + 10)
                if res.status != PullStatus.FOUND:
                    raise RuntimeError(f"the held pull answered {res.status}, not the message sent")
                out.append(t_done - t0)
                offset = res.next_offset
    finally:
        channel.close()
    return out
