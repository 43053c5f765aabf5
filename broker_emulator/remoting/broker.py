"""One emulated broker's remoting front end: the request-code table, the per-request gate (injected faults,
ACL) and the client connections it can call back (transaction checks, rebalance notifications). Each
handler lives in the module of its concern (`sending`, `pulling`, `clients`, `admin`) and only translates
between remoting commands and the broker core."""

from __future__ import annotations

import asyncio
import functools
import logging

from rocketmq_protocol.extension.pull_channel import BULK_PULL_CODE
from rocketmq_protocol.remoting.codes import RequestCode as Q
from rocketmq_protocol.remoting.frames import RemotingCommand

from ..core.cluster import Broker, Cluster
from ..core.long_polling import LongPollingService
from . import admin, bulk_pull, clients, pulling, sending
from .access import refusal
from .record_cache import RecordCache
from .server import Connection, Handler

log = logging.getLogger(__name__)


class RemotingBroker:
    def __init__(
        self,
        cluster: Cluster,
        broker: Broker,
        polling: LongPollingService,
        record_cache: RecordCache | None = None,
    ) -> None:
        self.cluster = cluster
        self.broker = broker
        self.polling = polling
        # encoded answers to PULL_MESSAGE, kept for later pulls of the same offsets (shared by the brokers)
        self.record_cache = record_cache if record_cache is not None else RecordCache(0)
        self.client_conns: dict[str, Connection] = {}  # client id → the connection of its last heartbeat
        self.locks: dict[tuple[str, str, str, int], tuple[str, float]] = {}  # LOCK_BATCH_MQ owners

    def handlers(self) -> dict[int, Handler]:
        table = {
            Q.SEND_MESSAGE: sending.send_message,
            Q.SEND_MESSAGE_V2: sending.send_message,
            Q.SEND_BATCH_MESSAGE: sending.send_message,
            Q.END_TRANSACTION: sending.end_transaction,
            Q.CONSUMER_SEND_MSG_BACK: sending.consumer_send_back,
            Q.PULL_MESSAGE: pulling.pull_message,
            Q.LITE_PULL_MESSAGE: pulling.pull_message,
            Q.GET_MAX_OFFSET: pulling.get_max_offset,
            Q.GET_MIN_OFFSET: pulling.get_min_offset,
            Q.SEARCH_OFFSET_BY_TIMESTAMP: pulling.search_offset,
            Q.GET_EARLIEST_MSG_STORETIME: pulling.earliest_store_time,
            Q.QUERY_CONSUMER_OFFSET: pulling.query_consumer_offset,
            Q.UPDATE_CONSUMER_OFFSET: pulling.update_consumer_offset,
            Q.VIEW_MESSAGE_BY_ID: pulling.view_message,
            Q.HEART_BEAT: clients.heart_beat,
            Q.UNREGISTER_CLIENT: clients.unregister_client,
            Q.GET_CONSUMER_LIST_BY_GROUP: clients.consumer_list,
            Q.CHECK_CLIENT_CONFIG: clients.check_client_config,
            Q.LOCK_BATCH_MQ: clients.lock_batch,
            Q.UNLOCK_BATCH_MQ: clients.unlock_batch,
            Q.UPDATE_AND_CREATE_TOPIC: admin.update_and_create_topic,
            Q.GET_ALL_TOPIC_CONFIG: admin.get_all_topic_config,
            Q.GET_TOPIC_CONFIG: admin.get_topic_config,
            Q.GET_BROKER_RUNTIME_INFO: admin.broker_runtime_info,
            Q.GET_TOPIC_STATS_INFO: admin.topic_stats,
            Q.GET_CONSUME_STATS: admin.consume_stats,
            Q.GET_CONSUMER_CONNECTION_LIST: admin.consumer_connections,
            Q.INVOKE_BROKER_TO_RESET_OFFSET: admin.reset_offset,
            Q.QUERY_TOPIC_CONSUME_BY_WHO: admin.topic_consumed_by,
            Q.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: admin.update_subscription_group,
            BULK_PULL_CODE: bulk_pull.bulk_pull,
        }
        return {int(code): functools.partial(fn, self) for code, fn in table.items()}

    async def gate(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        """Injected faults (`down` closes the connection, `latency_ms` delays) and the ACL."""
        f = self.broker.faults.current
        if f.down:
            conn.close()
            raise asyncio.CancelledError
        if f.latency_ms > 0:
            await asyncio.sleep(f.latency_ms / 1000.0)
        return refusal(self.cluster, cmd)

    def check_back(self, transaction_id: str, parked) -> bool:
        return sending.check_back(self, transaction_id, parked)

    def on_close(self, conn: Connection) -> None:
        """A client's connection went away: it leaves its groups (the others rebalance)."""
        changed: set[str] = set()
        for cid in conn.client_ids:
            if self.client_conns.get(cid) is conn:
                del self.client_conns[cid]
                changed |= self.cluster.clients.unregister(cid)
        clients.notify_changed(self, changed)
