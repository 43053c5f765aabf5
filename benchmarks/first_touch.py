"""What touching new memory costs on this machine: kernel time for a fresh process to write `--mib` MiB it
has just allocated, first on its own, then right after another process freed as much, then after pauses.

    python -m benchmarks.first_touch [--mib 1024] [--pauses 5,20]

On a virtual machine whose host backs guest memory lazily and takes freed memory back, the first touch of
a page costs far more than zeroing it (the write's emulator stores every message it receives, and its kernel
time per row follows this). Each measure runs in a new process; prints one line per case.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import resource
import time


def _touch(mib: int, out: mp.Queue) -> None:
    """Allocates and writes `mib` MiB in this (new) process; puts (wall s, kernel s)."""
    start = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    block = bytearray(mib << 20)  # calloc'd: untouched until written
    step = resource.getpagesize()
    for i in range(0, len(block), step):
        block[i] = 1
    wall = time.perf_counter() - t0
    end = resource.getrusage(resource.RUSAGE_SELF)
    out.put((wall, end.ru_stime - start.ru_stime))


def touch(mib: int) -> tuple[float, float]:
    """(wall s, kernel s) of a new process touching `mib` MiB."""
    ctx = mp.get_context("spawn")
    out: mp.Queue = ctx.Queue()
    proc = ctx.Process(target=_touch, args=(mib, out))
    proc.start()
    try:
        return out.get(timeout=120)
    finally:
        proc.join(30)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--pauses", default="5,20", help="seconds to wait before the later cases")
    args = ap.parse_args(argv)
    cases = [("first", 0.0), ("right after another process freed as much", 0.0)]
    cases += [(f"{p} s after that", float(p)) for p in args.pauses.split(",") if p]
    for label, pause in cases:
        time.sleep(pause)
        wall, kernel = touch(args.mib)
        print(
            f"{args.mib} MiB touched by a new process, {label}: wall {wall:.2f} s, kernel {kernel:.2f} s "
            f"({kernel / (args.mib << 20) * 1e9:.2f} ns per byte)",
            flush=True,
        )


if __name__ == "__main__":
    main()
