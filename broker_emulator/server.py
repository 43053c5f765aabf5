"""Runs the cluster's gRPC servers (one endpoint per broker) on an asyncio event loop."""

from __future__ import annotations

import asyncio
import functools
import logging

import grpc

from rocketmq_protocol.extension.pull_channel import SEND_MESSAGE_CODE

from .core.cluster import Cluster, ClusterConfig
from .core.long_polling import LongPollingService
from .extension.service import ExtensionService
from .grpc_v2.messages import warm_up
from .grpc_v2.messaging import MessagingService
from .grpc_v2.transactions import ask_producer
from .remoting import channel_send
from .remoting.broker import RemotingBroker
from .remoting.namesrv import NameServer
from .remoting.record_cache import DEFAULT_BUDGET_BYTES, RecordCache
from .remoting.server import RemotingServer

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 128 * 1024 * 1024
HOUSEKEEPING_INTERVAL_S = 1.0


class EmulatorServer:
    """The brokers of one cluster, each listening on `port + i` (or an ephemeral port when port is 0)."""

    def __init__(
        self,
        config: ClusterConfig,
        port: int = 8081,
        tls_cert: bytes | None = None,
        tls_key: bytes | None = None,
        *,
        namesrv_port: int = 0,
        remoting_port: int = 0,
        record_cache_bytes: int = DEFAULT_BUDGET_BYTES,
    ) -> None:
        self.config = config
        self.port = port
        self.namesrv_port = namesrv_port
        self.remoting_port = remoting_port
        self.namesrv: RemotingServer | None = None
        self.remoting: list[RemotingServer] = []
        self.record_cache = RecordCache(record_cache_bytes)  # the remoting brokers' kept pull answers
        self.tls = (tls_key, tls_cert) if tls_cert and tls_key else None
        self.cluster = Cluster(config)
        self.servers: list[grpc.aio.Server] = []
        self.services: list[MessagingService] = []
        self._housekeeping: asyncio.Task | None = None

    @property
    def endpoints(self) -> str:
        return ";".join(b.endpoint for b in self.cluster.brokers)

    @property
    def name_server(self) -> str:
        """The remoting name server's address (what a remoting client's `-n` / `nameServer` takes)."""
        if self.namesrv is None:
            raise RuntimeError("the name server is not started")
        return f"{self.config.advertised_host or self.config.host}:{self.namesrv.port}"

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        warm_up()  # a client's first send does not pay the send path's first-call costs
        self.cluster.recover()
        for b in self.cluster.brokers:
            await self._start_broker(b, loop)
        self.namesrv = RemotingServer("name server", NameServer(self.cluster).handlers())
        await self.namesrv.start(self.config.host, self.namesrv_port)
        log.info("name server listening on %s", self.name_server)
        self._housekeeping = asyncio.ensure_future(self._housekeep())

    async def _start_broker(self, b, loop) -> None:
        polling = LongPollingService(loop, self.config.max_held_requests)
        b.polling = polling
        b.store.listeners.append(polling.notify)
        if b.pop is not None:
            b.pop.start(loop)
        if b.delay is not None:
            b.delay.start(loop)
        if b.transactions is not None:
            b.transactions.check_backs.append(functools.partial(ask_producer, b))
            b.transactions.start(loop)
        server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                ("grpc.so_reuseport", 0),
                # gRPC core sheds RPCs (CANCELLED) once ~1000 wait to be picked up by the event loop; a burst
                # of long polls is normal traffic here, bounded by max_held_requests instead.
                ("grpc.server.max_pending_requests", max(1000, self.config.max_held_requests)),
                ("grpc.server.max_pending_requests_hard_limit", max(3000, 2 * self.config.max_held_requests)),
            ]
        )
        messaging = MessagingService(self.cluster, b, polling)
        messaging.add_to_server(server)
        ExtensionService(self.cluster, b, polling, pull_channel=self.tls is None).add_to_server(server)
        want = 0 if self.port == 0 else self.port + b.index
        addr = f"{self.config.host}:{want}"
        if self.tls:
            creds = grpc.ssl_server_credentials([self.tls])
            bound = server.add_secure_port(addr, creds)
        else:
            bound = server.add_insecure_port(addr)
        if bound == 0:
            raise OSError(f"{b.name}: cannot bind {addr}")
        b.port = bound
        await server.start()
        self.servers.append(server)
        self.services.append(messaging)
        log.info("%s listening on %s", b.name, b.endpoint)
        front = RemotingBroker(self.cluster, b, polling, self.record_cache)
        handlers = front.handlers()
        if self.tls is None:  # the pull channel's SendMessage, as ExtensionService names the channel
            handlers[SEND_MESSAGE_CODE] = channel_send.send_handler(self.cluster, messaging)
        remoting = RemotingServer(b.name, handlers, gate=front.gate, on_close=front.on_close)
        want = 0 if self.remoting_port == 0 else self.remoting_port + b.index
        b.remoting_port = await remoting.start(self.config.host, want)
        if b.transactions is not None:
            b.transactions.check_backs.append(front.check_back)
        self.remoting.append(remoting)
        log.info("%s serving remoting on %s:%d", b.name, b.host, b.remoting_port)

    async def add_broker(self):
        """Adds a broker to the running cluster (it serves every existing topic)."""
        b = self.cluster.add_broker()
        await self._start_broker(b, asyncio.get_running_loop())
        return b

    async def _housekeep(self) -> None:
        while True:
            await asyncio.sleep(HOUSEKEEPING_INTERVAL_S)
            try:
                self.cluster.apply_retention()
                self.cluster.clients.expire()
                self.cluster.acl.current()  # picks up an edited ACL file even without traffic
            except Exception:
                log.exception("housekeeping failed")

    async def stop(self, grace: float = 1.0) -> None:
        """Stops serving, answers held requests, flushes and closes the stores."""
        if self._housekeeping is not None:
            self._housekeeping.cancel()
        for b in self.cluster.brokers:
            if getattr(b, "polling", None) is not None:
                b.polling.wake_all()
        await asyncio.gather(*(s.stop(grace) for s in self.servers), return_exceptions=True)
        self.servers.clear()
        remoting = [*self.remoting, *([self.namesrv] if self.namesrv is not None else [])]
        await asyncio.gather(*(s.stop() for s in remoting), return_exceptions=True)
        self.remoting.clear()
        self.cluster.close()
