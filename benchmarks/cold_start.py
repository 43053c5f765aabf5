"""The first write of a fresh session: `spark.range(N)` → a sink, timed in a new Python process with its own
Spark session, then the same write twice more (warm). The one-time cost is the first write's time minus the
best warm one.

    python -m benchmarks.cold_start --endpoints HOST:PORT[;...] [--messages 1000000] [--sink rocketmq|discard|noop]

`--sink discard` writes the same DataFrame into a Python Arrow writer that discards its batches: what Spark
itself costs the first time a Python data source writes (its Python workers, the data source lookup, the
JVM's first job); the rocketmq sink's one-time cost over that one is the connector's own (its imports, the
route, the channels, the emulator's first requests). `--sink noop` (Spark's JVM sink, no Python process)
is the JVM's part alone. `measure(spark_home=...)` runs the process against another SPARK_HOME (the one
`benchmarks/compiled_pyspark.py` builds: PySpark's modules compiled).

The session is created before the clock starts: its start (the JVM) is not part of the figure. Spark's
lookup of the installed Python data sources is part of it: it runs on a session's first use of one. Prints one
JSON object: `session_s`, `writes_s` (the three writes), `first_s`, `warm_s`, `one_time_s`, and
`cpu_s`: per write, the CPU seconds of Spark's JVM and of its Python processes (`benchmarks/cpu_time.py`),
which say whether the one-time cost is work (class loading, JIT compilation, imports) or waiting.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

from benchmarks.discard_sink import discard_source

SINKS = ("rocketmq", "discard", "noop")


def measure_here(endpoints: str, messages: int, size: int, sink: str, topic: str) -> dict[str, Any]:
    """In this (fresh) process: a session, then three timed writes."""
    t0 = time.perf_counter()
    from benchmarks.cpu_time import measured
    from benchmarks.stacks import body_frame
    from examples.spark_defaults import spark_session

    spark = spark_session(f"cold-start-{sink}")
    session_s = time.perf_counter() - t0
    try:
        opts = {"endpoints": endpoints, "topic": topic} if sink == "rocketmq" else {}
        df = body_frame(spark, messages, size, "body")
        writes, cpu = [], []
        for i in range(3):
            t = time.perf_counter()
            with measured(None) as use:
                if sink == "discard" and i == 0:
                    # The session's first use of a Python data source by name, or its first registration,
                    # starts a Python worker that looks up the installed ones (~1.9 s here, most of it
                    # importing PySpark): the rocketmq sink pays it inside its first write, so the
                    # discarding one does too.
                    spark.dataSource.register(discard_source())
                df.write.format(sink).options(**opts).mode("append").save()
            writes.append(time.perf_counter() - t)
            cpu.append({k: use.seconds[k] for k in ("jvm", "python")})
    finally:
        spark.stop()
    warm = min(writes[1:])
    return {
        "sink": sink,
        "messages": messages,
        "session_s": session_s,
        "writes_s": writes,
        "first_s": writes[0],
        "warm_s": warm,
        "one_time_s": writes[0] - warm,
        "cpu_s": cpu,
    }


def measure(
    endpoints: str,
    messages: int,
    size: int = 100,
    sink: str = "rocketmq",
    topic: str = "bench-cold",
    spark_home: str | None = None,
) -> dict[str, Any]:
    """Runs `measure_here` in a new Python process (a fresh session and JVM, under `spark_home` if given);
    its result."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    if spark_home is not None:
        env["SPARK_HOME"] = spark_home
    cmd = [sys.executable, "-m", "benchmarks.cold_start", "--endpoints", endpoints, "--sink", sink]
    cmd += ["--messages", str(messages), "--size", str(size), "--topic", topic]
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=900, check=False)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"cold start ({sink}) exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--endpoints", required=True)
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--sink", choices=SINKS, default="rocketmq")
    ap.add_argument("--topic", default="bench-cold")
    a = ap.parse_args(argv)
    print(json.dumps(measure_here(a.endpoints, a.messages, a.size, a.sink, a.topic)), flush=True)


if __name__ == "__main__":
    main()
