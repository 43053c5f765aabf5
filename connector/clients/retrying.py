"""The retry rule both protocol clients share: attempts over a list of servers until a deadline, with
jittered exponential backoff after each full round, and the error a user sees when time runs out."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from ..errors import ConnectorError, RetriesExhaustedError

log = logging.getLogger(__name__)

BACKOFF_INITIAL_S = 0.05
BACKOFF_MAX_S = 1.0

R = TypeVar("R")


class Transient(Exception):
    """An attempt failed in a way worth retrying (unreachable, timed out, a busy code); carries the cause."""


def call_with_retries(
    rpc: str,
    targets: Callable[[], Sequence[str]],
    attempt: Callable[[str, float], R],
    timeout_ms: int,
    *,
    extra_wait_s: float = 0.0,
    exhausted_hint: Callable[[str], str] = lambda last: "",
) -> tuple[R, str]:
    """Runs `attempt(target, seconds)` on the targets in turn until one returns, or raises
    RetriesExhaustedError once `timeout_ms` has passed. Only `Transient` is retried; any other exception
    propagates. Each attempt gets a third of the budget (at least 1 s) plus `extra_wait_s` (a held pull's
    suspension), never more than what remains. Returns the result and the target that gave it."""
    total_s = timeout_ms / 1000.0
    deadline = time.monotonic() + total_s
    backoff = BACKOFF_INITIAL_S
    attempts = 0
    last = "no attempt was made"
    while True:
        round_targets = list(targets())
        if not round_targets:
            raise ConnectorError(f"{rpc}: no server to call")
        for target in round_targets:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RetriesExhaustedError(
                    f"{rpc} on {', '.join(round_targets)} did not succeed within {timeout_ms} ms "
                    f"({attempts} attempts); last error: {last}{exhausted_hint(last)}"
                )
            per_attempt = min(remaining, max(1.0, total_s / 3) + extra_wait_s)
            attempts += 1
            try:
                return attempt(target, per_attempt), target
            except Transient as e:
                last = str(e)
            log.debug("%s attempt %d failed (%s); retrying", rpc, attempts, last)
        time.sleep(min(backoff * random.uniform(0.8, 1.2), max(deadline - time.monotonic(), 0.0)))
        backoff = min(backoff * 2, BACKOFF_MAX_S)


def tls_handshake_message(rpc: str, target: str, details: str, tls: bool) -> str:
    """The message of a failed TLS handshake: a configuration error, not worth retrying."""
    if tls:
        advice = (
            "the server may not serve TLS (then set option 'tls' to 'false'), or its certificate is not "
            "trusted (set option 'tlsCaFile' to the PEM file of its CA) or does not name the host"
        )
    else:
        advice = "the server expects TLS: set option 'tls' to 'true'"
    return f"{rpc} on {target} failed: the TLS handshake failed ({details}); {advice}"
