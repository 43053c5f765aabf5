"""The gRPC v2 request signature RocketMQ 5 clients send (`MQv2-HMAC-SHA1` over `x-mq-date-time`), for
signing (the connector, the admin CLI) and checking (the emulator's ACL)."""

from __future__ import annotations

import hashlib
import hmac
import time

ALGORITHM = "MQv2-HMAC-SHA1"
AUTHORIZATION_HEADER = "authorization"
DATE_TIME_HEADER = "x-mq-date-time"
DATE_TIME_FORMAT = "%Y%m%dT%H%M%SZ"


def sign(secret_key: str, date_time: str) -> str:
    """HEX(HMAC-SHA1(secret key, x-mq-date-time))."""
    return hmac.new(secret_key.encode("utf-8"), date_time.encode("utf-8"), hashlib.sha1).hexdigest()


def date_time_now(now: float | None = None) -> str:
    """The `x-mq-date-time` value for `now` (epoch seconds, default the current time), in UTC."""
    return time.strftime(DATE_TIME_FORMAT, time.gmtime(now))


def authorization(access_key: str, secret_key: str, date_time: str) -> str:
    """The `authorization` header value signing `date_time`."""
    return (
        f"{ALGORITHM} Credential={access_key}, SignedHeaders={DATE_TIME_HEADER}, "
        f"Signature={sign(secret_key, date_time)}"
    )


def signed_headers(access_key: str, secret_key: str, now: float | None = None) -> list[tuple[str, str]]:
    """The `x-mq-date-time` and `authorization` headers of a signed request."""
    date_time = date_time_now(now)
    return [
        (DATE_TIME_HEADER, date_time),
        (AUTHORIZATION_HEADER, authorization(access_key, secret_key, date_time)),
    ]


def parse_authorization(value: str) -> tuple[str, str]:
    """(access key, signature) of an `authorization` header value; ValueError naming what is wrong."""
    algorithm, _, rest = value.strip().partition(" ")
    if algorithm != ALGORITHM:
        raise ValueError(f"authorization header uses {algorithm!r}; expected {ALGORITHM}")
    fields: dict[str, str] = {}
    for part in rest.split(","):
        key, _, val = part.strip().partition("=")
        fields[key] = val.strip()
    if "Credential" not in fields or "Signature" not in fields:
        raise ValueError("authorization header lacks Credential or Signature")
    signed = fields.get("SignedHeaders", DATE_TIME_HEADER)
    if signed.lower() != DATE_TIME_HEADER:
        raise ValueError(f"authorization signs {signed!r}; expected {DATE_TIME_HEADER}")
    return fields["Credential"].split("/", 1)[0], fields["Signature"]


def signature_matches(secret_key: str, date_time: str, signature: str) -> bool:
    """Whether `signature` is the one `secret_key` gives `date_time` (constant-time comparison)."""
    return hmac.compare_digest(sign(secret_key, date_time), signature.lower())
