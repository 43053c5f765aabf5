"""Regenerates tests/protocol/golden/ with Apache RocketMQ's Java encoders (needs Java 17 and Maven).

    python tests/protocol/java/generate_goldens.py [--out DIR] [--version 5.5.0 ...]

For each RocketMQ version, Maven copies `rocketmq-client` and its dependencies into
~/.cache/pyspark-rocketmq/maven/golden-<version>/lib, then GoldenBytes.java (single-file launch) writes
the files into <out>/rocketmq-<version>/. 5.5.0 is the newest rocketmq-client on Maven Central; 5.3.3 is
the last release whose JSON is fastjson 1 (5.4.0 moved RemotingSerializable to fastjson2).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE.parent / "golden"
VERSIONS = ("5.5.0", "5.3.3")
CACHE = Path(os.environ.get("PYSPARK_ROCKETMQ_CACHE", Path.home() / ".cache" / "pyspark-rocketmq")) / "maven"

POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.pyspark-rocketmq</groupId>
  <artifactId>golden-bytes-{version}</artifactId>
  <version>0</version>
  <dependencies>
    <dependency>
      <groupId>org.apache.rocketmq</groupId>
      <artifactId>rocketmq-client</artifactId>
      <version>{version}</version>
    </dependency>
  </dependencies>
</project>
"""


class ToolMissing(RuntimeError):
    """Java or Maven is not installed, or Maven Central cannot be reached."""


def classpath(version: str) -> str:
    """Resolves rocketmq-client `version` and its dependencies with Maven (cached); returns the classpath."""
    for tool in ("java", "mvn"):
        if shutil.which(tool) is None:
            raise ToolMissing(f"{tool} is not on PATH")
    work = CACHE / f"golden-{version}"
    lib = work / "lib"
    if not lib.is_dir() or not any(lib.glob("rocketmq-client-*.jar")):
        work.mkdir(parents=True, exist_ok=True)
        (work / "pom.xml").write_text(POM.format(version=version))
        cmd = [
            "mvn",
            "-q",
            "-B",
            "dependency:copy-dependencies",
            f"-DoutputDirectory={lib}",
            f"-Dmaven.repo.local={CACHE / 'repo'}",
        ]
        done = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            raise ToolMissing(
                f"Maven could not fetch rocketmq-client {version}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
            )
    return os.pathsep.join(str(p) for p in sorted(lib.glob("*.jar")))


def generate(out: Path, versions: tuple[str, ...] = VERSIONS) -> list[Path]:
    """Writes <out>/rocketmq-<version>/ for each version; returns those folders."""
    written = []
    for version in versions:
        target = out / f"rocketmq-{version}"
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
        cmd = ["java", "-cp", classpath(version), str(HERE / "GoldenBytes.java"), str(target)]
        env = dict(os.environ, TZ="UTC")
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
        if done.returncode != 0:
            raise RuntimeError(f"GoldenBytes failed for {version}:\n{done.stdout}\n{done.stderr}")
        written.append(target)
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--version", action="append", dest="versions")
    args = parser.parse_args()
    for folder in generate(args.out, tuple(args.versions or VERSIONS)):
        print(f"wrote {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
