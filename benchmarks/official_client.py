"""The official `rocketmq-python-client` against the same emulator (for comparison): its Producer's
send loop and its SimpleConsumer's receive + ack loop, each bounded in time and count (they are slow)."""

from __future__ import annotations

import time
from collections import deque

from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

SEND_WINDOW = 32  # async sends outstanding (the official client's own request timeout bounds more)
RECEIVE_BATCH = 32
INVISIBLE_S = 30


def _config(endpoints: str) -> ClientConfiguration:
    return ClientConfiguration(endpoints, Credentials(), request_timeout=10)


def producer_rate(
    endpoints: str, topic: str, size: int, seconds: float, max_messages: int
) -> tuple[float, int]:
    """`Producer.send_async` with SEND_WINDOW outstanding, for `seconds` or `max_messages`; (msgs/s, sent)."""
    producer = Producer(_config(endpoints), (topic,))
    producer.startup()
    try:
        body = b"x" * size

        def message() -> Message:
            m = Message()
            m.topic = topic
            m.body = body
            return m

        producer.send(message())  # route and channel outside the timing
        window: deque = deque()
        sent = 0
        t0 = time.perf_counter()
        deadline = t0 + seconds
        while sent < max_messages and time.perf_counter() < deadline:
            window.append(producer.send_async(message()))
            sent += 1
            if len(window) >= SEND_WINDOW:
                window.popleft().result(timeout=30)
        while window:
            window.popleft().result(timeout=30)
        dt = time.perf_counter() - t0
    finally:
        producer.shutdown()
    return sent / dt, sent + 1


def simple_consumer_rate(
    endpoints: str, topic: str, group: str, expected: int, seconds: float
) -> tuple[float, int]:
    """`SimpleConsumer.receive(32)` + `ack` of each message until `expected` are acked or `seconds`
    pass; (msgs/s, acked)."""
    consumer = SimpleConsumer(_config(endpoints), group, {topic: FilterExpression()}, await_duration=2)
    consumer.startup()
    try:
        acked = 0
        t0 = time.perf_counter()
        deadline = t0 + seconds
        while acked < expected and time.perf_counter() < deadline:
            for m in consumer.receive(RECEIVE_BATCH, INVISIBLE_S):
                consumer.ack(m)
                acked += 1
        dt = time.perf_counter() - t0
    finally:
        consumer.shutdown()
    return acked / dt, acked
