"""Registry of producers and consumers seen through Heartbeat/Telemetry; silent clients expire (120 s)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

CLIENT_EXPIRY_SECONDS = 120.0


@dataclass
class ClientInfo:
    client_id: str
    client_type: str
    group: str = ""
    topics: list[str] = field(default_factory=list)
    language: str = ""
    version: str = ""
    last_heartbeat: float = 0.0
    brokers: set[str] = field(default_factory=set)
    settings: object | None = None  # the client's last Telemetry settings (apache.rocketmq.v2.Settings)

    def to_dict(self) -> dict:
        return {
            "client_id": self.client_id,
            "client_type": self.client_type,
            "group": self.group,
            "topics": sorted(self.topics),
            "language": self.language,
            "version": self.version,
            "last_heartbeat_ms": int(self.last_heartbeat * 1000),
            "brokers": sorted(self.brokers),
        }


class ClientRegistry:
    def __init__(self, expiry_seconds: float = CLIENT_EXPIRY_SECONDS) -> None:
        self.expiry_seconds = expiry_seconds
        self._clients: dict[str, ClientInfo] = {}
        self._lock = threading.Lock()

    def touch(
        self,
        client_id: str,
        broker: str,
        *,
        client_type: str | None = None,
        group: str | None = None,
        topics: list[str] | None = None,
        language: str | None = None,
        version: str | None = None,
        settings: object | None = None,
    ) -> ClientInfo:
        """Registers or refreshes a client (heartbeat, settings or any RPC that names it)."""
        with self._lock:
            info = self._clients.get(client_id)
            if info is None:
                info = self._clients[client_id] = ClientInfo(client_id, client_type or "UNKNOWN")
            if client_type:
                info.client_type = client_type
            if group:
                info.group = group
            if topics:
                info.topics = sorted(set(info.topics) | set(topics))
            if language:
                info.language = language
            if version:
                info.version = version
            if settings is not None:
                info.settings = settings
            info.last_heartbeat = time.time()
            info.brokers.add(broker)
            return info

    def get(self, client_id: str) -> ClientInfo | None:
        with self._lock:
            return self._clients.get(client_id)

    def remove(self, client_id: str) -> ClientInfo | None:
        with self._lock:
            return self._clients.pop(client_id, None)

    def expire(self, now: float | None = None) -> list[str]:
        now = time.time() if now is None else now
        with self._lock:
            gone = [cid for cid, c in self._clients.items() if now - c.last_heartbeat > self.expiry_seconds]
            for cid in gone:
                del self._clients[cid]
            return gone

    def snapshot(self) -> list[ClientInfo]:
        self.expire()
        with self._lock:
            return list(self._clients.values())
