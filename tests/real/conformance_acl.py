"""Differential conformance of ACL refusals: the emulator with an ACL against real RocketMQ with
authentication and authorization on, over gRPC v2 (the 5.x proxy) and remoting (the 5.x broker, ACL 2.0;
the 4.9.x broker, ACL 1.0 with plain_acl.yml), comparing what a client observes for an unsigned request,
a wrong secret, an unknown access key, a user lacking the permission, and an allowed request.

One description of the accounts (`ACCOUNTS`) gives both configurations: the emulator's ACL file (docs/design.md,
"Security") and a `plain_acl.yml`, which RocketMQ 4.9.x reads natively and which a 5.x broker with
`migrateAuthFromV1Enabled` turns into ACL 2.0 users and policies when it starts (its admin account
becomes a super user, which the proxy also uses to call the broker).

The scenarios return observations as the other conformance modules do; the known differences are in
`conformance.DEVIATIONS["grpc"]["acl_refusals"]` and `conformance_remoting.DEVIATIONS[v]["acl_refusals"]`,
so docs/deviations.md lists them in the same tables.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from rocketmq_protocol.remoting.codes import RequestCode as Q
from rocketmq_protocol.remoting.codes import ResponseCode as R
from rocketmq_protocol.remoting.properties import encode_properties
from tests.real import conformance as cf
from tests.real import conformance_remoting as cr
from tests.real.v2stubs import d
from tests.support.remoting import RemotingClient, messages

TOPIC = "acl-orders"  # acl-pub may send to it, acl-sub may read it (the gRPC scenario's topic)
RTOPIC = "acl-orders-r"  # the same for the remoting scenario (one real 5.x cluster serves both)
OTHER_TOPIC = "acl-audit"  # nobody but the admin has a permission on it
GROUP = "acl-group"  # acl-sub may consume as it
CTOPIC = "acl-orders-c"  # the connector's own topic (tests/real/test_conformance_acl.py): acl-pub writes it
CGROUP = "acl-readers-c"  # ... and acl-sub reads it as this group

ADMIN = ("acl-admin", "acl-admin-secret")
PUB = ("acl-pub", "acl-pub-secret")
SUB = ("acl-sub", "acl-sub-secret")
WRONG_SECRET = (PUB[0], "not-the-secret")
UNKNOWN_KEY = ("acl-nobody", "whatever-secret")

# accessKey -> (secretKey, admin, {topic: perm}, {group: perm})
ACCOUNTS: dict[str, tuple[str, bool, dict[str, str], dict[str, str]]] = {
    ADMIN[0]: (ADMIN[1], True, {}, {}),
    PUB[0]: (PUB[1], False, {TOPIC: "PUB", RTOPIC: "PUB", CTOPIC: "PUB"}, {}),
    SUB[0]: (SUB[1], False, {TOPIC: "SUB", RTOPIC: "SUB", CTOPIC: "SUB"}, {GROUP: "SUB", CGROUP: "SUB"}),
}


def emulator_acl() -> dict:
    """The emulator's ACL (docs/design.md, "Security") for ACCOUNTS."""
    return {
        "accounts": [
            {"accessKey": ak, "secretKey": sk, "admin": admin, "topics": topics, "groups": groups}
            for ak, (sk, admin, topics, groups) in ACCOUNTS.items()
        ]
    }


def plain_acl_yaml() -> str:
    """ACCOUNTS as RocketMQ's ACL 1.0 `conf/plain_acl.yml` (everything not listed is denied)."""
    lines = ["globalWhiteRemoteAddresses: []", "accounts:"]
    for ak, (sk, admin, topics, groups) in ACCOUNTS.items():
        lines += [
            f"  - accessKey: {ak}",
            f"    secretKey: {sk}",
            f"    admin: {'true' if admin else 'false'}",
            "    defaultTopicPerm: DENY",
            "    defaultGroupPerm: DENY",
        ]
        if topics:
            lines += ["    topicPerms:"] + [f"      - {t}={p}" for t, p in topics.items()]
        if groups:
            lines += ["    groupPerms:"] + [f"      - {g}={p}" for g, p in groups.items()]
    return "\n".join(lines) + "\n"


def tools_yaml() -> str:
    """`conf/tools.yml`: the credentials `mqadmin` signs its requests with (apache/rocketmq `MQAdminStartup`)."""
    return f"accessKey: {ADMIN[0]}\nsecretKey: {ADMIN[1]}\n"


def _inner_credentials() -> str:
    return json.dumps({"accessKey": ADMIN[0], "secretKey": ADMIN[1]})


def broker5_auth_conf() -> dict[str, str]:
    """broker.conf entries of a 5.x broker with ACL 2.0 on, its users migrated from plain_acl.yml."""
    return {
        "authenticationEnabled": "true",
        "authorizationEnabled": "true",
        "authenticationProvider": "org.apache.rocketmq.auth.authentication.provider.DefaultAuthenticationProvider",
        "authenticationMetadataProvider": (
            "org.apache.rocketmq.auth.authentication.provider.LocalAuthenticationMetadataProvider"
        ),
        "authorizationProvider": "org.apache.rocketmq.auth.authorization.provider.DefaultAuthorizationProvider",
        "authorizationMetadataProvider": (
            "org.apache.rocketmq.auth.authorization.provider.LocalAuthorizationMetadataProvider"
        ),
        "migrateAuthFromV1Enabled": "true",
        "innerClientAuthenticationCredentials": _inner_credentials(),
    }


def proxy5_auth_conf() -> dict[str, object]:
    """rmq-proxy.json entries of a 5.x proxy (cluster mode) checking its clients against the broker's users
    and ACLs, calling the broker as the admin (a super user)."""
    return {
        "authenticationEnabled": True,
        "authorizationEnabled": True,
        "authenticationProvider": "org.apache.rocketmq.auth.authentication.provider.DefaultAuthenticationProvider",
        "authenticationMetadataProvider": "org.apache.rocketmq.proxy.auth.ProxyAuthenticationMetadataProvider",
        "authorizationProvider": "org.apache.rocketmq.auth.authorization.provider.DefaultAuthorizationProvider",
        "authorizationMetadataProvider": "org.apache.rocketmq.proxy.auth.ProxyAuthorizationMetadataProvider",
        "innerClientAuthenticationCredentials": _inner_credentials(),
        "enableAclRpcHookForClusterMode": True,  # sign the proxy's own requests to the broker
    }


def broker4_acl_conf() -> dict[str, str]:
    return {"aclEnable": "true"}


# ----------------------------------------------------------------------------------------------- gRPC v2
def _telemetry(client: cf.V2Client, ctype: int, **kw: Any) -> str:
    """What a Telemetry settings command gets back: "settings", "status:CODE", "grpc:CODE" or "nothing"."""
    stream, reply = client.settings(ctype, **kw)
    if reply is not None:
        if reply.HasField("settings"):
            return "settings"
        return f"status:{cf.code_name(reply.status.code)}"
    if stream.error is not None:
        return f"grpc:{stream.error.code().name}"
    return "nothing"


def grpc_acl_refusals(c: cf.V2Client) -> dict:
    """QueryRoute, SendMessage, Telemetry settings, ReceiveMessage and AckMessage as each kind of caller."""
    c.target.create_topic(TOPIC, 2, "NORMAL")
    c.target.create_topic(OTHER_TOPIC, 2, "NORMAL")
    c.target.create_group(GROUP, 16, False)
    callers = {
        "unsigned": c.peer_as(None),
        "wrong_secret": c.peer_as(WRONG_SECRET),
        "unknown_key": c.peer_as(UNKNOWN_KEY),
        "pub": c.peer_as(PUB),
        "sub": c.peer_as(SUB),
    }
    out: dict[str, Any] = {}
    out["route"] = {who: cf.code_name(x.route(TOPIC).status.code) for who, x in callers.items()}
    out["route"]["pub_other_topic"] = cf.code_name(callers["pub"].route(OTHER_TOPIC).status.code)
    out["send"] = {
        who: cf.send_result(x.send(cf.message(TOPIC, f"from-{who}".encode())))
        for who, x in callers.items()
        if who != "pub"
    }
    out["telemetry"] = {
        "unsigned_producer": _telemetry(c.peer_as(None), d.PRODUCER, topics=[TOPIC]),
        "wrong_secret_producer": _telemetry(c.peer_as(WRONG_SECRET), d.PRODUCER, topics=[TOPIC]),
        "pub_producer": _telemetry(c.peer_as(PUB), d.PRODUCER, topics=[TOPIC]),
        "sub_producer": _telemetry(c.peer_as(SUB), d.PRODUCER, topics=[TOPIC]),
        "pub_consumer": _telemetry(c.peer_as(PUB), d.SIMPLE_CONSUMER, topics=[TOPIC], group=GROUP),
    }
    consumer = c.peer_as(SUB)
    out["telemetry"]["sub_consumer"] = _telemetry(consumer, d.SIMPLE_CONSUMER, topics=[TOPIC], group=GROUP)
    # The one allowed send, then the receives: refused ones first, the allowed one takes the message.
    out["send"]["pub"] = cf.send_result(callers["pub"].send(cf.message(TOPIC, b"from-pub")))
    mqs = callers["pub"].queues(TOPIC)
    out["receive"] = {
        who: callers[who].receive(GROUP, mqs[0], long_poll_s=2)["frames"]
        for who in ("unsigned", "wrong_secret", "unknown_key", "pub")
    }
    got: list = []
    frames: list[str] = []
    deadline = time.monotonic() + 20
    while not got and time.monotonic() < deadline:
        for mq in mqs:
            r = consumer.receive(GROUP, mq, batch=8, long_poll_s=2)
            if r["messages"]:
                got, frames = r["messages"], r["frames"]
                break
    out["receive"]["sub"] = {"frames": frames, "bodies": sorted(m.body.decode() for m in got)}
    if got:
        out["ack"] = {
            "unsigned": cf.code_name(callers["unsigned"].ack(GROUP, TOPIC, *got).status.code),
            "pub": cf.code_name(callers["pub"].ack(GROUP, TOPIC, *got).status.code),
            "sub": cf.code_name(consumer.ack(GROUP, TOPIC, *got).status.code),
        }
    return out


# ----------------------------------------------------------------------------------------------- remoting
def _send(b: RemotingClient, topic: str, body: bytes) -> int:
    ext = {
        "a": "acl-producer", "b": topic, "c": "TBW102", "d": 4, "e": 0, "f": 0,
        "g": int(time.time() * 1000), "h": 0,
        "i": encode_properties({"UNIQ_KEY": uuid.uuid4().hex.upper(), "WAIT": "true"}), "j": 0, "k": False,
    }  # fmt: skip
    return b.call(Q.SEND_MESSAGE_V2, ext, body).code


def _pull(b: RemotingClient, topic: str) -> Any:
    return b.pull(topic, 0, 0, group=GROUP, max_nums=8)


def remoting_acl_refusals(target: cr.RemotingTarget) -> dict:
    """SEND_MESSAGE_V2, PULL_MESSAGE, GET_MAX_OFFSET and UPDATE_AND_CREATE_TOPIC to the broker as each kind of
    caller (the name server checks nothing, so the route comes unsigned)."""
    target.create_topic(RTOPIC, 1)
    target.create_group(GROUP, 16)
    ns = RemotingClient(target.namesrv)
    clients: dict[str, RemotingClient] = {}
    try:
        addr = ns.route(RTOPIC).broker_addr("broker-a")
        assert addr, "no broker-a in the route"
        for who, creds in (
            ("unsigned", None),
            ("wrong_secret", WRONG_SECRET),
            ("unknown_key", UNKNOWN_KEY),
            ("pub", PUB),
            ("sub", SUB),
        ):
            clients[who] = RemotingClient(addr, credentials=creds)
        out: dict[str, Any] = {}
        out["send"] = {who: cr.name(_send(b, RTOPIC, f"from-{who}".encode())) for who, b in clients.items()}
        out["pull"] = {who: cr.name(_pull(b, RTOPIC).code) for who, b in clients.items() if who != "sub"}
        deadline = time.monotonic() + 10  # a real broker dispatches to the consume queue asynchronously
        while True:
            r = _pull(clients["sub"], RTOPIC)
            if r.code == R.SUCCESS or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        out["pull"]["sub"] = cr.name(r.code)
        out["pull"]["sub.bodies"] = (
            sorted(x["body"].decode() for x in messages(r).to_pylist()) if r.code == R.SUCCESS else None
        )
        out["max_offset"] = {
            who: cr.name(clients[who].call(Q.GET_MAX_OFFSET, {"topic": RTOPIC, "queueId": 0}).code)
            for who in ("unsigned", "pub", "sub")
        }
        create = {
            "topic": f"acl-by-pub-{uuid.uuid4().hex[:8]}", "defaultTopic": "TBW102", "readQueueNums": 1,
            "writeQueueNums": 1, "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False,
        }  # fmt: skip
        out["create_topic"] = {
            who: cr.name(clients[who].call(Q.UPDATE_AND_CREATE_TOPIC, create).code)
            for who in ("unsigned", "pub")
        }
        return out
    finally:
        ns.close()
        for b in clients.values():
            b.close()
