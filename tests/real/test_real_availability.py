"""Without Java or Maven the realbroker tests skip, naming the reason, unless ROCKETMQ_REAL=required,
which turns that into a failure (CI sets it). Runs in the default suite: nothing here starts a JVM."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.real import realcluster as rc

ROOT = Path(__file__).resolve().parents[2]
ONE_REAL_TEST = "tests/real/test_real_proxy.py::test_official_python_client_producer_and_simple_consumer"


def test_missing_tools_are_named(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PATH", "")
    with pytest.raises(rc.Unavailable, match=r"java, javac, mvn not found on PATH"):
        rc.require_tools()


@pytest.mark.parametrize(("mode", "outcome"), [("", "1 skipped"), ("required", "1 error")])
def test_realbroker_tests_skip_or_fail_without_java(mode: str, outcome: str, tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if k != "ROCKETMQ_REAL"}
    env.update(PATH=str(tmp_path), ROCKETMQ_REAL=mode)  # an empty directory: no java, javac or mvn
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
            "-m",
            "realbroker",
            ONE_REAL_TEST,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    out = r.stdout + r.stderr
    assert outcome in out, out[-3000:]
    if mode:
        assert "ROCKETMQ_REAL=required but real RocketMQ is unavailable" in out, out[-3000:]
    else:
        assert "real RocketMQ unavailable: java, javac, mvn not found on PATH" in out, out[-3000:]
