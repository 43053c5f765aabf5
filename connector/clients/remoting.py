"""The remoting implementation of `RocketMQClient`: RocketMQ's classic TCP protocol through name servers, as
every RocketMQ 4.x and 5.x cluster serves it (docs/protocols.md, 'Remoting').

* Routes come from the name servers (GET_ROUTEINFO_BY_TOPIC), tried in turn from the last one that
  answered (apache/rocketmq `NettyRemotingClient` name-server failover). Queue calls go to the queue's
  master broker: GET_MIN/MAX_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP, QUERY/UPDATE_CONSUMER_OFFSET,
  PULL_MESSAGE, SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE.
* One connection per broker (`remoting_connection`), many requests in flight on it; transient failures
  (connection refused or lost, timeouts, SYSTEM_BUSY, GO_AWAY, ...) are retried with backoff until the
  call's deadline (`pullTimeoutMs` for the reader). A broker whose address changed is found again through
  the name servers.
* The reader never heartbeats and never joins `consumerGroup`: pulls carry their subscription
  (PullSysFlag SUBSCRIPTION, as `DefaultLitePullConsumer` does), so Java push consumers of the same group
  keep their queues; offsets are committed with UPDATE_CONSUMER_OFFSET, so `mqadmin consumerProgress`
  shows the lag.
* Pulls: a real broker returns at most 32 messages / 256 KiB per PULL_MESSAGE from page cache (8 / 64 KiB
  from disk). `pull()` asks for everything it wants in its first request; when the broker answers fewer,
  the next requests go out together, each at the offset where the previous one should end (the first
  answer tells how many offsets one request covers), and the answers are stitched in order as long as
  they are contiguous. All bodies of one `pull()` are decoded at once by the codec's columnar
  `decode_stored` into a MESSAGE_SCHEMA table; tag filters are re-checked on the exact tag string
  (the broker matches by hash code, as Java's `PullAPIWrapper.processPullResult` re-checks).
* ACL: every request carries the AccessKey / Signature ext fields (`rocketmq_protocol.remoting.signature`)
  when credentials are set; TLS is optional (`tls` / `tlsCaFile`).
"""

from __future__ import annotations

import json
import logging
import os
import random
import ssl
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketmq_protocol.arrow_values import (
    bool_values,
    from_numpy,
    int64_values,
    string_array,
)
from rocketmq_protocol.hashing import java_string_hash
from rocketmq_protocol.message_schema import DELAY, FIFO, MESSAGE_SCHEMA, NORMAL, TRANSACTION
from rocketmq_protocol.remoting import fastjson, signature
from rocketmq_protocol.remoting.codes import RequestCode, ResponseCode, Version
from rocketmq_protocol.remoting.columns import uniform_value
from rocketmq_protocol.remoting.errors import JsonBodyError, RemotingCodecError
from rocketmq_protocol.remoting.flags import MessageSysFlag, Perm, PullSysFlag
from rocketmq_protocol.remoting.frames import RemotingCommand
from rocketmq_protocol.remoting.headers import (
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    GetRouteInfoRequestHeader,
    GetTopicStatsInfoRequestHeader,
    PullMessageRequestHeader,
    QueryConsumerOffsetRequestHeader,
    SearchOffsetRequestHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rocketmq_protocol.remoting.message_codec import decode_stored
from rocketmq_protocol.remoting.route import MASTER_ID, TopicRouteData

from ..config import FILTER_SQL, ClientConfig, FilterSpec
from ..errors import ConnectorError, ErrorKind, RocketMQError
from ..queues import MessageQueue, RouteEntry, queue_sort_key
from .base import DEFAULT_TIMEOUT_MS, PullResult, PullStatus, RocketMQClient
from .remoting_connection import (
    ConnectionLost,
    ConnectionPool,
    HeaderTemplate,
    RemotingConnection,
    encode_request,
)
from .remoting_errors import code_name, code_name_of_request, remoting_error
from .remoting_send import DELAY_LEVELS_MS, RemotingSendEncoder, SendCall, parse_delay_levels
from .retrying import Transient, call_with_retries, tls_handshake_message

log = logging.getLogger(__name__)

__all__ = ["PULL_REMOTING", "RemotingClient", "code_name", "stored_to_table", "tls_context"]

PULL_REMOTING = "remoting"
#: A long-polled pull is answered by the broker up to 5 s after its suspend time (its hold service checks
#: every 5 s), so the socket wait is longer than the hold by this much.
LONG_POLL_SLACK_S = 6.0
#: Sub-pulls in flight at once when the broker caps what one PULL_MESSAGE returns (fewer when the answers
#: so far say that many would pass the pull's byte cap). Against RocketMQ 5.5.0's answers of 32 messages,
#: 64 rather than 16 read ~25% faster for ~20% less broker CPU per message: the broker takes a window's
#: requests in fewer reads and wake-ups.
PULL_WINDOW = 64
#: Bytes of stored messages one `pull()` gathers at most when the caller sets no `max_bytes` (bounded
#: memory with large messages: a broker answers at least one message per request, whatever its size).
PULL_MAX_BYTES = 32 * 1024 * 1024
#: PULL_MESSAGE's ext fields that differ between a pipeline's sub-pulls (`HeaderTemplate`'s values).
_PULL_VARIABLE = ("queueOffset", "maxMsgNums", "suspendTimeoutMillis")

_R = ResponseCode
#: Codes worth another attempt (the same or another server) before the deadline.
TRANSIENT_CODES = frozenset(
    {
        _R.SYSTEM_BUSY,
        _R.SERVICE_NOT_AVAILABLE,
        _R.GO_AWAY,
        _R.FLOW_CONTROL,
        _R.RPC_TIME_OUT,
        _R.RPC_SEND_TO_CHANNEL_FAILED,
    }
)
_PULL_CODES = {
    _R.SUCCESS: PullStatus.FOUND,
    _R.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    _R.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    _R.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}
#: The template topic of auto-created topics (`TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC`).
DEFAULT_TOPIC = "TBW102"
#: The group of the pulls that read one message's store time (offsets by timestamp).
TIME_PROBE_GROUP = "spark-rocketmq-time-probe"


def tls_context(config: ClientConfig) -> ssl.SSLContext | None:
    """The client TLS context of `tls` / `tlsCaFile` (the CA PEM travels in the config), or None."""
    if not config.tls:
        return None
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    if config.tls_ca_pem:
        ctx.load_verify_locations(cadata=config.tls_ca_pem.decode("ascii", "replace"))
    return ctx


@dataclass
class _SubPull:
    """One PULL_MESSAGE answer: status, where it started and where the next one starts, its body."""

    status: PullStatus
    start: int
    next_offset: int
    min_offset: int
    max_offset: int
    body: memoryview | bytes


class RemotingClient(RocketMQClient):
    """A thread-safe remoting client of one cluster; obtain it with `connector.clients.get_client(config)`."""

    def __init__(self, config: ClientConfig) -> None:
        if not config.name_server_list:
            raise ValueError("RemotingClient needs ClientConfig.name_server (option 'nameServer')")
        self.config = config
        self._pool = ConnectionPool(tls_context(config))
        self._ns_lock = threading.Lock()
        self._ns_first = 0  # index of the name server that answered last
        self._brokers: dict[str, str] = {}  # broker name → master address, from the latest routes
        self._versions: dict[str, int] = {}  # address → the server's version (from its responses)
        self._visible_groups: set[tuple[str, str]] = set()  # (group, broker) checked for a retry topic
        self._delay_levels: dict[str, tuple[int, ...]] = {}  # broker address → its delay levels (ms)
        self._pull_templates: dict[tuple, dict[str, str]] = {}  # PULL_MESSAGE ext fields without offsets
        self._pull_frame_templates: dict[tuple, HeaderTemplate] = {}  # the pipeline's, unsigned
        self.client_id = f"{os.getpid()}@{random.getrandbits(48):012x}"

    # ------------------------------------------------------------------ names
    def _wrap(self, name: str) -> str:
        """A resource name as the cluster stores it: `namespace%name` with a namespace (`NamespaceUtil`)."""
        ns = self.config.namespace
        return f"{ns}%{name}" if ns and not name.startswith(f"{ns}%") else name

    # ------------------------------------------------------------------ plumbing
    def _ext(self, header: object, body: bytes = b"") -> dict[str, str]:
        ext = header.to_ext_fields()  # type: ignore[attr-defined]
        return self._sign(ext, body)

    def _sign(self, ext: dict[str, str], body: bytes | memoryview = b"") -> dict[str, str]:
        ak, sk = self.config.access_key, self.config.secret_key
        if ak is None or sk is None:
            return ext
        cmd = RemotingCommand(code=0, ext_fields=ext, body=bytes(body) if body else b"")
        signature.sign(cmd, ak, sk)
        return cmd.ext_fields

    def connection(self, address: str, connect_timeout_s: float | None = None) -> RemotingConnection:
        return self._pool.get(address, connect_timeout_s)

    def _attempt(
        self,
        address: str,
        code: int,
        ext: dict[str, str],
        body: bytes | memoryview,
        timeout_s: float,
    ) -> RemotingCommand:
        """One request and its response; connection failures and timeouts raise `Transient`."""
        try:
            conn = self._pool.get(address, min(timeout_s, 3.0))
        except ssl.SSLError as e:  # a configuration problem, not worth retrying
            raise ConnectorError(
                tls_handshake_message(code_name_of_request(code), address, str(e), self.config.tls)
            ) from None
        except OSError as e:
            raise Transient(f"{address}: cannot connect ({e})") from None
        try:
            fut = conn.request(code, ext, body, timeout_s)
        except ConnectionLost as e:
            raise Transient(str(e)) from None
        try:
            resp = fut.result(timeout=max(timeout_s, 0.001))
        except FutureTimeout:
            conn.forget(fut)
            if time.monotonic() - conn.last_read >= timeout_s:  # nothing at all came back: a dead peer
                self._pool.drop(address, conn)
            raise Transient(f"{address}: no response within {timeout_s * 1000:.0f} ms") from None
        except ConnectionLost as e:
            raise Transient(str(e)) from None
        self._versions[address] = resp.version
        if resp.code in TRANSIENT_CODES:
            raise Transient(f"{address}: {code_name(resp.code)} ({resp.code}): {resp.remark or ''}")
        return resp

    def _invoke(
        self,
        addresses: Callable[[], Sequence[str]],
        code: int,
        ext: dict[str, str],
        body: bytes | memoryview,
        timeout_ms: int,
        rpc: str,
        *,
        extra_wait_s: float = 0.0,
        on_success: Callable[[str], None] | None = None,
    ) -> tuple[RemotingCommand, str]:
        """Runs the request on the addresses under the shared retry rule (`retrying.call_with_retries`)
        until one answers with a code that is not transient. Returns the response and its address."""

        def one(address: str, seconds: float) -> RemotingCommand:
            resp = self._attempt(address, code, ext, body, seconds)
            if on_success is not None:
                on_success(address)
            return resp

        def hint(last: str) -> str:
            if not self.config.tls and ("closed the connection" in last or "reset" in last):
                return " (if the cluster serves TLS only, set option 'tls' to 'true')"
            return ""

        return call_with_retries(
            rpc, addresses, one, timeout_ms, extra_wait_s=extra_wait_s, exhausted_hint=hint
        )

    # ------------------------------------------------------------------ name servers
    def _name_servers(self) -> list[str]:
        servers = self.config.name_server_list
        with self._ns_lock:
            k = self._ns_first % len(servers)
        return servers[k:] + servers[:k]

    def _ns_answered(self, address: str) -> None:
        servers = self.config.name_server_list
        with self._ns_lock:
            self._ns_first = servers.index(address) if address in servers else 0

    def route_data(self, topic: str, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> TopicRouteData:
        """The topic's TopicRouteData from the name servers (RocketMQError TOPIC_NOT_FOUND when unknown)."""
        header = GetRouteInfoRequestHeader(topic=self._wrap(topic), accept_standard_json_only=True)
        resp, address = self._invoke(
            self._name_servers,
            RequestCode.GET_ROUTEINFO_BY_TOPIC,
            self._ext(header),
            b"",
            timeout_ms,
            f"GET_ROUTEINFO_BY_TOPIC({topic})",
            on_success=self._ns_answered,
        )
        if resp.code != _R.SUCCESS:
            raise remoting_error(resp.code, resp.remark, address, f"GET_ROUTEINFO_BY_TOPIC({topic})")
        try:
            return TopicRouteData.from_json(bytes(resp.body))
        except RemotingCodecError as e:
            raise ConnectorError(
                f"GET_ROUTEINFO_BY_TOPIC({topic}) on {address}: unreadable route ({e})"
            ) from None

    def route(self, topic: str, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> list[RouteEntry]:
        """Every queue of `topic` with its master broker's address, in queue order. A queue is readable when
        its broker has READ permission and the id is below readQueueNums, writable likewise (WRITE,
        writeQueueNums); brokers without a master are left out (as `MQClientInstance` builds its lists)."""
        data = self.route_data(topic, timeout_ms)
        out: dict[MessageQueue, RouteEntry] = {}
        for qd in data.queue_datas:
            addr = data.broker_addr(qd.broker_name, MASTER_ID)
            if addr is None:
                continue
            self._brokers[qd.broker_name] = addr
            readable, writable = bool(qd.perm & Perm.READ), bool(qd.perm & Perm.WRITE)
            for qid in range(max(qd.read_queue_nums, qd.write_queue_nums)):
                q = MessageQueue(topic, qd.broker_name, qid)
                out[q] = RouteEntry(
                    q, addr, readable and qid < qd.read_queue_nums, writable and qid < qd.write_queue_nums
                )
        return [out[k] for k in sorted(out, key=queue_sort_key)]

    def server_version(self, address: str) -> int | None:
        """The version ordinal the server put in its last response (`MQVersion.Version`), if any yet."""
        return self._versions.get(address)

    # ------------------------------------------------------------------ broker calls
    def _broker_addresses(self, queue: RouteEntry) -> Callable[[], list[str]]:
        """The queue's broker address: the route entry's, or the one the latest route gave its broker (a
        broker restarted on another address is found again through the name servers after a failure)."""
        state = {"calls": 0}

        def addresses() -> list[str]:
            state["calls"] += 1
            if state["calls"] > 1:  # a full round failed: ask the name servers where the broker is now
                try:
                    self.route(queue.topic, timeout_ms=2000)
                except ConnectorError as e:
                    log.debug("route refresh of %s failed: %s", queue.topic, e)
            return [self._brokers.get(queue.broker, queue.endpoint)]

        return addresses

    def _broker_call(
        self,
        queue: RouteEntry,
        code: int,
        header: object,
        timeout_ms: int,
        rpc: str,
        ok: tuple[int, ...] = (0,),
    ) -> RemotingCommand:
        resp, address = self._invoke(
            self._broker_addresses(queue), code, self._ext(header), b"", timeout_ms, rpc
        )
        if resp.code not in ok:
            raise remoting_error(resp.code, resp.remark, address, f"{rpc}({queue.queue})")
        return resp

    @staticmethod
    def _int_field(resp: RemotingCommand, name: str, rpc: str) -> int:
        raw = resp.ext_fields.get(name)
        try:
            return int(raw)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise ConnectorError(f"{rpc}: the response has no integer '{name}' ({raw!r})") from None

    def min_offset(self, queue: RouteEntry, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> int:
        """The queue's earliest available offset (GET_MIN_OFFSET)."""
        h = GetMinOffsetRequestHeader(
            topic=self._wrap(queue.topic), queue_id=queue.queue_id, bname=queue.broker
        )
        resp = self._broker_call(queue, RequestCode.GET_MIN_OFFSET, h, timeout_ms, "GET_MIN_OFFSET")
        return self._int_field(resp, "offset", "GET_MIN_OFFSET")

    def max_offset(self, queue: RouteEntry, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> int:
        """The queue's next offset to be written (GET_MAX_OFFSET)."""
        h = GetMaxOffsetRequestHeader(
            topic=self._wrap(queue.topic), queue_id=queue.queue_id, bname=queue.broker
        )
        resp = self._broker_call(queue, RequestCode.GET_MAX_OFFSET, h, timeout_ms, "GET_MAX_OFFSET")
        return self._int_field(resp, "offset", "GET_MAX_OFFSET")

    def broker_bounds(
        self, queues: Sequence[RouteEntry], timeout_ms: int = DEFAULT_TIMEOUT_MS
    ) -> dict[MessageQueue, tuple[int, int]] | None:
        """The bounds of the topic's queues on one broker from GET_TOPIC_STATS_INFO (`mqadmin topicStatus`'s
        request: min and max offset of each queue in one call); None when the broker refuses it."""
        first = queues[0].queue
        stored = self._wrap(first.topic)
        h = GetTopicStatsInfoRequestHeader(topic=stored, bname=first.broker)
        rpc = "GET_TOPIC_STATS_INFO"
        try:
            resp = self._broker_call(queues[0], RequestCode.GET_TOPIC_STATS_INFO, h, timeout_ms, rpc)
        except RocketMQError as e:  # a refusal; a broker that cannot be reached still fails the call
            log.debug("%s refused: %s", rpc, e)
            return None
        out: dict[MessageQueue, tuple[int, int]] = {}
        try:
            for key, value in fastjson.loads(resp.body)["offsetTable"].items():
                mq = dict(key)
                if mq["topic"] == stored and mq["brokerName"] == first.broker:
                    q = MessageQueue(first.topic, first.broker, int(mq["queueId"]))
                    out[q] = (int(value["minOffset"]), int(value["maxOffset"]))
        except (JsonBodyError, KeyError, TypeError, ValueError) as e:
            log.debug("%s of %s on %s: unreadable body (%s)", rpc, first.topic, queues[0].endpoint, e)
            return None
        return out

    def offset_for_timestamp(
        self, queue: RouteEntry, ts_ms: int, timeout_ms: int = DEFAULT_TIMEOUT_MS
    ) -> int:
        """The first offset stored at or after `ts_ms`, the max offset when none is
        (SEARCH_OFFSET_BY_TIMESTAMP, lower boundary)."""
        h = SearchOffsetRequestHeader(
            topic=self._wrap(queue.topic),
            queue_id=queue.queue_id,
            timestamp=ts_ms,
            boundary_type="lower",
            bname=queue.broker,
        )
        resp = self._broker_call(
            queue, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, h, timeout_ms, "SEARCH_OFFSET_BY_TIMESTAMP"
        )
        guess = self._int_field(resp, "offset", "SEARCH_OFFSET_BY_TIMESTAMP")
        return self._first_stored_at_or_after(queue, ts_ms, guess, timeout_ms)

    def _store_time(self, queue: RouteEntry, offset: int, timeout_ms: int) -> int | None:
        """The store timestamp (ms) of the message at `offset`, None when there is none."""
        sub = self._sub_pull(queue, offset, 1, TIME_PROBE_GROUP, None, timeout_ms, 0, 0)
        if sub.status != PullStatus.FOUND or not len(sub.body):
            return None
        batch = decode_stored(sub.body, derive=False, columns=("queue_offset", "store_timestamp"))
        if not batch.num_rows or batch.column("queue_offset")[0].as_py() != offset:
            return None
        return batch.column("store_timestamp").cast(pa.int64())[0].as_py()

    def _first_stored_at_or_after(self, queue: RouteEntry, ts_ms: int, guess: int, timeout_ms: int) -> int:
        """Checks the broker's answer against the stored times: 5.x answers the first offset stored at or
        after `ts_ms` (BoundaryType.LOWER), but 4.x answers the offset whose time is *closest* (possibly
        before it, or the last message when all are older). One probe of the neighbours settles the usual
        case; otherwise a binary search on store times (non-decreasing within a queue) finds it."""
        lo, hi = self.min_offset(queue, timeout_ms), self.max_offset(queue, timeout_ms)
        if hi <= lo:
            return hi
        guess = min(max(guess, lo), hi)

        def at_or_after(offset: int) -> bool:  # offset's message is stored at or after ts (hi: yes)
            if offset >= hi:
                return True
            t = self._store_time(queue, offset, timeout_ms)
            return True if t is None else t >= ts_ms

        if at_or_after(guess) and (guess == lo or not at_or_after(guess - 1)):
            return guess
        # binary search for the first offset in [lo, hi] that is at or after ts_ms
        left, right = lo, hi
        while left < right:
            mid = (left + right) // 2
            if at_or_after(mid):
                right = mid
            else:
                left = mid + 1
        return left

    def get_committed(
        self, group: str, queue: RouteEntry, timeout_ms: int = DEFAULT_TIMEOUT_MS
    ) -> int | None:
        """The group's committed offset of the queue (QUERY_CONSUMER_OFFSET with setZeroIfNotFound=false);
        None when it has none (QUERY_NOT_FOUND, or a group the broker does not know)."""
        h = QueryConsumerOffsetRequestHeader(
            consumer_group=self._wrap(group),
            topic=self._wrap(queue.topic),
            queue_id=queue.queue_id,
            set_zero_if_not_found=False,
            bname=queue.broker,
        )
        resp = self._broker_call(
            queue,
            RequestCode.QUERY_CONSUMER_OFFSET,
            h,
            timeout_ms,
            "QUERY_CONSUMER_OFFSET",
            ok=(_R.SUCCESS, _R.QUERY_NOT_FOUND, _R.SUBSCRIPTION_GROUP_NOT_EXIST),
        )
        if resp.code != _R.SUCCESS:
            return None
        offset = self._int_field(resp, "offset", "QUERY_CONSUMER_OFFSET")
        return None if offset < 0 else offset

    def commit(
        self, group: str, queue: RouteEntry, offset: int, timeout_ms: int = DEFAULT_TIMEOUT_MS
    ) -> None:
        """Stores `offset` as the group's offset of the queue (UPDATE_CONSUMER_OFFSET, answered). A broker that
        does not know the group yet (SUBSCRIPTION_GROUP_NOT_EXIST: it never served a pull of it) gets one
        pull of the group first, which creates it where `autoCreateSubscriptionGroup` is on (the default)."""
        h = UpdateConsumerOffsetRequestHeader(
            consumer_group=self._wrap(group),
            topic=self._wrap(queue.topic),
            queue_id=queue.queue_id,
            commit_offset=offset,
            bname=queue.broker,
        )
        self._ensure_group_visible(group, queue)
        ok = (_R.SUCCESS, _R.SUBSCRIPTION_GROUP_NOT_EXIST)
        code = RequestCode.UPDATE_CONSUMER_OFFSET
        resp = self._broker_call(queue, code, h, timeout_ms, "UPDATE_CONSUMER_OFFSET", ok)
        if resp.code == _R.SUBSCRIPTION_GROUP_NOT_EXIST:
            self._sub_pull(queue, max(offset, 0), 1, group, None, timeout_ms, 0, 0)
            self._broker_call(queue, code, h, timeout_ms, "UPDATE_CONSUMER_OFFSET")

    def _ensure_group_visible(self, group: str, queue: RouteEntry) -> None:
        """`mqadmin consumerProgress -g G` finds a group's brokers through the route of its retry topic
        `%RETRY%G` (`DefaultMQAdminExtImpl.examineConsumeStats`), which brokers create when a consumer of the
        group heartbeats. A group no RocketMQ consumer ever used has none, so its offsets would stay
        invisible: then (once per group and broker) this client heartbeats as a pull consumer of the group
        and unregisters at once. No consumer of the group is online then (it would have created the topic),
        so no rebalance takes queues from anyone."""
        key = (group, queue.broker)
        if key in self._visible_groups:
            return
        self._visible_groups.add(key)
        retry = self._wrap(f"%RETRY%{group}")
        try:
            data = self.route_data(retry, timeout_ms=3000)
            if any(q.broker_name == queue.broker for q in data.queue_datas):
                return
        except RocketMQError as e:
            if e.kind != ErrorKind.TOPIC_NOT_FOUND:
                log.debug("route of %s: %s", retry, e)
                return
        except ConnectorError as e:
            log.debug("route of %s: %s", retry, e)
            return
        wrapped = self._wrap(group)
        heartbeat = {
            "clientID": self.client_id,
            "consumerDataSet": [
                {
                    "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                    "consumeType": "CONSUME_ACTIVELY",
                    "groupName": wrapped,
                    "messageModel": "CLUSTERING",
                    "subscriptionDataSet": [
                        {
                            "classFilterMode": False,
                            "codeSet": [],
                            "expressionType": "TAG",
                            "subString": "*",
                            "subVersion": int(time.time() * 1000),
                            "tagsSet": [],
                            "topic": self._wrap(queue.topic),
                        }
                    ],
                    "unitMode": False,
                }
            ],
            "heartbeatFingerprint": 0,
            "producerDataSet": [],
            "withoutSub": False,
        }
        body = json.dumps(heartbeat, separators=(",", ":")).encode()
        try:
            address = self._brokers.get(queue.broker, queue.endpoint)
            self._attempt(address, RequestCode.HEART_BEAT, self._sign({}, body), body, 3.0)
            h = UnregisterClientRequestHeader(client_id=self.client_id, consumer_group=wrapped)
            self._attempt(address, RequestCode.UNREGISTER_CLIENT, self._ext(h), b"", 3.0)
            log.info(
                "created retry topic %s on %s so that RocketMQ's tools show group %r",
                retry,
                queue.broker,
                group,
            )
        except (Transient, OSError, ConnectorError) as e:
            log.debug("could not make group %s visible on %s: %s", group, queue.broker, e)

    # ------------------------------------------------------------------ pull
    def _pull_header(
        self, queue: RouteEntry, offset: int, count: int, group: str, flt: FilterSpec | None, suspend_ms: int,
        max_bytes: int,
    ) -> dict[str, str]:  # fmt: skip
        """PULL_MESSAGE's ext fields (signed): a cached template per queue, group, filter and mode, with
        the offset and count filled in (the hot path of pipelined pulls)."""
        key = (queue.queue, group, flt, suspend_ms > 0, max_bytes)
        template = self._pull_templates.get(key)
        if template is None:
            sys_flag = PullSysFlag.SUBSCRIPTION | (PullSysFlag.SUSPEND if suspend_ms > 0 else 0)
            if flt is None or flt.matches_all:
                subscription, expression_type = "*", "TAG"
            else:
                subscription = flt.expression
                expression_type = "SQL92" if flt.kind == FILTER_SQL else "TAG"
            template = PullMessageRequestHeader(
                consumer_group=self._wrap(group),
                topic=self._wrap(queue.topic),
                queue_id=queue.queue_id,
                queue_offset=0,
                max_msg_nums=0,
                sys_flag=int(sys_flag),
                commit_offset=0,
                suspend_timeout_millis=0,
                sub_version=0,
                subscription=subscription,
                expression_type=expression_type,
                max_msg_bytes=max_bytes if max_bytes > 0 else None,
                bname=queue.broker,
            ).to_ext_fields()
            if len(self._pull_templates) > 4096:
                self._pull_templates.clear()
            self._pull_templates[key] = template
        ext = dict(template)
        ext["queueOffset"] = str(offset)
        ext["maxMsgNums"] = str(count)
        ext["suspendTimeoutMillis"] = str(max(suspend_ms, 0))
        return self._sign(ext)

    def _pull_frames(
        self, queue: RouteEntry, group: str, flt: FilterSpec | None, max_bytes: int
    ) -> HeaderTemplate | None:
        """The pipelined sub-pulls' frame template (offset, count and suspend time variable), or None when
        requests are signed (the signature covers every field, so each header is built in full)."""
        if self.config.access_key is not None and self.config.secret_key is not None:
            return None
        key = (queue.queue, group, flt, max_bytes)
        frames = self._pull_frame_templates.get(key)
        if frames is None:
            ext = self._pull_header(queue, 0, 0, group, flt, 0, max_bytes)
            fixed = {k: v for k, v in ext.items() if k not in _PULL_VARIABLE}
            frames = HeaderTemplate(RequestCode.PULL_MESSAGE, fixed, _PULL_VARIABLE)
            if len(self._pull_frame_templates) > 4096:
                self._pull_frame_templates.clear()
            self._pull_frame_templates[key] = frames
        return frames

    def _sub_result(self, resp: RemotingCommand, offset: int, address: str, queue: RouteEntry) -> _SubPull:
        status = _PULL_CODES.get(resp.code)
        if status is None:
            raise remoting_error(resp.code, resp.remark, address, f"PULL_MESSAGE({queue.queue})")
        f = resp.ext_fields
        try:
            next_offset = int(f["nextBeginOffset"])
            min_offset = int(f.get("minOffset", -1))
            max_offset = int(f.get("maxOffset", -1))
        except (KeyError, ValueError):
            raise ConnectorError(
                f"PULL_MESSAGE({queue.queue}) on {address}: response without nextBeginOffset ({f})"
            ) from None
        if status == PullStatus.FOUND and not len(resp.body):
            status = PullStatus.NO_MATCHED_MSG if next_offset > offset else PullStatus.NO_NEW_MSG
        return _SubPull(status, offset, next_offset, min_offset, max_offset, resp.body)

    def _sub_pull(
        self,
        queue: RouteEntry,
        offset: int,
        count: int,
        group: str,
        flt: FilterSpec | None,
        timeout_ms: int,
        suspend_ms: int,
        max_bytes: int,
    ) -> _SubPull:
        ext = self._pull_header(queue, offset, count, group, flt, suspend_ms, max_bytes)
        resp, address = self._invoke(
            self._broker_addresses(queue),
            RequestCode.PULL_MESSAGE,
            ext,
            b"",
            timeout_ms,
            f"PULL_MESSAGE({queue.queue})",
            extra_wait_s=(suspend_ms / 1000.0 + LONG_POLL_SLACK_S) if suspend_ms > 0 else 0.0,
        )
        return self._sub_result(resp, offset, address, queue)

    def pull(
        self,
        queue: RouteEntry,
        offset: int,
        max_messages: int,
        *,
        group: str,
        filter: FilterSpec | None = None,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        long_polling_ms: int = 0,
        max_bytes: int = 0,
    ) -> PullResult:
        """Up to `max_messages` offsets from `offset` of `queue` as a MESSAGE_SCHEMA table (PULL_MESSAGE,
        pipelined when the broker answers less than asked; see the module doc)."""
        first = self._sub_pull(
            queue, offset, max_messages, group, filter, timeout_ms, long_polling_ms, max_bytes
        )
        if first.status not in (PullStatus.FOUND, PullStatus.NO_MATCHED_MSG):
            return PullResult(first.status, first.next_offset, first.min_offset, first.max_offset,
                              MESSAGE_SCHEMA.empty_table(), PULL_REMOTING)  # fmt: skip
        bodies: list[memoryview | bytes] = [first.body] if len(first.body) else []
        cursor, span = first.next_offset, first.next_offset - offset
        limit = offset + max_messages
        if first.max_offset >= 0:
            limit = min(limit, first.max_offset)
        overlap = False
        byte_cap = max_bytes if max_bytes > 0 else PULL_MAX_BYTES
        if span > 0 and cursor < limit and len(first.body) < byte_cap:
            cursor, overlap = self._pipeline(
                queue,
                cursor,
                span,
                limit,
                group,
                filter,
                timeout_ms,
                max_bytes,
                byte_cap,
                len(first.body),
                bodies,
            )
        table = stored_to_table(bodies, filter, dedupe=overlap) if bodies else MESSAGE_SCHEMA.empty_table()
        status = PullStatus.FOUND if table.num_rows else PullStatus.NO_MATCHED_MSG
        if not table.num_rows and cursor == offset:
            status = PullStatus.NO_NEW_MSG
        return PullResult(status, cursor, first.min_offset, first.max_offset, table, PULL_REMOTING)

    def _pipeline(
        self,
        queue: RouteEntry,
        cursor: int,
        span: int,
        limit: int,
        group: str,
        flt: FilterSpec | None,
        timeout_ms: int,
        max_bytes: int,
        byte_cap: int,
        nbytes: int,
        bodies: list[memoryview | bytes],
    ) -> tuple[int, bool]:
        """Sub-pulls of `span` offsets each, up to PULL_WINDOW at a time (`_window`), from `cursor` up to
        `limit`; answers are kept while they are contiguous (an answer that starts inside what is already
        covered keeps its messages past it). Returns the new cursor and whether answers overlapped (a
        filter skipped ahead)."""
        deadline = time.monotonic() + timeout_ms / 1000.0
        overlap = False
        while cursor < limit:
            if nbytes >= byte_cap:
                break
            starts = list(range(cursor, limit, span)[: _window(byte_cap - nbytes, nbytes, len(bodies))])
            address = self._brokers.get(queue.broker, queue.endpoint)
            frames = self._pull_frames(queue, group, flt, max_bytes)
            try:
                conn = self._pool.get(address, 3.0)
                left = deadline - time.monotonic()
                if frames is None:
                    exts = [
                        self._pull_header(queue, s, min(span, limit - s), group, flt, 0, max_bytes)
                        for s in starts
                    ]
                    futures = conn.request_many(exts, _pull_frame_head, left)
                else:
                    futures = conn.request_many(
                        [(s, min(span, limit - s), 0) for s in starts], frames.frame_head, left
                    )
            except (OSError, ConnectionLost):
                futures = []  # stop here: the next pull() retries with the full logic
            pending = [(s, f, conn, address) for s, f in zip(starts, futures, strict=False)]
            if not pending:
                return cursor, overlap
            progressed, broken = False, False
            for s, fut, conn, address in pending:
                if broken:
                    conn.forget(fut)
                    continue
                if s > cursor:  # a gap: the previous answer covered less than one span
                    broken = True
                    conn.forget(fut)
                    continue
                try:
                    resp = fut.result(timeout=max(deadline - time.monotonic(), 0.001))
                except (TimeoutError, ConnectionLost):
                    conn.forget(fut)
                    broken = True
                    continue
                if resp.code in TRANSIENT_CODES:
                    broken = True
                    continue
                sub = self._sub_result(resp, s, address, queue)
                if (
                    sub.status not in (PullStatus.FOUND, PullStatus.NO_MATCHED_MSG)
                    or sub.next_offset <= cursor
                ):
                    broken = True
                    continue
                if s < cursor:
                    overlap = True
                if len(sub.body):
                    bodies.append(sub.body)
                    nbytes += len(sub.body)
                cursor = sub.next_offset
                progressed = True
                if nbytes >= byte_cap:
                    broken = True
            if not progressed:
                break
            if broken:
                # fall back to one full request from the cursor: it tells the new span
                if time.monotonic() >= deadline or nbytes >= byte_cap:
                    break
                sub = self._sub_pull(queue, cursor, limit - cursor, group, flt, timeout_ms, 0, max_bytes)
                if (
                    sub.status not in (PullStatus.FOUND, PullStatus.NO_MATCHED_MSG)
                    or sub.next_offset <= cursor
                ):
                    break
                if len(sub.body):
                    bodies.append(sub.body)
                    nbytes += len(sub.body)
                span = max(sub.next_offset - cursor, 1)
                cursor = sub.next_offset
        return cursor, overlap

    # ------------------------------------------------------------------ send
    def send_encoder(self, producer_group: str | None = None) -> RemotingSendEncoder:
        if producer_group is None:
            return RemotingSendEncoder(self)
        return RemotingSendEncoder(self, producer_group)

    def send_async(self, endpoint: str, payload: object, count: int, timeout_s: float) -> SendCall:
        """SEND_MESSAGE_V2 or SEND_BATCH_MESSAGE of a request `RemotingSendEncoder` encoded."""
        return SendCall.start(self, endpoint, payload, count, timeout_s)

    def timer_supported(self, address: str) -> bool:
        """Whether the broker schedules TIMER_DELIVER_MS (5.x); 4.x brokers only know delay levels."""
        version = self._versions.get(address)
        if version is None:
            try:
                self._attempt(
                    address,
                    RequestCode.GET_MAX_OFFSET,
                    self._sign({"topic": DEFAULT_TOPIC, "queueId": "0"}),
                    b"",
                    3.0,
                )
            except (Transient, OSError):
                return True
            version = self._versions.get(address, int(Version.V5_0_0))
        return version >= Version.V5_0_0

    def delay_levels(self, address: str) -> tuple[int, ...]:
        """The broker's delay levels in ms (`messageDelayLevel` from GET_BROKER_CONFIG; the defaults when it
        cannot be read, e.g. refused by an ACL)."""
        levels = self._delay_levels.get(address)
        if levels is None:
            levels = DELAY_LEVELS_MS
            try:
                resp = self._attempt(address, RequestCode.GET_BROKER_CONFIG, self._sign({}), b"", 3.0)
                if resp.code == _R.SUCCESS:
                    for line in bytes(resp.body).decode("utf-8", "replace").splitlines():
                        if line.startswith("messageDelayLevel="):
                            levels = parse_delay_levels(line.split("=", 1)[1]) or DELAY_LEVELS_MS
            except (Transient, OSError, ConnectorError) as e:
                log.debug("GET_BROKER_CONFIG on %s: %s", address, e)
            self._delay_levels[address] = levels
        return levels

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        self._pool.close()


def _window(room: int, nbytes: int, answers: int) -> int:
    """Sub-pulls to send at once: PULL_WINDOW, or as many answers of the average size so far as fit in
    `room` bytes (at least one), so large messages do not put many times the byte cap in flight."""
    if not answers or nbytes <= 0:
        return PULL_WINDOW
    return max(1, min(PULL_WINDOW, -(-room * answers // nbytes)))


# ------------------------------------------------------------------------------------------ decoding
_TS = pa.timestamp("ms")
_BORN_HOST = "__BORNHOST"


def _pull_frame_head(ext: dict[str, str], opaque: int) -> bytes:
    """A signed sub-pull's frame head: its fields encoded in full."""
    return encode_request(RequestCode.PULL_MESSAGE, ext, b"", opaque)


def _tag_codes(tags: pa.Array) -> pa.Array:
    if tags.null_count == len(tags):
        return from_numpy(np.zeros(len(tags), np.int32))
    same = uniform_value(tags)  # one producer's tag (the usual pull): one hash, repeated
    if same is not None:
        return from_numpy(np.full(len(tags), java_string_hash(same.decode("utf-8", "replace")), np.int32))
    enc = pc.dictionary_encode(tags)
    codes = from_numpy(np.array([java_string_hash(t) for t in enc.dictionary.to_pylist()], np.int32))
    return pc.fill_null(pc.take(codes, enc.indices), 0)


#: What `stored_to_table` reads of `decode_stored`'s columns.
_READ_COLUMNS = (
    "queue_offset", "message_id", "tags", "keys", "body", "properties", "born_timestamp", "store_timestamp",
    "born_host", "reconsume_times", "message_group", "delivery_timestamp", "sysflag",
)  # fmt: skip


def stored_to_table(
    bodies: Sequence[memoryview | bytes], flt: FilterSpec | None = None, *, dedupe: bool = False
) -> pa.Table:
    """Pull bodies (stored-message records) → a MESSAGE_SCHEMA table, with no per-message Python.

    Columns come from the codec's `decode_stored` (message id = UNIQ_KEY, else the offset id; tags, keys,
    message group, delivery time and user properties from the properties); `born_host` is the
    `__BORNHOST` property a 5.x proxy sets for gRPC producers, else the stored born host without its port;
    only the columns the table keeps are decoded;
    `dedupe` drops rows whose offset is not above every earlier row's (overlapping answers); a tag filter
    keeps the exact tags only.
    """
    batch = decode_stored(
        bodies, extra_properties=(_BORN_HOST,), raw_properties=False, columns=_READ_COLUMNS, host_ports=False
    )
    offsets = batch.column("queue_offset")
    if dedupe and len(offsets) > 1:
        arr = int64_values(offsets)
        prev_max = np.maximum.accumulate(np.concatenate([[np.iinfo(np.int64).min], arr[:-1]]))
        keep = arr > prev_max
        if not keep.all():
            batch = batch.filter(from_numpy(keep))
    if flt is not None and not flt.matches_all and flt.kind != FILTER_SQL:
        tags = [t.strip() for t in flt.expression.split("||") if t.strip()]
        mask = pc.fill_null(pc.is_in(batch.column("tags"), value_set=string_array(tags)), False)
        if not pc.all(mask).as_py():
            batch = batch.filter(mask)
    n = batch.num_rows
    col = batch.column
    born_host = col("born_host")
    given = col(_BORN_HOST)
    if given.null_count < n:
        born_host = pc.coalesce(given, born_host)
    group, delivery = col("message_group"), col("delivery_timestamp")
    sysflag = np.frombuffer(col("sysflag").buffers()[1], np.int32, n, 4 * col("sysflag").offset)  # never null
    mtype = np.full(n, NORMAL, np.int8)
    if delivery.null_count < n:
        mtype[bool_values(delivery.is_valid())] = DELAY
    if group.null_count < n:
        mtype[bool_values(group.is_valid())] = FIFO
    tx = (sysflag & int(MessageSysFlag.TRANSACTION_ROLLBACK)) == int(MessageSysFlag.TRANSACTION_COMMIT)
    if tx.any():
        mtype[tx] = TRANSACTION
    arrays = [
        col("queue_offset"),
        col("message_id"),
        col("tags"),
        col("keys"),
        col("body"),
        col("properties"),
        col("born_timestamp"),
        col("store_timestamp"),
        born_host,
        col("reconsume_times"),
        group,
        delivery,
        from_numpy(mtype),
        _tag_codes(col("tags")),
    ]
    return pa.Table.from_batches([pa.RecordBatch.from_arrays(arrays, schema=MESSAGE_SCHEMA)])
