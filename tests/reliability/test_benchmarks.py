"""The benchmark harness cannot rot: `python -m benchmarks --quick` runs every measure and reports each one, as a
table on stdout and in its JSON file (figures are not judged here: the machine is shared)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import time

import pytest

from benchmarks.run import DIFFERENCES, MEASURES
from benchmarks.stacks import WORKLOAD

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUN_TIMEOUT_S = 900


@pytest.mark.reliability
@pytest.mark.timeout(RUN_TIMEOUT_S + 60)  # the run's own timeout decides, not the suite's 300 s default
def test_quick_run_reports_every_measure(tmp_path):
    out = tmp_path / "results.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))}
    # Its own session: on a timeout the whole group goes (the run, its emulator, its Spark JVM and brokers).
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchmarks", "--quick", "--json", str(out)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    failed = [line for line in stderr.splitlines() if " failed: " in line]  # a stack's runs that raised
    assert proc.returncode == 0, "\n".join([*failed, stderr[-4000:]])
    printed = {line.split("  ")[0].strip() for line in stdout.splitlines()}
    assert set(MEASURES) <= printed, f"missing from the table: {set(MEASURES) - printed}\n{stdout}"

    result = json.loads(out.read_text())
    rows = {r["measure"]: r for r in result["measures"]}
    assert list(rows) == list(MEASURES)
    assert set(DIFFERENCES) <= set(MEASURES)
    assert sum(r["figure"] for name, r in rows.items() if name.endswith("JVM CPU")) > 0
    for name, row in rows.items():
        assert isinstance(row["figure"], float | int) and math.isfinite(row["figure"]), (name, row)
        # A process's CPU is read in clock ticks (10 ms): at --quick sizes the emulator can serve a read in
        # less than one (50,000 messages at ~0.1 µs), so a CPU row may be 0; a difference may be anything;
        # every other figure is a rate, a time or a size.
        if name not in DIFFERENCES:
            assert row["figure"] >= 0 if name.endswith(" CPU") else row["figure"] > 0, (name, row)
        assert row["target"], (name, row)
        if row["ratio"] is not None:
            assert math.isfinite(row["ratio"]) and isinstance(row["passed"], bool), (name, row)
    assert result["options"]["quick"] is True
    assert len(result["load_average_before"]) == 3

    # The stack comparison: every stack measured every row of the workload, or says why it was skipped.
    assert [s["stack"].split()[0] for s in result["stacks"]] == ["emulator", "emulator", "RocketMQ", "Kafka"]
    for stack in result["stacks"]:
        if stack["skipped"]:
            assert stack["skipped"] in stdout, stack
            continue
        assert stack["failures"] == [], stack
        assert set(stack["figures"]) == set(WORKLOAD), stack
        assert all(math.isfinite(v) and v > 0 for v in stack["figures"].values()), stack
        # Where each throughput's CPU went: the stack's broker processes (wired by pid: they did work), Spark's
        # Python workers and its JVM.
        cpu = stack["cpu_us_per_message"]
        assert set(cpu) == {"write", "batch read", "stream read"}, stack
        for groups in cpu.values():
            assert set(groups) == {"broker", "python", "jvm"}, stack
            assert all(math.isfinite(v) and v >= 0 for v in groups.values()), stack
            assert groups["jvm"] > 0, stack
        assert cpu["write"]["broker"] > 0, stack  # a read's may be under one clock tick at --quick sizes
        # What the broker's processes spend idle, measured once for all stacks (a fraction of a core each).
        assert 0 <= stack["broker_idle_cores"] < os.cpu_count(), stack
    assert "stacks: the same workload" in stdout
    assert "the brokers' own CPU while idle" in stdout


def test_a_failed_stack_run_is_reported_and_the_others_kept():
    """One run that raises (Kafka once stopped answering a write in a full run) is listed under the table;
    the stack keeps its other runs' figures and the run returns False (its topic is not read)."""
    from benchmarks import stacks

    stack = stacks.Stack("kafka", "Kafka 4.1.1", "kafka", ours=False)
    logged: list[str] = []

    def broken() -> float:
        raise RuntimeError("Expiring 148 record(s) for anchor-kafka-write-1-1\nat org.apache.kafka...")

    assert stacks._keep_best(stack, "batch read", 1000, broken, 0, logged.append) is False
    assert stacks._keep_best(stack, "write", 1000, lambda: 2000.0, 0, logged.append) is True
    assert stacks._keep_best(stack, "write", 1000, broken, 1, logged.append) is False
    assert stack.figures == {"write": 2000.0}
    assert set(stack.cpu) == {"write"}  # a measure with no run that succeeded has no CPU split to print
    assert stack.failures == [
        "batch read (run 1): RuntimeError: Expiring 148 record(s) for anchor-kafka-write-1-1",
        "write (run 2): RuntimeError: Expiring 148 record(s) for anchor-kafka-write-1-1",
    ]
    assert len(logged) == 3 and logged[1].startswith("  2,000/s; CPU µs per message: emulator ")  # run 1
    assert logged[2] == "Kafka 4.1.1: write run 2 failed: " + stack.failures[1].split(": ", 1)[1]
    table = stacks.render([stack], "stacks")
    assert "Kafka 4.1.1: FAILED write (run 2): RuntimeError: Expiring 148 record(s)" in table
    assert stacks.as_json([stack])[0]["failures"] == stack.failures


def test_a_reads_round_ratio_pairs_each_run_with_its_ceilings_run_of_the_same_round():
    """The median of per-round ratios, not the ratio of the best runs: a ceiling whose best run came in a
    quiet moment the read did not share does not set it."""
    from benchmarks.run import kept_and_logged, round_ratio_rows

    rates: dict[str, list[float]] = {"ceiling": [], "gRPC": [], "stream ceiling": [], "stream": []}
    logged: list[float] = []
    for ceiling, read in ((1.0, 0.9), (2.0, 1.0), (1.2, 1.14)):  # round 2: a quiet moment for the ceiling
        for key, rate in (("ceiling", ceiling), ("gRPC", read)):
            kept_and_logged(rates[key], lambda r, _spent: logged.append(r))(rate, {})
    assert logged == [1.0, 0.9, 2.0, 1.0, 1.2, 1.14]
    rows = round_ratio_rows(rates)
    assert [r.measure for r in rows] == ["batch read: median of the rounds' ratios to the ceiling"]
    assert rows[0].figure == pytest.approx(0.9)  # of 0.9, 0.5 and 0.95; best against best: 1.14 / 2.0
    assert rows[0].unit == "×" and rows[0].passed is None


def test_a_failed_jvm_call_is_reported_with_its_java_exception_and_root_cause():
    """A Py4JJavaError's first line only names the JVM call ("calling o5817.get", all a full run once
    recorded of a failed Kafka write); the reason keeps the Java exception and its last cause as well."""
    from benchmarks import stacks

    class Py4JJavaError(Exception):
        pass

    e = Py4JJavaError(
        "An error occurred while calling o5817.get.\n"
        ": org.apache.spark.SparkException: Job aborted.\n\tat org.apache.spark.sql.X.run(X.scala:1)\n"
        "Caused by: java.util.concurrent.ExecutionException: boom\n\tat y\n"
        "Caused by: org.apache.kafka.common.errors.TimeoutException: Topic t not present in metadata\n\tat z"
    )
    assert stacks.failure_reason(e) == (
        "Py4JJavaError: An error occurred while calling o5817.get. | org.apache.spark.SparkException: Job "
        "aborted. | Caused by: org.apache.kafka.common.errors.TimeoutException: Topic t not present in metadata"
    )
    assert stacks.failure_reason(RuntimeError("one line")) == "RuntimeError: one line"


def test_idle_cores_counts_each_group_over_one_window():
    from benchmarks.cpu_time import idle_cores

    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    asleep = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.3)  # both started
        spinning, sleeping, both = idle_cores([[busy.pid], [asleep.pid], [busy.pid, asleep.pid]], 1.0)
    finally:
        for p in (busy, asleep):
            p.kill()
            p.wait(10)
    assert spinning > 0.2 and sleeping < 0.05
    assert both == pytest.approx(spinning + sleeping)


PERF_SCRIPT = """\
    9713    7f30a4000000 __memmove_avx512_unaligned_erms (/usr/lib/x86_64-linux-gnu/libc.so.6)
    9713    7f30a4000010 _copy_from_iter ([kernel.kallsyms])
    9713    7f30a4000020 _copy_from_iter ([kernel.kallsyms])
    9713    7f30a4000030 _copy_from_iter ([kernel.kallsyms])
    9876    7f30a4000040 scan_stored (/work/rocketmq_protocol/remoting/_stored_scan.cpython-311-x86_64-linux-gnu.so)
    9876    7f30a4000050 scan_stored (/work/rocketmq_protocol/remoting/_stored_scan.cpython-311-x86_64-linux-gnu.so)
    9878    7f30a4000060 _copy_to_iter ([kernel.kallsyms])
   10062    7f30a4000070 scan_stored (/work/rocketmq_protocol/remoting/_stored_scan.cpython-311-x86_64-linux-gnu.so)
    9876    7f30a4000080 [unknown] ([unknown])
not a sample line
"""


def test_native_profile_counts_samples_per_group_and_scales_them_to_the_groups_cpu():
    """perf's samples per (process, symbol, library) become each group's top symbols with their share of the
    group's samples and that share of its measured CPU per message."""
    from benchmarks import native_profile as np_

    samples = np_.parse_samples(PERF_SCRIPT.splitlines())
    assert samples[9713, "_copy_from_iter", "[kernel.kallsyms]"] == 3
    assert samples[9876, "scan_stored", "_stored_scan.cpython-311-x86_64-linux-gnu.so"] == 2
    assert samples[9876, "[unknown]", "[unknown]"] == 1
    assert sum(samples.values()) == 9
    group_of = {9713: "emulator", 9876: "python", 9878: "python", 10062: "python"}
    profile = np_.summarize(samples, group_of, {"emulator": 0.4, "python": 1.0}, top=2)
    assert [(e.symbol, e.share) for e in profile["emulator"]] == [
        ("_copy_from_iter", 0.75),
        ("__memmove_avx512_unaligned_erms", 0.25),
    ]
    assert profile["emulator"][0].us_per_message == pytest.approx(0.3)
    first = profile["python"][0]
    assert (first.symbol, first.library, first.share) == (
        "scan_stored",
        "_stored_scan.cpython-311-x86_64-linux-gnu.so",
        0.6,
    )
    assert first.us_per_message == pytest.approx(0.6)
    assert len(profile["python"]) == 2
    text = np_.render(profile, {"emulator": 0.4, "python": 1.0, "jvm": 0.7}, "title")
    assert text.splitlines()[0] == "title"
    assert "emulator: 0.400 µs per message" in text and "jvm: 0.700 µs per message (not sampled)" in text
    assert " 0.3000 µs   75.0%  _copy_from_iter  [[kernel.kallsyms]]" in text


@pytest.mark.reliability
@pytest.mark.timeout(600)
def test_native_profile_names_where_a_remoting_read_spends_its_cpu():
    """A short real run: perf samples the emulator and Spark's Python workers during `nameServer` reads; the
    C scan of the stored records and the kernel's socket copies are among what it lists."""
    from benchmarks.native_profile import perf_unavailable

    why = perf_unavailable()
    if why:
        pytest.skip(why)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.native_profile", "--remoting", "--messages", "100000",
         "--seconds", "3", "--top", "40"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        stdout, stderr = proc.communicate(timeout=540)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    failed = [line for line in stderr.splitlines() if " failed: " in line]  # a stack's runs that raised
    assert proc.returncode == 0, "\n".join([*failed, stderr[-4000:]])
    assert "over nameServer" in stdout.splitlines()[0], stdout
    python = stdout.split("\npython: ", 1)[1].split("\njvm: ", 1)[0]
    assert "scan_stored" in python, stdout
    emulator = stdout.split("\nemulator: ", 1)[1].split("\npython: ", 1)[0]
    assert "[kernel.kallsyms]" in emulator, stdout
