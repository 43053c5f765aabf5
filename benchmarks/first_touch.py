"""What touching new memory costs on this machine: kernel time for a new process to write `--mib` MiB of
fresh anonymous memory, in 2 MiB transparent huge pages and in 4 KiB pages, after a pause (memory freed a
while ago) and right after another process freed as much.

    python -m benchmarks.first_touch [--mib 1024] [--pause 20]

On a virtual machine whose host backs guest memory lazily and takes freed memory back, faulting in a huge
page can cost far more than zeroing it. A broker stores every message it receives, so its kernel time per
message follows this (the emulator's CLI turns transparent huge pages off for its process). Each case runs
in a new process; prints one line per case. Linux only.
"""

from __future__ import annotations

import argparse
import mmap
import multiprocessing as mp
import resource
import time

import psutil

STEP_MIB = 256


def memory_in_use_mib() -> float:
    """The machine's memory in use (total less available), MiB."""
    vm = psutil.virtual_memory()
    return (vm.total - vm.available) / (1 << 20)


def _touch(mib: int, huge: bool, out: mp.Queue) -> None:
    """Maps `mib` MiB, advises huge pages or not, writes one byte per page; puts (wall s, kernel s)."""
    size = mib << 20
    region = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    region.madvise(mmap.MADV_HUGEPAGE if huge else mmap.MADV_NOHUGEPAGE)
    start = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    for i in range(0, size, mmap.PAGESIZE):
        region[i] = 1
    wall = time.perf_counter() - t0
    end = resource.getrusage(resource.RUSAGE_SELF)
    region.close()
    out.put((wall, end.ru_stime - start.ru_stime))


def touch(mib: int, huge: bool) -> tuple[float, float]:
    """(wall s, kernel s) of a new process touching `mib` MiB in huge pages or small ones."""
    ctx = mp.get_context("spawn")
    out: mp.Queue = ctx.Queue()
    proc = ctx.Process(target=_touch, args=(mib, huge, out))
    proc.start()
    try:
        return out.get(timeout=120)
    finally:
        proc.join(30)


def held(max_mib: int) -> None:
    """Writes STEP_MIB MiB at a time in 4 KiB pages, keeping all of it, up to `max_mib`; prints each step's
    kernel µs per page beside the machine's memory in use before it."""
    regions = []
    try:
        while len(regions) * STEP_MIB < max_mib:
            in_use = memory_in_use_mib()
            region = mmap.mmap(-1, STEP_MIB << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
            region.madvise(mmap.MADV_NOHUGEPAGE)
            start = resource.getrusage(resource.RUSAGE_SELF)
            for i in range(0, STEP_MIB << 20, mmap.PAGESIZE):
                region[i] = 1
            kernel = resource.getrusage(resource.RUSAGE_SELF).ru_stime - start.ru_stime
            regions.append(region)
            print(
                f"holding {(len(regions) - 1) * STEP_MIB:5d} MiB, the machine's memory in use {in_use:7,.0f} MiB: "
                f"{kernel / ((STEP_MIB << 20) // mmap.PAGESIZE) * 1e6:6.2f} µs per new page",
                flush=True,
            )
    finally:
        for region in regions:
            region.close()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--pause", type=float, default=20.0, help="seconds idle before each first case")
    ap.add_argument("--held", type=int, metavar="MIB", help="hold up to MIB MiB, costing each new step")
    args = ap.parse_args(argv)
    if args.held:
        held(args.held)
        return
    for huge in (True, False):
        pages = "2 MiB huge pages" if huge else "4 KiB pages"
        for label, pause in ((f"after {args.pause:g} s idle", args.pause), ("right after a free", 0.0)):
            time.sleep(pause)
            wall, kernel = touch(args.mib, huge)
            print(
                f"{args.mib} MiB in {pages}, {label}: wall {wall:.2f} s, kernel {kernel:.2f} s "
                f"({kernel / (args.mib << 20) * 1e9:.2f} ns per byte)",
                flush=True,
            )


if __name__ == "__main__":
    main()
