"""The examples' SparkSession: configured from the project's spark-defaults.conf (read once, here)."""

from __future__ import annotations

import os

from pyspark.sql import SparkSession

SPARK_DEFAULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "spark-defaults.conf")


def spark_session(app_name: str) -> SparkSession:
    """A SparkSession with every setting of spark-defaults.conf (comments and blank lines skipped)."""
    builder = SparkSession.builder.appName(app_name)
    with open(SPARK_DEFAULTS, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                key, _, value = line.partition(" ")
                builder = builder.config(key, value.strip())
    return builder.getOrCreate()
