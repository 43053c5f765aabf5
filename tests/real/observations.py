"""What a conformance scenario observed of the emulator against what it observed of real RocketMQ: the
observations as dotted keys, their differences, a value as docs/deviations.md prints it, and the check
every conformance test makes (differences equal to the listed deviations, each key in the run's table)."""

from __future__ import annotations

import json
from typing import Any

from tests.real import realcluster as rc

#: {scenario: {observation path: (emulator, real, reason)}}, one protocol's or version's deviations.
Deviations = dict[str, dict[str, tuple[Any, Any, str]]]


def flatten(obs: Any, prefix: str = "") -> dict[str, Any]:
    """Nested observations as {"a.b.c": value}."""
    if isinstance(obs, dict):
        out: dict[str, Any] = {}
        for k, v in obs.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: obs}


def differences(emulator: dict, real: dict) -> dict[str, tuple[Any, Any]]:
    """Each key whose value differs (or exists on one side only): (emulator's, real's)."""
    e, r = flatten(emulator), flatten(real)
    return {k: (e.get(k), r.get(k)) for k in sorted(set(e) | set(r)) if e.get(k) != r.get(k)}


def compact(value: Any) -> str:
    """A value as docs/deviations.md writes it."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def check(
    label: str, scenario: str, emu_obs: dict, real_obs: dict, deviations: Deviations, real_name: str
) -> None:
    """Every key of both observations goes to the run's table (`label | scenario | key | emulator | real |
    mark`); the emulator and `real_name` may differ only where `deviations` lists it, with those values."""
    diff = differences(emu_obs, real_obs)
    listed = {k: (e, r) for k, (e, r, _why) in deviations.get(scenario, {}).items()}
    e_flat, r_flat = flatten(emu_obs), flatten(real_obs)
    for key in sorted(set(e_flat) | set(r_flat)):
        mark = "same" if key not in diff else ("DEVIATION (listed)" if key in listed else "DIFFERENT")
        rc.TABLE.append(
            f"{label} | {scenario} | {key} | {compact(e_flat.get(key))} | {compact(r_flat.get(key))} | {mark}"
        )
    rc.evidence(
        f"conformance {label} {scenario}: "
        + ("same" if not diff else f"{len(diff)} difference(s): {sorted(diff)}")
    )
    assert diff == listed, (
        f"{scenario}: emulator and {real_name} differ beyond docs/deviations.md\n"
        f"emulator: {emu_obs}\nreal:     {real_obs}\n"
        f"unlisted: { {k: v for k, v in diff.items() if listed.get(k) != v} }\n"
        f"listed but gone: { {k: v for k, v in listed.items() if diff.get(k) != v} }"
    )
