"""The Python worker's heap, frozen out of the cyclic garbage collector once the connector is set up in it.

A reused Spark Python worker runs a full `gc.collect()` after every task (pyspark/daemon.py, `manager`);
that walks every object the worker holds: pyspark, pyarrow and the connector's modules, ~80,000 objects
costing 20–60 ms of CPU per task here, more than a small task's read. `freeze_worker_heap()` moves the
objects alive once a task has its client (modules, the client and its connections: they live as long as
the worker) to the permanent generation (`gc.freeze()`), so later collections only walk what later tasks
create. Objects frozen this way are still freed by reference counting; only cycles among them would
outlive the worker's collections. It does nothing outside a Spark worker (the driver, a user's process).
"""

from __future__ import annotations

import gc
import os
import sys

__all__ = ["freeze_worker_heap"]

_frozen_in_pid: int | None = None


def freeze_worker_heap() -> None:
    """Once per Spark Python worker process: collect the young generations, then freeze what is alive."""
    global _frozen_in_pid
    pid = os.getpid()
    if _frozen_in_pid == pid or "pyspark.worker" not in sys.modules:
        return
    _frozen_in_pid = pid
    gc.collect(1)
    gc.freeze()
