"""`kill -9` of a durable emulator while producers send: every acknowledged message survives, once."""

from __future__ import annotations

import random
import threading
import time
import uuid

import grpc

from rocketmq_protocol.grpc_v2 import definition_pb2 as d
from rocketmq_protocol.grpc_v2 import service_pb2 as s
from rocketmq_protocol.grpc_v2 import service_pb2_grpc as sg
from tests.support.emulator_proc import EmulatorProcess
from tests.support.helpers import read_queue

TOPIC = "durable"
QUEUES = 4
MD = [("x-mq-client-id", "durability-test")]


def _send_loop(endpoint: str, broker: str, acked: dict, stop: threading.Event, seed: int) -> None:
    """Sends small batches until the broker dies; records (broker, queue, offset) of every OK entry."""
    rng = random.Random(seed)
    ch = grpc.insecure_channel(endpoint)
    stub = sg.MessagingServiceStub(ch)
    try:
        while not stop.is_set():
            q = rng.randrange(QUEUES)
            msgs = []
            for _ in range(rng.randint(1, 20)):
                sp = d.SystemProperties(
                    message_id=uuid.uuid4().hex, queue_id=q, tag="d", body_encoding=d.IDENTITY
                )
                msgs.append(
                    d.Message(
                        topic=d.Resource(name=TOPIC), body=sp.message_id.encode() * 3, system_properties=sp
                    )
                )
            try:
                r = stub.SendMessage(
                    s.SendMessageRequest(messages=msgs),
                    metadata=[*MD, ("x-mq-queue-id-explicit", "true")],
                    timeout=5,
                )
            except grpc.RpcError:
                return  # the broker died mid-request: this batch was never acknowledged
            assert r.status.code == d.OK, r.status
            for m, e in zip(msgs, r.entries, strict=True):
                acked[m.system_properties.message_id] = (broker, q, e.offset)
    finally:
        ch.close()


def _read_all(endpoints: list[str]) -> dict[str, list[tuple[str, int, int]]]:
    seen: dict[str, list[tuple[str, int, int]]] = {}
    for i, ep in enumerate(endpoints):
        broker = "broker-" + "ab"[i]
        for q in range(QUEUES):
            t = read_queue(ep, TOPIC, q)
            if t is None:
                continue
            for mid, off, body in zip(
                t.column("message_id").to_pylist(),
                t.column("queue_offset").to_pylist(),
                t.column("body").to_pylist(),
                strict=True,
            ):
                assert body == mid.encode() * 3
                seen.setdefault(mid, []).append((broker, q, off))
    return seen


def _commit(endpoint: str, group: str, queue: int, offset: int) -> None:
    with grpc.insecure_channel(endpoint) as ch:
        r = sg.MessagingServiceStub(ch).UpdateOffset(
            s.UpdateOffsetRequest(
                group=d.Resource(name=group),
                offset=offset,
                message_queue=d.MessageQueue(topic=d.Resource(name=TOPIC), id=queue),
            ),
            metadata=MD,
            timeout=5,
        )
        assert r.status.code == d.OK


def _committed(endpoint: str, group: str, queue: int) -> int | None:
    with grpc.insecure_channel(endpoint) as ch:
        r = sg.MessagingServiceStub(ch).GetOffset(
            s.GetOffsetRequest(
                group=d.Resource(name=group),
                message_queue=d.MessageQueue(topic=d.Resource(name=TOPIC), id=queue),
            ),
            metadata=MD,
            timeout=5,
        )
        return r.offset if r.status.code == d.OK else None


def test_kill9_while_producing_loses_nothing_acknowledged(tmp_path):
    data = str(tmp_path / "data")
    args = ("--brokers", "2", "--data-dir", data, "--topic", f"{TOPIC}:{QUEUES}")
    acked: dict[str, tuple[str, int, int]] = {}
    rng = random.Random(7)
    total_checked = 0
    kill_points = 3
    for round_no in range(kill_points + 1):
        emu = EmulatorProcess(*args)
        try:
            eps = emu.endpoints.split(";")
            # Everything acknowledged before the previous crash is still there, exactly once, same offset.
            seen = _read_all(eps)
            for mid, where in acked.items():
                assert seen.get(mid) == [where], (
                    f"round {round_no}: {mid} acked at {where}, found {seen.get(mid)}"
                )
            assert all(len(v) == 1 for v in seen.values()), "a message is stored twice"
            total_checked = len(acked)
            if round_no:
                assert _committed(eps[0], "g-durable", 1) == 100 + round_no - 1
            if round_no == kill_points:
                assert emu.stop() == 0
                break
            _commit(eps[0], "g-durable", 1, 100 + round_no)
            stop = threading.Event()
            threads = [
                threading.Thread(
                    target=_send_loop, args=(eps[i % 2], "broker-" + "ab"[i % 2], acked, stop, i)
                )
                for i in range(4)
            ]
            for t in threads:
                t.start()
            time.sleep(rng.uniform(0.4, 1.2))
            emu.kill()  # SIGKILL while the senders are mid-flight
            stop.set()
            for t in threads:
                t.join(30)
                assert not t.is_alive()
        finally:
            emu.kill()
    assert total_checked > 500, f"only {total_checked} acknowledged messages were checked"
    print(
        f"kill -9 durability: {total_checked} acknowledged messages checked over {kill_points} kill points",
        flush=True,
    )
