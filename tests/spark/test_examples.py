"""The examples run as a user runs them (subprocesses, each with its own Spark JVM) and do what they say:
streaming_etl.py is restartable without duplicates, backfill.py reads only its window, and the example
pipeline test passes with only the plugin's fixtures."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from broker_emulator import Emulator

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")
TIMEOUT_S = 240

pytestmark = pytest.mark.slow


def run(*args: str) -> str:
    """Runs `python *args` from the project root; returns stdout, failing the test on a non-zero exit."""
    r = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=TIMEOUT_S, cwd=ROOT)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r.stdout


def test_streaming_etl_restarts_from_its_checkpoint_without_duplicates(
    rocketmq_emulator: Emulator, topic: str, tmp_path
) -> None:
    output, checkpoint = str(tmp_path / "orders"), str(tmp_path / "checkpoint")
    etl = [
        os.path.join(EXAMPLES, "streaming_etl.py"),
        "--endpoints",
        rocketmq_emulator.endpoints,
        "--topic",
        topic,
    ]
    etl += ["--output", output, "--checkpoint", checkpoint]

    first = run(*etl, "--demo-messages", "300")
    assert "sent 300 demo orders" in first
    assert "this run wrote 300 new rows" in first and "output holds 300 rows" in first, first

    # The second run sends 200 more: it must read exactly those, not the first 300 again (nor skip any).
    second = run(*etl, "--demo-messages", "200")
    assert "this run wrote 200 new rows" in second and "output holds 500 rows" in second, second

    table = pq.read_table(output)  # skips _spark_metadata; only committed files exist after a clean run
    assert table.num_rows == 500
    rows = table.select(["order_id", "messageId", "amount", "amount_eur", "currency", "is_large"]).to_pylist()
    assert len({r["messageId"] for r in rows}) == 500
    assert len({r["order_id"] for r in rows}) == 500 and all(r["order_id"] for r in rows)
    for r in rows:
        rate = 0.92 if r["currency"] == "USD" else 1.0
        assert r["amount_eur"] == round(r["amount"] * rate, 2)
        assert r["is_large"] == (r["amount_eur"] >= 50)


def test_backfill_reads_only_the_first_window(tmp_path) -> None:
    output = str(tmp_path / "window")
    out = run(os.path.join(EXAMPLES, "backfill.py"), "--output", output)
    assert (
        "sent 600 messages tagged 'first-burst'" in out and "sent 400 messages tagged 'second-burst'" in out
    )
    assert "backfilled 600 messages" in out, out
    table = pq.read_table(output)
    assert table.num_rows == 600
    assert set(table.column("tags").to_pylist()) == {"first-burst"}
    assert len(set(table.column("messageId").to_pylist())) == 600


def test_example_pipeline_test_passes_with_the_plugin_fixtures() -> None:
    out = run(
        "-m", "pytest", "-q", "-p", "no:cacheprovider", os.path.join(EXAMPLES, "test_pipeline_example.py")
    )
    assert re.search(r"\b2 passed\b", out), out
