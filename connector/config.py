"""Small picklable value types shared by the options, the client and the readers/writers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

FILTER_TAG = "tag"
FILTER_SQL = "sql"
PULL_AUTO, PULL_BULK, PULL_STANDARD = "auto", "bulk", "standard"
PULL_PROTOCOLS = (PULL_AUTO, PULL_BULK, PULL_STANDARD)


@dataclass(frozen=True)
class ClientConfig:
    """What a connection needs (name servers or endpoints, credentials, namespace, TLS); the key of the
    per-process client cache and what `connector.clients.new_client` picks the client implementation by.

    Exactly one of `name_server` (option `nameServer`: RocketMQ name servers, the remoting client) and
    `endpoints` (gRPC v2 endpoints, the v2 client) is set. `tls_ca_pem` holds the CA certificate read on the
    driver, so executors need no copy of the file. `pull_protocol` (option `pullProtocol`) chooses the gRPC
    client's pull RPC: `bulk` (the emulator's BulkPull), `standard` (v2 PullMessage) or `auto`; `pull_channel`
    lets BulkPull go over the emulator's pull channel where it offers one (plain TCP, no TLS or credentials;
    False keeps it on gRPC). Secrets stay out of repr/str.
    """

    endpoints: str = ""
    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)
    namespace: str = ""
    tls: bool = False
    tls_ca_pem: bytes | None = field(default=None, repr=False)
    pull_protocol: str = PULL_AUTO
    name_server: str = ""
    pull_channel: bool = True

    @property
    def endpoint_list(self) -> list[str]:
        """The `;`-separated endpoints as `host:port` strings, in the given order."""
        return [e.strip() for e in self.endpoints.split(";") if e.strip()]

    @property
    def name_server_list(self) -> list[str]:
        """The `;`-separated name servers as `host:port` strings, in the given order."""
        return [e.strip() for e in self.name_server.split(";") if e.strip()]

    @property
    def remoting(self) -> bool:
        """Whether this config speaks RocketMQ's remoting protocol (a name server is given)."""
        return bool(self.name_server)

    @property
    def target(self) -> str:
        """Where the client connects, for messages: `name server H:P` or the gRPC endpoints."""
        return f"name server {self.name_server}" if self.name_server else self.endpoints


class FilterSpec(NamedTuple):
    """A server-side message filter: kind `tag` (`TagA || TagB`, `*`) or `sql` (SQL92 on properties)."""

    kind: str = FILTER_TAG
    expression: str = "*"

    @property
    def matches_all(self) -> bool:
        return self.kind == FILTER_TAG and self.expression.strip() in ("", "*")
