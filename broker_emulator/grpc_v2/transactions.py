"""Transaction check-back over v2: a Telemetry `recover_orphaned_transaction_command` to a producer session."""

from __future__ import annotations

import asyncio

from rocketmq_protocol.grpc_v2 import definition_pb2 as d
from rocketmq_protocol.grpc_v2 import service_pb2 as s

from ..core.cluster import Broker
from ..core.parked import Parked
from ..core.transactions import HALF_TOPIC
from .messages import table_to_messages


def _producer_session(broker: Broker, topic: str, producer: str) -> asyncio.Queue | None:
    """A Telemetry outbound queue of a producer publishing `topic` on this broker, the sender first."""
    for cid in [producer, *broker.telemetry.keys()]:
        entry = broker.telemetry.get(cid)
        if entry is None:
            continue
        queue, settings = entry
        if settings is not None and settings.HasField("publishing"):
            if any(
                t.name == topic or f"{t.resource_namespace}%{t.name}" == topic
                for t in settings.publishing.topics
            ):
                return queue
    return None


def _half_message(broker: Broker, parked: Parked) -> d.Message | None:
    """The v2 Message of a parked half message."""
    r = broker.store.get(HALF_TOPIC, 0, parked.offset, 1)
    if r.table is None or not r.count:
        return None
    return table_to_messages(r.table, parked.topic, "", broker.name, parked.queue_id, broker.endpoint)[0]


def ask_producer(broker: Broker, transaction_id: str, parked: Parked) -> bool:
    """Sends the check-back command to a producer's Telemetry session; False when none is connected."""
    session = _producer_session(broker, parked.topic, parked.producer)
    msg = _half_message(broker, parked) if session is not None else None
    if session is None or msg is None:
        return False
    cmd = s.TelemetryCommand()
    cmd.recover_orphaned_transaction_command.message.CopyFrom(msg)
    cmd.recover_orphaned_transaction_command.transaction_id = transaction_id
    session.put_nowait(cmd)
    return True
