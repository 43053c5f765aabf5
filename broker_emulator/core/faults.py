"""Per-broker fault injection (docs/design.md, 'Faults'): down, added latency, send error rate, read-only."""

from __future__ import annotations

import random
import threading
from dataclasses import asdict, dataclass


@dataclass
class Faults:
    down: bool = False
    latency_ms: int = 0
    error_rate: float = 0.0
    read_only: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


class FaultState:
    """Thread-safe fault settings of one broker; unspecified keywords keep their values."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.current = Faults()
        self._rng = random.Random()

    def set(
        self,
        down: bool | None = None,
        latency_ms: int | None = None,
        error_rate: float | None = None,
        read_only: bool | None = None,
    ) -> Faults:
        if latency_ms is not None and latency_ms < 0:
            raise ValueError(f"latency_ms must be >= 0, got {latency_ms}")
        if error_rate is not None and not 0.0 <= error_rate <= 1.0:
            raise ValueError(f"error_rate must be within [0, 1], got {error_rate}")
        with self._lock:
            c = self.current
            self.current = Faults(
                c.down if down is None else bool(down),
                c.latency_ms if latency_ms is None else int(latency_ms),
                c.error_rate if error_rate is None else float(error_rate),
                c.read_only if read_only is None else bool(read_only),
            )
            return self.current

    def clear(self) -> Faults:
        with self._lock:
            self.current = Faults()
            return self.current

    def send_fails(self) -> bool:
        rate = self.current.error_rate
        return rate > 0 and self._rng.random() < rate
