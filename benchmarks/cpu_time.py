"""Where a measure's CPU goes: the emulator, Spark's Python workers and Spark's JVM, read from /proc (psutil)
before and after, so a table row can say which of them bounds a throughput on this machine's two cores."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import psutil

GROUPS = ("emulator", "python", "jvm")
# What of the emulator group's CPU was the kernel's, and the pages its processes were given fresh (minor page
# faults): a store that grows pays the kernel for every new page, at a cost per page that depends on the
# machine's memory (README, Known limits), so these say when that cost, not the emulator's code, moved a row.
BROKER_DETAIL = ("emulator_kernel", "emulator_faults")
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_LOG_NAME = {"emulator": "emulator", "python": "Python", "jvm": "JVM"}
SPARK_MAIN = "org.apache.spark.deploy.SparkSubmit"


def _cpu(proc: psutil.Process) -> float:
    """CPU seconds of a process and of the children it has reaped (a daemon's finished workers)."""
    t = proc.cpu_times()
    return t.user + t.system + t.children_user + t.children_system


def _minor_faults(pid: int) -> int:
    """Minor page faults so far of a process (Linux /proc; 0 where unreadable)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[7])
    except (OSError, IndexError, ValueError):
        return 0


def _pid_set(broker: int | Collection[int] | None) -> frozenset[int]:
    if broker is None:
        return frozenset()
    return frozenset([broker]) if isinstance(broker, int) else frozenset(broker)


def idle_cores(groups: Sequence[Collection[int]], seconds: float) -> list[float]:
    """The CPU each group of processes spends over one common window of `seconds` in which nothing is asked of
    them, in cores (CPU seconds a second): what a broker's own background work takes from the machine
    whatever it serves."""
    procs = {pid: psutil.Process(pid) for group in groups for pid in group}
    before = {pid: _cpu(p) for pid, p in procs.items()}
    time.sleep(seconds)
    spent = {pid: _cpu(p) - before[pid] for pid, p in procs.items()}
    return [sum(spent[pid] for pid in group) / seconds for group in groups]


#: Reads of the process tree a snapshot may take while processes end under it.
_READS = 5


def snapshot(emulator_pid: int | Collection[int] | None, ignore: Collection[int] = ()) -> dict[str, float]:
    """CPU seconds so far of the emulator process (or of the given broker processes: the stack comparison's
    RocketMQ or Kafka JVMs), of this driver's Spark JVM (main class SparkSubmit: never a broker's JVM) and
    of its Python processes (the daemon and its workers, the planning and streaming-runner processes,
    living or reaped by the JVM), and the emulator group's BROKER_DETAIL. `ignore`: processes counted in no
    group (another stack's idle broker, such as the emulator while a real broker is measured, which would
    otherwise count as Spark's Python).

    A process reaped while the tree is read (a stream's runner, stopped by the JVM as its query ends) can be
    missed both as itself and in its parent's children's times, or counted in both; the tree is then read
    again, so that it counts once."""
    brokers, ignored = _pid_set(emulator_pid), frozenset(ignore)
    me = psutil.Process(os.getpid())
    out: dict[str, float] = {}
    for _ in range(_READS):
        out, whole = _read_tree(me, brokers, ignored)
        if whole:
            break
    return out


def _read_tree(
    me: psutil.Process, brokers: frozenset[int], ignored: frozenset[int]
) -> tuple[dict[str, float], bool]:
    """One read of `snapshot`'s groups, and whether every process read was still there at its end."""
    out = dict.fromkeys(GROUPS + BROKER_DETAIL, 0.0)
    procs = me.children(recursive=True)
    whole = True
    for proc in procs:
        try:
            if proc.pid in ignored:
                continue
            if proc.pid in brokers:
                t = proc.cpu_times()
                out["emulator"] += t.user + t.system + t.children_user + t.children_system
                out["emulator_kernel"] += t.system + t.children_system
                out["emulator_faults"] += _minor_faults(proc.pid)
            elif proc.name().startswith("python"):
                out["python"] += _cpu(proc)
            elif proc.name().startswith("java") and SPARK_MAIN in proc.cmdline():
                t = proc.cpu_times()
                out["jvm"] += t.user + t.system
                out["python"] += t.children_user + t.children_system  # the Python processes it reaped
        except psutil.ZombieProcess:  # ended, not reaped yet: a JVM's command line is gone
            continue
        except psutil.NoSuchProcess:
            whole = False
        except psutil.Error:
            continue
    if whole:
        whole = {p.pid for p in procs} <= {p.pid for p in me.children(recursive=True)}
    return out, whole


@dataclass
class CpuUse:
    """CPU seconds per group over one measured stretch, and its wall time."""

    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(GROUPS, 0.0))
    wall: float = 0.0
    broker: dict[str, float] = field(default_factory=lambda: dict.fromkeys(BROKER_DETAIL, 0.0))

    def per_item_us(self, items: int) -> dict[str, float]:
        """Microseconds of CPU per row or message, per group."""
        return {k: v / items * 1e6 if items else 0.0 for k, v in self.seconds.items()}

    def broker_per_item(self, items: int) -> dict[str, float]:
        """The emulator group's kernel CPU (µs) and the bytes of fresh pages it was given, per row or message."""
        if not items:
            return {"kernel_us": 0.0, "fresh_bytes": 0.0}
        return {
            "kernel_us": self.broker["emulator_kernel"] / items * 1e6,
            "fresh_bytes": self.broker["emulator_faults"] * _PAGE / items,
        }


@contextmanager
def measured(emulator_pid: int | Collection[int] | None, ignore: Collection[int] = ()) -> Iterator[CpuUse]:
    """`with measured(pid) as use:` fills `use` with the CPU each group spent inside the block (`pid`: the
    emulator's, or the broker processes' whose CPU is the "emulator" group; `ignore`: see `snapshot`)."""
    use = CpuUse()
    before, t0 = snapshot(emulator_pid, ignore), time.perf_counter()
    try:
        yield use
    finally:
        after = snapshot(emulator_pid, ignore)
        use.wall = time.perf_counter() - t0
        use.seconds = {k: max(after[k] - before[k], 0.0) for k in GROUPS}
        use.broker = {k: max(after[k] - before[k], 0.0) for k in BROKER_DETAIL}


def best_with_cpu(
    best: float,
    measure: Callable[[], float],
    emulator_pid: int | Collection[int] | None,
    items: int,
    cpu: dict[str, float],
    on_run: Callable[[float, dict[str, float]], None] | None = None,
    ignore: Collection[int] = (),
) -> float:
    """max(best, measure()); when the new run is the best, `cpu` becomes its CPU µs per item per group, and
    of the emulator's the kernel's (`emulator_kernel`). `on_run` is handed every run's rate and CPU split (to
    log them); `ignore`: see `snapshot`."""
    with measured(emulator_pid, ignore) as use:
        rate = measure()
    spent = {**use.per_item_us(items), "emulator_kernel": use.broker_per_item(items)["kernel_us"]}
    if on_run is not None:
        on_run(rate, spent)
    if rate > best:
        cpu.clear()
        cpu.update(spent)
        return rate
    return best


def split_text(spent: dict[str, float]) -> str:
    """A run's CPU µs per item as the benchmark log prints it."""
    return ", ".join(f"{_LOG_NAME[g]} {spent.get(g, 0.0):.2f}" for g in GROUPS)


def run_logger(log: Callable[[str], None], unit: str) -> Callable[[float, dict[str, float]], None]:
    """`best_with_cpu`'s `on_run` that logs a run's rate (`unit`, e.g. " msgs/s") and its CPU split."""
    return lambda rate, spent: log(f"  {rate:,.0f}{unit}; CPU µs per message: {split_text(spent)}")


@dataclass
class OwnCpu:
    """CPU seconds this process (a raw client) spent inside a `with client_cpu()` block."""

    seconds: float = 0.0


@contextmanager
def client_cpu() -> Iterator[OwnCpu]:
    """`with client_cpu() as mine:` fills `mine.seconds` with this process's CPU inside the block (its
    threads: the raw pulls' clients)."""
    me = psutil.Process()
    use = OwnCpu()
    before = sum(me.cpu_times()[:2])
    try:
        yield use
    finally:
        use.seconds = sum(me.cpu_times()[:2]) - before
