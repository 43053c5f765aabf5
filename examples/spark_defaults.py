"""The SparkSession of the examples and benchmarks: configured from the project's spark-defaults.conf
(read once, here)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from pyspark.sql import SparkSession

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


def spark_session(app_name: str, extra: Mapping[str, str] | None = None) -> SparkSession:
    """A SparkSession with every setting of spark-defaults.conf, then `extra` (which wins)."""
    builder = SparkSession.builder.appName(app_name)
    for key, value in [*spark_conf_pairs(), *(extra or {}).items()]:
        builder = builder.config(key, value)
    return builder.getOrCreate()
