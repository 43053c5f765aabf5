"""Security (docs/design.md, 'Security'): the emulator's ACL (MQv2-HMAC-SHA1 signatures, topic/group permissions, reload)
and TLS, seen through the official rocketmq-python-client, the admin CLI, the connector's client and Spark;
secrets stay out of logs, reprs, plans, checkpoints and commit messages."""

from __future__ import annotations

import json
import logging
import os
import pickle
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pyarrow as pa
import pytest
from rocketmq import (
    ClientConfiguration,
    Credentials,
    FilterExpression,
    Message,
    Producer,
    SimpleConsumer,
)

from broker_emulator import Emulator
from broker_emulator.admin import AdminClient, AdminError
from broker_emulator.core.acl import AclError, Denial, Denied, authenticate, load_acl, parse_acl
from connector.clients import close_clients
from connector.clients.grpc_v2 import GrpcClient
from connector.config import ClientConfig
from connector.errors import RetriesExhaustedError
from rocketmq_protocol.extension import pb, pb_grpc
from rocketmq_protocol.grpc_v2 import definition_pb2 as d
from rocketmq_protocol.grpc_v2 import service_pb2 as s
from rocketmq_protocol.grpc_v2 import service_pb2_grpc as sg
from rocketmq_protocol.signature import signed_headers
from tests.support.emulator_proc import EmulatorProcess, run_admin, serve_command, wait_for
from tests.support.tls import self_signed_certificate

SECRET = "s3cr3t-Sk-7f1c9a"  # every account's secret contains this marker, so one grep finds any leak
WRONG_SECRET = "wr0ng-Sk-5e2b"
TOPIC = "secured_topic"
OTHER_TOPIC = "secured_other"
GROUP = "secured_group"


def account(ak: str, topics: dict, groups: dict | None = None, admin: bool = False) -> dict:
    return {
        "accessKey": ak,
        "secretKey": f"{SECRET}-{ak}",
        "topics": topics,
        "groups": groups or {},
        "admin": admin,
    }


def secret(ak: str) -> str:
    return f"{SECRET}-{ak}"


ACL = {
    "accounts": [
        account("app", {TOPIC: "PUB_SUB", OTHER_TOPIC: "SUB"}, {GROUP: "SUB"}),
        account("writer", {TOPIC: "PUB"}),
        account("nogroup", {TOPIC: "SUB"}),
        account("ops", {"*": "PUB_SUB"}, {"*": "SUB"}, admin=True),
    ]
}


def client_config(endpoints: str, ak: str = "app") -> ClientConfiguration:
    return ClientConfiguration(endpoints, Credentials(ak, secret(ak)), request_timeout=10)


class ClientLog(logging.Handler):
    """The official client's own error log (its logger does not propagate to the root logger)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def __enter__(self) -> ClientLog:
        logging.getLogger("rocketmq-python-client").addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        logging.getLogger("rocketmq-python-client").removeHandler(self)


# ------------------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def secured() -> Iterator[Emulator]:
    """A plaintext Emulator(brokers=2, queues=2) with ACL."""
    emu = Emulator(brokers=2, queues=2, acl=ACL)
    emu.start(timeout=30)
    emu.create_topic(TOPIC)
    emu.create_topic(OTHER_TOPIC)
    try:
        yield emu
    finally:
        emu.stop(timeout=30)


@pytest.fixture(scope="module")
def certificate(tmp_path_factory) -> tuple[bytes, bytes, Path]:
    """A self-signed certificate for 127.0.0.1 and localhost: (cert PEM, key PEM, cert file)."""
    cert_pem, key_pem, cert_file, _key_file = self_signed_certificate(tmp_path_factory.mktemp("tls"))
    return cert_pem, key_pem, cert_file


@pytest.fixture(scope="module")
def tls_secured(certificate) -> Iterator[Emulator]:
    """An Emulator(brokers=2, queues=2) serving TLS with the ACL."""
    cert_pem, key_pem, _ = certificate
    emu = Emulator(brokers=2, queues=2, acl=ACL, tls_cert=cert_pem, tls_key=key_pem)
    emu.start(timeout=30)
    emu.create_topic(TOPIC)
    try:
        yield emu
    finally:
        close_clients()
        emu.stop(timeout=30)


# ------------------------------------------------------------------------------------------ ACL file
@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{not json", "not valid JSON"),
        ('{"users": []}', '"accounts" list'),
        ('{"accounts": {}}', '"accounts" must be a list'),
        ('{"accounts": [{"secretKey": "x"}]}', 'accounts[0]: "accessKey" is missing or blank'),
        ('{"accounts": [{"accessKey": "a"}]}', 'accounts[0]: "secretKey" is missing or blank'),
        (
            '{"accounts": [{"accessKey": "a", "secretKey": "zz-hidden", "topics": {"t": "WRITE"}}]}',
            "accounts[0].topics['t'] is 'WRITE'; accepted: PUB, SUB, PUB_SUB",
        ),
        (
            '{"accounts": [{"accessKey": "a", "secretKey": "zz-hidden", "groups": {"g": "PUB"}}]}',
            "accounts[0].groups['g'] is 'PUB'; accepted: SUB",
        ),
        (
            '{"accounts": [{"accessKey": "a", "secretKey": "zz-hidden", "topic": {}}]}',
            "accounts[0] has unknown key(s) topic",
        ),
        (
            '{"accounts": [{"accessKey": "a", "secretKey": "zz-hidden"}, {"accessKey": "a", "secretKey": "y"}]}',
            "accounts[1]: accessKey 'a' is already used",
        ),
        ('{"accounts": [{"accessKey": "a", "secretKey": "zz-hidden", "admin": "yes"}]}', '"admin" must be'),
    ],
)
def test_acl_file_errors_name_the_file_and_field(tmp_path: Path, content: str, expected: str) -> None:
    path = tmp_path / "acl.json"
    path.write_text(content)
    with pytest.raises(AclError) as e:
        load_acl(str(path))
    assert expected in str(e.value) and str(path) in str(e.value)
    assert "zz-hidden" not in str(e.value)


def test_signature_check_and_secret_kept_out_of_reprs() -> None:
    acl = parse_acl(ACL)
    ak = "app"
    assert authenticate(acl, dict(signed_headers(ak, secret(ak)))).access_key == ak
    for headers, reason in [
        ({}, "no authorization header"),
        (dict(signed_headers(ak, WRONG_SECRET)), "signature mismatch for access key 'app'"),
        (dict(signed_headers("nobody", "x")), "access key 'nobody' is unknown"),
        (dict(signed_headers(ak, secret(ak), now=time.time() - 2 * 86400)), "away from the server's clock"),
        ({"authorization": "Basic abc"}, "expected MQv2-HMAC-SHA1"),
    ]:
        with pytest.raises(Denied) as e:
            authenticate(acl, headers)
        assert e.value.kind == Denial.UNAUTHORIZED and reason in e.value.message
        assert SECRET not in e.value.message and WRONG_SECRET not in e.value.message
    assert SECRET not in repr(acl) + repr(acl.accounts) + str(list(acl.accounts.values()))


# ------------------------------------------------------------------------------------------ official client
def test_official_client_produces_and_consumes_with_credentials(secured: Emulator) -> None:
    topic = TOPIC
    producer = Producer(client_config(secured.endpoints), (topic,))
    producer.startup()
    try:
        bodies = {f"signed-{i}".encode() for i in range(5)}
        for body in sorted(bodies):
            m = Message()
            m.topic, m.body = topic, body
            producer.send(m)
    finally:
        producer.shutdown()
    consumer = SimpleConsumer(
        client_config(secured.endpoints), GROUP, {topic: FilterExpression()}, await_duration=3
    )
    consumer.startup()
    try:
        got: set[bytes] = set()
        deadline = time.time() + 60
        while not bodies <= got and time.time() < deadline:
            for m in consumer.receive(16, 15):
                consumer.ack(m)
                got.add(m.body)
    finally:
        consumer.shutdown()
    assert bodies <= got


@pytest.mark.parametrize("credentials", ["wrong secret", "no credentials"])
def test_official_client_without_valid_credentials_is_unauthorized(
    secured: Emulator, credentials: str
) -> None:
    creds = Credentials("app", WRONG_SECRET) if credentials == "wrong secret" else Credentials()
    producer = Producer(ClientConfiguration(secured.endpoints, creds, request_timeout=5), (TOPIC,))
    with ClientLog() as client_log:
        producer.startup()
        try:
            m = Message()
            m.topic, m.body = TOPIC, b"refused"
            with pytest.raises(Exception, match="failed to fetch topic"):
                producer.send(m)
        finally:
            producer.shutdown()
    # The client turns the refused QueryRoute into the exception above and logs the server's answer.
    refusals = [line for line in client_log.lines if "40100" in line]
    expected = "signature mismatch" if credentials == "wrong secret" else "no access key"
    assert refusals and expected in refusals[0], client_log.lines[-5:]


def test_official_client_without_permission_is_forbidden(secured: Emulator) -> None:
    from rocketmq.v5.exception import ForbiddenException

    producer = Producer(client_config(secured.endpoints), (OTHER_TOPIC,))
    producer.startup()
    try:
        m = Message()
        m.topic, m.body = OTHER_TOPIC, b"no PUB here"
        with pytest.raises(ForbiddenException) as e:
            producer.send(m)
        assert e.value.code == d.FORBIDDEN and "lacks PUB on topic 'secured_other'" in str(e.value)
    finally:
        producer.shutdown()
    consumer = SimpleConsumer(
        client_config(secured.endpoints, "nogroup"), GROUP, {TOPIC: FilterExpression()}, await_duration=3
    )
    consumer.startup()
    try:
        with pytest.raises(ForbiddenException) as e:
            consumer.receive(1, 15)
        assert e.value.code == d.FORBIDDEN and f"lacks SUB on group '{GROUP}'" in str(e.value)
    finally:
        consumer.shutdown()


# ------------------------------------------------------------------------------------------ every RPC
def test_every_rpc_refuses_unsigned_requests(secured: Emulator) -> None:
    endpoint = secured.endpoints.split(";")[0]
    md = [("x-mq-client-id", "unsigned@1")]
    topic, group = d.Resource(name=TOPIC), d.Resource(name=GROUP)
    mq = d.MessageQueue(topic=topic, id=0)
    with grpc.insecure_channel(endpoint) as ch:
        v2, ext = sg.MessagingServiceStub(ch), pb_grpc.EmulatorServiceStub(ch)
        unary = {
            "QueryRoute": s.QueryRouteRequest(topic=topic),
            "Heartbeat": s.HeartbeatRequest(group=group, client_type=d.SIMPLE_CONSUMER),
            "SendMessage": s.SendMessageRequest(messages=[d.Message(topic=topic, body=b"x")]),
            "QueryAssignment": s.QueryAssignmentRequest(topic=topic, group=group),
            "AckMessage": s.AckMessageRequest(topic=topic, group=group),
            "ChangeInvisibleDuration": s.ChangeInvisibleDurationRequest(topic=topic, group=group),
            "ForwardMessageToDeadLetterQueue": s.ForwardMessageToDeadLetterQueueRequest(
                topic=topic, group=group
            ),
            "EndTransaction": s.EndTransactionRequest(topic=topic, transaction_id="t"),
            "NotifyClientTermination": s.NotifyClientTerminationRequest(group=group),
            "GetOffset": s.GetOffsetRequest(group=group, message_queue=mq),
            "UpdateOffset": s.UpdateOffsetRequest(group=group, message_queue=mq),
            "QueryOffset": s.QueryOffsetRequest(message_queue=mq, query_offset_policy=d.END),
        }
        for rpc, req in unary.items():
            resp = getattr(v2, rpc)(req, metadata=md, timeout=10)
            assert resp.status.code == d.UNAUTHORIZED, rpc
        pull = s.PullMessageRequest(group=group, message_queue=mq, batch_size=1)
        receive = s.ReceiveMessageRequest(group=group, message_queue=mq, batch_size=1)
        for rpc, req in {"PullMessage": pull, "ReceiveMessage": receive}.items():
            first = next(iter(getattr(v2, rpc)(req, metadata=md, timeout=10)))
            assert first.status.code == d.UNAUTHORIZED, rpc
        # Telemetry answers each command in band, as Apache's proxy does, and keeps the stream open.
        replies = list(v2.Telemetry(iter([s.TelemetryCommand()]), metadata=md, timeout=10))
        assert [r.status.code for r in replies] == [d.UNAUTHORIZED]
        bulk = ext.BulkPull(
            pb.BulkPullRequest(group=GROUP, topic=TOPIC, max_messages=1), metadata=md, timeout=10
        )
        assert bulk.code == d.UNAUTHORIZED
        offsets = ext.QueueOffsets(pb.QueueOffsetsRequest(topic=TOPIC), metadata=md, timeout=10)
        assert (offsets.code, list(offsets.queues)) == (d.UNAUTHORIZED, [])
        admin = ext.Admin(pb.AdminRequest(verb="topics"), metadata=md, timeout=10)
        assert admin.code == d.UNAUTHORIZED
        channel = ext.PullChannel(pb.PullChannelRequest(), metadata=md, timeout=10)
        assert (channel.code, channel.address) == (d.UNAUTHORIZED, "")
        # Signed, but the account lacks SUB: FORBIDDEN, in band.
        signed = md + signed_headers("writer", secret("writer"))
        # The pull channel carries no signature: an ACL'd emulator offers none to anyone.
        channel = ext.PullChannel(pb.PullChannelRequest(), metadata=signed, timeout=10)
        assert (channel.code, channel.address) == (d.OK, "")
        bulk = ext.BulkPull(pb.BulkPullRequest(group=GROUP, topic=TOPIC, max_messages=1), metadata=signed)
        assert (bulk.code, bulk.message) == (
            d.FORBIDDEN,
            "access key 'writer' lacks SUB on topic 'secured_topic'",
        )
        offsets = ext.QueueOffsets(pb.QueueOffsetsRequest(topic=TOPIC), metadata=signed, timeout=10)
        assert (offsets.code, offsets.message, list(offsets.queues)) == (
            d.FORBIDDEN,
            "access key 'writer' lacks SUB on topic 'secured_topic'",
            [],
        )
        # Telemetry settings are authorized like the proxy does: PUB on published topics, SUB on the
        # consumer's group and subscribed topics; a refused settings command is answered in band.
        producer = d.Settings(client_type=d.PRODUCER, publishing=d.Publishing(topics=[topic]))
        consumer = d.Settings(
            client_type=d.SIMPLE_CONSUMER,
            subscription=d.Subscription(group=group, subscriptions=[d.SubscriptionEntry(topic=topic)]),
        )
        commands = [s.TelemetryCommand(settings=producer), s.TelemetryCommand(settings=consumer)]
        replies = list(v2.Telemetry(iter(commands), metadata=signed, timeout=10))
        assert [(r.status.code, r.HasField("settings")) for r in replies] == [
            (d.OK, True),
            (d.FORBIDDEN, False),
        ]
        assert replies[1].status.message == "access key 'writer' lacks SUB on group 'secured_group'"


# ------------------------------------------------------------------------------------------ CLI and reload
def test_cli_acl_admin_credentials_and_reload(tmp_path: Path) -> None:
    acl_file = tmp_path / "acl.json"
    acl_file.write_text(json.dumps(ACL))
    started = subprocess.run(
        serve_command("--acl", str(tmp_path / "none.json")),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert started.returncode == 2 and "none.json: cannot be read" in started.stderr
    proc = EmulatorProcess("--acl", str(acl_file), "--topic", f"{TOPIC}:2")
    try:
        e = proc.endpoints
        refused = run_admin(e, "topics")
        assert refused.returncode == 1 and "no authorization header" in refused.stderr
        ok = run_admin(e, "--access-key", "ops", "--secret-key", secret("ops"), "--json", "topics")
        assert ok.returncode == 0, ok.stderr
        assert {row["topic"] for row in json.loads(ok.stdout)} == {TOPIC}
        not_admin = run_admin(e, "--access-key", "app", "--secret-key", secret("app"), "create-topic", "x")
        assert not_admin.returncode == 1 and "may not run admin verb 'create-topic'" in not_admin.stderr

        newcomer = AdminClient(e, access_key="newcomer", secret_key=secret("newcomer"))
        ops = AdminClient(e, access_key="ops", secret_key=secret("ops"))
        try:
            with pytest.raises(AdminError, match="'newcomer' is unknown"):
                newcomer.call("topics")
            # Reload on change: the file gains an account.
            acl_file.write_text(json.dumps({"accounts": [*ACL["accounts"], account("newcomer", {})]}))

            def newcomer_admitted() -> bool:
                try:
                    newcomer.call("topics")
                    return True
                except AdminError:
                    return False

            wait_for(newcomer_admitted, timeout=15, interval=0.2, message="the ACL file to be reloaded")
            # A broken file keeps the ACL in force, logs an error and fails `reload-acl` clearly.
            acl_file.write_text('{"accounts": [{"accessKey": "x"}]}')
            wait_for(
                lambda: "keeping the previous ACL" in proc.output, timeout=15, message="the reload error"
            )
            assert newcomer_admitted()
            with pytest.raises(AdminError, match='accounts\\[0\\]: "secretKey" is missing'):
                ops.call("reload-acl")
            acl_file.write_text(json.dumps(ACL))
            assert ops.call("reload-acl")["accounts"] == len(ACL["accounts"])
            with pytest.raises(AdminError, match="'newcomer' is unknown"):
                newcomer.call("topics")
        finally:
            newcomer.close()
            ops.close()
    finally:
        assert proc.stop() == 0
    assert SECRET not in proc.output


# ------------------------------------------------------------------------------------------ TLS
OFFICIAL_TLS_SCRIPT = textwrap.dedent(
    """
    import os, sys
    from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer
    endpoints, topic, group = sys.argv[1:]
    config = ClientConfiguration(
        endpoints, Credentials(os.environ["AK"], os.environ["SK"]), request_timeout=10
    )
    producer = Producer(config, (topic,), tls_enable=True)
    producer.startup()
    m = Message()
    m.topic, m.body = topic, b"over-tls"
    receipt = producer.send(m)
    producer.shutdown()
    consumer = SimpleConsumer(config, group, {topic: FilterExpression()}, await_duration=3, tls_enable=True)
    consumer.startup()
    got = []
    for _ in range(10):
        for msg in consumer.receive(16, 15):
            consumer.ack(msg)
            got.append(msg.body)
        if b"over-tls" in got:
            break
    consumer.shutdown()
    print("sent", receipt.message_id, "received", got.count(b"over-tls"))
    """
)


def test_official_client_over_tls(tls_secured: Emulator, certificate) -> None:
    """rocketmq-python-client 5.1.2 enables TLS with `tls_enable=True` and verifies the server against
    gRPC's default roots (no CA option): gRPC's GRPC_DEFAULT_SSL_ROOTS_FILE_PATH points them at our CA.
    It gets one endpoint: with several, its channel target `ipv4:a,b` becomes the TLS authority and fails
    hostname verification (the routes it then learns name one broker each)."""
    _, _, cert_file = certificate
    env = {**os.environ, "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(cert_file), "AK": "app", "SK": secret("app")}
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            OFFICIAL_TLS_SCRIPT,
            tls_secured.endpoints.split(";")[0],
            TOPIC,
            GROUP,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "received 1" in out.stdout, out.stdout


def test_connector_over_tls_and_plaintext_refused(tls_secured: Emulator, certificate) -> None:
    cert_pem, _, _ = certificate
    endpoints = tls_secured.endpoints
    good = GrpcClient(ClientConfig(endpoints, "app", secret("app"), tls=True, tls_ca_pem=cert_pem))
    plain = GrpcClient(ClientConfig(endpoints, "app", secret("app")))
    untrusted = GrpcClient(ClientConfig(endpoints, "app", secret("app"), tls=True))
    try:
        route = good.route(TOPIC, timeout_ms=10_000)
        assert len(route) == 4 and good.max_offset(route[0]) >= 0
        with pytest.raises(RetriesExhaustedError) as e:
            plain.route(TOPIC, timeout_ms=1500)
        assert endpoints.split(";")[0] in str(e.value) and "set option 'tls' to 'true'" in str(e.value)
        with pytest.raises(Exception) as e:
            untrusted.route(TOPIC, timeout_ms=10_000)
        assert "TLS handshake failed" in str(e.value) and "tlsCaFile" in str(e.value)
    finally:
        for c in (good, plain, untrusted):
            c.close()


# ------------------------------------------------------------------------------------------ Spark
def spark_options(emu: Emulator, cert_file: Path, ak: str | None = "app", **extra: str) -> dict[str, str]:
    opts = {"endpoints": emu.endpoints, "topic": TOPIC, "tls": "true", "tlsCaFile": str(cert_file), **extra}
    if ak is not None:
        opts |= {"accessKey": ak, "secretKey": secret(ak)}
    return opts


def test_spark_read_write_with_credentials_and_refusals(spark, tls_secured: Emulator, certificate) -> None:
    _, _, cert_file = certificate
    n = 20
    df = spark.range(n).selectExpr("format_string('row-%03d', id) AS body")
    df.write.format("rocketmq").options(**spark_options(tls_secured, cert_file)).mode("append").save()
    read = spark.read.format("rocketmq").options(**spark_options(tls_secured, cert_file, consumerGroup=GROUP))
    bodies = {bytes(r.body) for r in read.load().select("body").collect()}
    assert {f"row-{i:03d}".encode() for i in range(n)} <= bodies
    endpoint_hint = "endpoint 127.0.0.1:"

    with pytest.raises(Exception) as e:  # no credentials: refused on the driver (route)
        spark.read.format("rocketmq").options(**spark_options(tls_secured, cert_file, ak=None)).load().count()
    assert endpoint_hint in str(e.value) and "rejected the credentials (UNAUTHORIZED)" in str(e.value)
    with pytest.raises(Exception) as e:  # no credentials: refused on the executors (writer's route)
        df.write.format("rocketmq").options(**spark_options(tls_secured, cert_file, ak=None)).mode(
            "append"
        ).save()
    assert endpoint_hint in str(e.value) and "the request carries no authorization header" in str(e.value)
    wrong = spark_options(tls_secured, cert_file) | {"secretKey": WRONG_SECRET}
    with pytest.raises(Exception) as e:  # wrong secret: refused on the executors (writer's route)
        df.write.format("rocketmq").options(**wrong).mode("append").save()
    assert "rejected the credentials (UNAUTHORIZED)" in str(e.value) and "signature mismatch" in str(e.value)
    assert WRONG_SECRET not in str(e.value)
    with pytest.raises(Exception) as e:  # reader without SUB on its group: refused by the executor's pulls
        spark.read.format("rocketmq").options(
            **spark_options(tls_secured, cert_file, ak="nogroup", consumerGroup=GROUP)
        ).load().count()
    assert f"access key 'nogroup' lacks SUB on group '{GROUP}'" in str(e.value) and endpoint_hint in str(
        e.value
    )
    with pytest.raises(Exception) as e:  # writer without PUB
        df.write.format("rocketmq").options(**spark_options(tls_secured, cert_file, ak="nogroup")).mode(
            "append"
        ).save()
    assert "FORBIDDEN" in str(e.value) and "lacks PUB on topic 'secured_topic'" in str(e.value)


def test_secrets_stay_out_of_logs_plans_checkpoints_and_commit_messages(
    spark, tls_secured: Emulator, certificate, tmp_path: Path, caplog, capsys
) -> None:
    from connector.batch_reader import RocketMQBatchReader
    from connector.options import parse_reader_options
    from connector.schema import SCHEMA
    from connector.stream_reader import RocketMQStreamReader
    from connector.writer import RocketMQBatchWriter

    _, _, cert_file = certificate
    for name in ("connector", "broker_emulator", "rocketmq-python-client"):
        caplog.set_level(logging.DEBUG, logger=name)
    opts = spark_options(tls_secured, cert_file, consumerGroup=GROUP)
    seen: list[str] = []

    # The connector's code in this process: writer task + driver commit, reader planning and reading.
    writer = RocketMQBatchWriter(
        spark_options(tls_secured, cert_file), spark.range(1).selectExpr("'x' AS body").schema, False
    )
    message = writer.write(iter([pa.RecordBatch.from_pydict({"body": ["in-process"]})]))
    writer.commit([message])
    seen += [repr(message), str(pickle.loads(pickle.dumps(message)).__dict__), repr(writer.options)]
    reader = RocketMQBatchReader(opts, SCHEMA)
    partitions = reader.partitions()
    seen += [repr(partitions), repr(reader), repr(parse_reader_options(opts, streaming=False))]
    assert sum(sum(b.num_rows for b in reader.read(p)) for p in partitions) >= 1
    stream = RocketMQStreamReader(opts, SCHEMA)
    start = stream.initialOffset()
    seen += [json.dumps(start), repr(stream.partitions(start, start))]
    stream.stop()

    # Spark: a streaming query rocketmq -> rocketmq with a checkpoint, plans and progress.
    sdf = spark.readStream.format("rocketmq").options(**opts, startingOffsets="earliest").load()
    sdf.explain(True)
    checkpoint = tmp_path / "checkpoint"
    query = (
        sdf.selectExpr("body")
        .writeStream.format("rocketmq")
        .options(**spark_options(tls_secured, cert_file))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(120)
        assert query.exception() is None
        seen += [json.dumps(query.recentProgress, default=str), query._jsq.toString()]
        query.explain(True)
    finally:
        query.stop()
    spark.read.format("rocketmq").options(**opts).load().explain(True)
    seen.append(capsys.readouterr().out)
    files = [p for p in checkpoint.rglob("*") if p.is_file()]
    assert any(p.parent.name == "offsets" for p in files) and any(p.parent.name == "commits" for p in files)
    seen += [p.read_bytes().decode("utf-8", "replace") for p in files]
    seen.append(caplog.text)
    assert "micro-batch" in caplog.text or "write committed" in caplog.text
    assert "rocketmq" in seen[-2 - len(files)]  # the explain() output was captured
    leaks = [text[:200] for text in seen if SECRET in text]
    assert not leaks, leaks
