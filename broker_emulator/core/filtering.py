"""Subscription filters as the broker applies them: tag hash codes then exact tags, or SQL92 on properties."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from rocketmq_protocol.hashing import java_string_hash

FILTER_TAG = 1
FILTER_SQL = 2


class FilterError(ValueError):
    """An expression the broker cannot parse (ILLEGAL_FILTER_EXPRESSION)."""


@dataclass(frozen=True)
class MessageFilter:
    """A parsed subscription expression; `match_all` for `*`."""

    match_all: bool = True
    tags: frozenset[str] = frozenset()
    codes: frozenset[int] = frozenset()
    sql: Callable[[Mapping[str, str]], bool] | None = None
    expression: str = "*"
    _code_list: tuple[int, ...] = field(default=(), compare=False)

    def matches_codes(self, codes: Iterable[int]) -> bool:
        """Whether any message with these tag codes can match (the long-polling wake-up test)."""
        if self.match_all or self.sql is not None:
            return True
        return any(c in self.codes for c in codes)

    def mask(self, table: pa.Table) -> pa.ChunkedArray | None:
        """Boolean mask of matching rows, or None when every row matches."""
        if self.match_all:
            return None
        if self.sql is not None:
            tags = table.column("tag").to_pylist()
            keys = table.column("keys").to_pylist()
            props = table.column("properties").to_pylist()
            out = []
            for tag, k, p in zip(tags, keys, props, strict=True):
                d = dict(p) if p else {}
                if tag is not None:
                    d.setdefault("TAGS", tag)
                if k:
                    d.setdefault("KEYS", " ".join(k))
                out.append(bool(self.sql(d)))
            return pa.chunked_array([pa.array(out, pa.bool_())])
        by_code = pc.is_in(table.column("tag_code"), value_set=pa.array(self._code_list, pa.int32()))
        by_tag = pc.is_in(table.column("tag"), value_set=pa.array(sorted(self.tags), pa.string()))
        return pc.and_(by_code, pc.fill_null(by_tag, False))

    def matches_row(self, tag: str | None, keys: list[str], properties: Mapping[str, str]) -> bool:
        """Single-message test (POP and standard pull paths)."""
        if self.match_all:
            return True
        if self.sql is not None:
            d = dict(properties)
            if tag is not None:
                d.setdefault("TAGS", tag)
            if keys:
                d.setdefault("KEYS", " ".join(keys))
            return bool(self.sql(d))
        return tag is not None and tag in self.tags and java_string_hash(tag) in self.codes


MATCH_ALL = MessageFilter()


def parse_tag_expression(expression: str | None) -> MessageFilter:
    """`*`/blank → all; otherwise `TagA || TagB` split on `||`, trimmed, empties dropped (FilterAPI)."""
    if expression is None or expression.strip() in ("", "*"):
        return MATCH_ALL
    tags = [t.strip() for t in expression.split("||")]
    tags = [t for t in tags if t]
    if not tags:
        raise FilterError(f"tag expression {expression!r} names no tag")
    codes = tuple(sorted({java_string_hash(t) for t in tags}))
    return MessageFilter(False, frozenset(tags), frozenset(codes), None, expression, codes)


def parse_filter(filter_type: int, expression: str | None) -> MessageFilter:
    """Parses a v2 FilterExpression (type 0/1 = TAG, 2 = SQL)."""
    if filter_type in (0, FILTER_TAG):
        return parse_tag_expression(expression)
    if filter_type == FILTER_SQL:
        from .sql92 import FilterSyntaxError, compile_sql92

        if expression is None or not expression.strip():
            raise FilterError("SQL92 filter expression is empty")
        try:
            pred = compile_sql92(expression)
        except FilterSyntaxError as e:
            raise FilterError(str(e)) from e
        return MessageFilter(False, frozenset(), frozenset(), pred, expression)
    raise FilterError(f"unknown filter type {filter_type}; accepted: 1 (TAG), 2 (SQL)")
