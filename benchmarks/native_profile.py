"""Where a batch read's CPU goes, function by function: Linux `perf` samples of the emulator and of Spark's
Python processes while `spark.read.format("rocketmq")` → `noop` repeats, counted per process group and
symbol (C functions of Python, the C scan, Arrow, libc, the kernel's socket copies) and scaled to µs per
message with each group's CPU from /proc (`benchmarks/cpu_time.py`).

    python -m benchmarks.native_profile [--remoting] [--messages N] [--seconds S] [--top K]

Spark's JVM is not sampled (its compiled code has no symbols without an agent); its CPU per message is
printed as measured. Python code shows as the interpreter's own functions (`_PyEval_EvalFrameDefault`),
never by Python function: py-spy or cProfile name those, perf names what they cannot (kernel copies,
libc, C extensions). Needs `perf` allowed to sample other processes (root, or
`kernel.perf_event_paranoid` ≤ 1); says so and exits 2 otherwise.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

#: perf's sampling frequency (Hz per CPU).
FREQUENCY = 999


@dataclass(frozen=True)
class Entry:
    """One symbol's share of its group's samples and its µs per message."""

    symbol: str
    library: str
    share: float
    us_per_message: float


def perf_unavailable() -> str | None:
    """Why `perf` cannot sample other processes here, or None when it can."""
    if shutil.which("perf") is None:
        return "perf is not installed (linux-tools / linux-perf)"
    try:
        with open("/proc/sys/kernel/perf_event_paranoid") as f:
            paranoid = int(f.read().strip())
    except (OSError, ValueError):
        paranoid = 2
    if os.geteuid() != 0 and paranoid > 1:
        return f"kernel.perf_event_paranoid is {paranoid}: sampling other processes needs ≤ 1 or root"
    return None


def parse_samples(lines: Iterable[str]) -> Counter[tuple[int, str, str]]:
    """`perf script -F pid,ip,sym,dso` lines ("  9713  7f01a2b3c4d5 memcpy (/usr/lib/libc.so.6)") → samples per
    (pid, symbol, library file name); lines that are not samples are skipped."""
    out: Counter[tuple[int, str, str]] = Counter()
    for line in lines:
        fields = line.split(None, 2)
        if len(fields) < 3 or not fields[0].isdigit():
            continue
        sym, _, dso = fields[2].strip().rpartition(" (")
        if not dso.endswith(")"):
            sym, dso = fields[2].strip(), "[unknown])"
        out[int(fields[0]), sym or "[unknown]", os.path.basename(dso[:-1])] += 1
    return out


def summarize(
    samples: Mapping[tuple[int, str, str], int],
    group_of: Mapping[int, str],
    us_per_message: Mapping[str, float],
    top: int,
) -> dict[str, list[Entry]]:
    """Per group (its pids in `group_of`; other pids are left out): its `top` symbols by samples, each with
    its share of the group's samples and that share of the group's CPU µs per message."""
    per_group: dict[str, Counter[tuple[str, str]]] = {}
    for (pid, sym, lib), n in samples.items():
        group = group_of.get(pid)
        if group is not None:
            per_group.setdefault(group, Counter())[sym, lib] += n
    out: dict[str, list[Entry]] = {}
    for group, counts in per_group.items():
        total = sum(counts.values())
        cpu = us_per_message.get(group, 0.0)
        out[group] = [
            Entry(sym, lib, n / total, n / total * cpu) for (sym, lib), n in counts.most_common(top)
        ]
    return out


def render(profile: Mapping[str, list[Entry]], us_per_message: Mapping[str, float], title: str) -> str:
    """The profile as printed: each group's CPU per message, then its top symbols."""
    lines = [title]
    for group in ("emulator", "python"):
        entries = profile.get(group, [])
        lines.append(f"{group}: {us_per_message.get(group, 0.0):.3f} µs per message")
        for e in entries:
            lines.append(f"  {e.us_per_message:7.4f} µs  {e.share:6.1%}  {e.symbol}  [{e.library}]")
    lines.append(f"jvm: {us_per_message.get('jvm', 0.0):.3f} µs per message (not sampled)")
    return "\n".join(lines)


def _record(pids: list[int], out: str) -> subprocess.Popen:
    return subprocess.Popen(
        ["perf", "record", "-F", str(FREQUENCY), "-o", out, "-p", ",".join(map(str, pids))],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _script(data: str) -> list[str]:
    proc = subprocess.run(
        ["perf", "script", "-i", data, "-F", "pid,ip,sym,dso"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return proc.stdout.splitlines()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--remoting", action="store_true", help="read over nameServer (default: gRPC)")
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--seconds", type=float, default=20.0, help="how long the reads are sampled")
    parser.add_argument("--top", type=int, default=15, help="symbols listed per group")
    args = parser.parse_args(argv)
    why = perf_unavailable()
    if why:
        print(f"native_profile: {why}", file=sys.stderr)
        return 2

    from benchmarks import raw_throughput as rt
    from benchmarks import spark_reads
    from benchmarks.cpu_time import measured
    from examples.spark_defaults import spark_session

    proc, endpoints = rt.start_emulator(4, None, brokers=2)
    spark = None
    try:
        for ep in endpoints.split(";"):
            rt.bench_send(ep, rt.build_requests(args.messages // 2, 100, 1000, 4), 4)
        target: str | dict[str, str] = endpoints
        if args.remoting:
            if rt.NAME_SERVER is None:
                raise RuntimeError("the emulator printed no name server")
            target = {"nameServer": rt.NAME_SERVER}
        spark = spark_session("native-profile")

        def read() -> float:
            return spark_reads.batch_read(spark, target, rt.TOPIC, args.messages)

        for _ in range(3):  # untimed: the first reads pay one-time costs (JIT, workers, the emulator's cache)
            read()
        workers = [p.pid for p in spark_reads.python_workers()]
        with tempfile.TemporaryDirectory(prefix="native-profile-") as tmp:
            data = os.path.join(tmp, "perf.data")
            recorder = _record([proc.pid, *workers], data)
            reads, rates = 0, []
            try:
                time.sleep(0.5)  # perf attached
                with measured(proc.pid) as use:
                    deadline = time.monotonic() + args.seconds
                    while reads == 0 or time.monotonic() < deadline:
                        rates.append(read())
                        reads += 1
            finally:
                recorder.send_signal(signal.SIGINT)
                recorder.wait(timeout=120)
            us = use.per_item_us(reads * args.messages)
            samples = parse_samples(_script(data))
            # every other sampled process is Spark's Python: a worker or one the daemon forked during the reads
            group_of = {pid: "emulator" if pid == proc.pid else "python" for pid, _, _ in samples}
            profile = summarize(samples, group_of, us, args.top)
        protocol = "nameServer" if args.remoting else "gRPC"
        title = (
            f"batch read of {args.messages:,} over {protocol}, {reads} reads sampled "
            f"({min(rates):,.0f}–{max(rates):,.0f} msgs/s), perf at {FREQUENCY} Hz:"
        )
        print(render(profile, us, title))
        return 0
    finally:
        if spark is not None:
            spark.stop()
        proc.kill()
        proc.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(main())
