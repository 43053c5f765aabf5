"""Tests for the RocketMQ SQL92 property filter in broker_emulator.core.sql92."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker_emulator.core.sql92 import FilterSyntaxError, compile_sql92


def matches(expression: str, **properties: str) -> bool:
    """Compile an expression and evaluate it against keyword properties."""
    return compile_sql92(expression)(properties)


# --------------------------------------------------------------------------------------------- comparisons


@pytest.mark.parametrize(
    ("expression", "value", "expected"),
    [
        ("a = 10", "10", True),
        ("a = 10", "10.0", True),
        ("a = 10", "11", False),
        ("a <> 10", "11", True),
        ("a <> 10", "10", False),
        ("a != 10", "11", True),
        ("a != 10", "10", False),
        ("a > 10", "11", True),
        ("a > 10", "10", False),
        ("a >= 10", "10", True),
        ("a >= 10", "9", False),
        ("a < 10", "9", True),
        ("a < 10", "10", False),
        ("a <= 10", "10", True),
        ("a <= 10", "11", False),
        ("a > 2.5", "2.6", True),
        ("a > 2.5", "2.5", False),
        ("a < .5", "0.25", True),
        ("a > 1e2", "101", True),
        ("a > -1", "0", True),
        ("a > -1", "-2", False),
        ("a = -1.5", "-1.5", True),
        ("a = +3", "3", True),
        ("a>-1", "0", True),
    ],
)
def test_numeric_comparisons(expression: str, value: str, expected: bool) -> None:
    assert matches(expression, a=value) is expected


@pytest.mark.parametrize("value", ["1e3", "+1000", "1000.0", "1000"])
def test_property_string_is_converted_to_number(value: str) -> None:
    assert matches("a = 1000", a=value)
    assert matches("a BETWEEN 999 AND 1001", a=value)


@pytest.mark.parametrize("value", ["abc", "", " 10", "10 ", "1_0", "0x10", "NaN", "Infinity", "١٠"])
def test_non_numeric_property_never_satisfies_numeric_comparison(value: str) -> None:
    for op in ("=", "<>", "!=", ">", ">=", "<", "<="):
        assert not matches(f"a {op} 10", a=value)
        # The comparison is UNKNOWN, not FALSE, so negating it does not match either.
        assert not matches(f"NOT (a {op} 10)", a=value)


def test_huge_integer_property_does_not_raise() -> None:
    assert matches("a > 10", a="9" * 5000)


def test_literal_on_the_left() -> None:
    assert matches("10 < a", a="11")
    assert not matches("10 < a", a="10")
    assert matches("'x' = a", a="x")


def test_string_equality() -> None:
    assert matches("TAGS = 'TagA'", TAGS="TagA")
    assert not matches("TAGS = 'TagA'", TAGS="taga")
    assert matches("TAGS <> 'TagA'", TAGS="TagB")
    assert not matches("TAGS <> 'TagA'", TAGS="TagA")
    assert matches("TAGS != 'TagA'", TAGS="TagB")
    assert matches("a = ''", a="")


def test_string_literal_compared_with_number_converts() -> None:
    assert matches("a = '10'", a="10")
    assert not matches("a = '10'", a="10.0")  # string vs string: no numeric conversion


def test_string_ordering_comparisons_are_false() -> None:
    for op in (">", ">=", "<", "<="):
        assert not matches(f"a {op} 'b'", a="c")
        assert not matches(f"NOT (a {op} 'b')", a="c")
    assert not matches("a > b", a="2", b="1")  # two properties are both strings


def test_property_to_property_equality() -> None:
    assert matches("a = b", a="x", b="x")
    assert not matches("a = b", a="x", b="y")
    assert matches("a <> b", a="x", b="y")


def test_literal_only_comparisons() -> None:
    assert matches("1 = 1")
    assert not matches("1 = 2")
    assert matches("'a' = 'a'")
    assert matches("2 > 1.5")


def test_string_escaped_quote() -> None:
    assert matches("a = 'it''s'", a="it's")
    assert matches("a = ''''", a="'")
    assert not matches("a = 'it''s'", a="it''s")


def test_string_with_keywords_and_symbols_inside() -> None:
    assert matches("a = 'x AND y OR (z) <> 1'", a="x AND y OR (z) <> 1")


# ---------------------------------------------------------------------------------------------- booleans


@pytest.mark.parametrize("value", ["true", "TRUE", "True"])
def test_boolean_true_is_case_insensitive(value: str) -> None:
    assert matches("flag = TRUE", flag=value)
    assert matches("flag = true", flag=value)
    assert not matches("flag = FALSE", flag=value)
    assert matches("flag <> FALSE", flag=value)


def test_boolean_false() -> None:
    assert matches("flag = FALSE", flag="false")
    assert matches("flag = False", flag="FALSE")
    assert not matches("flag = TRUE", flag="false")


def test_boolean_against_non_boolean_string_is_unknown() -> None:
    assert not matches("flag = TRUE", flag="yes")
    assert not matches("flag = FALSE", flag="yes")
    assert not matches("NOT (flag = TRUE)", flag="yes")
    assert not matches("flag = TRUE", flag="1")


def test_boolean_ordering_is_false() -> None:
    assert not matches("flag > FALSE", flag="true")


def test_boolean_constants_as_conditions() -> None:
    assert matches("TRUE")
    assert not matches("FALSE")
    assert matches("NOT FALSE")
    assert matches("a = 1 OR TRUE", a="2")
    assert not matches("a = 1 AND FALSE", a="1")
    assert matches("TRUE = flag", flag="true")


# ----------------------------------------------------------------------------------------------- IS NULL


def test_is_null_and_is_not_null() -> None:
    assert matches("a IS NULL")
    assert not matches("a IS NULL", a="")
    assert matches("a IS NOT NULL", a="")
    assert not matches("a IS NOT NULL")
    assert matches("a is not null", a="x")
    assert not matches("NOT (a IS NULL)")
    assert matches("NOT (a IS NOT NULL)")


# ----------------------------------------------------------------------------------------------- BETWEEN


def test_between() -> None:
    assert matches("a BETWEEN 1 AND 10", a="1")
    assert matches("a BETWEEN 1 AND 10", a="10")
    assert matches("a BETWEEN 1 AND 10", a="5.5")
    assert not matches("a BETWEEN 1 AND 10", a="0")
    assert not matches("a BETWEEN 1 AND 10", a="11")
    assert matches("a BETWEEN -5 AND -1", a="-3")
    assert not matches("a BETWEEN 10 AND 1", a="5")


def test_not_between() -> None:
    assert matches("a NOT BETWEEN 1 AND 10", a="0")
    assert matches("a NOT BETWEEN 1 AND 10", a="11")
    assert not matches("a NOT BETWEEN 1 AND 10", a="5")
    assert not matches("a NOT BETWEEN 1 AND 10", a="abc")
    assert not matches("a NOT BETWEEN 1 AND 10")


def test_between_binds_its_own_and() -> None:
    assert matches("a BETWEEN 1 AND 10 AND b = 'x'", a="5", b="x")
    assert not matches("a BETWEEN 1 AND 10 AND b = 'x'", a="5", b="y")
    assert matches("a BETWEEN 1 AND 10 OR b = 'x'", a="50", b="x")


def test_between_with_string_bounds_is_false() -> None:
    assert not matches("a BETWEEN 'a' AND 'z'", a="m")


def test_between_with_property_bounds_is_string_ordering_and_false() -> None:
    # Every property is a string and ordering is defined for numbers only.
    assert not matches("a BETWEEN lo AND hi", a="5", lo="1", hi="10")
    assert not matches("a NOT BETWEEN lo AND hi", a="5", lo="1", hi="10")


# ---------------------------------------------------------------------------------------------------- IN


def test_in() -> None:
    assert matches("TAGS IN ('a', 'b')", TAGS="a")
    assert matches("TAGS IN ('a','b')", TAGS="b")
    assert not matches("TAGS IN ('a', 'b')", TAGS="c")
    assert matches("TAGS IN ('only')", TAGS="only")
    assert matches("TAGS IN ('it''s')", TAGS="it's")
    assert not matches("TAGS IN ('a', 'b')")


def test_not_in() -> None:
    assert matches("TAGS NOT IN ('a', 'b')", TAGS="c")
    assert not matches("TAGS NOT IN ('a', 'b')", TAGS="a")
    assert not matches("TAGS NOT IN ('a', 'b')")


def test_in_compares_strings_exactly() -> None:
    assert not matches("a IN ('1')", a="1.0")
    assert not matches("a IN ('A')", a="a")


# --------------------------------------------------------------------------- CONTAINS / STARTSWITH / ENDSWITH


def test_contains() -> None:
    assert matches("a CONTAINS 'ell'", a="hello")
    assert not matches("a CONTAINS 'xyz'", a="hello")
    assert matches("a NOT CONTAINS 'xyz'", a="hello")
    assert not matches("a NOT CONTAINS 'ell'", a="hello")
    assert not matches("a CONTAINS 'ell'")
    assert not matches("a NOT CONTAINS 'ell'")
    assert matches("a CONTAINS ''", a="hello")


def test_startswith() -> None:
    assert matches("a STARTSWITH 'he'", a="hello")
    assert not matches("a STARTSWITH 'lo'", a="hello")
    assert matches("a NOT STARTSWITH 'lo'", a="hello")
    assert not matches("a NOT STARTSWITH 'he'", a="hello")
    assert not matches("a STARTSWITH 'he'")
    assert not matches("a NOT STARTSWITH 'he'")


def test_endswith() -> None:
    assert matches("a ENDSWITH 'lo'", a="hello")
    assert not matches("a ENDSWITH 'he'", a="hello")
    assert matches("a NOT ENDSWITH 'he'", a="hello")
    assert not matches("a NOT ENDSWITH 'lo'", a="hello")
    assert not matches("a ENDSWITH 'lo'")
    assert not matches("a NOT ENDSWITH 'lo'")


def test_string_operators_are_case_sensitive_on_values() -> None:
    assert not matches("a CONTAINS 'ELL'", a="hello")


# ------------------------------------------------------------------------------------ logic and precedence


def test_and_or_not() -> None:
    props = {"a": "1", "b": "2"}
    assert compile_sql92("a = 1 AND b = 2")(props)
    assert not compile_sql92("a = 1 AND b = 3")(props)
    assert compile_sql92("a = 9 OR b = 2")(props)
    assert not compile_sql92("a = 9 OR b = 9")(props)
    assert compile_sql92("NOT a = 9")(props)
    assert not compile_sql92("NOT a = 1")(props)
    assert compile_sql92("NOT NOT a = 1")(props)


def test_and_binds_tighter_than_or() -> None:
    # a = 1 OR (b = 1 AND c = 1)
    assert matches("a = 1 OR b = 1 AND c = 1", a="1", b="0", c="0")
    assert not matches("(a = 1 OR b = 1) AND c = 1", a="1", b="0", c="0")
    # (a = 1 AND b = 1) OR c = 1
    assert matches("a = 1 AND b = 1 OR c = 1", a="0", b="0", c="1")
    assert not matches("a = 1 AND (b = 1 OR c = 1)", a="0", b="0", c="1")


def test_not_binds_tighter_than_and_and_or() -> None:
    # (NOT a = 1) AND b = 1
    assert matches("NOT a = 1 AND b = 1", a="0", b="1")
    assert not matches("NOT (a = 1 AND b = 1)", a="1", b="1")
    assert matches("NOT (a = 1 AND b = 1)", a="1", b="0")
    # (NOT a = 1) OR b = 1
    assert matches("NOT a = 1 OR b = 1", a="1", b="1")
    assert not matches("NOT (a = 1 OR b = 1)", a="1", b="1")


def test_nested_parentheses() -> None:
    assert matches("((a = 1) AND ((b = 2) OR (c = 3)))", a="1", b="0", c="3")
    assert not matches("((a = 1) AND ((b = 2) OR (c = 3)))", a="1", b="0", c="0")


def test_keywords_are_case_insensitive() -> None:
    props = {"a": "5", "TAGS": "x", "s": "hello"}
    for expression in (
        "a between 1 and 10 and TAGS in ('x') or a is null",
        "a Between 1 And 10 AnD TAGS In ('x') Or a Is Null",
        "not a not between 1 and 10",
        "s contains 'ell' and s startswith 'he' and s endswith 'lo'",
        "a is not null and a = true or true",
    ):
        assert compile_sql92(expression)(props), expression


def test_identifiers_are_case_sensitive() -> None:
    assert not matches("TAGS = 'x'", tags="x")


def test_identifiers_with_dots_digits_and_underscores() -> None:
    assert matches("user.region_1 = 'eu'", **{"user.region_1": "eu"})
    assert matches("_private = 'x'", _private="x")
    assert matches("a1.b2.c3 > 0", **{"a1.b2.c3": "1"})


def test_whitespace_is_flexible() -> None:
    assert matches("  a=1\tAND\nb<>2  ", a="1", b="3")
    assert matches("(a=1)AND(b=2)", a="1", b="2")


# ------------------------------------------------------------------------------------ missing properties


@pytest.mark.parametrize(
    "expression",
    [
        "a = 1",
        "a <> 1",
        "a > 1",
        "a >= 1",
        "a < 1",
        "a <= 1",
        "a = 'x'",
        "a <> 'x'",
        "a = TRUE",
        "a = b",
        "a BETWEEN 1 AND 2",
        "a IN ('x')",
        "a CONTAINS 'x'",
        "a STARTSWITH 'x'",
        "a ENDSWITH 'x'",
    ],
)
def test_missing_property_makes_comparison_and_its_negation_false(expression: str) -> None:
    assert not matches(expression)
    assert not matches(f"NOT ({expression})")
    assert not matches(f"NOT NOT ({expression})")


def test_unknown_in_and_or() -> None:
    # UNKNOWN AND FALSE = FALSE, so NOT of it is TRUE.
    assert matches("NOT (missing = 1 AND b = 9)", b="1")
    # UNKNOWN AND TRUE = UNKNOWN -> still false after NOT.
    assert not matches("NOT (missing = 1 AND b = 1)", b="1")
    # UNKNOWN OR TRUE = TRUE.
    assert matches("missing = 1 OR b = 1", b="1")
    # UNKNOWN OR FALSE = UNKNOWN -> NOT keeps it unknown.
    assert not matches("NOT (missing = 1 OR b = 9)", b="1")


def test_system_keys_like_tags() -> None:
    predicate = compile_sql92("TAGS IS NOT NULL AND TAGS IN ('TagA', 'TagB') AND price > 100")
    assert predicate({"TAGS": "TagA", "price": "150"})
    assert not predicate({"TAGS": "TagC", "price": "150"})
    assert not predicate({"price": "150"})


# ------------------------------------------------------------------------------------------------- API


def test_compile_is_cached() -> None:
    assert compile_sql92("a = 1 AND b = 2") is compile_sql92("a = 1 AND b = 2")


def test_predicate_returns_bool() -> None:
    predicate = compile_sql92("a > 1")
    assert predicate({"a": "2"}) is True
    assert predicate({"a": "0"}) is False
    assert predicate({}) is False


def test_filter_syntax_error_is_value_error() -> None:
    assert issubclass(FilterSyntaxError, ValueError)


# ---------------------------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("expression", "fragment", "position"),
    [
        ("", "empty", 0),
        ("   \t ", "empty", 0),
        ("(a = 1", "unbalanced parenthesis", 6),
        ("((a = 1)", "unbalanced parenthesis", 8),
        ("a = 1)", "unbalanced parenthesis", 5),
        ("()", "expected a property name or literal", 1),
        ("a =", "expected a property name or literal", 3),
        ("a = 1 AND", "expected a property name or literal", 9),
        ("OR a = 1", "expected a property name or literal", 0),
        ("a = 1 OR", "expected a property name or literal", 8),
        ("NOT", "expected a property name or literal", 3),
        ("a = 'abc", "unterminated string literal", 4),
        ("a = 'it''s", "unterminated string literal", 4),
        ("a # 1", "unexpected character '#'", 2),
        ("a = 1 ; b = 2", "unexpected character ';'", 6),
        ('a = "x"', "unexpected character '\"'", 4),
        ("a ! 1", "unexpected character '!'", 2),
        ("a", "expected a comparison operator", 1),
        ("a b", "expected a comparison operator", 2),
        ("'x'", "expected a comparison operator", 3),
        ("a = 1 b = 2", "expected AND, OR or end of expression", 6),
        ("a IS 1", "expected NULL", 5),
        ("a IS NOT", "expected NULL", 8),
        ("a NOT 1", "after NOT", 6),
        ("a BETWEEN 1", "expected AND", 11),
        ("a BETWEEN 1 OR 2", "expected AND", 12),
        ("a IN 'x'", "expected '(' after IN", 5),
        ("a IN ()", "string literal in the IN list", 6),
        ("a IN (1, 2)", "string literal in the IN list", 6),
        ("a IN ('x',)", "string literal in the IN list", 10),
        ("a IN ('x' 'y')", "',' or ')' in the IN list", 10),
        ("a IN ('x'", "',' or ')' in the IN list", 9),
        ("a CONTAINS 1", "string literal after CONTAINS", 11),
        ("a STARTSWITH b", "string literal after STARTSWITH", 13),
        ("a ENDSWITH", "string literal after ENDSWITH", 10),
        ("a = 1abc", "malformed number '1abc'", 4),
        ("a = 1.2.3", "malformed number", 4),
        ("a = - x", "expected a property name or literal", 4),
        ("a = = 1", "expected a property name or literal", 4),
        ("AND = 1", "expected a property name or literal", 0),
        ("1a = 1", "malformed number", 0),
    ],
)
def test_syntax_errors(expression: str, fragment: str, position: int) -> None:
    with pytest.raises(FilterSyntaxError) as info:
        compile_sql92(expression)
    message = str(info.value)
    assert fragment in message
    assert repr(expression) in message  # the message names the offending expression
    assert info.value.position == position
    assert f"position {position}" in message
    assert info.value.expression == expression


def test_syntax_error_names_the_bad_token() -> None:
    with pytest.raises(FilterSyntaxError, match=r"found 'b' at position 6"):
        compile_sql92("a = 1 b = 2")
    with pytest.raises(FilterSyntaxError, match=r"found end of expression"):
        compile_sql92("a = 1 AND")


def test_non_string_expression() -> None:
    with pytest.raises(FilterSyntaxError, match="must be a string"):
        compile_sql92(None)  # type: ignore[arg-type]


def test_excessive_nesting_is_a_syntax_error() -> None:
    with pytest.raises(FilterSyntaxError, match="nested deeper"):
        compile_sql92("(" * 500 + "a = 1" + ")" * 500)
    with pytest.raises(FilterSyntaxError, match="nested deeper"):
        compile_sql92("NOT " * 500 + "a = 1")
    assert matches("(" * 50 + "a = 1" + ")" * 50, a="1")


def test_long_flat_chains_do_not_recurse() -> None:
    expression = " OR ".join(f"p{i} = {i}" for i in range(2000))
    assert matches(expression, p1999="1999")
    assert not matches(expression)


# -------------------------------------------------------------------------------------------- property


_FRAGMENTS = [
    "a", "b", "TAGS", "x.y_1", "=", "<>", "!=", ">", ">=", "<", "<=", "IS", "NOT", "NULL", "BETWEEN",
    "AND", "OR", "IN", "(", ")", ",", "'s'", "'it''s'", "''", "1", "-2", "3.5", ".5", "1e3", "-", "+",
    "TRUE", "false", "CONTAINS", "STARTSWITH", "endswith", "'", "#", "1x",
]  # fmt: skip

_property_values = st.one_of(
    st.text(max_size=8),
    st.integers(-1000, 1000).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
    st.sampled_from(["true", "FALSE", "", "1e3", ".5", "-0", "+7", " 1"]),
)
_property_dicts = st.dictionaries(st.sampled_from(["a", "b", "TAGS", "x.y_1", "c"]), _property_values)


def _compile_or_syntax_error(expression: str) -> Callable[[Mapping[str, str]], bool] | None:
    try:
        predicate = compile_sql92(expression)
    except FilterSyntaxError as exc:
        assert exc.expression == expression
        return None
    assert callable(predicate)
    return predicate


@settings(max_examples=400, deadline=None)
@given(expression=st.text(max_size=60), properties=_property_dicts)
def test_random_text_compiles_or_raises_filter_syntax_error(expression: str, properties: dict) -> None:
    predicate = _compile_or_syntax_error(expression)
    if predicate is not None:
        assert isinstance(predicate(properties), bool)


@settings(max_examples=1000, deadline=None)
@given(
    fragments=st.lists(st.sampled_from(_FRAGMENTS), min_size=1, max_size=14),
    properties=_property_dicts,
)
def test_random_token_soup_compiles_or_raises_filter_syntax_error(
    fragments: list[str], properties: dict
) -> None:
    predicate = _compile_or_syntax_error(" ".join(fragments))
    if predicate is not None:
        assert isinstance(predicate(properties), bool)


_names = st.sampled_from(["a", "b", "TAGS", "x.y_1", "c"])
_literals = st.one_of(
    st.integers(-50, 50).map(str),
    st.sampled_from(["1.5", "-0.5", "TRUE", "false", "'x'", "'1'", "''", "'it''s'"]),
)
_operands = st.one_of(_names, _literals)
_strings = st.sampled_from(["'x'", "'1'", "''", "'a''b'", "'TagA'"])
_predicates = st.one_of(
    st.builds(lambda left, op, right: f"{left} {op} {right}", _operands, st.sampled_from(
        ["=", "<>", "!=", ">", ">=", "<", "<="]), _operands),
    st.builds(lambda name, neg: f"{name} IS {neg}NULL", _names, st.sampled_from(["", "NOT "])),
    st.builds(lambda name, neg, lo, hi: f"{name} {neg}BETWEEN {lo} AND {hi}", _names,
              st.sampled_from(["", "NOT "]), _operands, _operands),
    st.builds(lambda name, neg, items: f"{name} {neg}IN ({', '.join(items)})", _names,
              st.sampled_from(["", "NOT "]), st.lists(_strings, min_size=1, max_size=3)),
    st.builds(lambda name, neg, op, s: f"{name} {neg}{op} {s}", _names, st.sampled_from(["", "NOT "]),
              st.sampled_from(["CONTAINS", "STARTSWITH", "ENDSWITH"]), _strings),
    st.sampled_from(["TRUE", "FALSE"]),
)  # fmt: skip
_conditions = st.recursive(
    _predicates,
    lambda inner: st.one_of(
        st.builds(lambda c: f"NOT {c}", inner),
        st.builds(lambda c: f"({c})", inner),
        st.builds(
            lambda left, op, right: f"{left} {op} {right}", inner, st.sampled_from(["AND", "OR"]), inner
        ),
    ),
    max_leaves=8,
)


@settings(max_examples=500, deadline=None)
@given(expression=_conditions, properties=_property_dicts)
def test_generated_valid_expressions_compile_and_evaluate_to_bool(expression: str, properties: dict) -> None:
    predicate = compile_sql92(expression)
    assert isinstance(predicate(properties), bool)
    # A predicate never matches both an expression and its negation.
    negated = compile_sql92(f"NOT ({expression})")
    assert not (predicate(properties) and negated(properties))
