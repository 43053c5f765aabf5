"""Real Apache RocketMQ for the test suite, from its Maven Central artifacts (no binary distribution).

- `fetch(version)` resolves RocketMQ's jars and their dependencies with Maven into a cache
  (`~/.cache/pyspark-rocketmq/maven/`, or `$PYSPARK_ROCKETMQ_CACHE/maven/`), once per version.
- `Cluster(dist, work_dir).start()` runs a name server, a broker and (5.x) a proxy in cluster mode on free
  loopback ports with small heaps, waits until the broker has registered with the name server (and the
  proxy serves gRPC), and `stop()` kills the JVMs it started, by pid.
- `Cluster.mqadmin(...)` runs `org.apache.rocketmq.tools.command.MQAdminStartup`;
  `Cluster.java_driver(...)` runs the Java client drivers of `tests/real/java/`, compiled with `javac`
  against the fetched jars, which print one JSON object per line.

The command line (`tests/real/rocketmq.sh`, or `python tests/real/realcluster.py`) fetches and starts a
cluster by hand: `rocketmq.sh fetch`, `rocketmq.sh start [--version 4.9.7]`, `rocketmq.sh versions`.

Upstream sources this follows: `distribution/bin/{runserver.sh,runbroker.sh,tools.sh}` and the startup
classes `NamesrvStartup`, `BrokerStartup`, `ProxyStartup`, `MQAdminStartup` of apache/rocketmq.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rocketmq_protocol.remoting.route import TopicRouteData
from rocketmq_protocol.remoting.signature import calculate_signature, content_to_sign
from tests.real.jvm import (
    JavaProcess,
    Unavailable,  # noqa: F401  (rc.Unavailable: what the fixtures catch)
    bindable,
    cache_root,
    free_port,
    java_cmd,
    maven_fetch,
    port_open,
    require_tools,
    spawn_java,
    tail,
)

# The newest releases whose modules Maven Central served together when this was written
# (5.5.1 had rocketmq-broker but not rocketmq-proxy/namesrv/tools/client; 4.9.8 had no namesrv/broker).
ROCKETMQ5_VERSION = os.environ.get("ROCKETMQ5_VERSION", "5.5.0")
ROCKETMQ4_VERSION = os.environ.get("ROCKETMQ4_VERSION", "4.9.7")

GROUP_ID = "org.apache.rocketmq"
CLUSTER_NAME = "DefaultCluster"
BROKER_NAME = "broker-a"


def broker_name(index: int) -> str:
    """The name of a cluster's broker `index`: broker-a, broker-b, ... (as RocketMQ's sample configs)."""
    return f"broker-{chr(ord('a') + index)}"


JAVA_DIR = Path(__file__).resolve().parent / "java"

# What Java 17 needs to run RocketMQ (its store unmaps files through JDK internals).
JDK17_FLAGS = [
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-exports=java.base/jdk.internal.ref=ALL-UNNAMED",
]
COMMON_JVM_FLAGS = [
    "-XX:+UseSerialGC",
    "-XX:-OmitStackTraceInFastThrow",
    "-Xss512k",
    "-Djava.net.preferIPv4Stack=true",
]
HEAP = {
    "namesrv": ["-Xms64m", "-Xmx256m"],
    "broker": ["-Xms256m", "-Xmx768m", "-XX:MaxDirectMemorySize=512m"],
    "proxy": ["-Xms256m", "-Xmx768m", "-XX:MaxDirectMemorySize=512m"],
    "tools": ["-Xms32m", "-Xmx256m", "-XX:TieredStopAtLevel=1"],
    "driver": ["-Xms32m", "-Xmx512m"],
}


# Figures the tests measured (fetch and start times, throughput, the differential table): the
# realbroker conftest prints them in pytest's terminal summary.
EVIDENCE: list[str] = []
TABLE: list[str] = []  # the differential table: protocol | scenario | observation | emulator | real | verdict


def evidence(line: str) -> None:
    EVIDENCE.append(line)
    print(line, flush=True)


class StartFailed(RuntimeError):
    """A process of the cluster did not come up; the message ends with the tail of its log."""


# ----------------------------------------------------------------------------------------------- fetch
@dataclass(frozen=True)
class Dist:
    """A fetched RocketMQ version: its jars (one directory, one classpath for every process)."""

    version: str
    lib: Path
    fetch_seconds: float  # how long the Maven run that filled the cache took
    fetched_now: bool  # this call ran Maven (False: the cache was reused)

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    @property
    def classpath(self) -> str:
        return str(self.lib / "*")

    @property
    def has_proxy(self) -> bool:
        return self.major >= 5

    def jar_versions(self) -> dict[str, str]:
        """`artifactId -> version` of the org.apache.rocketmq jars."""
        out = {}
        for jar in sorted(self.lib.glob("rocketmq-*.jar")):
            m = re.match(r"(rocketmq-[a-z-]+?)-(\d[\w.-]*)\.jar$", jar.name)
            if m:
                out[m.group(1)] = m.group(2)
        return out


def artifacts(version: str) -> list[str]:
    """The modules to resolve: 5.x has a proxy, 4.x has none. rocketmq-client is the Java client the
    drivers use (DefaultMQProducer, DefaultLitePullConsumer, DefaultMQPushConsumer)."""
    names = ["rocketmq-namesrv", "rocketmq-broker", "rocketmq-tools", "rocketmq-client"]
    if int(version.split(".")[0]) >= 5:
        names.insert(2, "rocketmq-proxy")
    return names


def fetch(version: str, timeout: float = 1500.0, log: Path | None = None) -> Dist:
    """Resolves `version`'s jars into the cache (once; later calls reuse it). Raises Unavailable."""
    require_tools()
    got = maven_fetch(
        f"rocketmq-{version}",
        [f"{GROUP_ID}:{a}:{version}" for a in artifacts(version)],
        expect="rocketmq-broker-*.jar",
        what=f"RocketMQ {version}",
        timeout=timeout,
        log=log,
    )
    return Dist(version, got.lib, got.seconds, fetched_now=got.fetched_now)


# ----------------------------------------------------------------------------------------------- helpers
def free_broker_port(taken: Collection[int] = ()) -> int:
    """A broker listenPort P whose neighbours are free too: the broker also binds P-2 (the "fast"/VIP
    remoting server) and P+1 (HA). P is taken below the kernel's ephemeral port range where it can: a
    broker restarted on its port then cannot find one of them taken as the local port of some client's
    connection (a 5.5.0 broker once exited on restart with "Address already in use" on P+1).
    `taken`: listenPorts chosen for brokers not started yet, whose neighbours are kept clear too."""
    low = ephemeral_port_floor()
    rng = random.Random()
    for _ in range(200):
        p = rng.randrange(10_002, low - 2) if low > 12_000 else free_port()
        if (
            p > 1026
            and p < 65534
            and all(abs(p - t) > 3 for t in taken)
            and all(bindable(q) for q in (p - 2, p - 1, p, p + 1))
        ):
            return p
    raise RuntimeError("no free port with free neighbours")


def ephemeral_port_floor() -> int:
    """The lowest port the kernel hands out to connect() and bind(0) (32768 where it cannot be read)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def remoting_call(
    addr: str,
    code: int,
    ext: dict | None = None,
    body: bytes = b"",
    timeout: float = 5.0,
    credentials: tuple[str, str] | None = None,
) -> tuple[dict, bytes]:
    """One remoting request (JSON header) to a name server or broker: (response header, body). With
    `credentials` (access key, secret key) it is signed as RocketMQ's AclClientRPCHook signs."""
    host, port = addr.rsplit(":", 1)
    ext = dict(ext or {})
    if credentials is not None:
        ext["AccessKey"] = credentials[0]
        ext["Signature"] = calculate_signature(content_to_sign(ext, body), credentials[1])
    header = json.dumps(
        {
            "code": code,
            "flag": 0,
            "language": "JAVA",
            "opaque": 1,
            "serializeTypeCurrentRPC": "JSON",
            "version": 401,
            "extFields": ext,
        }
    ).encode()
    frame = struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(frame)

        def read(n: int) -> bytes:
            buf = b""
            while len(buf) < n:
                chunk = s.recv(n - len(buf))
                if not chunk:
                    raise ConnectionError("connection closed")
                buf += chunk
            return buf

        (length,) = struct.unpack(">i", read(4))
        data = read(length)
    (mark,) = struct.unpack(">i", data[:4])
    hlen = mark & 0xFFFFFF
    if mark >> 24 != 0:
        raise ValueError("response header is not JSON")
    return json.loads(data[4 : 4 + hlen]), data[4 + hlen :]


# Remoting request codes (org.apache.rocketmq.remoting.protocol.RequestCode).
UPDATE_AND_CREATE_TOPIC = 17
GET_MAX_OFFSET = 30
GET_ROUTEINFO_BY_TOPIC = 105
GET_BROKER_CLUSTER_INFO = 106
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200


def broker_registered(namesrv: str, broker_addr: str) -> bool:
    try:
        head, body = remoting_call(namesrv, GET_BROKER_CLUSTER_INFO, timeout=2.0)
    except (OSError, ValueError):
        return False
    return head.get("code") == 0 and f'"{broker_addr}"' in body.decode("utf-8", "replace")


def wait_indexed(broker_addr: str, topic: str, queues: int, at_least: int, timeout: float) -> int:
    """The sum of the max offsets of the topic's queues 0..queues-1 once it reaches `at_least`, or the last
    sum seen after `timeout` s. A broker acknowledges a send once its commit log has it; the queues' index,
    which readers see, follows a moment later (120,480 of 131,072 just-acknowledged messages, once)."""
    deadline = time.monotonic() + timeout
    while True:
        got = 0
        for q in range(queues):
            head, _ = remoting_call(broker_addr, GET_MAX_OFFSET, {"topic": topic, "queueId": str(q)})
            got += int(head["extFields"]["offset"])
        if got >= at_least or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


def topic_status_total(out: str) -> int:
    """Sum of (max offset - min offset) over the rows of `mqadmin topicStatus`."""
    total = 0
    for line in out.splitlines():
        cols = line.split()
        if len(cols) >= 5 and cols[1].isdigit() and cols[2].isdigit() and cols[3].isdigit():
            total += int(cols[3]) - int(cols[2])
    return total


def diff_total(out: str) -> int | None:
    """`Diff Total` of `mqadmin consumerProgress` (the group's lag over all its queues), None if not printed."""
    m = re.search(r"Diff Total:\s*(\d+)", out)
    return int(m.group(1)) if m else None


# ----------------------------------------------------------------------------------------------- processes
def _java_cmd(tools: dict[str, str], role: str, classpath: str, user_home: Path) -> list[str]:
    flags = [*HEAP[role], *COMMON_JVM_FLAGS, *JDK17_FLAGS]
    flags += [f"-Duser.home={user_home}", "-Drocketmq.broker.diskSpaceWarningLevelRatio=0.98"]
    return java_cmd(tools["java"], flags, classpath)


LOGBACK_4X = """<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>{log}</file>
    <encoder><pattern>%d{{HH:mm:ss.SSS}} %-5level %logger{{24}} - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
"""


# ----------------------------------------------------------------------------------------------- cluster
@dataclass
class Cluster:
    """One name server, `brokers` masters (`broker-a`, `broker-b`, ...) in one cluster and, for 5.x, a proxy
    in cluster mode.

    `broker_conf` entries override the defaults of `broker_properties()` (on every broker).
    """

    dist: Dist
    work_dir: Path
    with_proxy: bool | None = None
    brokers: int = 1
    broker_conf: dict[str, str] = field(default_factory=dict)
    proxy_conf: dict[str, object] = field(default_factory=dict)  # extra keys of the proxy's JSON config
    # files written under ROCKETMQ_HOME before the start (e.g. conf/plain_acl.yml)
    home_files: dict[str, str] = field(default_factory=dict)
    # JVM system properties of the name server and the broker (e.g. apache/rocketmq `TlsSystemConfig`'s tls.*)
    jvm_props: dict[str, str] = field(default_factory=dict)
    # (access key, secret key) signing the admin requests of update_topic/update_group (a cluster with ACL)
    admin_credentials: tuple[str, str] | None = None
    processes: list[JavaProcess] = field(default_factory=list)
    namesrv_port: int = 0
    broker_ports: list[int] = field(default_factory=list)
    grpc_port: int = 0
    proxy_remoting_port: int = 0
    start_seconds: float = 0.0
    _tools: dict[str, str] = field(default_factory=dict)
    _drivers: Path | None = None

    # -- addresses
    @property
    def namesrv(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    @property
    def broker_port(self) -> int:
        """The first broker's (`broker-a`'s) listenPort."""
        return self.broker_ports[0] if self.broker_ports else 0

    @property
    def broker_addr(self) -> str:
        """The first broker's (`broker-a`'s) remoting address."""
        return f"127.0.0.1:{self.broker_port}"

    @property
    def broker_names(self) -> list[str]:
        return [broker_name(i) for i in range(self.brokers)]

    @property
    def broker_addrs(self) -> list[str]:
        return [f"127.0.0.1:{p}" for p in self.broker_ports]

    @property
    def proxy_endpoint(self) -> str:
        """The proxy's gRPC v2 endpoint (what the connector's `endpoints` option takes)."""
        if not self.grpc_port:
            raise RuntimeError(f"RocketMQ {self.dist.version} runs no proxy")
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def home(self) -> Path:
        return self.work_dir / "home"

    def broker_properties(self, index: int = 0) -> dict[str, str]:
        """The configuration file of broker `index` (0 = `broker-a`, its store in `store/`)."""
        store = self.work_dir / ("store" if index == 0 else f"store-{broker_name(index)}")
        props = {
            "brokerClusterName": CLUSTER_NAME,
            "brokerName": broker_name(index),
            "brokerId": "0",
            "brokerRole": "ASYNC_MASTER",
            "flushDiskType": "ASYNC_FLUSH",
            "brokerIP1": "127.0.0.1",
            "brokerIP2": "127.0.0.1",
            "namesrvAddr": self.namesrv,
            "listenPort": str(self.broker_ports[index]),
            "storePathRootDir": str(store),
            "storePathCommitLog": str(store / "commitlog"),
            "autoCreateTopicEnable": "true",
            "autoCreateSubscriptionGroup": "true",
            "defaultTopicQueueNums": "8",
            "mappedFileSizeCommitLog": str(64 * 1024 * 1024),
            "mappedFileSizeConsumeQueue": str(300_000 * 20 // 10),
            "diskMaxUsedSpaceRatio": "95",
            "enablePropertyFilter": "true",
            "deleteWhen": "04",
            # Short delay levels: retries of remoting push consumers come back after seconds, not minutes.
            "messageDelayLevel": "1s 1s 2s 2s 3s 3s 4s 4s 5s 5s 6s 6s 7s 7s 8s 8s 9s 9s",
            # Transaction check-back soon after a half message is left unresolved.
            "transactionTimeOut": "3000",
            "transactionCheckInterval": "2000",
        }
        if self.dist.major >= 5:
            props.update(
                {
                    "bindAddress": "127.0.0.1",  # 4.x always binds every interface
                    "mappedFileSizeTimerLog": str(16 * 1024 * 1024),
                    "timerWheelEnable": "true",
                }
            )
        props.update(self.broker_conf)
        return props

    # -- lifecycle
    def start(self, timeout: float = 180.0) -> Cluster:
        self._tools = require_tools()
        if self.with_proxy is None:
            self.with_proxy = self.dist.has_proxy
        t0 = time.monotonic()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        (self.home / "conf").mkdir(parents=True, exist_ok=True)
        for rel, text in self.home_files.items():
            (self.home / rel).parent.mkdir(parents=True, exist_ok=True)
            (self.home / rel).write_text(text)
        self.namesrv_port = free_port()
        self.broker_ports = []
        for _ in range(self.brokers):
            self.broker_ports.append(free_broker_port(self.broker_ports))
        deadline = time.monotonic() + timeout
        try:
            ns = self._spawn("namesrv", "org.apache.rocketmq.namesrv.NamesrvStartup", self._namesrv_args())
            self._wait(ns, lambda: port_open(self.namesrv_port), deadline, "the name server port")
            for i in range(self.brokers):
                conf = self.work_dir / f"{self._broker_process_name(i)}.conf"
                conf.write_text("".join(f"{k}={v}\n" for k, v in self.broker_properties(i).items()))
            started = [self._spawn_broker(i) for i in range(self.brokers)]
            for i, proc in enumerate(started):
                self._wait_registered(i, proc, deadline)
            if self.with_proxy:
                self.grpc_port, self.proxy_remoting_port = free_port(), free_port()
                pconf = self.work_dir / "proxy.json"
                pconf.write_text(
                    json.dumps(
                        {
                            "rocketMQClusterName": CLUSTER_NAME,
                            "namesrvAddr": self.namesrv,
                            "grpcServerPort": self.grpc_port,
                            "remotingListenPort": self.proxy_remoting_port,
                            **self.proxy_conf,
                        },
                        indent=1,
                    )
                )
                proxy = self._spawn(
                    "proxy",
                    "org.apache.rocketmq.proxy.ProxyStartup",
                    ["-pm", "cluster", "-pc", str(pconf), "-n", self.namesrv],
                )
                self._wait(proxy, lambda: port_open(self.grpc_port), deadline, "the proxy's gRPC port")
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - t0
        return self

    @staticmethod
    def _broker_process_name(index: int) -> str:
        """broker-a keeps the names of a one-broker cluster's files (broker.conf, broker.out); others: theirs."""
        return "broker" if index == 0 else broker_name(index)

    def _spawn_broker(self, index: int) -> JavaProcess:
        """Starts broker `index` from the configuration file `start` wrote (same port and store)."""
        name = self._broker_process_name(index)
        conf = self.work_dir / f"{name}.conf"
        args = ["-c", str(conf), "-n", self.namesrv]
        return self._spawn("broker", "org.apache.rocketmq.broker.BrokerStartup", args, name)

    def _wait_registered(self, index: int, proc: JavaProcess, deadline: float) -> None:
        addr = self.broker_addrs[index]
        self._wait(
            proc,
            lambda: broker_registered(self.namesrv, addr),
            deadline,
            f"{broker_name(index)} to register {addr} with the name server",
        )

    def broker_process(self, index: int = 0) -> JavaProcess:
        """The running JVM of broker `index` (0 = broker-a)."""
        name = self._broker_process_name(index)
        return next(p for p in self.processes if p.name == name)

    def stop_broker(self, index: int = 0, kill: bool = False, grace: float = 20.0) -> None:
        """Stops broker `index`: SIGTERM, a clean shutdown (SIGKILL after `grace` s), or with `kill` SIGKILL
        at once, a crash (its store keeps what the OS had been given: ASYNC_FLUSH loses nothing then)."""
        proc = self.broker_process(index)
        if kill:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.popen.wait(10)
        else:
            proc.stop(grace=grace)
        self.processes.remove(proc)

    def start_broker(self, index: int = 0, timeout: float = 120.0) -> None:
        """Starts a stopped broker `index` again on its port and store, until it has registered."""
        self._wait_registered(index, self._spawn_broker(index), time.monotonic() + timeout)

    def restart_broker(self, index: int = 0) -> None:
        """A clean restart of broker `index` (stop_broker, then start_broker)."""
        self.stop_broker(index)
        self.start_broker(index)

    def _namesrv_args(self) -> list[str]:
        conf = self.work_dir / "namesrv.conf"
        bind = "bindAddress=127.0.0.1\n" if self.dist.major >= 5 else ""
        conf.write_text(f"listenPort={self.namesrv_port}\n{bind}")
        return ["-c", str(conf)]

    def _spawn(self, role: str, main: str, args: Sequence[str], name: str | None = None) -> JavaProcess:
        """Starts a JVM of `role` (its heap and logback configuration); `name` (default: the role) names its
        process, output file and user.home."""
        name = name or role
        log = self.work_dir / f"{name}.out"
        user_home = self.work_dir / f"{name}-home"
        user_home.mkdir(exist_ok=True)
        cmd = _java_cmd(self._tools, role, self.dist.classpath, user_home)
        cmd += [f"-Drocketmq.home.dir={self.home}"]
        if role in ("namesrv", "broker"):
            cmd += [f"-D{k}={v}" for k, v in self.jvm_props.items()]
        if self.dist.major >= 5:
            cmd += [f"-Drmq.logback.configurationFile=rmq.{role}.logback.xml"]
        else:
            # one file per role under ROCKETMQ_HOME: a 4.x cluster's brokers share broker.log
            conf = {"namesrv": "logback_namesrv.xml", "broker": "logback_broker.xml"}[role]
            (self.home / "conf" / conf).write_text(LOGBACK_4X.format(log=self.work_dir / f"{role}.log"))
        cmd += [main, *args]
        env = {**os.environ, "ROCKETMQ_HOME": str(self.home)}
        proc = spawn_java(name, cmd, log, user_home, env)
        self.processes.append(proc)
        return proc

    def _wait(self, proc: JavaProcess, ready, deadline: float, what: str) -> None:
        while time.monotonic() < deadline:
            if not proc.alive():
                raise StartFailed(
                    f"RocketMQ {self.dist.version} {proc.name} (pid {proc.pid}) exited with "
                    f"{proc.popen.returncode} before {what}; last lines of {proc.log}:\n{tail(proc.log)}"
                    f"{self._inner_log_tail(proc)}"
                )
            if ready():
                return
            time.sleep(0.25)
        raise StartFailed(
            f"RocketMQ {self.dist.version} {proc.name} (pid {proc.pid}): timed out waiting for {what}; "
            f"last lines of {proc.log}:\n{tail(proc.log)}{self._inner_log_tail(proc)}"
        )

    def _inner_log_tail(self, proc: JavaProcess) -> str:
        """The tail of the process's own RocketMQ log (under its user.home), where the cause usually is."""
        logs = sorted(
            (self.work_dir / f"{proc.name}-home" / "logs").rglob("*.log"),
            key=lambda p: p.stat().st_mtime,
        )
        own = self.work_dir / f"{proc.name}.log"
        if own.exists():
            logs.append(own)
        if not logs:
            return ""
        return f"\n--- last lines of {logs[-1]}:\n{tail(logs[-1], 30)}"

    def stop(self, grace: float = 3.0) -> None:
        """SIGTERM to every JVM of the cluster, SIGKILL to those still alive after `grace` s (by pid)."""
        for proc in reversed(self.processes):
            if proc.alive():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in reversed(self.processes):
            proc.stop(grace=max(0.1, deadline - time.monotonic()))
        self.processes.clear()

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def logs(self) -> list[Path]:
        return sorted(self.work_dir.glob("*.out")) + sorted(self.work_dir.rglob("logs/**/*.log"))

    # -- admin
    def mqadmin(self, *args: str, timeout: float = 120.0, check: bool = True) -> str:
        """One `mqadmin` command (MQAdminStartup); `-n <name server>` is added. Returns its stdout."""
        return self.mqadmin_batch([list(args)], timeout=timeout, check=check)[0]

    def mqadmin_batch(self, commands: Iterable[Sequence[str]], timeout: float = 180.0, check: bool = True):
        """Several `mqadmin` commands in one JVM (tests/real/java/MqAdminBatch.java): their stdouts."""
        commands = [[*c, "-n", self.namesrv] for c in commands]
        lines = [json.dumps(c) for c in commands]
        out = self._run_java("MqAdminBatch", [], stdin="\n".join(lines) + "\n", timeout=timeout, role="tools")
        parts = re.split(r"^@@mqadmin-end (\d+)$\n?", out, flags=re.M)
        results = [parts[i] for i in range(0, len(parts) - 1, 2)]
        if len(results) != len(commands):
            raise RuntimeError(f"mqadmin batch printed {len(results)} results for {len(commands)}:\n{out}")
        if check:
            for c, r in zip(commands, results, strict=True):
                if "Exception" in r or "not exist" in r:
                    raise RuntimeError(f"mqadmin {' '.join(c)} failed:\n{r}")
        return results

    def create_topics(self, topics: Iterable[tuple[str, int, str | None]] | Iterable[str]) -> None:
        """`mqadmin updateTopic` for each (name, queues, message type or None); a bare name = 8 queues.
        The message type (5.x topic attribute `message.type`) is what the proxy checks sends against."""
        cmds = []
        for t in topics:
            name, queues, mtype = (t, 8, None) if isinstance(t, str) else t
            cmd = ["updateTopic", "-c", CLUSTER_NAME, "-t", name, "-r", str(queues), "-w", str(queues)]
            if mtype and self.dist.major >= 5:
                cmd += ["-a", f"+message.type={mtype}"]
            cmds.append(cmd)
        outs = self.mqadmin_batch(cmds)
        failed = [c for c, out in zip(cmds, outs, strict=True) if "success" not in out.lower()]
        if failed:
            # Once more (updateTopic is idempotent): on a loaded 2-core machine a fresh JVM's first name
            # server call can time out within mqadmin's 3 s, most of it spent in Netty's first connect.
            outs = self.mqadmin_batch(failed)
            for c, out in zip(failed, outs, strict=True):
                if "success" not in out.lower():
                    raise RuntimeError(f"mqadmin {' '.join(c)} did not succeed:\n{out}")

    def consumer_progress(self, group: str, topic: str) -> dict[tuple[str, int], tuple[int, int]]:
        """`mqadmin consumerProgress -g group`, `topic`'s rows: (broker, queue id) → (broker offset, consumer
        offset)."""
        out = self.mqadmin("consumerProgress", "-g", group, check=False)
        rows = {}
        for line in out.splitlines():
            parts = line.split()
            if len(parts) >= 5 and parts[0] == topic and parts[2].isdigit():
                rows[(parts[1], int(parts[2]))] = (int(parts[3]), int(parts[4]))
        return rows

    def create_group(self, group: str, retry_max_times: int | None = None, orderly: bool = False) -> None:
        """`mqadmin updateSubGroup`: the group's retries before its DLQ (gRPC consumers get
        retry_max_times + 1 deliveries) and its FIFO (`consumeMessageOrderly`) mode."""
        cmd = ["updateSubGroup", "-c", CLUSTER_NAME, "-g", group]
        if retry_max_times is not None:
            cmd += ["-r", str(retry_max_times)]
        if orderly:
            cmd += ["-o", "true"]
        out = self.mqadmin(*cmd)
        if "success" not in out.lower():
            raise RuntimeError(f"mqadmin {' '.join(cmd)} did not succeed:\n{out}")

    def update_topic(
        self, name: str, queues: int = 8, message_type: str | None = None, timeout: float = 30
    ) -> None:
        """What `mqadmin updateTopic -c` sends (UPDATE_AND_CREATE_TOPIC to every broker, `queues` on each),
        without a JVM start, then waits until the name server routes the topic on all of them. For tests
        creating many topics."""
        ext = {
            "topic": name,
            "defaultTopic": "TBW102",
            "readQueueNums": str(queues),
            "writeQueueNums": str(queues),
            "perm": "6",
            "topicFilterType": "SINGLE_TAG",
            "topicSysFlag": "0",
            "order": "false",
        }
        if message_type and self.dist.major >= 5:
            ext["attributes"] = f"+message.type={message_type}"
        self._on_every_broker(UPDATE_AND_CREATE_TOPIC, ext, b"", f"UPDATE_AND_CREATE_TOPIC {name}")
        deadline = time.monotonic() + timeout
        while len(self.routed_brokers(name)) < self.brokers:
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the name server routes {name} to {self.routed_brokers(name)} after {timeout} s, "
                    f"not to all of {self.broker_names}"
                )
            time.sleep(0.1)

    def routed_brokers(self, topic: str) -> list[str]:
        """The broker names the name server's route of `topic` lists (none while it has no route)."""
        head, body = remoting_call(self.namesrv, GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        if head.get("code") != 0:
            return []
        return sorted({q.broker_name for q in TopicRouteData.from_json(body).queue_datas})

    def update_group(self, group: str, retry_max_times: int = 16, orderly: bool = False) -> None:
        """What `mqadmin updateSubGroup -c` sends (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP to every broker)."""
        config = {
            "groupName": group,
            "consumeEnable": True,
            "consumeFromMinEnable": True,
            "consumeBroadcastEnable": True,
            "consumeMessageOrderly": orderly,
            "retryQueueNums": 1,
            "retryMaxTimes": retry_max_times,
            "brokerId": 0,
            "whichBrokerWhenConsumeSlowly": 1,
            "notifyConsumerIdsChangedEnable": True,
        }
        body = json.dumps(config).encode()
        self._on_every_broker(
            UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body, f"UPDATE_AND_CREATE_SUBSCRIPTIONGROUP {group}"
        )

    def _on_every_broker(self, code: int, ext: dict, body: bytes, what: str) -> None:
        """One admin request to every broker (signed with `admin_credentials`); fails on any non-0 answer."""
        for addr in self.broker_addrs:
            head, _ = remoting_call(addr, code, ext, body, timeout=10, credentials=self.admin_credentials)
            if head.get("code") != 0:
                raise RuntimeError(f"{what} on {addr}: {head.get('code')} {head.get('remark')}")

    # -- Java drivers
    def drivers_dir(self) -> Path:
        """tests/real/java/*.java compiled against this version's jars (once per cluster)."""
        if self._drivers is None:
            out = self.work_dir / "drivers"
            out.mkdir(exist_ok=True)
            sources = sorted(str(p) for p in JAVA_DIR.glob("*.java"))
            r = subprocess.run(
                [self._tools["javac"], "-nowarn", "-cp", self.dist.classpath, "-d", str(out), *sources],
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
            if r.returncode != 0:
                raise RuntimeError(
                    f"javac of the drivers failed against RocketMQ {self.dist.version}:\n{r.stderr}"
                )
            self._drivers = out
        return self._drivers

    def _run_java(
        self, main: str, args: Sequence[str], stdin: str | None = None, timeout: float = 120.0, role="driver"
    ) -> str:
        user_home = self.work_dir / "driver-home"
        user_home.mkdir(exist_ok=True)
        classpath = f"{self.drivers_dir()}{os.pathsep}{self.dist.classpath}"
        cmd = [*_java_cmd(self._tools, role, classpath, user_home), f"-Drocketmq.home.dir={self.home}"]
        if self.dist.major >= 5:
            cmd += ["-Drmq.logback.configurationFile=rmq.tools.logback.xml"]
        else:
            (self.home / "conf" / "logback_tools.xml").write_text(
                LOGBACK_4X.format(log=self.work_dir / "tools.log")
            )
        cmd += [main, *args]
        env = {**os.environ, "ROCKETMQ_HOME": str(self.home), "NAMESRV_ADDR": self.namesrv}
        try:
            r = subprocess.run(
                cmd,
                input=stdin,
                capture_output=True,
                text=True,
                timeout=timeout,
                env=env,
                cwd=user_home,
                check=False,
            )
        except subprocess.TimeoutExpired as e:
            raise RuntimeError(
                f"{main} {' '.join(args)} timed out after {timeout} s; stderr:\n{e.stderr}"
            ) from None
        if r.returncode != 0:
            raise RuntimeError(f"{main} {' '.join(args)} exited {r.returncode}; stderr:\n{r.stderr[-4000:]}")
        return r.stdout

    def java_driver(self, main: str, *args: str, timeout: float = 180.0) -> list[dict]:
        """Runs a driver of tests/real/java/ (`-n` name server first); its JSON lines, parsed."""
        out = self._run_java(main, [self.namesrv, *args], timeout=timeout)
        return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


# ----------------------------------------------------------------------------------------------- CLI
def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(
        prog="rocketmq.sh", description="Fetch and run real Apache RocketMQ (for the realbroker tests)."
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch", help="resolve the jars of the 5.x and 4.x versions into the cache")
    f.add_argument("--version", action="append", help=f"default: {ROCKETMQ5_VERSION} and {ROCKETMQ4_VERSION}")
    s = sub.add_parser("start", help="start a cluster and keep it running until Ctrl-C")
    s.add_argument("--version", default=ROCKETMQ5_VERSION)
    s.add_argument("--no-proxy", action="store_true")
    s.add_argument("--brokers", type=int, default=1, help="masters in the cluster (broker-a, broker-b, ...)")
    s.add_argument(
        "--topic",
        action="append",
        default=[],
        help="NAME[:QUEUES[:MESSAGE_TYPE]] to create (QUEUES on each broker)",
    )
    s.add_argument("--dir", help="work directory (default: a new temporary one)")
    sub.add_parser("versions", help="print the pinned versions and the cache location")
    a = p.parse_args(argv)

    if a.cmd == "versions":
        print(
            json.dumps(
                {"rocketmq5": ROCKETMQ5_VERSION, "rocketmq4": ROCKETMQ4_VERSION, "cache": str(cache_root())}
            )
        )
        return 0
    if a.cmd == "fetch":
        for v in a.version or [ROCKETMQ5_VERSION, ROCKETMQ4_VERSION]:
            t0 = time.monotonic()
            d = fetch(v)
            took = time.monotonic() - t0
            state = "fetched" if d.fetched_now else f"cached (first fetch took {d.fetch_seconds:.1f} s)"
            print(f"RocketMQ {v}: {state} in {took:.1f} s, {len(list(d.lib.glob('*.jar')))} jars in {d.lib}")
        return 0
    dist = fetch(a.version)
    work = Path(a.dir) if a.dir else Path(tempfile.mkdtemp(prefix=f"rocketmq-{a.version}-"))
    cluster = Cluster(dist, work, with_proxy=False if a.no_proxy else None, brokers=a.brokers)
    cluster.start()
    try:
        topics = []
        for t in a.topic:
            name, *rest = t.split(":")
            topics.append((name, int(rest[0]) if rest else 8, rest[1] if len(rest) > 1 else None))
        if topics:
            cluster.create_topics(topics)
        print(f"RocketMQ {a.version} started in {cluster.start_seconds:.1f} s (work dir {work})")
        print(f"name server: {cluster.namesrv}")
        for name, addr in zip(cluster.broker_names, cluster.broker_addrs, strict=True):
            print(f"{name}: {addr}")
        if cluster.grpc_port:
            print(f"proxy gRPC (endpoints): {cluster.proxy_endpoint}")
            print(f"proxy remoting: 127.0.0.1:{cluster.proxy_remoting_port}")
        print("pids: " + ", ".join(f"{p.name}={p.pid}" for p in cluster.processes))
        print("Ctrl-C stops it.", flush=True)
        signal.signal(signal.SIGTERM, _interrupt)
        while all(p.alive() for p in cluster.processes):
            time.sleep(1)
        print("a process exited: " + ", ".join(f"{p.name}={p.popen.returncode}" for p in cluster.processes))
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
