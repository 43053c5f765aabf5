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
    """What a connection needs (endpoints, credentials, namespace, TLS); the key of the per-process client cache
    and what `connector.clients.get_client` picks the client implementation by.

    `endpoints` are gRPC endpoints (the v2 client). `tls_ca_pem` holds the CA certificate read on the driver,
    so executors need no copy of the file. `pull_protocol` (option `pullProtocol`) chooses the gRPC client's
    pull RPC: `bulk` (the emulator's BulkPull), `standard` (v2 PullMessage) or `auto`. Secrets stay out of
    repr/str.
    """

    endpoints: str
    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)
    namespace: str = ""
    tls: bool = False
    tls_ca_pem: bytes | None = field(default=None, repr=False)
    pull_protocol: str = PULL_AUTO

    @property
    def endpoint_list(self) -> list[str]:
        """The `;`-separated endpoints as `host:port` strings, in the given order."""
        return [e.strip() for e in self.endpoints.split(";") if e.strip()]


class FilterSpec(NamedTuple):
    """A server-side message filter: kind `tag` (`TagA || TagB`, `*`) or `sql` (SQL92 on properties)."""

    kind: str = FILTER_TAG
    expression: str = "*"

    @property
    def matches_all(self) -> bool:
        return self.kind == FILTER_TAG and self.expression.strip() in ("", "*")
