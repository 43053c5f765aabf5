"""What bounds the write's ratio: the same `spark.range(N)` write into the discarding writer, into
`rocketmq` (the emulator in its own process on the same cores) and into the `busy` writer, which spends the
Python CPU per row that the rocketmq write's workers spent beyond the discarding writer's, then drops the
rows (no broker).

    python -m benchmarks.write_bound [--messages 1000000] [--size 100] [--rounds 3]

The busy writer's ratio is what the rocketmq write would reach if its broker ran elsewhere; the rest of the
gap is the broker's CPU on the same two cores. Rounds are interleaved; each prints rows/s, the ratio to that
round's discarding writer and the CPU µs per row of the emulator, Spark's Python workers and its JVM.
"""

from __future__ import annotations

import argparse
import signal

from benchmarks.cpu_time import measured
from benchmarks.discard_sink import busy_source, discard_source
from benchmarks.raw_throughput import start_emulator
from benchmarks.write_throughput import range_bodies
from examples.spark_defaults import spark_session

TOPIC = "bench"


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    proc, endpoints = start_emulator(4, None, brokers=2)
    spark = spark_session("write-bound")
    results: list[dict] = []
    try:
        spark.dataSource.register(discard_source())
        spark.dataSource.register(busy_source())
        df = range_bodies(spark, args.messages, args.size)

        def timed(fmt: str, **opts: str) -> tuple[float, dict[str, float]]:
            with measured(proc.pid) as use:
                df.write.format(fmt).options(**opts).mode("append").save()
            return args.messages / use.wall, use.per_item_us(args.messages)

        timed("discard")  # warm-up: workers, imports, the emulator's route and channels
        timed("rocketmq", endpoints=endpoints, topic=TOPIC)
        for r in range(args.rounds):
            ceiling, ceiling_cpu = timed("discard")
            ours, ours_cpu = timed("rocketmq", endpoints=endpoints, topic=TOPIC)
            extra = max(ours_cpu["python"] - ceiling_cpu["python"], 0.0)
            busy, busy_cpu = timed("busy", us=f"{extra:.3f}")
            for sink, rate, cpu in (
                ("discard", ceiling, ceiling_cpu),
                ("rocketmq", ours, ours_cpu),
                (f"busy {extra:.2f} µs", busy, busy_cpu),
            ):
                print(
                    f"round {r + 1} {sink:16s} {rate:12,.0f} rows/s  ratio {rate / ceiling:5.3f}  CPU µs/row "
                    + ", ".join(f"{k} {v:.2f}" for k, v in cpu.items()),
                    flush=True,
                )
            results.append({"discard": ceiling, "rocketmq": ours, "busy": busy, "busy_us_per_row": extra})
    finally:
        spark.stop()
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    return results


if __name__ == "__main__":
    main()
