"""connector.worker_heap: the heap is frozen once in a Spark Python worker, never in another process."""

from __future__ import annotations

import subprocess
import sys

_PROBE = """
import gc, sys
from connector.worker_heap import freeze_worker_heap
freeze_worker_heap()
before = gc.get_freeze_count()
if {in_worker}:
    sys.modules["pyspark.worker"] = sys  # what a Spark Python worker has imported
freeze_worker_heap()
first = gc.get_freeze_count()
junk = [[] for _ in range(1000)]
freeze_worker_heap()
print(before, first, gc.get_freeze_count())
"""


def _counts(in_worker: bool) -> list[int]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE.format(in_worker=in_worker)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return [int(x) for x in out.stdout.split()]


def test_a_spark_worker_freezes_its_heap_once() -> None:
    before, first, again = _counts(in_worker=True)
    assert before == 0 and first > 1000, (before, first)
    assert again == first  # objects made after the first freeze stay collectable


def test_any_other_process_is_left_alone() -> None:
    assert _counts(in_worker=False) == [0, 0, 0]
