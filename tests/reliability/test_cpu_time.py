"""`benchmarks/cpu_time.py` attributes CPU to the process that spent it: the emulator's pid apart from this
process's other Python children."""

from __future__ import annotations

import select
import subprocess
import sys

import pytest

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
