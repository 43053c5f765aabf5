"""Quickstart: start an embedded 2-broker emulator, send messages with the official RocketMQ Python
client, read them back over bulk pull, commit a consumer group and show its lag.

    python examples/quickstart.py

(The Spark source and sink land with the connector; this job then becomes the Spark quickstart.)
"""

from __future__ import annotations

import collections
import logging

from rocketmq import ClientConfiguration, Credentials, Message, Producer

from broker_emulator import Emulator
from broker_emulator.admin import AdminClient, consume

TOPIC = "orders"
COUNT = 200


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    with Emulator(brokers=2, queues=4) as emu:
        emu.create_topic(TOPIC)
        print(f"emulator endpoints: {emu.endpoints}")

        producer = Producer(ClientConfiguration(emu.endpoints.split(";")[0], Credentials()), (TOPIC,))
        producer.startup()
        try:
            for i in range(COUNT):
                msg = Message()
                msg.topic = TOPIC
                msg.body = f"order-{i}".encode()
                msg.tag = "paid" if i % 2 else "created"
                msg.keys = f"order-{i}"
                msg.add_property("amount", str(i * 10))
                producer.send(msg)
        finally:
            producer.shutdown()
        print(f"sent {COUNT} messages with the official rocketmq-python-client")

        admin = AdminClient(emu.endpoints)
        try:
            half = consume(admin, TOPIC, COUNT // 2, group="quickstart", commit=True)
            per_tag = collections.Counter(m["tag"] for m in half)
            print(f"read {len(half)} messages back over bulk pull; by tag: {dict(sorted(per_tag.items()))}")
            print("\nconsumer group 'quickstart' lag:")
            print(f"{'broker':<10}{'queue':>6}{'committed':>11}{'max':>6}{'lag':>6}")
            total = 0
            for row in admin.call("lag", group="quickstart"):
                total += row["lag"]
                print(f"{row['broker']:<10}{row['queue']:>6}{row['committed']:>11}{row['max_offset']:>6}{row['lag']:>6}")
            print(f"total lag: {total}")
        finally:
            admin.close()
    print("emulator stopped")


if __name__ == "__main__":
    main()
