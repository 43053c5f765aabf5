"""The connector over `nameServer` with TLS against real RocketMQ 5.x and 4.9.x.

The name server and the broker are started with a certificate of ours (apache/rocketmq `TlsSystemConfig`:
`tls.server.certPath` / `tls.server.keyPath`, test mode off) in `permissive` mode, the brokers' default,
where one port serves TLS and plaintext alike. With `tls=true` and `tlsCaFile` the connector writes and
reads back over TLS; trusting only the system CAs it fails with the TLS handshake named and `tlsCaFile`
suggested, which shows the servers did answer with our certificate.
"""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from tests.real import realcluster as rc
from tests.real.conftest import _unavailable
from tests.support.tls import self_signed_certificate

pytestmark = [pytest.mark.realbroker, pytest.mark.timeout(600)]


@pytest.fixture(scope="module", params=["5", "4"], ids=lambda v: f"rocketmq{v}")
def tls_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple]:
    """A name server + broker (no proxy) serving TLS with our certificate: (cluster, CA file)."""
    version = rc.ROCKETMQ5_VERSION if request.param == "5" else rc.ROCKETMQ4_VERSION
    try:
        dist = rc.fetch(version)
    except rc.Unavailable as e:
        _unavailable(str(e))
    work = tmp_path_factory.mktemp(f"rocketmq-{version}-tls")
    _cert_pem, _key_pem, cert_file, key_file = self_signed_certificate(work / "tls")
    props = {
        "tls.test.mode.enable": "false",
        "tls.server.mode": "permissive",
        "tls.server.need.client.auth": "none",
        "tls.server.certPath": str(cert_file),
        "tls.server.keyPath": str(key_file),
    }
    cluster = rc.Cluster(dist, work, with_proxy=False, jvm_props=props)
    cluster.start()
    rc.evidence(f"RocketMQ {version} with TLS (permissive): started in {cluster.start_seconds:.1f} s")
    try:
        yield cluster, cert_file
    finally:
        cluster.stop()
        shutil.rmtree(work / "store", ignore_errors=True)


def test_write_and_read_back_over_tls(spark: SparkSession, tls_cluster: tuple) -> None:
    cluster, ca_file = tls_cluster
    topic = f"tls-{uuid.uuid4().hex[:8]}"
    cluster.update_topic(topic, 4)
    tls = {"nameServer": cluster.namesrv, "topic": topic, "tls": "true", "tlsCaFile": str(ca_file)}
    df = spark.range(0, 500, numPartitions=2).select(F.format_string("tls-%04d", "id").alias("body"))
    t0 = time.monotonic()
    df.write.format("rocketmq").options(**tls).mode("append").save()
    got = spark.read.format("rocketmq").options(**tls).load().select("body").collect()
    rc.evidence(
        f"RocketMQ {cluster.dist.version} over TLS: 500 rows written and read in {time.monotonic() - t0:.1f} s"
    )
    assert sorted(r.body.decode() for r in got) == [f"tls-{i:04d}" for i in range(500)]
    untrusted = {k: v for k, v in tls.items() if k != "tlsCaFile"}
    with pytest.raises(Exception, match=r"(?s)TLS handshake failed.*tlsCaFile"):
        spark.read.format("rocketmq").options(**untrusted).load().count()
