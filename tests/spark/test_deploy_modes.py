"""format("rocketmq") under Spark Connect (`remote("local[2]")`) and on `local-cluster[2,1,1024]` (two
executors in their own JVMs): a write, a batch read, and streaming queries (rocketmq → rocketmq and
rocketmq → parquet) run twice from their checkpoints. Each mode runs in its own process (tests/spark/cluster_job.py)
against the session's emulator; marked `cluster` (excluded from the default run, run by CI)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from broker_emulator import Emulator
from tests.support.helpers import unique_name

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TIMEOUT_S = 600

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(TIMEOUT_S + 60)]


@pytest.mark.parametrize("mode", ["connect", "local-cluster"])
def test_write_read_and_stream(mode: str, rocketmq_emulator: Emulator, tmp_path) -> None:
    source, sink = unique_name(f"{mode}-src"), unique_name(f"{mode}-sink")
    rocketmq_emulator.create_topic(source)
    rocketmq_emulator.create_topic(sink)
    cmd = [
        sys.executable,
        "-m",
        "tests.spark.cluster_job",
        "--mode",
        mode,
        "--endpoints",
        rocketmq_emulator.endpoints,
    ]
    cmd += ["--topic", source, "--sink-topic", sink, "--out", str(tmp_path)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, cwd=ROOT)
    out = f"exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-5000:]}"
    assert r.returncode == 0, out
    lines = [line for line in r.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, out
    res = json.loads(lines[-1][len("RESULT ") :])
    print(f"{mode}: {res}")

    if mode == "connect":
        assert res["session"] == "pyspark.sql.connect.session", res
    else:
        assert res["executors"] == 2, res
    assert res["batch_read"] == res["batch_distinct"] == 200, res
    assert res["relayed"] == res["relayed_distinct"] == 250 and res["relay_expected"], res
    assert res["parquet"] == res["parquet_distinct"] == res["parquet_positions_distinct"] == 250, res
    assert res["expected"], res
