"""The heap of a Python process Spark runs, frozen out of the cyclic garbage collector once the connector is
set up in it.

Spark runs Python in processes forked by its daemon: the tasks' workers (`pyspark.worker`) and, for a
Python data source, the processes that create it, plan a read, create a writer and commit a write
(`pyspark.sql.worker.*`). Each is reused, and runs a full `gc.collect()` after every task it serves
(pyspark/daemon.py, `manager`); that walks every object the process holds: pyspark, pyarrow and the
connector's modules, ~80,000 objects, 20–60 ms of CPU each time here. A batch read pays it in its create
and plan processes and in every task's worker; a small task's read costs less. `freeze_worker_heap()`
moves the objects alive once the connector is set up (modules, a worker's client and its connections:
they live as long as the process) to the permanent generation (`gc.freeze()`), so later collections only
walk what later calls create. Frozen objects are still freed by reference counting; only cycles among
them would outlive the collections. It does nothing outside a process Spark runs (the driver, a user's
process): every one of Spark's Python worker modules imports `pyspark.worker_util`, and nothing else does.

A later call freezes again when the process has imported modules since: PySpark's write task imports
pandas after the writer returns (`pa.array` on its commit message), which left ~30,000 objects unfrozen
and every later task of that worker, reads included, paid a 50 ms collection after it. Module objects
live as long as the process, and a task starts right after the previous one's full collection, so what
is frozen then is what the process keeps anyway.

With glibc the same call also keeps freed memory in the worker (`keep_freed_memory`): by default glibc
hands memory back to the kernel as soon as a few hundred KiB to a few MiB are free (heap top trimming,
buffers above the mmap threshold unmapped on free), so every pull's multi-MiB response and Arrow buffers
are page-faulted in afresh: 0.03–0.05 minor faults and 0.08–0.12 µs of system time per message in a
1M-message bulk read here. Keeping up to 64 MiB removes both: a raw bulk read outside Spark with the same
thresholds went from 4.8–5.6M to 6.3–7.1M msgs/s, a Spark batch read's Python CPU from 0.50–0.58 to
0.44–0.45 µs per message; the peak worker RSS of a 2 GB backlog read went from 317 to 325 MiB.

It also caps glibc's arenas at one (`M_ARENA_MAX`): the threads started afterwards (the client's connection
readers, each read task's prefetch thread) allocate from the main arena, where the thresholds above keep
freed memory, instead of from arenas of their own, where what one pull freed was page-faulted in afresh by
later ones. A worker that had also written and read a second cluster took 18,000–25,000 minor faults
and 0.16–0.47 s of system time in each of three `nameServer` batch reads of 1,000,000 messages in a row;
with the cap 1,900–3,400 and 0.07–0.17 s in the first and a few hundred after. Python's small objects come
from pymalloc and Arrow's buffers from Arrow's own pool, so the one arena serves the large buffers only.
"""

from __future__ import annotations

import ctypes
import gc
import os
import platform
import sys

__all__ = ["freeze_worker_heap"]

_frozen_in_pid: int | None = None
_modules_at_freeze = 0


#: Imported by every one of PySpark's Python worker modules (tasks, data source planning and commits,
#: streaming runners), by none of its driver-side ones.
_SPARK_WORKER_MODULE = "pyspark.worker_util"


def freeze_worker_heap() -> None:
    """In a Python process Spark runs, at the start of a task or of a data source call: collect the young
    generations and freeze what is alive, the first time and again whenever modules were imported since."""
    global _frozen_in_pid, _modules_at_freeze
    pid, modules = os.getpid(), len(sys.modules)
    if (_frozen_in_pid == pid and modules == _modules_at_freeze) or _SPARK_WORKER_MODULE not in sys.modules:
        return
    first = _frozen_in_pid != pid
    _frozen_in_pid, _modules_at_freeze = pid, modules
    gc.collect(1)
    gc.freeze()
    if first:
        keep_freed_memory()


_M_TRIM_THRESHOLD = -1  # glibc malloc.h: free heap top above this goes back to the kernel
_M_MMAP_THRESHOLD = -3  # glibc malloc.h: allocations above this are mmapped, and unmapped on free
_M_ARENA_MAX = -8  # glibc malloc.h: the most arenas threads allocate from


def keep_freed_memory() -> None:
    """glibc only: keep up to 64 MiB of freed memory, heap-allocate buffers up to 32 MiB, and let the
    threads started from now on allocate from the arenas that exist (the main one in a fresh worker)."""
    if platform.libc_ver()[0] != "glibc":
        return
    libc = ctypes.CDLL(None)
    libc.mallopt(_M_TRIM_THRESHOLD, 64 << 20)
    libc.mallopt(_M_MMAP_THRESHOLD, 32 << 20)
    libc.mallopt(_M_ARENA_MAX, 1)
