"""What every real system of the suite needs from Java and Maven (real RocketMQ in `realcluster`, Kafka in
`kafka`): the tools, a Maven fetch of artifacts into one cache, free loopback ports and JVM processes
stopped by pid.

- `maven_fetch(name, dependencies)` resolves the dependencies' runtime jars with Maven into
  `<cache>/<name>/lib` (`~/.cache/pyspark-rocketmq/maven/`, or `$PYSPARK_ROCKETMQ_CACHE/maven/`), once:
  later calls reuse the directory. A file lock serializes concurrent fetches of the same name.
- `spawn_java(...)` starts a JVM whose output goes to a log file and which dies with its parent
  (`setpriv --pdeathsig`); `JavaProcess.stop()` sends SIGTERM, then SIGKILL after a grace period.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1"


class Unavailable(RuntimeError):
    """Java, javac or Maven is missing, or Maven could not fetch the artifacts."""


def cache_root() -> Path:
    base = os.environ.get("PYSPARK_ROCKETMQ_CACHE")
    return (Path(base) if base else Path.home() / ".cache" / "pyspark-rocketmq") / "maven"


def require_tools(names: Sequence[str] = ("java", "javac", "mvn")) -> dict[str, str]:
    """Paths of the tools (java, javac, mvn by default); raises Unavailable naming what is missing or a Java
    older than 11."""
    found = {name: shutil.which(name) for name in names}
    missing = [n for n, p in found.items() if not p]
    if missing:
        raise Unavailable(
            f"{', '.join(missing)} not found on PATH (real RocketMQ and Kafka need Java 17 and Maven)"
        )
    if "java" in found:
        out = subprocess.run(
            [found["java"], "-version"], capture_output=True, text=True, timeout=60, check=False
        ).stderr
        m = re.search(r'version "(\d+)(?:\.(\d+))?', out)
        major = int(m.group(1)) if m else 0
        if major == 1 and m and m.group(2):
            major = int(m.group(2))
        if major < 11:
            raise Unavailable(f"java is version {major or 'unknown'} ({out.strip()[:80]}); Java 17 is needed")
    return {k: str(v) for k, v in found.items()}


# ----------------------------------------------------------------------------------------------- fetch
@dataclass(frozen=True)
class Fetched:
    """A directory of fetched jars."""

    lib: Path
    seconds: float  # how long the Maven run that filled the cache took
    fetched_now: bool  # this call ran Maven (False: the cache was reused)


def pom(name: str, dependencies: Sequence[str]) -> str:
    """A pom that depends on `group:artifact:version` coordinates."""
    deps = []
    for coord in dependencies:
        group, artifact, version = coord.split(":")
        deps.append(
            f"    <dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
            f"<version>{version}</version></dependency>"
        )
    joined = "\n".join(deps)
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0">\n'
        "  <modelVersion>4.0.0</modelVersion>\n"
        "  <groupId>pyspark-rocketmq.tests</groupId>\n"
        f"  <artifactId>{name}-runtime</artifactId>\n"
        "  <version>1</version>\n  <packaging>pom</packaging>\n"
        f"  <dependencies>\n{joined}\n  </dependencies>\n</project>\n"
    )


def maven_fetch(
    name: str,
    dependencies: Sequence[str],
    *,
    expect: str,
    what: str,
    timeout: float = 1500.0,
    log: Path | None = None,
) -> Fetched:
    """The runtime jars of `dependencies` (`group:artifact:version`) in `<cache>/<name>/lib`, fetched with
    Maven once. `expect` is a glob that must match a fetched jar; `what` names the fetch in errors.
    Raises Unavailable (tools missing, Maven failed or timed out)."""
    tools = require_tools(("java", "mvn"))
    root = cache_root()
    home = root / name
    lib, done = home / "lib", home / "fetched.json"
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another session may be fetching the same artifacts
        if done.exists() and lib.is_dir():
            info = json.loads(done.read_text())
            return Fetched(lib, info.get("seconds", 0.0), fetched_now=False)
        (home / "pom.xml").write_text(pom(name, dependencies))
        staging = home / "lib.partial"
        shutil.rmtree(staging, ignore_errors=True)
        log = log or home / "fetch.log"
        cmd = [
            tools["mvn"],
            "-B",
            "-ntp",
            "-f",
            str(home / "pom.xml"),
            f"-Dmaven.repo.local={root / 'repo'}",
            f"{DEPENDENCY_PLUGIN}:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={staging}",
        ]
        t0 = time.monotonic()
        with open(log, "w") as out:
            try:
                rc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, timeout=timeout, check=False)
            except subprocess.TimeoutExpired:
                raise Unavailable(f"Maven did not fetch {what} within {timeout:.0f} s; see {log}") from None
        seconds = time.monotonic() - t0
        if rc.returncode != 0 or not any(staging.glob(expect)):
            raise Unavailable(
                f"Maven could not fetch {what} (exit {rc.returncode}); last lines of {log}:\n{tail(log, 25)}"
            )
        shutil.rmtree(lib, ignore_errors=True)
        staging.rename(lib)
        done.write_text(json.dumps({"name": name, "seconds": round(seconds, 1), "at": time.time()}))
        return Fetched(lib, seconds, fetched_now=True)


# ----------------------------------------------------------------------------------------------- helpers
def tail(path: Path, lines: int = 40) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            return "\n".join(f.read().decode("utf-8", "replace").splitlines()[-lines:])
    except OSError as e:
        return f"(no log: {e})"


def bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


# ----------------------------------------------------------------------------------------------- processes
@dataclass
class JavaProcess:
    name: str
    popen: subprocess.Popen
    log: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self, grace: float = 3.0) -> None:
        """SIGTERM (shutdown hooks run), then SIGKILL after `grace` seconds; by pid only. A test system's
        data is thrown away, so long shutdown hooks are not waited for."""
        if self.popen.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.popen.pid, signal.SIGTERM)
        try:
            self.popen.wait(grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.popen.pid, signal.SIGKILL)
            self.popen.wait(10)


def java_cmd(java: str, flags: Sequence[str], classpath: str) -> list[str]:
    """`java <flags> -cp <classpath>`, under `setpriv --pdeathsig KILL` where available: the JVM dies with
    the Python thread that started it, even when the Python process itself is killed."""
    cmd = [java, *flags, "-cp", classpath]
    if shutil.which("setpriv"):
        cmd = ["setpriv", "--pdeathsig", "KILL", "--", *cmd]
    return cmd


def spawn_java(
    name: str, cmd: Sequence[str], log: Path, cwd: Path, env: Mapping[str, str] | None = None
) -> JavaProcess:
    """Starts `cmd` (from `java_cmd` plus the main class and its arguments) with its output appended to
    `log` (the command line first)."""
    with open(log, "ab") as out:
        out.write(f"$ {' '.join(cmd)}\n".encode())
        out.flush()
        popen = subprocess.Popen(
            list(cmd),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
            env=dict(env) if env is not None else None,
        )
    return JavaProcess(name, popen, log)
