"""connector.worker_heap: the heap is frozen in a Spark Python worker (again after new imports), never in another
process."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

_PROBE = """
import gc, sys
from connector.worker_heap import freeze_worker_heap
freeze_worker_heap()
before = gc.get_freeze_count()
if {in_worker}:
    sys.modules["pyspark.worker_util"] = sys  # what a Spark Python worker has imported
freeze_worker_heap()
first = gc.get_freeze_count()
junk = [[] for _ in range(1000)]
freeze_worker_heap()
again = gc.get_freeze_count()
import json.tool  # a module imported by a later task, e.g. pandas by PySpark's write task
freeze_worker_heap()
after_import = gc.get_freeze_count()
more_junk = [[] for _ in range(1000)]
freeze_worker_heap()
print(before, first, again, after_import, gc.get_freeze_count())
"""


def _completed(code: str) -> subprocess.CompletedProcess[str]:
    """`code` run to its end in a fresh interpreter, its output captured."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out


def _python(code: str) -> list[int]:
    """The integers `code` prints, run in a fresh interpreter."""
    return [int(x) for x in _completed(code).stdout.split()]


def _run(probe: str, in_worker: bool) -> list[int]:
    """The integers `probe` prints, run in a fresh interpreter that looks like a Spark worker or not."""
    return _python(probe.format(in_worker=in_worker))


def _counts(in_worker: bool) -> list[int]:
    return _run(_PROBE, in_worker)


def test_a_spark_worker_freezes_its_heap_and_again_only_after_new_imports() -> None:
    before, first, again, after_import, last = _counts(in_worker=True)
    assert before == 0 and first > 1000, (before, first)
    assert again == first  # objects made after the first freeze stay collectable
    assert after_import > again  # the new modules' objects are frozen too
    assert last == after_import  # and later objects again stay collectable


def test_any_other_process_is_left_alone() -> None:
    assert _counts(in_worker=False) == [0, 0, 0, 0, 0]


# Spark's Python processes: the tasks' workers, and a Python data source's create, plan, writer and commit
# processes (each reused, each running a full collection after every call it serves).
_SPARK_PROCESSES = [
    "pyspark.worker",
    "pyspark.sql.worker.create_data_source",
    "pyspark.sql.worker.plan_data_source_read",
    "pyspark.sql.worker.write_into_data_source",
    "pyspark.sql.worker.commit_data_source_write",
    "pyspark.sql.streaming.python_streaming_source_runner",
]

_HOOKS_PROBE = """
import gc, importlib
for module in {modules!r}:
    importlib.import_module(module)
import connector.worker_heap as heap
from connector.datasource import RocketMQDataSource
from connector.schema import SCHEMA
from pyspark.sql.types import BinaryType, StructField, StructType
ROWS = StructType([StructField("body", BinaryType())])
source = RocketMQDataSource({{"endpoints": "127.0.0.1:1", "topic": "t"}})
calls = {{
    "schema": lambda: source.schema(),
    "reader": lambda: source.reader(SCHEMA),
    "streamReader": lambda: source.streamReader(SCHEMA),
    "writer": lambda: source.writer(ROWS, False),
    "streamWriter": lambda: source.streamWriter(ROWS, False),
}}
frozen = []
for call in calls.values():
    gc.unfreeze()
    heap._frozen_in_pid = None  # each hook as the first call in a new process of Spark's
    call()
    frozen.append(gc.get_freeze_count())
print(*frozen)
"""


@pytest.mark.parametrize("module", _SPARK_PROCESSES)
def test_the_sources_hooks_freeze_the_heap_of_each_of_sparks_python_processes(module: str) -> None:
    """Importing the module Spark runs a process with is what makes it one of Spark's (the real modules of
    the pinned PySpark); then every hook of the data source freezes the heap before its work."""
    frozen = _python(_HOOKS_PROBE.format(modules=[module]))
    assert len(frozen) == 5 and min(frozen) > 1000, frozen


def test_the_sources_hooks_leave_the_driver_alone() -> None:
    """The user's process: PySpark's session, data source and streaming modules, no worker module."""
    driver = ["pyspark.sql", "pyspark.sql.session", "pyspark.sql.datasource", "pyspark.sql.streaming"]
    assert _python(_HOOKS_PROBE.format(modules=driver)) == [0, 0, 0, 0, 0]


_FAULTS_PROBE = """
import resource, sys
from connector.worker_heap import freeze_worker_heap
if {in_worker}:
    sys.modules["pyspark.worker_util"] = sys
freeze_worker_heap()

def cycle():
    for size in (3 << 20, 9 << 20, 5 << 20, 20 << 20, 2 << 20, 12 << 20):  # a pull's buffers, varying
        buffer = b"x" * size  # writes every page
        del buffer

cycle()
start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    cycle()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - start)
"""


def _reuse_faults(in_worker: bool) -> int:
    return _run(_FAULTS_PROBE, in_worker)[0]


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc thresholds are set on glibc only")
def test_a_spark_worker_reuses_freed_buffers_without_page_faults() -> None:
    # glibc's defaults: freed multi-MiB buffers go back to the kernel.
    default = _reuse_faults(in_worker=False)
    assert default >= 1000, default
    assert _reuse_faults(in_worker=True) < default // 10


_ARENAS_PROBE = """
import ctypes, sys, threading
from connector.worker_heap import freeze_worker_heap
if {in_worker}:
    sys.modules["pyspark.worker_util"] = sys
freeze_worker_heap()
together = threading.Barrier(3)

def allocate():  # a read task's reader or prefetch thread: large buffers, while the others hold theirs
    buffers = [bytearray(1 << 20) for _ in range(4)]
    together.wait(timeout=30)
    del buffers

threads = [threading.Thread(target=allocate) for _ in range(3)]
for t in threads:
    t.start()
for t in threads:
    t.join()
ctypes.CDLL(None).malloc_stats()  # a paragraph per arena, on stderr
"""


def _arenas(in_worker: bool) -> int:
    stats = _completed(_ARENAS_PROBE.format(in_worker=in_worker)).stderr
    return sum(line.startswith("Arena ") for line in stats.splitlines())


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc arenas are capped on glibc only")
def test_threads_a_spark_worker_starts_later_allocate_from_its_main_arena() -> None:
    # glibc's default: each thread allocating while the others do gets an arena of its own
    assert _arenas(in_worker=False) == 4
    assert _arenas(in_worker=True) == 1
