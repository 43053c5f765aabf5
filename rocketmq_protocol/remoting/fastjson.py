"""The JSON dialect of RocketMQ bodies (fastjson 1 up to 5.3, fastjson2 from 5.4), read and written.

`RemotingSerializable.encode` writes maps with non-string keys raw: `{0:"127.0.0.1:10911"}` for a
`Map<Long,String>` and `{{"brokerName":"b","queueId":0,"topic":"T"}:{...}}` for a `Map<MessageQueue,...>`
(ConsumeStats, TopicStatsTable). Neither is JSON. `loads` reads both (and plain JSON); `dumps` writes the
same shapes, or standard JSON with quoted keys as the name server sends routes to clients ≥ 4.9.4.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np

from .errors import JsonBodyError

__all__ = ["JsonStyle", "dumps", "json_string", "loads"]

#: "fastjson2" (RocketMQ ≥ 5.4) escapes only control characters, lowercase hex; "fastjson1" (≤ 5.3) also
#: escapes DEL, U+2028 and U+2029, uppercase hex. Both read alike.
JsonStyle = Literal["fastjson2", "fastjson1"]

_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_ESCAPE_2 = re.compile('[\x00-\x1f"\\\\]')
_ESCAPE_1 = re.compile('[\x00-\x1f"\\\\\x7f\u2028\u2029]')
_ESCAPE_ASCII = re.compile('[\x00-\x1f"\\\\\x7f-\uffff]')
_LONG = 2048  # strings longer than this are checked with NumPy first


def _lower(m: re.Match[str]) -> str:
    c = m.group()
    return _SHORT.get(c) or f"\\u{ord(c):04x}"


def _upper(m: re.Match[str]) -> str:
    c = m.group()
    return _SHORT.get(c) or f"\\u{ord(c):04X}"


def _plain_ascii(s: str) -> bool:
    """Whether a long string needs no escape in any style: ASCII without control characters, DEL, quote or
    backslash (one vectorised pass; `re` scans a character class at several ns a character, and a batch
    send's answer carries a 270 KB `msgId`)."""
    if not s.isascii():
        return False
    a = np.frombuffer(s.encode("ascii"), np.uint8)
    return not ((a < 0x20) | (a == 0x22) | (a == 0x5C) | (a == 0x7F)).any()


def json_string(s: str, style: JsonStyle = "fastjson2", ascii_only: bool = False) -> str:
    """A quoted JSON string escaped the way fastjson writes it (`ascii_only`: BrowserCompatible's \\uXXXX)."""
    if len(s) > _LONG and _plain_ascii(s):
        return '"' + s + '"'
    if ascii_only:
        return '"' + _ESCAPE_ASCII.sub(_upper if style == "fastjson1" else _lower, s) + '"'
    if style == "fastjson1":
        return '"' + _ESCAPE_1.sub(_upper, s) + '"'
    return '"' + _ESCAPE_2.sub(_lower, s) + '"'


# ------------------------------------------------------------------------------------------------ read

_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_MAX_DEPTH = 256


def freeze(value: Any) -> Any:
    """A hashable form of a parsed value, used for object keys: dicts become sorted item tuples."""
    if isinstance(value, dict):
        return tuple(sorted((k, freeze(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(freeze(v) for v in value)
    return value


class _Reader:
    __slots__ = ("pos", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, what: str) -> JsonBodyError:
        snippet = self.text[max(0, self.pos - 20) : self.pos + 20]
        return JsonBodyError(f"{what} at offset {self.pos} (near {snippet!r})")

    def skip(self) -> None:
        self.pos = _WS.match(self.text, self.pos).end()  # type: ignore[union-attr]

    def value(self, depth: int) -> Any:
        if depth > _MAX_DEPTH:
            raise self.fail("nesting deeper than 256")
        self.skip()
        if self.pos >= len(self.text):
            raise self.fail("unexpected end")
        c = self.text[self.pos]
        if c == "{":
            return self.obj(depth)
        if c == "[":
            return self.arr(depth)
        if c == '"':
            return self.string()
        m = _NUMBER.match(self.text, self.pos)
        if m:
            self.pos = m.end()
            return float(m.group()) if m.group(1) or m.group(2) else int(m.group())
        m = _IDENT.match(self.text, self.pos)
        if m:
            word = m.group()
            if word in ("true", "false", "null"):
                self.pos = m.end()
                return {"true": True, "false": False, "null": None}[word]
        raise self.fail("unexpected character")

    def string(self) -> str:
        try:
            s, end = json.decoder.scanstring(self.text, self.pos + 1)
        except json.JSONDecodeError as e:
            raise JsonBodyError(f"bad string at offset {self.pos}: {e.msg}") from None
        self.pos = end
        return s

    def key(self, depth: int) -> Any:
        self.skip()
        c = self.text[self.pos : self.pos + 1]
        if c == '"':
            return self.string()
        if c in ("{", "["):
            return freeze(self.value(depth + 1))  # a map keyed by an object (e.g. MessageQueue)
        m = _NUMBER.match(self.text, self.pos)
        if m:
            self.pos = m.end()
            return float(m.group()) if m.group(1) or m.group(2) else int(m.group())
        m = _IDENT.match(self.text, self.pos)
        if m:  # an unquoted field name (fastjson without QuoteFieldNames)
            self.pos = m.end()
            return m.group()
        raise self.fail("expected an object key")

    def obj(self, depth: int) -> dict[Any, Any]:
        self.pos += 1
        out: dict[Any, Any] = {}
        self.skip()
        if self.text[self.pos : self.pos + 1] == "}":
            self.pos += 1
            return out
        while True:
            k = self.key(depth)
            self.skip()
            if self.text[self.pos : self.pos + 1] != ":":
                raise self.fail("expected ':'")
            self.pos += 1
            out[k] = self.value(depth + 1)
            self.skip()
            c = self.text[self.pos : self.pos + 1]
            self.pos += 1
            if c == "}":
                return out
            if c != ",":
                self.pos -= 1
                raise self.fail("expected ',' or '}'")

    def arr(self, depth: int) -> list[Any]:
        self.pos += 1
        out: list[Any] = []
        self.skip()
        if self.text[self.pos : self.pos + 1] == "]":
            self.pos += 1
            return out
        while True:
            out.append(self.value(depth + 1))
            self.skip()
            c = self.text[self.pos : self.pos + 1]
            self.pos += 1
            if c == "]":
                return out
            if c != ",":
                self.pos -= 1
                raise self.fail("expected ',' or ']'")


def loads(body: str | bytes | bytearray | memoryview) -> Any:
    """Parses a fastjson body: standard JSON, bare number keys (ints), object keys (see `freeze`)."""
    try:
        text = body if isinstance(body, str) else bytes(body).decode("utf-8")
    except UnicodeDecodeError as e:
        raise JsonBodyError(f"body is not UTF-8: {e}") from None
    try:
        return json.loads(text)  # standard JSON: the common case, in C
    except ValueError:
        pass
    except RecursionError:
        raise JsonBodyError("nesting too deep") from None
    reader = _Reader(text)
    value = reader.value(0)
    reader.skip()
    if reader.pos != len(text):
        raise reader.fail("trailing data")
    return value


# ------------------------------------------------------------------------------------------------ write


def dumps(
    value: Any, *, quote_keys: bool = False, sort_maps: bool = False, style: JsonStyle = "fastjson2"
) -> str:
    """Writes `value` like fastjson: compact; non-string map keys bare unless `quote_keys` (BrowserCompatible).

    Frozen object keys (tuples of items, from `loads`) are written back as objects. `sort_maps` sorts
    every map's keys (MapSortField); otherwise maps keep their order.
    """
    out: list[str] = []
    _dump(value, out, quote_keys, sort_maps, style)
    return "".join(out)


def _key(k: Any, quote: bool, sort_maps: bool, style: JsonStyle) -> str:
    if isinstance(k, str):
        return json_string(k, style, ascii_only=quote)
    if isinstance(k, bool):
        text = "true" if k else "false"
    elif isinstance(k, int | float):
        text = repr(k)
    elif isinstance(k, tuple):
        parts: list[str] = []
        _dump(_thaw(k), parts, quote, sort_maps, style)
        text = "".join(parts)
    else:
        raise TypeError(f"cannot write a map key of type {type(k).__name__}")
    return json_string(text, style, ascii_only=quote) if quote else text


def _thaw(k: tuple) -> Any:
    if all(isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str) for item in k):
        return {name: _thaw(v) if isinstance(v, tuple) else v for name, v in k}
    return [_thaw(v) if isinstance(v, tuple) else v for v in k]


def _dump(value: Any, out: list[str], quote: bool, sort_maps: bool, style: JsonStyle) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(json_string(value, style, ascii_only=quote))
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, float):
        out.append(repr(value))
    elif isinstance(value, Mapping):
        items = list(value.items())
        if sort_maps:
            items.sort(
                key=lambda kv: (
                    not isinstance(kv[0], int | float),
                    kv[0] if not isinstance(kv[0], tuple) else str(kv[0]),
                )
            )
        out.append("{")
        for i, (k, v) in enumerate(items):
            if i:
                out.append(",")
            out.append(_key(k, quote, sort_maps, style))
            out.append(":")
            _dump(v, out, quote, sort_maps, style)
        out.append("}")
    elif isinstance(value, list | tuple | set | frozenset):
        out.append("[")
        for i, v in enumerate(value):
            if i:
                out.append(",")
            _dump(v, out, quote, sort_maps, style)
        out.append("]")
    else:
        raise TypeError(f"cannot write {type(value).__name__} as JSON")
