"""`benchmarks/die_with_parent.py`: the program it execs gets SIGKILL when the process that started it dies,
and otherwise runs as if started directly (same pid, arguments, stdout)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil

from benchmarks import die_with_parent

# Starts the launcher around a long sleep, waits until the sleeper runs, says its pid, then exits without
# stopping it.
PARENT = """
import os, subprocess, sys
sleeper = "print('up', flush=True); import time; time.sleep(60)"
child = subprocess.Popen(
    [sys.executable, sys.argv[1], str(os.getpid()), sys.executable, "-c", sleeper],
    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
)
assert child.stdout.readline() == "up\\n"
print(child.pid, flush=True)
"""


def test_the_program_runs_in_the_launchers_process_with_its_arguments():
    program = "import os, sys; print(os.getpid(), sys.argv[1:])"
    launcher = [
        sys.executable,
        die_with_parent.__file__,
        str(os.getpid()),
        sys.executable,
        "-c",
        program,
        "a b",
    ]
    proc = subprocess.Popen(launcher, stdout=subprocess.PIPE, text=True)
    stdout, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert stdout.strip() == f"{proc.pid} ['a b']"


def test_the_program_dies_with_its_parent():
    parent = subprocess.run(
        [sys.executable, "-c", PARENT, die_with_parent.__file__],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    pid = int(parent.stdout)
    try:
        deadline = time.monotonic() + 10
        while psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
            assert time.monotonic() < deadline, f"pid {pid} outlived its parent by 10 s"
            time.sleep(0.05)
    finally:
        if psutil.pid_exists(pid):
            os.kill(pid, 9)


def test_a_parent_already_gone_is_refused():
    launcher = [sys.executable, die_with_parent.__file__, "1", sys.executable, "-c", "print('ran')"]
    proc = subprocess.run(launcher, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 1
    assert "parent 1 is gone" in proc.stderr and "ran" not in proc.stdout


def test_no_program_is_a_usage_error():
    proc = subprocess.run(
        [sys.executable, die_with_parent.__file__], capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 1 and "usage" in proc.stderr
