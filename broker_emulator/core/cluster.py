"""The emulated cluster: brokers (each a store, faults, endpoint) plus the name-server view of routes."""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field

from rocketmq_protocol.names import DLQ_PREFIX, RETRY_PREFIX, group_error, topic_error

from .acl import AclGuard
from .clients import ClientRegistry
from .delay import DelayService
from .faults import FaultState
from .pop import PopService
from .store.journal import JournaledTable
from .store.message_store import MessageStore, TopicConfig
from .transactions import DEFAULT_CHECK_INTERVAL_MS, TransactionService

log = logging.getLogger(__name__)

MESSAGE_TYPES = ("NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED")
DEFAULT_MAX_BODY_SIZE = 4 * 1024 * 1024
# MessageStoreConfig.messageDelayLevel: levels 1..18 of DELAY sends and of consumer send-backs.
DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
DEFAULT_CLUSTER_NAME = "DefaultCluster"
# Messages one remoting PULL_MESSAGE answer holds at most. A real broker stops at 32 from page cache
# (maxTransferCountOnMessageInMemory; docs/deviations.md, "Remoting"); 32768 = the connector's default
# pullBatchSize, so its pull is one request here: against 8192 (four requests), the emulator's CPU per message
# of a remoting read fell from 0.93 to 0.72 µs (per-request costs of encoding stored records and answering).
DEFAULT_MAX_TRANSFER_COUNT = 32768


def broker_name(index: int) -> str:
    """broker-a, broker-b, ..., broker-z, broker-aa, ..."""
    letters = ""
    i = index
    while True:
        letters = chr(ord("a") + i % 26) + letters
        i = i // 26 - 1
        if i < 0:
            return f"broker-{letters}"


@dataclass
class Broker:
    name: str
    index: int
    store: MessageStore
    faults: FaultState = field(default_factory=FaultState)
    host: str = "127.0.0.1"
    port: int = 0
    pop: PopService | None = None
    delay: DelayService | None = None
    transactions: TransactionService | None = None
    telemetry: dict = field(default_factory=dict)  # client id -> (Telemetry outbound queue, Settings)
    polling: object | None = None  # LongPollingService, set by the server
    remoting_port: int = 0  # the broker's remoting listener (0: none)
    _rr: dict[str, int] = field(default_factory=dict)

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"

    def next_queue(self, topic: str, queues: int) -> int:
        """Round robin over the topic's queues on this broker (sends without a queue id)."""
        n = self._rr.get(topic, -1) + 1
        self._rr[topic] = n
        return n % queues

    def set_fault(self, **kwargs) -> dict:
        return self.faults.set(**kwargs).to_dict()

    def clear_faults(self) -> dict:
        return self.faults.clear().to_dict()


@dataclass
class ClusterConfig:
    brokers: int = 2
    default_queues: int = 8
    data_dir: str | None = None
    host: str = "127.0.0.1"
    advertised_host: str | None = None
    auto_create_topics: bool = False
    max_body_size: int = DEFAULT_MAX_BODY_SIZE
    # A broker's maxMessageSize as it limits a batch: the body of a remoting batch, or of the batch a proxy
    # forwards for a multi-message v2 request (RocketMQ's default 4 MiB, as a body's).
    max_batch_bytes: int = DEFAULT_MAX_BODY_SIZE
    flush: str = "sync"
    retention_messages: int | None = None
    retention_hours: float | None = None
    commitlog_file_size: int | None = None
    max_held_requests: int = 100_000
    max_transfer_count: int = DEFAULT_MAX_TRANSFER_COUNT  # `serve --max-transfer-count`
    min_invisible_ms: int = 10_000  # the proxy's lower bound for ReceiveMessage invisible_duration
    min_long_polling_ms: int = 5_000  # the proxy's lower bound for a held ReceiveMessage's long polling
    max_retries: int = 16  # a new group's retryMaxTimes (17 deliveries)
    transaction_check_ms: int = DEFAULT_CHECK_INTERVAL_MS
    delay_levels: str = DEFAULT_DELAY_LEVELS  # "1s 5s ..." (s, m, h, d units), as messageDelayLevel
    cluster_name: str = DEFAULT_CLUSTER_NAME  # what the name server reports the brokers under
    acl: str | dict | None = field(
        default=None, repr=False
    )  # ACL file path or its JSON value (docs/design.md, 'Security')


@dataclass
class GroupConfig:
    """A consumer group's subscription config (RocketMQ SubscriptionGroupConfig subset)."""

    max_retries: int = 16
    fifo: bool = False

    @property
    def max_attempts(self) -> int:
        return self.max_retries + 1


class Cluster:
    """All brokers of one emulator process; any broker answers routes for the whole cluster."""

    def __init__(self, config: ClusterConfig) -> None:
        self.config = config
        self.clients = ClientRegistry()
        self.acl = AclGuard(config.acl)
        self.groups_table = JournaledTable(config.data_dir, "subscriptionGroup")
        self.brokers: list[Broker] = []
        self.lock = threading.RLock()
        for _ in range(config.brokers):
            self.add_broker()

    def add_broker(self) -> Broker:
        with self.lock:
            i = len(self.brokers)
            name = broker_name(i)
            ddir = os.path.join(self.config.data_dir, name) if self.config.data_dir else None
            store = MessageStore(
                name,
                ddir,
                flush=self.config.flush,
                retention_messages=self.config.retention_messages,
                retention_hours=self.config.retention_hours,
                commitlog_file_size=self.config.commitlog_file_size,
            )
            b = Broker(name, i, store, host=self.config.advertised_host or self.config.host)
            b.pop = PopService(name, store, ddir, lambda g: self.group_config(g).max_attempts)
            b.delay = DelayService(store, ddir)
            b.transactions = TransactionService(store, ddir, self.config.transaction_check_ms)
            # A broker joining a running cluster serves the cluster's topics (as if created cluster-wide).
            for other in self.brokers[:1]:
                for cfg in other.store.topics.values():
                    if cfg.name not in store.topics:
                        store.create_topic(cfg.name, cfg.queues, cfg.perm, cfg.message_type)
            self.brokers.append(b)
            return b

    def group_config(self, group: str) -> GroupConfig:
        """The group's config; groups are created on first use (autoCreateSubscriptionGroup)."""
        raw = self.groups_table.get(group)
        if raw is None:
            return GroupConfig(max_retries=self.config.max_retries)
        return GroupConfig(**raw)

    def update_group(
        self, group: str, max_retries: int | None = None, fifo: bool | None = None
    ) -> GroupConfig:
        err = group_error(group)
        if err:
            raise ValueError(err)
        cur = self.group_config(group)
        if max_retries is not None:
            if not 0 <= int(max_retries) <= 1000:
                raise ValueError(f"max_retries must be within 0..1000, got {max_retries}")
            cur.max_retries = int(max_retries)
        if fifo is not None:
            cur.fifo = bool(fifo)
        self.groups_table.set(group, {"max_retries": cur.max_retries, "fifo": cur.fifo})
        return cur

    def broker(self, name: str) -> Broker:
        for b in self.brokers:
            if b.name == name:
                return b
        raise KeyError(f"no broker named {name!r}; brokers: {', '.join(b.name for b in self.brokers)}")

    def create_topic(
        self,
        name: str,
        queues: int | None = None,
        message_type: str = "MIXED",
        brokers: list[str] | None = None,
    ) -> list[TopicConfig]:
        err = topic_error(name) if not name.startswith((RETRY_PREFIX, DLQ_PREFIX)) else None
        if err:
            raise ValueError(err)
        queues = self.config.default_queues if queues is None else int(queues)
        if not 1 <= queues <= 1024:
            raise ValueError(f"queues must be within 1..1024, got {queues}")
        if message_type not in MESSAGE_TYPES:
            raise ValueError(f"message_type must be one of {', '.join(MESSAGE_TYPES)}, got {message_type!r}")
        out = []
        with self.lock:
            for b in self.brokers:
                if brokers is None or b.name in brokers:
                    out.append(b.store.create_topic(name, queues, 6, message_type))
        return out

    def topic_exists(self, name: str) -> bool:
        return any(name in b.store.topics for b in self.brokers)

    def route(self, topic: str) -> list[tuple[Broker, TopicConfig]]:
        """Brokers serving the topic, sorted by broker name."""
        out = []
        for b in sorted(self.brokers, key=lambda x: x.name):
            cfg = b.store.topics.get(topic)
            if cfg is not None:
                out.append((b, cfg))
        return out

    def ensure_topic(self, topic: str) -> bool:
        """Auto-creates an unknown topic when allowed; returns whether it exists now."""
        if self.topic_exists(topic):
            return True
        if self.config.auto_create_topics and topic_error(topic) is None:
            log.info("auto-creating topic %s with %d queues per broker", topic, self.config.default_queues)
            self.create_topic(topic)
            return True
        return False

    def recover(self) -> None:
        for b in self.brokers:
            b.store.recover()

    def apply_retention(self) -> None:
        for b in self.brokers:
            b.store.apply_retention()

    def close(self) -> None:
        for b in self.brokers:
            for service in (b.pop, b.delay, b.transactions):
                if service is not None:
                    service.close()
            b.store.close()
        self.groups_table.close()
