"""A minimal remoting client for the emulator's tests, built on the shared codec only: frames over a socket,
responses matched by opaque (so several requests can be outstanding), oneway requests, and the requests
a broker sends back (CHECK_TRANSACTION_STATE, NOTIFY_CONSUMER_IDS_CHANGED) kept for inspection."""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
from collections.abc import Mapping

from rocketmq_protocol.remoting.codes import RequestCode as Q
from rocketmq_protocol.remoting.frames import ONEWAY_FLAG, FrameSplitter, RemotingCommand, encode_frame
from rocketmq_protocol.remoting.message_codec import decode_stored
from rocketmq_protocol.remoting.properties import encode_properties
from rocketmq_protocol.remoting.route import TopicRouteData
from rocketmq_protocol.remoting.signature import sign

_OPAQUE = itertools.count(1)


def host_port(addr: str) -> tuple[str, int]:
    host, port = addr.rsplit(":", 1)
    return host, int(port)


class RemotingClient:
    def __init__(self, addr: str, credentials: tuple[str, str] | None = None, timeout: float = 10.0) -> None:
        self.addr = addr
        self.credentials = credentials
        self.sock = socket.create_connection(host_port(addr), timeout=timeout)
        self.sock.settimeout(None)
        self._responses: dict[int, RemotingCommand] = {}
        self.requests: list[RemotingCommand] = []  # broker → client requests
        self._cond = threading.Condition()
        self._closed = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        splitter = FrameSplitter()
        try:
            while True:
                data = self.sock.recv(1 << 20)
                if not data:
                    break
                for cmd in splitter.feed(data):
                    with self._cond:
                        if cmd.is_response:
                            self._responses[cmd.opaque] = cmd
                        else:
                            self.requests.append(cmd)
                        self._cond.notify_all()
        except OSError:
            pass
        finally:
            with self._cond:
                self._closed = True
                self._cond.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> RemotingClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(
        self, code: int, ext: Mapping[str, object] | None = None, body: bytes = b"", *, oneway: bool = False
    ) -> int:
        cmd = RemotingCommand(
            code=int(code),
            opaque=next(_OPAQUE),
            flag=ONEWAY_FLAG if oneway else 0,
            ext_fields={k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in (ext or {}).items()
                        if v is not None},
            body=body,
        )  # fmt: skip
        if self.credentials is not None:
            sign(cmd, *self.credentials)
        self.sock.sendall(encode_frame(cmd))
        return cmd.opaque

    def wait(self, opaque: int, timeout: float = 10.0) -> RemotingCommand:
        deadline = time.monotonic() + timeout
        with self._cond:
            while opaque not in self._responses:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no response to opaque {opaque} within {timeout} s")
                if self._closed:
                    raise ConnectionError("the server closed the connection")
                self._cond.wait(left)
            return self._responses.pop(opaque)

    def call(
        self, code: int, ext: Mapping[str, object] | None = None, body: bytes = b"", timeout: float = 10.0
    ) -> RemotingCommand:
        return self.wait(self.send(code, ext, body), timeout)

    def wait_request(self, code: int, timeout: float = 10.0) -> RemotingCommand:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for i, r in enumerate(self.requests):
                    if r.code == code:
                        return self.requests.pop(i)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no request {code} from the server within {timeout} s")
                self._cond.wait(left)

    # ------------------------------------------------------------------ conveniences
    def route(self, topic: str) -> TopicRouteData:
        r = self.call(Q.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        assert r.code == 0, (r.code, r.remark)
        return TopicRouteData.from_json(r.body)

    def send_message(
        self,
        topic: str,
        body: bytes,
        *,
        queue_id: int = -1,
        properties: Mapping[str, str] | None = None,
        sys_flag: int = 0,
        group: str = "test-producer",
        code: int = Q.SEND_MESSAGE_V2,
    ) -> RemotingCommand:
        ext = {
            "a": group, "b": topic, "c": "TBW102", "d": 4, "e": queue_id, "f": sys_flag,
            "g": int(time.time() * 1000), "h": 0, "i": encode_properties(dict(properties or {})), "j": 0,
            "k": False,
        }  # fmt: skip
        if code == Q.SEND_BATCH_MESSAGE:
            ext["m"] = True
        return self.call(code, ext, body)

    def pull(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        *,
        group: str = "test-group",
        max_nums: int = 32,
        sys_flag: int = 0x4,
        suspend_ms: int = 0,
        subscription: str = "*",
        expression_type: str = "TAG",
        timeout: float = 10.0,
        commit_offset: int = 0,
    ) -> RemotingCommand:
        return self.wait(self.send_pull(topic, queue_id, offset, group=group, max_nums=max_nums,
                                        sys_flag=sys_flag, suspend_ms=suspend_ms, subscription=subscription,
                                        expression_type=expression_type, commit_offset=commit_offset),
                         timeout)  # fmt: skip

    def send_pull(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        *,
        group: str = "test-group",
        max_nums: int = 32,
        sys_flag: int = 0x4,
        suspend_ms: int = 0,
        subscription: str = "*",
        expression_type: str = "TAG",
        commit_offset: int = 0,
    ) -> int:
        return self.send(
            Q.PULL_MESSAGE,
            {
                "consumerGroup": group, "topic": topic, "queueId": queue_id, "queueOffset": offset,
                "maxMsgNums": max_nums, "sysFlag": sys_flag, "commitOffset": commit_offset,
                "suspendTimeoutMillis": suspend_ms, "subscription": subscription, "subVersion": 0,
                "expressionType": expression_type,
            },
        )  # fmt: skip

    def heartbeat(self, client_id: str, *, consumer_group: str | None = None, topic: str | None = None,
                  producer_group: str | None = None, expression: str = "*") -> RemotingCommand:  # fmt: skip
        doc: dict = {
            "clientID": client_id,
            "producerDataSet": [],
            "consumerDataSet": [],
            "heartbeatFingerprint": 0,
        }
        if producer_group:
            doc["producerDataSet"].append({"groupName": producer_group})
        if consumer_group:
            doc["consumerDataSet"].append(
                {
                    "groupName": consumer_group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
                    "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "unitMode": False,
                    "subscriptionDataSet": [{"topic": topic, "subString": expression, "tagsSet": [], "codeSet": [],
                                             "subVersion": 1, "expressionType": "TAG", "classFilterMode": False}]
                    if topic else [],
                }
            )  # fmt: skip
        return self.call(Q.HEART_BEAT, body=json.dumps(doc).encode())


def messages(resp: RemotingCommand | bytes):
    """The rows of a pull response body (decode_stored's RecordBatch)."""
    return decode_stored(resp if isinstance(resp, bytes) else resp.body)
