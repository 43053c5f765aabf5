"""`kill -9` of a durable emulator while remoting producers send (SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE):
every acknowledged message survives, once, at the queue offset its response named; its offset message id
still finds it (VIEW_MESSAGE_BY_ID) and a consumer offset committed over remoting is kept."""

from __future__ import annotations

import random
import threading
import time
import uuid

from rocketmq_protocol.remoting.codes import RequestCode as Q
from rocketmq_protocol.remoting.codes import ResponseCode as R
from rocketmq_protocol.remoting.message_codec import encode_batch
from rocketmq_protocol.remoting.message_id import decode_offset_message_id
from rocketmq_protocol.remoting.properties import encode_properties
from tests.support.emulator_proc import EmulatorProcess
from tests.support.remoting import RemotingClient, messages

TOPIC = "durable"
QUEUES = 4
GROUP = "g-durable"


def _brokers(ns_addr: str) -> dict[str, str]:
    with RemotingClient(ns_addr) as ns:
        route = ns.route(TOPIC)
    return {bd.broker_name: bd.master_addr for bd in route.broker_datas}


def _send_loop(addr: str, broker: str, acked: dict, stop: threading.Event, seed: int) -> None:
    """Sends singles and batches until the broker dies; records where every acknowledged message went."""
    rng = random.Random(seed)
    try:
        client = RemotingClient(addr, timeout=5)
    except OSError:
        return
    try:
        while not stop.is_set():
            q = rng.randrange(QUEUES)
            ids = [uuid.uuid4().hex.upper() for _ in range(rng.choice([1, 1, rng.randint(2, 20)]))]
            try:
                if len(ids) == 1:
                    r = client.send_message(TOPIC, ids[0].encode() * 3, queue_id=q,
                                            properties={"UNIQ_KEY": ids[0], "WAIT": "true"})  # fmt: skip
                else:
                    body = encode_batch(
                        [i.encode() * 3 for i in ids], [encode_properties({"UNIQ_KEY": i}) for i in ids]
                    )
                    r = client.send_message(TOPIC, body, queue_id=q, code=Q.SEND_BATCH_MESSAGE,
                                            properties={"WAIT": "true"})  # fmt: skip
            except (ConnectionError, TimeoutError, OSError):
                return  # the broker died mid-request: never acknowledged
            assert r.code == R.SUCCESS, r.remark
            base = int(r.ext_fields["queueOffset"])
            for k, (mid, offset_id) in enumerate(zip(ids, r.ext_fields["msgId"].split(","), strict=True)):
                acked[mid] = (broker, q, base + k, offset_id)
    finally:
        client.close()


def _read_all(brokers: dict[str, str]) -> dict[str, list[tuple[str, int, int]]]:
    seen: dict[str, list[tuple[str, int, int]]] = {}
    for name, addr in brokers.items():
        with RemotingClient(addr) as c:
            for q in range(QUEUES):
                offset = 0
                while True:
                    r = c.pull(TOPIC, q, offset, max_nums=1024)
                    if r.code != R.SUCCESS:
                        break
                    for row in messages(r).to_pylist():
                        assert row["body"] == row["message_id"].encode() * 3
                        seen.setdefault(row["message_id"], []).append((name, q, row["queue_offset"]))
                    offset = int(r.ext_fields["nextBeginOffset"])
    return seen


def test_kill9_while_producing_over_remoting_loses_nothing_acknowledged(tmp_path):
    args = ("--brokers", "2", "--data-dir", str(tmp_path / "data"), "--topic", f"{TOPIC}:{QUEUES}")
    acked: dict[str, tuple[str, int, int, str]] = {}
    rng = random.Random(11)
    kill_points = 3
    checked = 0
    for round_no in range(kill_points + 1):
        emu = EmulatorProcess(*args)
        try:
            brokers = _brokers(emu.name_server)
            seen = _read_all(brokers)
            for mid, (b, q, off, _) in acked.items():
                assert seen.get(mid) == [(b, q, off)], (
                    f"round {round_no}: {mid} acked at {(b, q, off)}, found {seen.get(mid)}"
                )
            assert all(len(v) == 1 for v in seen.values()), "a message is stored twice"
            checked = len(acked)
            with RemotingClient(brokers["broker-a"]) as a:
                q = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": 1}
                if round_no:
                    assert a.call(Q.QUERY_CONSUMER_OFFSET, q).ext_fields["offset"] == str(100 + round_no - 1)
                    # Offset message ids handed out before the crash still name their message.
                    for mid, (b, _q, _off, offset_id) in list(acked.items())[-20:]:
                        with RemotingClient(brokers[b]) as owner:
                            v = owner.call(
                                Q.VIEW_MESSAGE_BY_ID,
                                {"offset": decode_offset_message_id(offset_id).commit_log_offset},
                            )
                        assert v.code == R.SUCCESS and messages(v).to_pylist()[0]["message_id"] == mid
                if round_no == kill_points:
                    break
                assert (
                    a.call(Q.UPDATE_CONSUMER_OFFSET, {**q, "commitOffset": 100 + round_no}).code == R.SUCCESS
                )
            stop = threading.Event()
            names = sorted(brokers)
            threads = [
                threading.Thread(
                    target=_send_loop, args=(brokers[names[i % 2]], names[i % 2], acked, stop, i)
                )
                for i in range(4)
            ]
            for t in threads:
                t.start()
            time.sleep(rng.uniform(0.4, 1.2))
            emu.kill()
            stop.set()
            for t in threads:
                t.join(30)
                assert not t.is_alive()
        finally:
            if round_no == kill_points:
                assert emu.stop() == 0
            emu.kill()
    assert checked > 300, f"only {checked} acknowledged messages were checked"
    print(
        f"\nkill -9 durability over remoting: {checked} acknowledged messages checked over {kill_points} kill points"
    )
