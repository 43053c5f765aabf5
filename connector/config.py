"""Small picklable value types shared by the options, the client and the readers/writers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

FILTER_TAG = "tag"
FILTER_SQL = "sql"


@dataclass(frozen=True)
class ClientConfig:
    """What a connection needs (endpoints, credentials, namespace, TLS); the key of the per-process client cache.

    `tls_ca_pem` holds the CA certificate read on the driver, so executors need no copy of the file.
    Secrets stay out of repr/str.
    """

    endpoints: str
    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)
    namespace: str = ""
    tls: bool = False
    tls_ca_pem: bytes | None = field(default=None, repr=False)

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
