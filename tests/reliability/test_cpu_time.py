"""`benchmarks/cpu_time.py` attributes CPU to the process that spent it: the emulator's pid apart from this
process's other Python children."""

from __future__ import annotations

import select
import subprocess
import sys
import time
from types import SimpleNamespace

import psutil
import pytest

from benchmarks import cpu_time
from benchmarks.cpu_time import measured

# Burns 0.4 s of CPU when told to, says so, then waits to be killed (so its CPU is still readable).
CHILD = """
import sys, time
sys.stdin.readline()
end = time.process_time() + 0.4
while time.process_time() < end:
    pass
print("done", flush=True)
sys.stdin.readline()
"""


def _burn(proc: subprocess.Popen) -> None:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()
    ready, _, _ = select.select([proc.stdout], [], [], 30)
    assert ready and proc.stdout.readline().strip() == "done"


@pytest.mark.parametrize("as_emulator", [True, False])
def test_cpu_is_counted_for_the_process_that_spent_it(as_emulator: bool) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        with measured(proc.pid if as_emulator else None) as use:
            _burn(proc)
    finally:
        proc.kill()
        proc.wait(30)
    burnt, other = ("emulator", "python") if as_emulator else ("python", "emulator")
    assert use.seconds[burnt] >= 0.3, use.seconds
    assert use.seconds[other] < 0.2, use.seconds
    assert use.per_item_us(1000)[burnt] == pytest.approx(use.seconds[burnt] * 1000)
    assert use.wall >= 0.3


# Writes 128 MiB of new memory when told to, says so, then waits to be killed.
GROW = """
import sys
sys.stdin.readline()
kept = b"x" * (128 << 20)
print("done", flush=True)
sys.stdin.readline()
"""


def test_the_emulators_fresh_pages_and_kernel_time_are_counted() -> None:
    """A broker that grows by 128 MiB is given at least that much in fresh pages (its minor faults), with the
    kernel time they cost; per item as the write's rows print them."""
    proc = subprocess.Popen(
        [sys.executable, "-c", GROW], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        with measured(proc.pid) as use:
            _burn(proc)
    finally:
        proc.kill()
        proc.wait(30)
    grown = 128 << 20
    per_item = use.broker_per_item(1024)
    assert grown <= per_item["fresh_bytes"] * 1024 < 3 * grown, use.broker
    assert 0 < use.broker["emulator_kernel"] <= use.seconds["emulator"], (use.broker, use.seconds)
    assert per_item["kernel_us"] == pytest.approx(use.broker["emulator_kernel"] / 1024 * 1e6)


def test_no_fresh_pages_are_counted_without_a_broker() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", GROW], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        with measured(None) as use:
            _burn(proc)
    finally:
        proc.kill()
        proc.wait(30)
    assert use.broker == {"emulator_kernel": 0.0, "emulator_faults": 0.0}
    assert use.broker_per_item(0) == {"kernel_us": 0.0, "fresh_bytes": 0.0}


def test_an_ignored_process_counts_in_no_group() -> None:
    """Another stack's broker (the emulator, a Python process, while a real broker is measured) is neither
    Spark's Python nor the measured broker."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        with measured(None, ignore=[proc.pid]) as use:
            _burn(proc)
    finally:
        proc.kill()
        proc.wait(30)
    assert sum(use.seconds.values()) < 0.2, use.seconds


# Starts a child that burns 0.4 s of CPU and exits; reaps it only when told to.
PARENT = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import time\\nend = time.process_time() + 0.4\\n"
                          "while time.process_time() < end: pass"])
print(child.pid, flush=True)
sys.stdin.readline()
child.wait()
print("reaped", flush=True)
sys.stdin.readline()
"""


def test_a_process_reaped_inside_the_block_counts_only_what_it_spent_there() -> None:
    """A stream query's runner that ended before the block but is reaped inside it (its parent's children
    times then take in its whole life's CPU) adds nothing to the block's CPU."""
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert parent.stdin is not None and parent.stdout is not None
    try:
        child = int(parent.stdout.readline())
        deadline = time.monotonic() + 30
        while psutil.Process(child).status() != psutil.STATUS_ZOMBIE:  # it burnt its CPU and exited
            assert time.monotonic() < deadline
            time.sleep(0.05)
        with measured(None) as use:
            parent.stdin.write("reap\n")
            parent.stdin.flush()
            ready, _, _ = select.select([parent.stdout], [], [], 30)
            assert ready and parent.stdout.readline().strip() == "reaped"
    finally:
        parent.kill()
        parent.wait(30)
    assert use.seconds["python"] < 0.2, use.seconds


class _FakeProc:
    """A process of a simulated tree: `cpu` its own seconds, `reaped` what it holds of ended children."""

    def __init__(self, pid: int, name: str, cpu: float, reaped: float = 0.0, gone: bool = False) -> None:
        self.pid, self._name, self._cpu, self._reaped, self._gone = pid, name, cpu, reaped, gone

    def _check(self) -> None:
        if self._gone:
            raise psutil.NoSuchProcess(self.pid)

    def name(self) -> str:
        self._check()
        return self._name

    def cmdline(self) -> list[str]:
        self._check()
        return ["java", cpu_time.SPARK_MAIN] if self._name == "java" else [self._name]

    def cpu_times(self) -> SimpleNamespace:
        self._check()
        return SimpleNamespace(user=self._cpu, system=0.0, children_user=self._reaped, children_system=0.0)


class _FakeTree:
    """`psutil.Process(me)` whose children change between reads, as given."""

    def __init__(self, reads: list[list[_FakeProc]]) -> None:
        self.reads = reads
        self.calls = 0

    def __call__(self, pid: int) -> _FakeTree:
        return self

    def children(self, recursive: bool = False) -> list[_FakeProc]:
        self.calls += 1
        return self.reads[min(self.calls - 1, len(self.reads) - 1)]


def test_a_process_reaped_while_the_tree_is_read_counts_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stream's runner (1.5 s of CPU) stopped by the JVM as a snapshot reads the tree: listed, then gone
    before it is read, with the JVM already read without it. The snapshot reads the tree again and finds
    it in the JVM's reaped children's times."""
    jvm_before = _FakeProc(10, "java", cpu=4.0, reaped=2.0)
    runner_gone = _FakeProc(11, "python3", cpu=1.5, gone=True)
    jvm_after = _FakeProc(10, "java", cpu=4.0, reaped=3.5)
    worker = _FakeProc(12, "python3", cpu=0.5)
    tree = _FakeTree([[jvm_before, runner_gone, worker], [jvm_after, worker]])
    monkeypatch.setattr(cpu_time.psutil, "Process", tree)
    out = cpu_time.snapshot(None)
    assert out["python"] == pytest.approx(3.5 + 0.5)
    assert out["jvm"] == pytest.approx(4.0)


def test_a_process_read_then_reaped_before_the_read_ends_is_read_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Read as itself (1.5 s), then reaped into a JVM read after it (its 1.5 s counted a second time): the
    tree listed at the end lacks it, so the snapshot reads again."""
    runner = _FakeProc(11, "python3", cpu=1.5)
    jvm_after = _FakeProc(10, "java", cpu=4.0, reaped=3.5)
    tree = _FakeTree([[runner, jvm_after], [jvm_after], [jvm_after]])
    monkeypatch.setattr(cpu_time.psutil, "Process", tree)
    assert cpu_time.snapshot(None)["python"] == pytest.approx(3.5)
