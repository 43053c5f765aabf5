"""Driver-side resolution of queues and offsets: the topology from routes, and starting / ending positions
(`earliest`, `latest`, `group`, a timestamp, JSON) turned into one offset per queue with the broker's
min/max offsets, applying `failOnDataLoss` to positions outside what the broker still holds.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from .clients import RocketMQClient
from .data_loss import report_data_loss
from .errors import ConnectorError, ErrorKind, OptionError, RocketMQError
from .offsets import EARLIEST, LATEST
from .options import OffsetSpec, ReaderOptions
from .queues import MessageQueue, RouteEntry, sort_queues

log = logging.getLogger(__name__)

__all__ = ["discover_queues", "fetch_bounds", "fetch_max_offsets", "resolve_end", "resolve_start"]

T = TypeVar("T")
R = TypeVar("R")
_PARALLEL_ABOVE = 4  # queue counts above this query the brokers from a small thread pool
_MAX_THREADS = 16

Bounds = dict[MessageQueue, tuple[int, int]]


_pool_state: tuple[int, ThreadPoolExecutor] | None = None
_pool_lock = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    """This process's thread pool for per-queue RPCs, kept across calls (a stream asks every trigger; a
    pool per call started 8 threads each time). Spark forks Python workers, so a pool is per pid."""
    global _pool_state
    with _pool_lock:
        if _pool_state is None or _pool_state[0] != os.getpid():
            _pool_state = (
                os.getpid(),
                ThreadPoolExecutor(_MAX_THREADS, thread_name_prefix="rocketmq-offsets"),
            )
        return _pool_state[1]


def submit_queues(fn: Callable[[T], R], items: Sequence[T]) -> list[Future[R]]:
    """`fn` over per-queue items, started on the shared pool (the client is thread-safe); `fn` must not
    itself wait on the pool."""
    pool = _pool()
    return [pool.submit(fn, item) for item in items]


def map_queues(fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """`fn` over per-queue items (concurrently when there are many), in order."""
    if len(items) <= _PARALLEL_ABOVE:
        return [fn(q) for q in items]
    return [f.result() for f in submit_queues(fn, items)]


# Topics a running stream found without a route, until they have one again (what discover_queues warned of).
_unrouted: set[str] = set()


def discover_queues(
    client: RocketMQClient, opts: ReaderOptions, *, missing_ok: bool = False
) -> dict[MessageQueue, RouteEntry]:
    """The readable queues of every topic of option `topic`, in queue order (topic, broker, queue id).

    A topic that does not exist is an error, or, with `missing_ok` (a running stream), has no queues.
    """
    found: dict[MessageQueue, RouteEntry] = {}
    for topic in opts.topics:
        try:
            route = client.route(topic, opts.pull_timeout_ms)
        except RocketMQError as e:
            if e.kind == ErrorKind.TOPIC_NOT_FOUND and missing_ok:
                if topic not in _unrouted:  # once per outage, not at every trigger
                    _unrouted.add(topic)
                    log.warning(
                        "topic %r has no route now (deleted, or every broker serving it is down or "
                        "restarting); its queues are left out until it has one (%s)",
                        topic,
                        e,
                    )
                continue
            if e.kind == ErrorKind.TOPIC_NOT_FOUND:
                raise ConnectorError(
                    f"topic {topic!r} of option 'topic' does not exist on {opts.client_config.target} ({e})"
                ) from None
            raise
        if topic in _unrouted:
            _unrouted.discard(topic)
            log.warning("topic %r has a route again", topic)
        found.update((e.queue, e) for e in route if e.readable)
    return {k: found[k] for k in sort_queues(found)}


def fetch_bounds(client: RocketMQClient, queues: Sequence[RouteEntry], timeout_ms: int) -> Bounds:
    """(min offset, max offset) of each queue: one request per broker where the client has one
    (`broker_bounds`), else two per queue."""
    return _by_broker(
        client,
        queues,
        timeout_ms,
        lambda b: b,
        lambda q: (client.min_offset(q, timeout_ms), client.max_offset(q, timeout_ms)),
    )


def fetch_max_offsets(
    client: RocketMQClient, queues: Sequence[RouteEntry], timeout_ms: int
) -> dict[MessageQueue, int]:
    """The max offset (next offset to be written) of each queue (as `fetch_bounds`)."""
    return _by_broker(client, queues, timeout_ms, lambda b: b[1], lambda q: client.max_offset(q, timeout_ms))


def _by_broker(
    client: RocketMQClient,
    queues: Sequence[RouteEntry],
    timeout_ms: int,
    from_bounds: Callable[[tuple[int, int]], R],
    per_queue: Callable[[RouteEntry], R],
) -> dict[MessageQueue, R]:
    """A value per queue: from `client.broker_bounds`, one request per (topic, broker), concurrently; by
    `per_queue` for the queues those answers leave out."""
    groups: dict[tuple[str, str], list[RouteEntry]] = {}
    for q in queues:
        groups.setdefault((q.queue.topic, q.queue.broker), []).append(q)
    ask = lambda g: client.broker_bounds(g, timeout_ms)  # noqa: E731
    todo = list(groups.values())
    answers = [ask(g) for g in todo] if len(todo) == 1 else [f.result() for f in submit_queues(ask, todo)]
    known = {k: from_bounds(v) for answer in answers for k, v in (answer or {}).items()}
    rest = [q for q in queues if q.queue not in known]
    known.update(zip((q.queue for q in rest), map_queues(per_queue, rest), strict=True))
    return {q.queue: known[q.queue] for q in queues}


def _unknown_queues(spec: OffsetSpec, queues: Mapping[MessageQueue, RouteEntry], option: str) -> None:
    unknown = [str(k) for k, _ in spec.offsets if k not in queues]
    if unknown:
        have = ", ".join(str(k) for k in queues) or "none"
        raise OptionError(
            f"option '{option}' names queues that do not exist: {', '.join(unknown)} "
            f"(the topics' readable queues are: {have})"
        )


def _at_timestamp(
    client: RocketMQClient, spec: OffsetSpec, infos: list[RouteEntry], bounds: Bounds, timeout_ms: int
) -> dict[MessageQueue, int]:
    """Each queue's first offset stored at or after the spec's timestamp, inside [min, max]."""
    ts = spec.timestamp_ms
    assert ts is not None
    found = map_queues(lambda q: client.offset_for_timestamp(q, ts, timeout_ms), infos)
    return {
        q.queue: min(max(v, bounds[q.queue][0]), bounds[q.queue][1])
        for q, v in zip(infos, found, strict=True)
    }


def _clamp_start(key: MessageQueue, offset: int, bounds: tuple[int, int], source: str, fail: bool) -> int:
    """A starting offset inside [min, max]; outside it is data loss (below min) or a reset (above max)."""
    lo, hi = bounds
    if offset < lo:
        report_data_loss(
            f"queue {key}: the starting offset {offset} ({source}) is below the queue's earliest available "
            f"offset {lo}; messages {offset}..{lo - 1} are gone, reading from {lo}",
            fail,
        )
        return lo
    if offset > hi:
        report_data_loss(
            f"queue {key}: the starting offset {offset} ({source}) is beyond the queue's max offset {hi} "
            f"(the queue was reset or recreated); reading from {hi}",
            fail,
        )
        return hi
    return offset


def resolve_start(
    client: RocketMQClient,
    opts: ReaderOptions,
    queues: Mapping[MessageQueue, RouteEntry],
    bounds: Bounds,
) -> dict[MessageQueue, int]:
    """The first offset to read of each queue for `startingOffsets` / `startingTimestamp`.

    JSON leaves unnamed queues at earliest; `group` falls back to earliest for queues without a
    committed offset (README.md, 'Reader options'). Positions below min / above max follow `failOnDataLoss`.
    """
    spec, fail = opts.starting, opts.fail_on_data_loss
    infos = list(queues.values())
    if spec.kind == OffsetSpec.EARLIEST:
        return {k: bounds[k][0] for k in queues}
    if spec.kind == OffsetSpec.LATEST:
        return {k: bounds[k][1] for k in queues}
    if spec.kind == OffsetSpec.TIMESTAMP:
        return _at_timestamp(client, spec, infos, bounds, opts.pull_timeout_ms)
    if spec.kind == OffsetSpec.GROUP:
        committed = map_queues(
            lambda q: client.get_committed(opts.consumer_group, q, opts.pull_timeout_ms), infos
        )
        out = {}
        for q, c in zip(infos, committed, strict=True):
            if c is None:
                out[q.queue] = bounds[q.queue][0]
            else:
                source = f"committed by consumer group {opts.consumer_group!r}"
                out[q.queue] = _clamp_start(q.queue, c, bounds[q.queue], source, fail)
        missing = [str(q.queue) for q, c in zip(infos, committed, strict=True) if c is None]
        if missing:
            log.info(
                "consumer group %r has no committed offset for %s; starting them at earliest",
                opts.consumer_group,
                ", ".join(missing),
            )
        return out
    _unknown_queues(spec, queues, "startingOffsets")
    named = spec.offset_map()
    out = {}
    for k in queues:
        lo, hi = bounds[k]
        value = named.get(k, EARLIEST)
        if value == EARLIEST:
            out[k] = lo
        elif value == LATEST:
            out[k] = hi
        else:
            out[k] = _clamp_start(k, value, bounds[k], "from option 'startingOffsets'", fail)
    return out


def resolve_end(
    client: RocketMQClient,
    opts: ReaderOptions,
    queues: Mapping[MessageQueue, RouteEntry],
    bounds: Bounds,
) -> dict[MessageQueue, int]:
    """The exclusive end offset of each queue for a batch query (`endingOffsets` / `endingTimestamp`).

    JSON leaves unnamed queues at latest; an end beyond the queue's max offset is cut to it.
    """
    spec = opts.ending
    infos = list(queues.values())
    if spec.kind == OffsetSpec.LATEST:
        return {k: bounds[k][1] for k in queues}
    if spec.kind == OffsetSpec.TIMESTAMP:
        return _at_timestamp(client, spec, infos, bounds, opts.pull_timeout_ms)
    _unknown_queues(spec, queues, "endingOffsets")
    named = spec.offset_map()
    out = {}
    for k in queues:
        hi = bounds[k][1]
        value = named.get(k, LATEST)
        if value == LATEST:
            out[k] = hi
        elif value > hi:
            log.warning(
                "queue %s: ending offset %d of option 'endingOffsets' is beyond the queue's max offset %d; "
                "reading up to %d",
                k,
                value,
                hi,
                hi,
            )
            out[k] = hi
        else:
            out[k] = value
    return out
