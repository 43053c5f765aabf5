"""Fuzzing of every parser a user's text reaches (bad input): offsets JSON, reader/writer
options, tag and SQL92 filter expressions. Each input either parses or fails with the project's error
type (a ValueError subclass naming the option); any other exception type is a bug."""

from __future__ import annotations

import json
import os
import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker_emulator.core.filtering import FilterError, parse_filter, parse_tag_expression
from broker_emulator.core.sql92 import FilterSyntaxError, compile_sql92
from connector.errors import OptionError
from connector.offsets import OffsetsError, from_json, from_json_dict
from connector.options import (
    COMMON_OPTIONS,
    READER_OPTIONS,
    SPARK_INTERNAL_OPTIONS,
    WRITER_OPTIONS,
    parse_reader_options,
    parse_writer_options,
)

# FUZZ_EXAMPLES raises the count for a longer bug hunt; the default keeps the suite fast.
FUZZ = settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

# JSON documents shaped roughly like offsets, with every kind of wrong leaf.
_json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
)
_json = st.recursive(
    _json_leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=20,
)
_queue_ids = st.one_of(
    st.integers(min_value=-5, max_value=2**40).map(str), st.text(alphabet="0123456789+- ٣x", max_size=12)
)
_offsets_like = st.dictionaries(
    st.text(max_size=8),
    st.dictionaries(
        st.text(max_size=8), st.dictionaries(_queue_ids, _json_leaf, max_size=3) | _json, max_size=3
    ),
    max_size=3,
)
# Text made of the characters that matter to the parsers, plus anything.
_syntax = st.text(alphabet=string.printable + "|,;:{}[]\"'()\\\x00\x7fé☃\U0001f600", max_size=60)
_any_text = st.one_of(_syntax, st.text(max_size=60))


def _is_project_error(e: BaseException) -> bool:
    return isinstance(e, (OptionError, OffsetsError, FilterError, FilterSyntaxError))


@FUZZ
@given(st.one_of(_any_text, _json.map(json.dumps), _offsets_like.map(json.dumps)), st.booleans())
def test_offsets_json_parses_or_raises_offsets_error(text: str, sentinels: bool) -> None:
    try:
        parsed = from_json(text, allow_sentinels=sentinels)
    except OffsetsError as e:
        assert str(e)
        return
    for key, offset in parsed.items():
        assert isinstance(offset, int) and offset >= (-2 if sentinels else 0)
        assert 0 <= key.queue_id <= 2**31 - 1


@FUZZ
@given(st.one_of(_json, _offsets_like))
def test_offsets_dict_parses_or_raises_offsets_error(doc) -> None:
    try:
        parsed = from_json_dict(doc, allow_sentinels=True)
    except OffsetsError as e:
        assert str(e)
        return
    assert isinstance(doc, dict)
    for key, offset in parsed.items():
        assert key.topic in doc and isinstance(offset, int) and offset >= -2


def test_deeply_nested_offsets_json_is_an_offsets_error() -> None:
    for text in ("[" * 100_000 + "]" * 100_000, '{"a":' * 50_000 + "1" + "}" * 50_000):
        try:
            from_json(text)
        except OffsetsError:
            continue
        raise AssertionError("nested JSON parsed as offsets")


_reader_names = st.sampled_from([*READER_OPTIONS, "endpoints", "tls", "tlsCaFile", "accessKey", "secretKey"])
_writer_names = st.sampled_from([*WRITER_OPTIONS, "endpoints", "tls", "namespace", "accessKey", "secretKey"])
_values = st.one_of(
    _any_text,
    st.integers(min_value=-(2**65), max_value=2**65).map(str),
    st.sampled_from(
        ["", " ", "0", "-1", "1e3", "true", "FALSE", "15m", "99999999999999999999d", "{}", '{"t":{}}', "*"]
    ),
    _offsets_like.map(json.dumps),
)


def _check_option_error(e: OptionError, options: dict[str, str]) -> None:
    message = str(e)
    named = [k for k in options if k.lower() in message.lower()]
    assert named or "endpoints" in message or "topic" in message, f"error names no option: {message}"


@FUZZ
@given(st.dictionaries(_reader_names, _values, max_size=6), st.booleans(), st.booleans())
def test_reader_options_parse_or_raise_option_error(fuzzed: dict, streaming: bool, base: bool) -> None:
    options = {"endpoints": "127.0.0.1:8081", "topic": "orders"} if base else {}
    options.update(fuzzed)
    try:
        parse_reader_options(options, streaming)
    except OptionError as e:
        _check_option_error(e, options)


@FUZZ
@given(st.dictionaries(_writer_names, _values, max_size=6), st.booleans())
def test_writer_options_parse_or_raise_option_error(fuzzed: dict, base: bool) -> None:
    options = {"endpoints": "127.0.0.1:8081", "topic": "orders"} if base else {}
    options.update(fuzzed)
    try:
        parse_writer_options(options)
    except OptionError as e:
        _check_option_error(e, options)


@FUZZ
@given(st.dictionaries(st.text(max_size=20), _values, max_size=4))
def test_unknown_option_names_raise_option_error(options: dict) -> None:
    spark = {k.lower() for k in SPARK_INTERNAL_OPTIONS}
    for parse, known in (
        (lambda o: parse_reader_options(o, True), COMMON_OPTIONS + READER_OPTIONS),
        (parse_writer_options, COMMON_OPTIONS + WRITER_OPTIONS),
    ):
        names = {k.lower() for k in known} | spark
        unknown = [k for k in options if k.lower() not in names]
        try:
            parse(options)
        except OptionError as e:
            if unknown:
                assert f"option '{unknown[0]}'" in str(e), f"{unknown[0]!r} not named: {e}"
            else:
                _check_option_error(e, options)
            continue
        assert not unknown, f"unknown options {unknown} were accepted"


_tag_text = st.text(alphabet="Tag |*\t\x00\x1f\x7f,é", max_size=30)


@FUZZ
@given(st.one_of(_tag_text, _any_text), st.sampled_from(["tag", "TAG", "sql", "sql92", "bogus"]))
def test_reader_filter_options_parse_or_raise_option_error(expression: str, kind: str) -> None:
    options = {
        "endpoints": "127.0.0.1:8081",
        "topic": "t",
        "filterExpression": expression,
        "filterType": kind,
    }
    try:
        spec = parse_reader_options(options, True).filter
    except OptionError as e:
        assert "filterExpression" in str(e) or "filterType" in str(e)
        return
    if spec.kind == "tag" and not spec.matches_all:
        # What the connector accepts, the emulator's tag parser accepts too.
        parse_tag_expression(spec.expression)


@FUZZ
@given(st.one_of(_tag_text, _any_text, st.none()))
def test_emulator_tag_expression_parses_or_raises_filter_error(expression) -> None:
    try:
        flt = parse_tag_expression(expression)
    except FilterError:
        return
    flt.matches_row("TagA", [], {})


# SQL92 token soup: keywords, operators, literals and identifiers in random order.
_sql_tokens = st.sampled_from(
    [
        "a", "b.c", "_x", "TAGS", "AND", "OR", "NOT", "IS", "NULL", "BETWEEN", "IN", "TRUE", "FALSE",
        "CONTAINS", "STARTSWITH", "ENDSWITH", "=", "<>", "!=", ">", ">=", "<", "<=", "+", "-", "(", ")",
        ",", "'s'", "'it''s'", "'", "1", "-1", "1.5", "1e308", "1e999", ".5", "99999999999999999999",
        "0x1F", "\"q\"", "é", "\x00",
    ]
)  # fmt: skip
_sql = st.one_of(st.lists(_sql_tokens, max_size=20).map(" ".join), _any_text)
_props = st.dictionaries(
    st.sampled_from(["a", "b.c", "_x"]), st.sampled_from(["1", "-2.5", "x", "", "1e400"])
)


@FUZZ
@given(_sql, _props)
def test_sql92_compiles_or_raises_syntax_error(expression: str, props: dict) -> None:
    try:
        predicate = compile_sql92(expression)
    except FilterSyntaxError as e:
        assert str(e)
        return
    assert predicate(props) in (True, False)


@FUZZ
@given(_sql, st.sampled_from([0, 1, 2, 3, -1]))
def test_emulator_filter_parses_or_raises_filter_error(expression: str, filter_type: int) -> None:
    try:
        parse_filter(filter_type, expression)
    except FilterError:
        pass


def test_deeply_nested_sql92_is_a_syntax_error() -> None:
    for expression in (
        "(" * 10_000 + "a = 1" + ")" * 10_000,
        "NOT " * 10_000 + "a = 1",
        "a = " + "-" * 5000 + "1",
    ):
        try:
            compile_sql92(expression)
        except FilterSyntaxError:
            continue
        except RecursionError as e:  # pragma: no cover - the bug this test guards against
            raise AssertionError(f"RecursionError for {expression[:20]!r}...") from e


def test_project_errors_are_value_errors() -> None:
    for cls in (OptionError, OffsetsError, FilterError):
        assert issubclass(cls, ValueError) and _is_project_error(cls("x"))
