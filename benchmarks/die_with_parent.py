"""`python benchmarks/die_with_parent.py PARENT_PID PROGRAM ARGS...`: ask Linux to SIGKILL this process when
its parent (PARENT_PID) dies, then exec PROGRAM. A benchmark killed by a timeout so leaves no emulator behind.

The request is made here, in a process of its own, and not in a `preexec_fn`: that runs between fork and
exec of a process whose gRPC threads are running, where gRPC's fork handlers now and then kill or hang the
child before it execs (a benchmark run once waited 30 s for an emulator that never started)."""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1  # <sys/prctl.h>


def main(argv: list[str]) -> None:
    if len(argv) < 2 or not argv[0].isdigit():
        sys.exit("usage: python die_with_parent.py PARENT_PID PROGRAM [ARGS...]")
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != int(argv[0]):  # the parent died before the request took effect
        sys.exit(f"die_with_parent: parent {argv[0]} is gone")
    argv = argv[1:]
    os.execvp(argv[0], argv)  # the death signal request survives exec


if __name__ == "__main__":
    main(sys.argv[1:])
