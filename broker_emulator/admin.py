"""`python -m broker_emulator admin`: verbs against a running emulator over its extension service."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from collections.abc import Sequence

import grpc

from rocketmq_protocol.extension import pb, pb_grpc
from rocketmq_protocol.grpc_v2 import definition_pb2 as d
from rocketmq_protocol.grpc_v2 import service_pb2 as s
from rocketmq_protocol.grpc_v2 import service_pb2_grpc as sg
from rocketmq_protocol.grpc_v2.headers import (
    CLIENT_ID_HEADER,
    EXPLICIT_QUEUE_HEADER,
    LANGUAGE_HEADER,
)
from rocketmq_protocol.message_schema import ipc_to_table
from rocketmq_protocol.signature import signed_headers

from .core.admin import ADMIN_VERBS


class AdminError(Exception):
    pass


class AdminClient:
    """Talks to one endpoint of the cluster (any endpoint answers for the whole cluster)."""

    def __init__(
        self,
        endpoints: str,
        timeout: float = 10.0,
        access_key: str | None = None,
        secret_key: str | None = None,
        tls_ca_file: str | None = None,
    ) -> None:
        self.endpoints = [e.strip() for e in endpoints.split(";") if e.strip()]
        if not self.endpoints:
            raise AdminError("--endpoints is empty; expected host:port[;host:port]")
        if bool(access_key) != bool(secret_key):
            raise AdminError("--access-key and --secret-key go together")
        self.timeout = timeout
        self._credentials = (access_key, secret_key) if access_key and secret_key else None
        self._tls: grpc.ChannelCredentials | None = None
        if tls_ca_file:
            try:
                with open(tls_ca_file, "rb") as f:
                    self._tls = grpc.ssl_channel_credentials(root_certificates=f.read())
            except OSError as e:
                raise AdminError(f"--tls-ca-file {tls_ca_file}: cannot be read ({e.strerror})") from None
        self._channels: dict[str, grpc.Channel] = {}
        self.client_id = f"admin@{os.getpid()}@{uuid.uuid4().hex[:8]}"

    def channel(self, endpoint: str) -> grpc.Channel:
        ch = self._channels.get(endpoint)
        if ch is None:
            options = [("grpc.max_receive_message_length", 128 * 1024 * 1024)]
            if self._tls is not None:
                ch = grpc.secure_channel(endpoint, self._tls, options=options)
            else:
                ch = grpc.insecure_channel(endpoint, options=options)
            self._channels[endpoint] = ch
        return ch

    def close(self) -> None:
        for ch in self._channels.values():
            ch.close()

    @property
    def md(self) -> list[tuple[str, str]]:
        """The headers of one call: client id and, with credentials, a fresh signature."""
        md = [(CLIENT_ID_HEADER, self.client_id), (LANGUAGE_HEADER, "PYTHON")]
        if self._credentials is not None:
            md += signed_headers(*self._credentials)
        return md

    def call(self, verb: str, **args) -> object:
        last: Exception | None = None
        for ep in self.endpoints:
            try:
                resp = pb_grpc.EmulatorServiceStub(self.channel(ep)).Admin(
                    pb.AdminRequest(verb=verb, args_json=json.dumps(args)),
                    timeout=self.timeout,
                    metadata=self.md,
                )
            except grpc.RpcError as e:
                last = e
                continue
            if resp.code != d.OK:
                raise AdminError(f"{verb}: {resp.message}")
            return json.loads(resp.result_json)
        raise AdminError(f"no endpoint of {';'.join(self.endpoints)} answered: {last}")

    def route(self, topic: str) -> list[d.MessageQueue]:
        for ep in self.endpoints:
            try:
                r = sg.MessagingServiceStub(self.channel(ep)).QueryRoute(
                    s.QueryRouteRequest(topic=d.Resource(name=topic)), metadata=self.md, timeout=self.timeout
                )
            except grpc.RpcError:
                continue
            if r.status.code != d.OK:
                raise AdminError(f"route of {topic}: {r.status.message}")
            return list(r.message_queues)
        raise AdminError(f"no endpoint of {';'.join(self.endpoints)} answered QueryRoute")


def _endpoint(mq: d.MessageQueue) -> str:
    a = mq.broker.endpoints.addresses[0]
    return f"{a.host}:{a.port}"


def _table(rows: list[dict], columns: Sequence[str]) -> str:
    if not rows:
        return "(none)"
    widths = [max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in columns]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    for r in rows:
        lines.append("  ".join(str(r.get(c, "")).ljust(w) for c, w in zip(columns, widths, strict=True)))
    return "\n".join(lines)


def _progress(done: int, total: int, started: float, out=sys.stderr) -> None:
    width = 30
    filled = int(width * done / total) if total else width
    rate = done / max(time.time() - started, 1e-9)
    out.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {rate:,.0f} msg/s")
    out.flush()


def produce(
    client: AdminClient, topic: str, count: int, size: int, tag: str | None, batch: int, progress: bool
):
    queues = [q for q in client.route(topic) if q.permission in (d.WRITE, d.READ_WRITE)]
    if not queues:
        raise AdminError(f"topic {topic} has no writable queue")
    started = time.time()
    sent = 0
    i = 0
    body = (b"x" * size) if size > 0 else b"x"
    md = [*client.md, (EXPLICIT_QUEUE_HEADER, "true")]
    while sent < count:
        mq = queues[i % len(queues)]
        i += 1
        n = min(batch, count - sent)
        msgs = []
        for k in range(n):
            sp = d.SystemProperties(
                message_id=uuid.uuid4().hex.upper(), queue_id=mq.id, body_encoding=d.IDENTITY
            )
            sp.born_timestamp.GetCurrentTime()
            sp.born_host = "admin"
            if tag:
                sp.tag = tag
            msgs.append(
                d.Message(
                    topic=d.Resource(name=topic),
                    body=body,
                    system_properties=sp,
                    user_properties={"seq": str(sent + k)},
                )
            )
        r = sg.MessagingServiceStub(client.channel(_endpoint(mq))).SendMessage(
            s.SendMessageRequest(messages=msgs), metadata=md, timeout=client.timeout
        )
        if r.status.code != d.OK:
            raise AdminError(f"send to {mq.broker.name}:{mq.id} failed: {r.status.message}")
        sent += n
        if progress:
            _progress(sent, count, started)
    if progress:
        sys.stderr.write("\n")
    elapsed = time.time() - started
    return {
        "topic": topic,
        "sent": sent,
        "seconds": round(elapsed, 3),
        "msgs_per_s": round(sent / max(elapsed, 1e-9)),
    }


def consume(client: AdminClient, topic: str, count: int, group: str | None, commit: bool) -> list[dict]:
    out: list[dict] = []
    for mq in client.route(topic):
        if len(out) >= count:
            break
        ch = client.channel(_endpoint(mq))
        v2 = sg.MessagingServiceStub(ch)
        ext = pb_grpc.EmulatorServiceStub(ch)
        mq_pb = d.MessageQueue(topic=d.Resource(name=topic), id=mq.id)
        offset = None
        if group:
            r = v2.GetOffset(
                s.GetOffsetRequest(group=d.Resource(name=group), message_queue=mq_pb), metadata=client.md
            )
            if r.status.code == d.OK:
                offset = r.offset
        if offset is None:
            r = v2.QueryOffset(
                s.QueryOffsetRequest(message_queue=mq_pb, query_offset_policy=d.BEGINNING), metadata=client.md
            )
            offset = r.offset
        while len(out) < count:
            r = ext.BulkPull(
                pb.BulkPullRequest(
                    group=group or "admin",
                    topic=topic,
                    queue_id=mq.id,
                    offset=offset,
                    max_messages=count - len(out),
                ),
                timeout=client.timeout,
                metadata=client.md,
            )
            if r.code == d.ILLEGAL_OFFSET:
                offset = r.next_offset
                continue
            if r.code in (d.UNAUTHORIZED, d.FORBIDDEN):
                raise AdminError(f"BulkPull of {topic}: {d.Code.Name(r.code)}: {r.message}")
            if r.code != d.OK:
                if r.next_offset > offset and r.next_offset < r.max_offset:
                    offset = r.next_offset
                    continue
                break
            for row in ipc_to_table(r.arrow_ipc).to_pylist():
                out.append(
                    {
                        "broker": mq.broker.name,
                        "queue": mq.id,
                        "offset": row["queue_offset"],
                        "message_id": row["message_id"],
                        "tag": row["tag"],
                        "keys": row["keys"],
                        "properties": dict(row["properties"] or []),
                        "body": row["body"].decode("utf-8", "replace"),
                    }
                )
            offset = r.next_offset
        if group and commit:
            v2.UpdateOffset(
                s.UpdateOffsetRequest(group=d.Resource(name=group), message_queue=mq_pb, offset=offset),
                metadata=client.md,
            )
    return out[:count]


def build_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("admin", help="administer a running emulator")
    p.add_argument("--endpoints", required=True, help="host:port[;host:port] of any broker")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.add_argument("--timeout", type=float, default=10.0)
    p.add_argument(
        "--access-key",
        default=os.environ.get("ROCKETMQ_ACCESS_KEY"),
        help="sign requests for an emulator started with --acl (default: $ROCKETMQ_ACCESS_KEY)",
    )
    p.add_argument(
        "--secret-key",
        default=os.environ.get("ROCKETMQ_SECRET_KEY"),
        help="secret key of --access-key (default: $ROCKETMQ_SECRET_KEY, which keeps it out of `ps`)",
    )
    p.add_argument("--tls-ca-file", help="connect with TLS, trusting this CA certificate (PEM)")
    verbs = p.add_subparsers(dest="verb", required=True)
    v = verbs.add_parser("create-topic", help=ADMIN_VERBS["create-topic"].help)
    v.add_argument("name")
    v.add_argument("--queues", type=int, default=None)
    v.add_argument(
        "--message-type", default="MIXED", choices=["NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED"]
    )
    v.add_argument("--broker", action="append", dest="brokers", help="only on this broker (repeatable)")
    v = verbs.add_parser("topics", help=ADMIN_VERBS["topics"].help)
    v.add_argument("--topic")
    verbs.add_parser("groups", help=ADMIN_VERBS["groups"].help)
    v = verbs.add_parser("update-group", help=ADMIN_VERBS["update-group"].help)
    v.add_argument("group")
    v.add_argument("--max-retries", type=int)
    v.add_argument("--fifo", action=argparse.BooleanOptionalAction, default=None)
    v = verbs.add_parser("lag", help=ADMIN_VERBS["lag"].help)
    v.add_argument("--group")
    v.add_argument("--topic")
    v = verbs.add_parser("produce", help="send N test messages")
    v.add_argument("--topic", required=True)
    v.add_argument("--count", type=int, default=1000)
    v.add_argument("--size", type=int, default=100, help="body bytes")
    v.add_argument("--tag")
    v.add_argument("--batch", type=int, default=100, help="messages per SendMessage")
    v.add_argument("--no-progress", action="store_true")
    v = verbs.add_parser("consume", help="print N messages")
    v.add_argument("--topic", required=True)
    v.add_argument("--count", type=int, default=10)
    v.add_argument("--group", help="start at this group's committed offsets")
    v.add_argument("--commit", action="store_true", help="commit the new offsets to --group")
    v = verbs.add_parser("fault", help=ADMIN_VERBS["fault"].help)
    v.add_argument("--broker", required=True)
    v.add_argument("--down", action=argparse.BooleanOptionalAction, default=None)
    v.add_argument("--latency-ms", type=int)
    v.add_argument("--error-rate", type=float)
    v.add_argument("--read-only", action=argparse.BooleanOptionalAction, default=None)
    v.add_argument("--clear", action="store_true")
    verbs.add_parser("stats", help=ADMIN_VERBS["stats"].help)
    verbs.add_parser("reload-acl", help=ADMIN_VERBS["reload-acl"].help)


def run(args: argparse.Namespace) -> int:
    client = None
    try:
        client = AdminClient(args.endpoints, args.timeout, args.access_key, args.secret_key, args.tls_ca_file)
        result, text = _dispatch(client, args)
    except AdminError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    finally:
        if client is not None:
            client.close()
    print(json.dumps(result, indent=2) if args.json else text)
    return 0


def _create_topic(client: AdminClient, a: argparse.Namespace) -> tuple[object, str]:
    r = client.call(
        "create-topic", name=a.name, queues=a.queues, message_type=a.message_type, brokers=a.brokers
    )
    return r, f"topic {r['topic']}: {r['queues']} queues on {', '.join(r['brokers'])}"


def _topics(client: AdminClient, a: argparse.Namespace) -> tuple[object, str]:
    r = client.call("topics", topic=a.topic)
    return r, _table(r, ["topic", "broker", "queue", "min_offset", "max_offset", "message_type"])


def _groups(client: AdminClient, a: argparse.Namespace) -> tuple[object, str]:
    r = client.call("groups")
    clients = [
        {**c, "last_heartbeat": time.strftime("%H:%M:%S", time.localtime(c["last_heartbeat_ms"] / 1000))}
        for c in r["clients"]
    ]
    text = "clients:\n" + _table(clients, ["client_id", "client_type", "group", "topics", "last_heartbeat"])
    return r, text + "\n\ngroups:\n" + _table(r["groups"], ["group", "clients", "topics"])


def _update_group(client: AdminClient, a: argparse.Namespace) -> tuple[object, str]:
    r = client.call("update-group", group=a.group, max_retries=a.max_retries, fifo=a.fifo)
    return r, f"group {r['group']}: max_retries={r['max_retries']} fifo={r['fifo']}"


def _lag(client: AdminClient, a: argparse.Namespace) -> tuple[object, str]:
    r = client.call("lag", group=a.group, topic=a.topic)
    columns = ["group", "topic", "broker", "queue", "mode", "committed", "max_offset", "lag", "inflight"]
    return r, _table(r, columns)


def _produce(client: AdminClient, a: argparse.Namespace) -> tuple[object, str]:
    r = produce(client, a.topic, a.count, a.size, a.tag, a.batch, not a.no_progress)
    return r, f"sent {r['sent']} messages to {r['topic']} in {r['seconds']} s ({r['msgs_per_s']:,} msg/s)"


def _consume(client: AdminClient, a: argparse.Namespace) -> tuple[object, str]:
    r = consume(client, a.topic, a.count, a.group, a.commit)
    lines = [
        f"{m['broker']}:{m['queue']}@{m['offset']} id={m['message_id']} tag={m['tag']} keys={m['keys']} "
        f"props={m['properties']} body={m['body'][:80]!r}"
        for m in r
    ]
    return r, "\n".join(lines) if lines else "(no messages)"


def _fault(client: AdminClient, a: argparse.Namespace) -> tuple[object, str]:
    if a.clear:
        r = client.call("fault", broker=a.broker, clear=True)
    else:
        given = {
            "down": a.down,
            "latency_ms": a.latency_ms,
            "error_rate": a.error_rate,
            "read_only": a.read_only,
        }
        r = client.call("fault", broker=a.broker, **{k: v for k, v in given.items() if v is not None})
    return r, f"{r['broker']}: " + ", ".join(f"{k}={v}" for k, v in r["faults"].items())


_STATS_COLUMNS = [
    "broker",
    "endpoint",
    "remoting",
    "topics",
    "queues",
    "messages",
    "put_messages",
    "get_requests",
    "memory_bytes",
]


def _stats(client: AdminClient, a: argparse.Namespace) -> tuple[object, str]:
    r = client.call("stats")
    rows = [{k: b[k] for k in _STATS_COLUMNS} | {"faults": _active(b["faults"])} for b in r["brokers"]]
    text = _table(rows, [*_STATS_COLUMNS, "faults"])
    return r, text + f"\nclients: {r['clients']}  held requests: {r['held_requests']}"


def _reload_acl(client: AdminClient, a: argparse.Namespace) -> tuple[object, str]:
    r = client.call("reload-acl")
    return r, f"ACL reloaded from {r['source']}: {r['accounts']} accounts"


# Each CLI verb: the server verbs of ADMIN_VERBS, plus produce/consume (v2 client verbs run here).
_RUN = {
    "create-topic": _create_topic,
    "topics": _topics,
    "groups": _groups,
    "update-group": _update_group,
    "lag": _lag,
    "produce": _produce,
    "consume": _consume,
    "fault": _fault,
    "stats": _stats,
    "reload-acl": _reload_acl,
}


def _dispatch(client: AdminClient, a: argparse.Namespace) -> tuple[object, str]:
    return _RUN[a.verb](client, a)


def _active(f: dict) -> str:
    on = [k if v is True else f"{k}={v}" for k, v in f.items() if v]
    return ",".join(on) or "-"
