"""The benchmark's table: a row per measure, the rows that test a ratio against a target, and the text
that prints them (`benchmarks/run.py` builds the rows, `benchmarks/real_remoting.py` adds its own)."""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.spark_reads import READ_TARGET


@dataclass
class Row:
    measure: str
    figure: float
    unit: str
    target: str
    ratio: float | None = None
    passed: bool | None = None


def at_least(name: str, figure: float, unit: str, target: float, reference: float, label: str) -> Row:
    """`figure` against `target` × `reference` (its ratio: figure ÷ reference)."""
    ratio = figure / reference if reference else 0.0
    return Row(name, figure, unit, label, ratio, ratio >= target)


def read_row(name: str, rate: float, ceiling: float, ceiling_name: str = "ceiling") -> Row:
    """A read's rate against its target, READ_TARGET × its ceiling's rate."""
    return at_least(name, rate, "msgs/s", READ_TARGET, ceiling, f"≥ {READ_TARGET} × {ceiling_name}")


def render(rows: list[Row]) -> str:
    w = max([40, *(len(r.measure) for r in rows)])  # the name column fits the longest name
    t = max([18, *(len(r.target) for r in rows)])
    head = f"{'measure':<{w}} {'figure':>14} {'unit':<7} {'target':<{t}} {'ratio':>8}  pass"
    lines = [head, "-" * len(head)]
    for r in rows:
        fig = (
            f"{r.figure:,.3f}"
            if r.unit == "×"
            else f"{r.figure:,.2f}"
            if r.unit in ("s", "µs/row", "µs/msg")
            else f"{r.figure:,.1f}"
            if r.unit in ("ms", "MiB")
            else f"{r.figure:,.0f}"
        )
        ratio = "" if r.ratio is None else f"{r.ratio:.3f}"
        ok = "" if r.passed is None else ("PASS" if r.passed else "FAIL")
        lines.append(f"{r.measure:<{w}} {fig:>14} {r.unit:<7} {r.target:<{t}} {ratio:>8}  {ok}")
    return "\n".join(lines)
