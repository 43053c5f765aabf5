"""The remoting ACL signature: AccessKey / SecurityToken / Signature ext fields, HMAC-SHA1 in base64.

Client side as apache/rocketmq `AclClientRPCHook.doBeforeRequest`; server side as the 5.x auth module's
`DefaultAuthenticationContextBuilder.build` + `DefaultAuthenticationHandler` (and 4.x/5.2 PlainAccessValidator).
The signed content is the values of every ext field except Signature, ordered by key (Java TreeMap:
UTF-16 code-unit order), concatenated as UTF-8, followed by the body.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping

from .codes import Version
from .frames import RemotingCommand

__all__ = [
    "ACCESS_KEY",
    "SECURITY_TOKEN",
    "SIGNATURE",
    "calculate_signature",
    "content_to_sign",
    "sign",
    "verify",
]

ACCESS_KEY = "AccessKey"
SECURITY_TOKEN = "SecurityToken"
SIGNATURE = "Signature"
_UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"  # MixAll.UNIQUE_MSG_QUERY_FLAG


def _utf16_key(key: str) -> bytes:
    return key.encode("utf-16-be")  # byte order of UTF-16BE = Java String.compareTo order


def content_to_sign(
    ext_fields: Mapping[str, str], body: bytes | None, skip: frozenset[str] = frozenset()
) -> bytes:
    """`AclUtils.combineRequestContent`: values sorted by key (Signature and `skip` left out) + body."""
    keys = sorted((k for k in ext_fields if k != SIGNATURE and k not in skip), key=_utf16_key)
    return "".join(ext_fields[k] for k in keys).encode("utf-8") + (body or b"")


def calculate_signature(content: bytes, secret_key: str) -> str:
    """`AclSigner.calSignature`: base64(HMAC-SHA1(secret, content))."""
    digest = hmac.new(secret_key.encode("utf-8"), content, hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


def sign(
    cmd: RemotingCommand, access_key: str, secret_key: str, security_token: str | None = None
) -> RemotingCommand:
    """Adds AccessKey (+ SecurityToken) and the Signature of the command's final ext fields and body.

    Call it last, after every other ext field is set: the server signs exactly the map it receives. In
    a ROCKETMQ binary header an empty value arrives as null and Java signs it as "null", so a request
    signed here with an empty value fails on a Java server; JSON headers keep empty strings.
    """
    cmd.ext_fields.pop(SIGNATURE, None)
    cmd.ext_fields[ACCESS_KEY] = access_key
    if security_token is not None:
        cmd.ext_fields[SECURITY_TOKEN] = security_token
    cmd.ext_fields[SIGNATURE] = calculate_signature(content_to_sign(cmd.ext_fields, cmd.body), secret_key)
    return cmd


def verify(cmd: RemotingCommand, secret_key: str) -> bool:
    """Whether the command's Signature matches `secret_key` (constant-time compare).

    Like the broker, requests of version ≤ V4_9_3 sign without the `_UNIQUE_KEY_QUERY` field.
    """
    given = cmd.ext_fields.get(SIGNATURE)
    if given is None:
        return False
    skip = frozenset({_UNIQUE_KEY_QUERY}) if cmd.version <= Version.V4_9_3 else frozenset()
    expected = calculate_signature(content_to_sign(cmd.ext_fields, cmd.body, skip), secret_key)
    return hmac.compare_digest(expected.encode("ascii"), given.encode("utf-8", "replace"))
