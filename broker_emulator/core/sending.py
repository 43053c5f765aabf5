"""Storing a send request on one broker, whatever protocol carried it (apache/rocketmq
`SendMessageProcessor`): checks, queue choice, delayed and transactional messages, durability.

Queue choice, per message: the queue the sender named (`explicit_queue`, or a non-zero queue id), else the
Guava consistent hash of its message group's Java hashCode (FIFO), else the request's one round-robin queue.
"""

from __future__ import annotations

import gzip
import time
import zlib
from dataclasses import dataclass
from itertools import repeat
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from rocketmq_protocol.hashing import guava_consistent_hash, java_string_hash

from .errors import BrokerError, ErrorKind
from .send_columns import SendColumns, message_columns, message_types
from .store.records import MessageColumns
from .validation import check_body, columns_valid, first_violation
from .waiting_rows import WaitingRows, waiting_rows

if TYPE_CHECKING:
    from .cluster import Broker, Cluster


@dataclass
class SendResult:
    """Per message, in request order: its id, its queue offset, and its transaction id (half messages only)."""

    message_ids: pa.StringArray
    queue_ids: np.ndarray
    offsets: np.ndarray
    transaction_ids: list[str] | None


def decompress(body: bytes) -> bytes:
    """A compressed body: gzip (v2 clients) or zlib (remoting clients' COMPRESSED_FLAG)."""
    return gzip.decompress(body) if body[:2] == b"\x1f\x8b" else zlib.decompress(body)


def _queue_ids(cols: SendColumns, topic: str, queues: int, explicit: bool) -> list[int]:
    """Each message's queue id (-1: the round-robin queue); BrokerError naming the first message whose
    named queue is out of range."""
    n = cols.n
    named = cols.queue_id
    given = (named or [0] * n) if explicit else named or []
    if given:  # distinct values first: a request's messages name few queues (set() is cheap on ints)
        bad = {q for q in set(given) if (q < 0 or q >= queues) and (explicit or q != 0)}
        if bad:
            i = min(map(given.index, bad))
            raise BrokerError(
                ErrorKind.QUEUE_NOT_FOUND,
                f"message #{i}: queue_id {given[i]} is outside 0..{queues - 1} of {topic}",
            )
    qids = given if explicit else [q or -1 for q in named] if named is not None else [-1] * n
    groups = cols.message_group
    if groups is None or explicit:
        return qids
    hashed = {g: guava_consistent_hash(java_string_hash(g), queues) for g in set(groups) if g is not None}
    return [
        q if q >= 0 or g is None else hashed[g] for q, g in zip(qids, groups or repeat(None, n), strict=True)
    ]


def _bodies(cols: SendColumns) -> list[bytes] | pa.Array:
    """The messages' bodies as stored: compressed ones decompressed."""
    if cols.compressed is None:
        return cols.body
    bodies = cols.body.to_pylist() if isinstance(cols.body, pa.Array) else list(cols.body)
    for i, packed in enumerate(cols.compressed):
        if packed:
            try:
                bodies[i] = decompress(bodies[i])
            except Exception as e:
                raise BrokerError(
                    ErrorKind.MESSAGE_CORRUPTED, f"message #{i}: compressed body cannot be decoded: {e}"
                ) from e
    return bodies


def _broker_checks(cols: SendColumns, max_body: int) -> None:
    """What a broker itself checks of each message (`AbstractSendMessageProcessor.msgCheck`, the store):
    a body, and its size. The other message rules are the proxy's (and the official clients')."""
    sizes = cols.body_size
    if sizes and (min(sizes) == 0 or max(sizes) > max_body):  # the message-by-message pass only to name one
        for i, size in enumerate(sizes):
            check_body(i, size, max_body)


def send(
    cluster: Cluster,
    broker: Broker,
    topic: str,
    cols: SendColumns,
    *,
    explicit_queue: bool,
    producer: str,
    proxy_checks: bool = True,
    batch_bytes: int | None = None,
) -> tuple[SendResult, int]:
    """Checks and stores the request's messages on `broker` (topic = the stored name). Returns the result
    and the store position to await for durability; raises BrokerError with nothing stored.

    `proxy_checks`: the message rules of RocketMQ 5's proxy (tags, keys, user properties, message group,
    delivery time, the topic's message type), as gRPC clients meet them; False for clients that talk to
    brokers directly (remoting), which check only the body. `batch_bytes`: the body of the batch the broker
    stores (a remoting batch's, or the one a proxy forwards for a v2 request), refused over
    `max_batch_bytes` as a broker refuses it ("message body size exceeded")."""
    if not cols.n:
        raise BrokerError(ErrorKind.MESSAGE_CORRUPTED, "the request holds no message")
    if not cluster.ensure_topic(topic):
        raise BrokerError(ErrorKind.TOPIC_NOT_FOUND, f"topic {topic} does not exist")
    store = broker.store
    cfg = store.topics.get(topic)
    if cfg is None:
        raise BrokerError(ErrorKind.TOPIC_NOT_FOUND, f"topic {topic} is not served by {broker.name}")
    if broker.faults.current.read_only or not cfg.perm & 2:
        raise BrokerError(
            ErrorKind.NO_WRITE_PERMISSION, f"{broker.name} does not accept writes to {topic} (read-only)"
        )
    if broker.faults.send_fails():
        raise BrokerError(ErrorKind.INTERNAL, f"{broker.name}: injected send failure")
    if batch_bytes is not None and batch_bytes > cluster.config.max_batch_bytes:
        raise BrokerError(
            ErrorKind.INTERNAL,
            f"message body size exceeded: a batch of {cols.n} messages is {batch_bytes} bytes as the broker "
            f"stores it, over its limit of {cluster.config.max_batch_bytes}",
        )
    now = int(time.time() * 1000)
    types = message_types(cols)
    max_body = cluster.config.max_body_size
    if not proxy_checks:
        _broker_checks(cols, max_body)
    elif not columns_valid(cols, types, max_body, now, cfg.message_type):
        first_violation(cols, types, max_body, now, topic, cfg.message_type)
    qids = _queue_ids(cols, topic, cfg.queues, explicit_queue)
    bodies = _bodies(cols)
    if -1 in qids:
        rr = broker.next_queue(topic, cfg.queues)
        qids = [rr] * len(qids) if qids.count(-1) == len(qids) else [rr if q < 0 else q for q in qids]
    mcols = message_columns(cols, bodies, types, now)
    n = cols.n
    one_queue = qids.count(qids[0]) == n
    if one_queue:
        appends: list[tuple[int, MessageColumns, np.ndarray | slice]] = [(qids[0], mcols, slice(None))]
    else:
        by_queue = np.asarray(qids)
        order = np.argsort(by_queue, kind="stable")
        groups = np.split(order, np.flatnonzero(np.diff(by_queue[order])) + 1)
        groups.sort(key=lambda idx: idx[0])  # queues in order of first appearance
        appends = [(qids[idx[0]], mcols.take(idx), idx) for idx in groups]
    offsets = np.empty(n, np.int64)
    end = 0
    tx_ids: list[str] | None = None
    for qid, qcols, idxs in appends:
        waiting = waiting_rows(qcols, now)
        if waiting is None:
            base, end_pos = store.append(topic, qid, qcols)
            offsets[idxs] = np.arange(base, base + len(qcols))
        else:
            part, end_pos, txs = _append_waiting(broker, topic, qid, qcols, waiting, producer)
            offsets[idxs] = part
            if txs:
                tx_ids = tx_ids or [""] * n
                for i, tx in zip(np.arange(n)[idxs], txs, strict=True):
                    tx_ids[int(i)] = tx
        end = max(end, end_pos)
    queue_ids = np.full(n, qids[0], np.int64) if one_queue else np.asarray(qids, np.int64)
    return SendResult(mcols.message_id, queue_ids, offsets, tx_ids), end


def _append_waiting(
    broker: Broker, topic: str, qid: int, cols: MessageColumns, waiting: WaitingRows, producer: str
) -> tuple[np.ndarray, int, list[str] | None]:
    """Appends a queue's messages where some wait: delayed ones for their time, half messages for the end
    of their transaction. Returns (per-message offsets, durable end, per-message transaction ids or None)."""
    assert broker.delay is not None and broker.transactions is not None
    n = len(cols)
    offsets = np.zeros(n, np.int64)
    end = 0
    txs: list[str] | None = None
    if len(waiting.normal):
        base, end = broker.store.append(topic, qid, cols.take(waiting.normal))
        offsets[waiting.normal] = np.arange(base, base + len(waiting.normal))
    if len(waiting.delayed):
        base, e = broker.delay.schedule(topic, qid, cols.take(waiting.delayed), waiting.due)
        offsets[waiting.delayed] = np.arange(base, base + len(waiting.delayed))
        end = max(end, e)
    if len(waiting.transactional):
        ids, base, e = broker.transactions.prepare(topic, qid, cols.take(waiting.transactional), producer)
        offsets[waiting.transactional] = np.arange(base, base + len(waiting.transactional))
        end = max(end, e)
        txs = [""] * n
        for i, tx in zip(waiting.transactional, ids, strict=True):
            txs[int(i)] = tx
    return offsets, end, txs
