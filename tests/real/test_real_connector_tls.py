"""The connector over `nameServer` with TLS against real RocketMQ 5.x and 4.9.x.

The name server and the broker are started with a certificate of ours (apache/rocketmq `TlsSystemConfig`:
`tls.server.certPath` / `tls.server.keyPath`, test mode off) in `permissive` mode, the brokers' default,
where one port serves TLS and plaintext alike (fixture `tls_cluster`, tests/real/conftest.py). With
`tls=true` and `tlsCaFile` the connector writes and reads back over TLS; trusting only the system CAs it
fails with the TLS handshake named and `tlsCaFile` suggested, which shows the servers did answer with our
certificate.
"""

from __future__ import annotations

import time
import uuid

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from tests.real import realcluster as rc

pytestmark = [pytest.mark.realbroker, pytest.mark.timeout(600)]


def test_write_and_read_back_over_tls(spark: SparkSession, tls_cluster: tuple) -> None:
    cluster, ca_file = tls_cluster
    topic = f"tls-{uuid.uuid4().hex[:8]}"
    cluster.update_topic(topic, 4)
    tls = {"nameServer": cluster.namesrv, "topic": topic, "tls": "true", "tlsCaFile": str(ca_file)}
    df = spark.range(0, 500, numPartitions=2).select(F.format_string("tls-%04d", "id").alias("body"))
    t0 = time.monotonic()
    # The sink is at-least-once: a send that times out but was stored is sent again. A slow TLS handshake
    # on the loaded CI machine must not turn into duplicates in this exact-content check, so the timeout is
    # generous; a retry within it would still be a real fault.
    sink = {**tls, "sendMsgTimeoutMs": "30000"}
    df.write.format("rocketmq").options(**sink).mode("append").save()
    got = spark.read.format("rocketmq").options(**tls).load().select("body").collect()
    rc.evidence(
        f"RocketMQ {cluster.dist.version} over TLS: 500 rows written and read in {time.monotonic() - t0:.1f} s"
    )
    bodies = sorted(r.body.decode() for r in got)
    twice = sorted({b for b in bodies if bodies.count(b) > 1})
    assert not twice, (
        f"{len(twice)} rows stored more than once (a send retried), from {twice[0]} to {twice[-1]}"
    )
    assert bodies == [f"tls-{i:04d}" for i in range(500)]
    untrusted = {k: v for k, v in tls.items() if k != "tlsCaFile"}
    with pytest.raises(Exception, match=r"(?s)TLS handshake failed.*tlsCaFile"):
        spark.read.format("rocketmq").options(**untrusted).load().count()
