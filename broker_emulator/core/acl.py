"""Access control (docs/design.md, 'Security'): accounts with topic and group permissions, checked against the
`MQv2-HMAC-SHA1` signature RocketMQ clients put in the `authorization` header.

The ACL file is JSON:
`{"accounts": [{"accessKey": "AK", "secretKey": "SK", "topics": {"NAME": "PUB|SUB|PUB_SUB"},
"groups": {"NAME": "SUB"}, "admin": false}]}`. A topic or group named `*` applies to every name the
account has no entry for. `admin: true` allows the admin verbs that change the cluster. `AclGuard` holds
the current ACL and reloads its file when the file's mtime changes (checked at most once per second) or
on `reload()` (admin verb `reload-acl`); a bad file keeps the previous ACL. Secret keys never appear in
logs, reprs or error messages.
"""

from __future__ import annotations

import enum
import json
import logging
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from rocketmq_protocol.signature import (
    AUTHORIZATION_HEADER,
    DATE_TIME_FORMAT,
    DATE_TIME_HEADER,
    parse_authorization,
    signature_matches,
)

log = logging.getLogger(__name__)

#: How far `x-mq-date-time` may be from the emulator's clock (either way).
MAX_CLOCK_SKEW_S = 15 * 60
#: The ACL file's mtime is looked at no more often than this.
RELOAD_CHECK_INTERVAL_S = 1.0
WILDCARD = "*"


class Perm(enum.Flag):
    """What an account may do with a topic (PUB: send; SUB: read) or a group (SUB: consume as it)."""

    NONE = 0
    PUB = 1
    SUB = 2
    PUB_SUB = 3


TOPIC_PERMS = {"PUB": Perm.PUB, "SUB": Perm.SUB, "PUB_SUB": Perm.PUB_SUB}
GROUP_PERMS = {"SUB": Perm.SUB}
ACCOUNT_KEYS = ("accessKey", "secretKey", "topics", "groups", "admin")


class AclError(ValueError):
    """An ACL file or dict that cannot be used; the message names the file, the account and the field."""


class Denial(enum.Enum):
    UNAUTHORIZED = "UNAUTHORIZED"  # no valid credentials
    FORBIDDEN = "FORBIDDEN"  # valid credentials, permission missing


class Denied(Exception):
    """A request the ACL refuses; each front end maps `kind` to its protocol's code."""

    def __init__(self, kind: Denial, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


@dataclass(frozen=True)
class Account:
    access_key: str
    secret_key: str = field(repr=False)
    topics: Mapping[str, Perm] = field(default_factory=dict)
    groups: Mapping[str, Perm] = field(default_factory=dict)
    admin: bool = False

    def topic_perm(self, topic: str) -> Perm:
        return self.topics.get(topic, self.topics.get(WILDCARD, Perm.NONE))

    def group_perm(self, group: str) -> Perm:
        return self.groups.get(group, self.groups.get(WILDCARD, Perm.NONE))


@dataclass(frozen=True)
class Acl:
    accounts: Mapping[str, Account]
    source: str

    def __repr__(self) -> str:
        return f"Acl({len(self.accounts)} accounts from {self.source})"


@dataclass(frozen=True)
class Need:
    """One permission a request needs: `kind` is "topic" or "group"."""

    kind: str
    name: str
    perm: Perm


# ------------------------------------------------------------------------------------------ parsing
def _perms(raw: Any, where: str, accepted: Mapping[str, Perm]) -> dict[str, Perm]:
    if not isinstance(raw, dict):
        raise AclError(f"{where} must be an object of name -> permission, got {type(raw).__name__}")
    out = {}
    for name, perm in raw.items():
        if not isinstance(name, str) or not name.strip():
            raise AclError(f"{where} has a blank name")
        if perm not in accepted:
            raise AclError(f"{where}[{name!r}] is {perm!r}; accepted: {', '.join(accepted)}")
        out[name] = accepted[perm]
    return out


def parse_acl(data: Any, source: str = "ACL") -> Acl:
    """Validates the ACL's JSON value; AclError names the source, the account and the bad field."""
    if not isinstance(data, dict) or "accounts" not in data:
        raise AclError(f'{source}: expected an object with an "accounts" list')
    unknown = set(data) - {"accounts"}
    if unknown:
        raise AclError(f"{source}: unknown top-level key(s) {', '.join(sorted(unknown))}; accepted: accounts")
    accounts_raw = data["accounts"]
    if not isinstance(accounts_raw, list):
        raise AclError(f'{source}: "accounts" must be a list, got {type(accounts_raw).__name__}')
    accounts: dict[str, Account] = {}
    for i, raw in enumerate(accounts_raw):
        where = f"{source}: accounts[{i}]"
        if not isinstance(raw, dict):
            raise AclError(f"{where} must be an object, got {type(raw).__name__}")
        unknown = set(raw) - set(ACCOUNT_KEYS)
        if unknown:
            raise AclError(
                f"{where} has unknown key(s) {', '.join(sorted(unknown))}; accepted: {', '.join(ACCOUNT_KEYS)}"
            )
        for key in ("accessKey", "secretKey"):
            value = raw.get(key)
            if not isinstance(value, str) or not value.strip():
                raise AclError(f'{where}: "{key}" is missing or blank (a non-empty string is required)')
        ak = raw["accessKey"]
        if ak in accounts:
            raise AclError(f"{where}: accessKey {ak!r} is already used by another account")
        admin = raw.get("admin", False)
        if not isinstance(admin, bool):
            raise AclError(f'{where}: "admin" must be true or false, got {admin!r}')
        accounts[ak] = Account(
            ak,
            raw["secretKey"],
            _perms(raw.get("topics", {}), f"{where}.topics", TOPIC_PERMS),
            _perms(raw.get("groups", {}), f"{where}.groups", GROUP_PERMS),
            admin,
        )
    return Acl(accounts, source)


def load_acl(path: str) -> Acl:
    """Reads and validates an ACL file."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise AclError(f"ACL file {path}: cannot be read ({e.strerror})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise AclError(
            f"ACL file {path}: not valid JSON ({e.msg} at line {e.lineno} column {e.colno})"
        ) from None
    return parse_acl(data, f"ACL file {path}")


# ------------------------------------------------------------------------------------------ checking
def _parse_authorization(value: str) -> tuple[str, str]:
    """(access key, signature) of an `authorization` header; Denied(UNAUTHORIZED) when malformed."""
    try:
        return parse_authorization(value)
    except ValueError as e:
        raise Denied(Denial.UNAUTHORIZED, str(e)) from None


def _check_date_time(value: str, now: float) -> None:
    """The signed date must be within MAX_CLOCK_SKEW_S of now. The official Python client formats its
    local time with a `Z` suffix, so the value is accepted when it is close to either UTC or local time."""
    try:
        stamp = datetime.strptime(value, DATE_TIME_FORMAT)
    except ValueError:
        raise Denied(
            Denial.UNAUTHORIZED, f"{DATE_TIME_HEADER} {value!r} is not a date like 20240131T235959Z"
        ) from None
    utc = datetime.fromtimestamp(now, UTC).replace(tzinfo=None)
    local = datetime.fromtimestamp(now)
    skew = min(abs((stamp - utc).total_seconds()), abs((stamp - local).total_seconds()))
    if skew > MAX_CLOCK_SKEW_S:
        raise Denied(
            Denial.UNAUTHORIZED,
            f"{DATE_TIME_HEADER} {value} is {skew:.0f} s away from the server's clock "
            f"(at most {MAX_CLOCK_SKEW_S} s accepted)",
        )


def authenticate(acl: Acl, metadata: Mapping[str, str], now: float | None = None) -> Account:
    """The account whose secret key signed the request; Denied(UNAUTHORIZED) otherwise."""
    header = metadata.get(AUTHORIZATION_HEADER)
    if not header:
        raise Denied(
            Denial.UNAUTHORIZED, "the request carries no authorization header (credentials required)"
        )
    access_key, signature = _parse_authorization(header)
    if not access_key:
        raise Denied(Denial.UNAUTHORIZED, "the request carries no access key (credentials required)")
    account = acl.accounts.get(access_key)
    if account is None:
        raise Denied(Denial.UNAUTHORIZED, f"access key {access_key!r} is unknown")
    date_time = metadata.get(DATE_TIME_HEADER, "")
    if not date_time:
        raise Denied(Denial.UNAUTHORIZED, f"the request carries no {DATE_TIME_HEADER} header")
    _check_date_time(date_time, time.time() if now is None else now)
    if not signature_matches(account.secret_key, date_time, signature):
        raise Denied(
            Denial.UNAUTHORIZED, f"signature mismatch for access key {access_key!r} (wrong secret key?)"
        )
    return account


def authorize(account: Account, needs: tuple[Need, ...]) -> None:
    """Denied(FORBIDDEN) naming the first permission the account lacks."""
    for need in needs:
        have = account.topic_perm(need.name) if need.kind == "topic" else account.group_perm(need.name)
        if need.perm and not have & need.perm:
            raise Denied(
                Denial.FORBIDDEN,
                f"access key {account.access_key!r} lacks {need.perm.name} on {need.kind} {need.name!r}",
            )
        if not need.perm and not have:  # any permission on the resource will do (e.g. QueryRoute)
            raise Denied(
                Denial.FORBIDDEN,
                f"access key {account.access_key!r} has no permission on {need.kind} {need.name!r}",
            )


class AclGuard:
    """The emulator's current ACL (None: no access control), from a file (reloaded when its mtime changes)
    or a dict."""

    def __init__(self, source: str | os.PathLike | Mapping[str, Any] | None) -> None:
        self.path: str | None = None
        self._acl: Acl | None = None
        self._stamp: tuple[int, int] | None = None  # (mtime_ns, size) of the loaded file
        self._checked = 0.0
        self._lock = threading.Lock()
        if source is None:
            return
        if isinstance(source, Mapping):
            self._acl = parse_acl(dict(source), "ACL")
        else:
            self.path = os.fspath(source)
            self._stamp = self._stat()
            self._acl = load_acl(self.path)
        log.info("access control on: %r", self._acl)

    @property
    def enabled(self) -> bool:
        return self._acl is not None

    def _stat(self) -> tuple[int, int] | None:
        assert self.path is not None
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size

    def current(self) -> Acl | None:
        """The ACL to check against; reloads the file when its mtime changed (looked at once a second)."""
        if self.path is not None:
            now = time.monotonic()
            if now - self._checked >= RELOAD_CHECK_INTERVAL_S:
                self._checked = now
                stamp = self._stat()
                if stamp is not None and stamp != self._stamp:
                    self._stamp = stamp
                    try:
                        self.reload()
                    except AclError as e:
                        log.error("keeping the previous ACL: %s", e)
        return self._acl

    def reload(self) -> dict:
        """Re-reads the ACL file now; AclError (previous ACL kept) when it is invalid."""
        if self.path is None:
            raise AclError("no ACL file to reload (the emulator was not started with --acl FILE)")
        stamp = self._stat()
        acl = load_acl(self.path)
        with self._lock:
            self._acl = acl
            self._stamp = stamp
        log.info("ACL reloaded: %r", acl)
        return {"source": self.path, "accounts": len(acl.accounts)}

    def check(self, metadata: Mapping[str, str], needs: tuple[Need, ...]) -> Account | None:
        """The authenticated account (None without an ACL); Denied when the request is refused."""
        acl = self.current()
        if acl is None:
            return None
        account = authenticate(acl, metadata)
        authorize(account, needs)
        return account
