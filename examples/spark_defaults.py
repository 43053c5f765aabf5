"""The examples' SparkSession: configured from the project's spark-defaults.conf (read once, here).

Tests and benchmarks import this module too, so the settings are read in one place."""

from __future__ import annotations

import logging
import os

from pyspark.errors import PySparkRuntimeError
from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

# pyspark starts its JVM with a fork and a Python `preexec_fn`; in a process whose gRPC threads are running
# (a benchmark's clients, an embedded emulator) the forked child now and then dies before `exec`, and
# pyspark reports JAVA_GATEWAY_EXITED. Starting it again succeeds; a JVM that fails for another reason fails
# every attempt.
GATEWAY_ATTEMPTS = 3

SPARK_DEFAULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "spark-defaults.conf")


def spark_conf_pairs(path: str = SPARK_DEFAULTS) -> list[tuple[str, str]]:
    """The settings of spark-defaults.conf (comments and blank lines skipped)."""
    pairs = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                key, _, value = line.partition(" ")
                pairs.append((key, value.strip()))
    return pairs


def spark_session(
    app_name: str,
    master: str | None = None,
    remote: str | None = None,
    extra: dict[str, str] | None = None,
) -> SparkSession:
    """A SparkSession with every setting of spark-defaults.conf.

    `master` overrides spark.master (e.g. "local-cluster[2,1,1024]"); `remote` starts a Spark Connect
    session instead (e.g. "local[2]"), which takes the master from its own URL; `extra` adds settings
    (e.g. `spark.jars`)."""
    builder = SparkSession.builder.appName(app_name)
    if remote is not None:
        builder = builder.remote(remote)
    for key, value in spark_conf_pairs():
        if key == "spark.master" and (remote is not None or master is not None):
            continue
        builder = builder.config(key, value)
    for key, value in (extra or {}).items():
        builder = builder.config(key, value)
    if master is not None:
        builder = builder.master(master)
    for attempt in range(GATEWAY_ATTEMPTS):
        try:
            return builder.getOrCreate()
        except PySparkRuntimeError as e:
            if e.getCondition() != "JAVA_GATEWAY_EXITED" or attempt == GATEWAY_ATTEMPTS - 1:
                raise
            log.warning(
                "Spark's JVM exited before sending its port (attempt %d); starting it again", attempt + 1
            )
    raise AssertionError("unreachable")
