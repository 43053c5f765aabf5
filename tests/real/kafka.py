"""A real Apache Kafka broker (KRaft, one node acting as broker and controller) and Spark's Kafka connector,
both from Maven Central, for the performance comparison of `python -m benchmarks` (nothing in the test
suite asserts on Kafka).

- `fetch_broker()` resolves `org.apache.kafka:kafka_2.13` (the broker) into the shared Maven cache
  (`tests.real.jvm.maven_fetch`), `fetch_spark_connector()` resolves `spark-sql-kafka-0-10_2.13` and returns
  the jars Spark lacks (the connector, its token provider, kafka-clients, commons-pool2), for `spark.jars`.
- `KafkaBroker(lib, work_dir).start()` formats a KRaft log directory (`kafka.tools.StorageTool format`) and
  runs `kafka.Kafka` on two free loopback ports (clients, controller); topics are created by the caller
  (Kafka's AdminClient; `num.partitions` is 8). `stop()` ends the JVM by pid.

The connector matching the pinned pyspark is preferred; when Maven Central does not serve it (pyspark 4.3.0
has no `spark-sql-kafka-0-10_2.13:4.3.0` there), the newest served release of the same major version is
taken and `SparkConnector.version` says which.
"""

from __future__ import annotations

import base64
import json
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from tests.real.jvm import (
    JavaProcess,
    Unavailable,
    cache_root,
    free_port,
    java_cmd,
    maven_fetch,
    port_open,
    require_tools,
    spawn_java,
    tail,
)

KAFKA_VERSION = os.environ.get("KAFKA_VERSION", "4.1.1")
# Tried in order: the pinned pyspark's own version first (see the module doc).
SPARK_KAFKA_VERSIONS = ("4.3.0", "4.2.0")
UNSERVED_RETRY_S = 86_400.0  # a version Maven Central did not serve is asked for again after a day
PARTITIONS = 8
HEAP = ["-Xms256m", "-Xmx1g"]
JVM_FLAGS = ["-XX:+UseSerialGC", "-Djava.net.preferIPv4Stack=true", "-Djava.awt.headless=true"]
# Jars of spark-sql-kafka's runtime closure that Spark does not ship (the rest it has, in its own versions).
CONNECTOR_JARS = (
    "spark-sql-kafka-0-10_",
    "spark-token-provider-kafka-0-10_",
    "kafka-clients-",
    "commons-pool2-",
)


@dataclass(frozen=True)
class SparkConnector:
    version: str
    jars: tuple[Path, ...]
    fetch_seconds: float


def fetch_broker(version: str = KAFKA_VERSION, timeout: float = 900.0) -> Path:
    """The broker's jars (`org.apache.kafka:kafka_2.13:<version>` and its runtime closure)."""
    return maven_fetch(
        f"kafka-{version}",
        [f"org.apache.kafka:kafka_2.13:{version}"],
        expect="kafka_2.13-*.jar",
        what=f"Kafka {version}",
        timeout=timeout,
    ).lib


def fetch_spark_connector(versions: tuple[str, ...] = SPARK_KAFKA_VERSIONS) -> SparkConnector:
    """Spark's Kafka connector jars for `spark.jars`: the first of `versions` Maven Central serves."""
    errors = []
    for v in versions:
        unserved = cache_root() / f"spark-sql-kafka-{v}" / "unserved.json"
        if unserved.exists() and time.time() - unserved.stat().st_mtime < UNSERVED_RETRY_S:
            errors.append(f"spark-sql-kafka-0-10_2.13 {v}: not served (Maven said so within a day)")
            continue
        try:
            got = maven_fetch(
                f"spark-sql-kafka-{v}",
                [f"org.apache.spark:spark-sql-kafka-0-10_2.13:{v}"],
                expect="spark-sql-kafka-0-10_*.jar",
                what=f"spark-sql-kafka-0-10_2.13 {v}",
                timeout=900.0,
            )
        except Unavailable as e:
            errors.append(str(e).splitlines()[0])
            if "Could not find artifact" in tail(unserved.parent / "fetch.log"):
                unserved.write_text(json.dumps({"version": v, "at": time.time()}))
            continue
        jars = tuple(sorted(j for j in got.lib.glob("*.jar") if j.name.startswith(CONNECTOR_JARS)))
        return SparkConnector(v, jars, got.seconds)
    raise Unavailable("; ".join(errors))


@dataclass
class KafkaBroker:
    """One KRaft node (`process.roles=broker,controller`) on free loopback ports."""

    lib: Path
    work_dir: Path
    port: int = 0
    controller_port: int = 0
    process: JavaProcess | None = None
    start_seconds: float = 0.0
    conf: dict[str, str] = field(default_factory=dict)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def version(self) -> str:
        jar = next(self.lib.glob("kafka_2.13-*.jar"), None)
        return jar.name.removeprefix("kafka_2.13-").removesuffix(".jar") if jar else "?"

    def properties(self) -> dict[str, str]:
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.work_dir / "data"),
            "num.partitions": str(PARTITIONS),
            "auto.create.topics.enable": "false",  # topics are created with the AdminClient
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
        }
        props.update(self.conf)
        return props

    def start(self, timeout: float = 120.0) -> KafkaBroker:
        java = require_tools(("java",))["java"]
        t0 = time.monotonic()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.port, self.controller_port = free_port(), free_port()
        conf = self.work_dir / "server.properties"
        conf.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        classpath = str(self.lib / "*")
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        log = self.work_dir / "kafka.out"
        fmt = spawn_java(
            "kafka-storage",
            [
                *java_cmd(java, ["-Xmx256m", *JVM_FLAGS], classpath),
                "kafka.tools.StorageTool",
                "format",
                f"--cluster-id={cluster_id}",
                "-c",
                str(conf),
            ],
            log,
            self.work_dir,
        )
        try:
            rc = fmt.popen.wait(timeout)
        except Exception:
            fmt.stop()
            raise
        if rc != 0:
            raise RuntimeError(f"Kafka storage format exited {rc}; last lines of {log}:\n{tail(log)}")
        self.process = spawn_java(
            "kafka",
            [*java_cmd(java, [*HEAP, *JVM_FLAGS], classpath), "kafka.Kafka", str(conf)],
            log,
            self.work_dir,
        )
        deadline = time.monotonic() + timeout
        while not port_open(self.port):
            if not self.process.alive():
                raise RuntimeError(
                    f"Kafka exited with {self.process.popen.returncode}; last lines of {log}:\n{tail(log)}"
                )
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(
                    f"Kafka did not listen on {self.bootstrap} within {timeout} s:\n{tail(log)}"
                )
            time.sleep(0.25)
        self.start_seconds = time.monotonic() - t0
        return self

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
            self.process = None
