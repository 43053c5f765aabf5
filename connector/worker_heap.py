"""The Python worker's heap, frozen out of the cyclic garbage collector once the connector is set up in it.

A reused Spark Python worker runs a full `gc.collect()` after every task (pyspark/daemon.py, `manager`);
that walks every object the worker holds: pyspark, pyarrow and the connector's modules, ~80,000 objects
costing 20–60 ms of CPU per task here, more than a small task's read. `freeze_worker_heap()` moves the
objects alive once a task has its client (modules, the client and its connections: they live as long as
the worker) to the permanent generation (`gc.freeze()`), so later collections only walk what later tasks
create. Objects frozen this way are still freed by reference counting; only cycles among them would
outlive the worker's collections. It does nothing outside a Spark worker (the driver, a user's process).

A later task freezes again when the worker has imported modules since: PySpark's write task imports pandas
after the writer returns (`pa.array` on its commit message), which left ~30,000 objects unfrozen and every
later task of that worker, reads included, paid a 50 ms collection after it. Module objects live as long
as the worker, and a task starts right after the previous one's full collection, so what is frozen then
is what the worker keeps anyway.

With glibc the same call also keeps freed memory in the worker (`keep_freed_memory`): by default glibc
hands memory back to the kernel as soon as a few hundred KiB to a few MiB are free (heap top trimming,
buffers above the mmap threshold unmapped on free), so every pull's multi-MiB response and Arrow buffers
are page-faulted in afresh: 0.03–0.05 minor faults and 0.08–0.12 µs of system time per message in a
1M-message bulk read here. Keeping up to 64 MiB removes both: a raw bulk read outside Spark with the same
thresholds went from 4.8–5.6M to 6.3–7.1M msgs/s, a Spark batch read's Python CPU from 0.50–0.58 to
0.44–0.45 µs per message; the peak worker RSS of a 2 GB backlog read went from 317 to 325 MiB.
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


def freeze_worker_heap() -> None:
    """In a Spark Python worker, at a task's start: collect the young generations and freeze what is alive,
    the first time and again whenever modules were imported since the last freeze."""
    global _frozen_in_pid, _modules_at_freeze
    pid, modules = os.getpid(), len(sys.modules)
    if (_frozen_in_pid == pid and modules == _modules_at_freeze) or "pyspark.worker" not in sys.modules:
        return
    first = _frozen_in_pid != pid
    _frozen_in_pid, _modules_at_freeze = pid, modules
    gc.collect(1)
    gc.freeze()
    if first:
        keep_freed_memory()


_M_TRIM_THRESHOLD = -1  # glibc malloc.h: free heap top above this goes back to the kernel
_M_MMAP_THRESHOLD = -3  # glibc malloc.h: allocations above this are mmapped, and unmapped on free


def keep_freed_memory() -> None:
    """glibc only: keep up to 64 MiB of freed memory and heap-allocate buffers up to 32 MiB."""
    if platform.libc_ver()[0] != "glibc":
        return
    libc = ctypes.CDLL(None)
    libc.mallopt(_M_TRIM_THRESHOLD, 64 << 20)
    libc.mallopt(_M_MMAP_THRESHOLD, 32 << 20)
