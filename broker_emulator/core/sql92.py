"""RocketMQ SQL92 message-property filter: tokenizer, recursive-descent parser and evaluator.

An expression compiles once into a predicate over a message's properties (``str -> str``). Evaluation
uses three-valued logic: a comparison that cannot be decided (missing property, operand that does not
convert to the other side's type, ordering comparison on strings) is UNKNOWN; ``NOT`` keeps UNKNOWN
unknown, ``AND``/``OR`` follow SQL rules, and UNKNOWN collapses to ``False`` at the top.
"""

from __future__ import annotations

import functools
import re
import string
from collections.abc import Callable, Mapping
from typing import NamedTuple

__all__ = ["FilterSyntaxError", "compile_sql92"]

Tri = bool | None
"""Three-valued truth: True, False or None (UNKNOWN)."""
Scalar = str | int | float | bool | None
"""An operand value: a property string, a literal, or None for a missing property."""
Node = Callable[[Mapping[str, str]], Tri]
Getter = Callable[[Mapping[str, str]], Scalar]

KEYWORDS = frozenset(
    {"AND", "OR", "NOT", "IS", "NULL", "BETWEEN", "IN", "TRUE", "FALSE", "CONTAINS", "STARTSWITH", "ENDSWITH"}
)
COMPARISON_OPS = frozenset({"=", "<>", "!=", ">", ">=", "<", "<="})
STRING_OPS = frozenset({"CONTAINS", "STARTSWITH", "ENDSWITH"})
_PREDICATE_KEYWORDS = frozenset({"IS", "NOT", "BETWEEN", "IN"}) | STRING_OPS
_MAX_DEPTH = 100

_IDENT_START = frozenset(string.ascii_letters + "_")
_IDENT_PART = _IDENT_START | frozenset(string.digits + ".")
_WHITESPACE = frozenset(" \t\r\n\f\v")
_NUMBER_RE = re.compile(r"\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?", re.ASCII)
_SIGNED_NUMBER_RE = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)
_OPERATORS = ("<>", "!=", ">=", "<=", "=", ">", "<", "-", "+")


class FilterSyntaxError(ValueError):
    """Raised when a SQL92 filter expression is empty or malformed."""

    def __init__(self, expression: str, position: int, detail: str) -> None:
        super().__init__(f"invalid SQL92 filter expression {expression!r}: {detail} at position {position}")
        self.expression = expression
        self.position = position
        self.detail = detail


class _Token(NamedTuple):
    kind: str  # IDENT, KW, STRING, NUMBER, OP, LPAREN, RPAREN, COMMA, EOF
    value: str
    pos: int

    def describe(self) -> str:
        """Human-readable form of the token for error messages."""
        if self.kind == "EOF":
            return "end of expression"
        if self.kind == "STRING":
            return "string '" + self.value.replace("'", "''") + "'"
        return repr(self.value)


def _tokenize(expression: str) -> list[_Token]:
    """Split an expression into tokens, raising FilterSyntaxError on unknown characters."""
    tokens: list[_Token] = []
    pos, length = 0, len(expression)
    while pos < length:
        ch = expression[pos]
        if ch in _WHITESPACE:
            pos += 1
        elif ch in _IDENT_START:
            end = pos + 1
            while end < length and expression[end] in _IDENT_PART:
                end += 1
            word = expression[pos:end]
            if word.upper() in KEYWORDS:
                tokens.append(_Token("KW", word.upper(), pos))
            else:
                tokens.append(_Token("IDENT", word, pos))
            pos = end
        elif ch == "'":
            chunks: list[str] = []
            start, cursor = pos, pos + 1
            while True:
                quote = expression.find("'", cursor)
                if quote < 0:
                    raise FilterSyntaxError(expression, start, "unterminated string literal")
                chunks.append(expression[cursor:quote])
                if expression.startswith("''", quote):
                    chunks.append("'")
                    cursor = quote + 2
                    continue
                pos = quote + 1
                break
            tokens.append(_Token("STRING", "".join(chunks), start))
        elif (match := _NUMBER_RE.match(expression, pos)) is not None:
            end = match.end()
            if end < length and expression[end] in _IDENT_PART:
                while end < length and expression[end] in _IDENT_PART:
                    end += 1
                raise FilterSyntaxError(expression, pos, f"malformed number {expression[pos:end]!r}")
            tokens.append(_Token("NUMBER", match.group(), pos))
            pos = end
        elif ch == "(":
            tokens.append(_Token("LPAREN", ch, pos))
            pos += 1
        elif ch == ")":
            tokens.append(_Token("RPAREN", ch, pos))
            pos += 1
        elif ch == ",":
            tokens.append(_Token("COMMA", ch, pos))
            pos += 1
        else:
            op = next((o for o in _OPERATORS if expression.startswith(o, pos)), None)
            if op is None:
                raise FilterSyntaxError(expression, pos, f"unexpected character {ch!r}")
            tokens.append(_Token("OP", op, pos))
            pos += len(op)
    tokens.append(_Token("EOF", "", length))
    return tokens


def _number_from_text(text: str) -> int | float:
    """Convert validated numeric text to int, or float for decimals/exponents and huge integers."""
    if any(c in text for c in ".eE"):
        return float(text)
    try:
        return int(text)
    except ValueError:  # more digits than int() accepts from a string
        return float(text)


def _parse_number(text: str) -> int | float | None:
    """Parse a property string as a number the way the broker does, or None if it is not numeric."""
    if _SIGNED_NUMBER_RE.fullmatch(text) is None:
        return None
    return _number_from_text(text)


def _parse_bool(text: str) -> bool | None:
    """Parse a property string as a boolean ('true'/'false', any case), or None."""
    lowered = text.lower()
    if lowered == "true":
        return True
    if lowered == "false":
        return False
    return None


def _coerce(left: Scalar, right: Scalar) -> tuple[Scalar, Scalar] | None:
    """Bring two non-null operands to one type (bool, str or number); None when they do not convert."""
    left_bool, right_bool = isinstance(left, bool), isinstance(right, bool)
    if left_bool or right_bool:
        if left_bool and right_bool:
            return left, right
        other = right if left_bool else left
        if not isinstance(other, str):
            return None
        parsed = _parse_bool(other)
        if parsed is None:
            return None
        return (left, parsed) if left_bool else (parsed, right)
    left_str, right_str = isinstance(left, str), isinstance(right, str)
    if left_str and right_str:
        return left, right
    if left_str:
        left = _parse_number(left)  # type: ignore[arg-type]
        if left is None:
            return None
    if right_str:
        right = _parse_number(right)  # type: ignore[arg-type]
        if right is None:
            return None
    return left, right


def _compare(op: str, left: Scalar, right: Scalar) -> Tri:
    """Evaluate one comparison with RocketMQ-style conversions; UNKNOWN on nulls or type mismatch."""
    if left is None or right is None:
        return None
    pair = _coerce(left, right)
    if pair is None:
        return None
    lhs, rhs = pair
    if op == "=":
        return lhs == rhs
    if op in ("<>", "!="):
        return lhs != rhs
    if isinstance(lhs, (str, bool)):
        return None  # ordering is defined for numbers only
    if op == ">":
        return lhs > rhs  # type: ignore[operator]
    if op == ">=":
        return lhs >= rhs  # type: ignore[operator]
    if op == "<":
        return lhs < rhs  # type: ignore[operator]
    return lhs <= rhs  # type: ignore[operator]


def _property_getter(name: str) -> Getter:
    """Getter returning a property's string value, or None when the message lacks it."""

    def get(properties: Mapping[str, str]) -> Scalar:
        value = properties.get(name)
        return value if value is None or isinstance(value, str) else str(value)

    return get


def _constant_getter(value: Scalar) -> Getter:
    """Getter returning a literal value."""
    return lambda _properties: value


def _negate(node: Node) -> Node:
    """Three-valued NOT: UNKNOWN stays UNKNOWN."""

    def evaluate(properties: Mapping[str, str]) -> Tri:
        result = node(properties)
        return None if result is None else not result

    return evaluate


def _all_of(nodes: list[Node]) -> Node:
    """Three-valued AND over any number of operands."""

    def evaluate(properties: Mapping[str, str]) -> Tri:
        outcome: Tri = True
        for node in nodes:
            result = node(properties)
            if result is False:
                return False
            if result is None:
                outcome = None
        return outcome

    return evaluate


def _any_of(nodes: list[Node]) -> Node:
    """Three-valued OR over any number of operands."""

    def evaluate(properties: Mapping[str, str]) -> Tri:
        outcome: Tri = False
        for node in nodes:
            result = node(properties)
            if result is True:
                return True
            if result is None:
                outcome = None
        return outcome

    return evaluate


class _Parser:
    """Recursive-descent parser turning a token list into a tree of closures."""

    def __init__(self, expression: str) -> None:
        self.expression = expression
        self.tokens = _tokenize(expression)
        self.index = 0
        self.depth = 0

    @property
    def current(self) -> _Token:
        return self.tokens[self.index]

    def _peek(self, offset: int = 1) -> _Token:
        return self.tokens[min(self.index + offset, len(self.tokens) - 1)]

    def _advance(self) -> _Token:
        token = self.tokens[self.index]
        if token.kind != "EOF":
            self.index += 1
        return token

    def _error(self, detail: str, token: _Token | None = None) -> FilterSyntaxError:
        token = token or self.current
        return FilterSyntaxError(self.expression, token.pos, f"{detail}, found {token.describe()}")

    def _accept_keyword(self, word: str) -> bool:
        if self.current.kind == "KW" and self.current.value == word:
            self.index += 1
            return True
        return False

    def _expect(self, kind: str, what: str, value: str | None = None) -> _Token:
        token = self.current
        if token.kind != kind or (value is not None and token.value != value):
            raise self._error(f"expected {what}")
        return self._advance()

    def _enter(self) -> None:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise self._error(f"expression nested deeper than {_MAX_DEPTH} levels")

    def parse(self) -> Node:
        """Parse the whole expression and require that every token is consumed."""
        node = self._parse_or()
        if self.current.kind == "RPAREN":
            raise self._error("unbalanced parenthesis: ')' without a matching '('")
        if self.current.kind != "EOF":
            raise self._error("expected AND, OR or end of expression")
        return node

    def _parse_or(self) -> Node:
        nodes = [self._parse_and()]
        while self._accept_keyword("OR"):
            nodes.append(self._parse_and())
        return nodes[0] if len(nodes) == 1 else _any_of(nodes)

    def _parse_and(self) -> Node:
        nodes = [self._parse_not()]
        while self._accept_keyword("AND"):
            nodes.append(self._parse_not())
        return nodes[0] if len(nodes) == 1 else _all_of(nodes)

    def _parse_not(self) -> Node:
        if self._accept_keyword("NOT"):
            self._enter()
            node = _negate(self._parse_not())
            self.depth -= 1
            return node
        return self._parse_primary()

    def _parse_primary(self) -> Node:
        token = self.current
        if token.kind == "LPAREN":
            self._advance()
            self._enter()
            node = self._parse_or()
            self._expect(
                "RPAREN", f"unbalanced parenthesis: expected ')' for the '(' opened at offset {token.pos}"
            )
            self.depth -= 1
            return node
        if token.kind == "KW" and token.value in ("TRUE", "FALSE"):
            following = self._peek()
            is_operand = (following.kind == "OP" and following.value in COMPARISON_OPS) or (
                following.kind == "KW" and following.value in _PREDICATE_KEYWORDS
            )
            if not is_operand:
                self._advance()
                constant = token.value == "TRUE"
                return lambda _properties: constant
        return self._parse_predicate()

    def _parse_value(self) -> Getter:
        token = self.current
        if token.kind == "IDENT":
            self._advance()
            return _property_getter(token.value)
        if token.kind == "STRING":
            self._advance()
            return _constant_getter(token.value)
        if token.kind == "NUMBER":
            self._advance()
            return _constant_getter(_number_from_text(token.value))
        if token.kind == "OP" and token.value in ("-", "+") and self._peek().kind == "NUMBER":
            self._advance()
            number = _number_from_text(self._advance().value)
            return _constant_getter(-number if token.value == "-" else number)
        if token.kind == "KW" and token.value in ("TRUE", "FALSE"):
            self._advance()
            return _constant_getter(token.value == "TRUE")
        raise self._error("expected a property name or literal")

    def _parse_string_literal(self, context: str) -> str:
        return self._expect("STRING", f"a string literal {context}").value

    def _parse_predicate(self) -> Node:
        operand = self._parse_value()
        token = self.current
        if token.kind == "OP" and token.value in COMPARISON_OPS:
            self._advance()
            right = self._parse_value()
            op = token.value
            return lambda properties: _compare(op, operand(properties), right(properties))
        if self._accept_keyword("IS"):
            negated = self._accept_keyword("NOT")
            self._expect("KW", "NULL after IS" + (" NOT" if negated else ""), "NULL")
            if negated:
                return lambda properties: operand(properties) is not None
            return lambda properties: operand(properties) is None
        negated = self._accept_keyword("NOT")
        node = self._parse_postfix_predicate(operand, negated)
        return _negate(node) if negated else node

    def _parse_postfix_predicate(self, operand: Getter, negated: bool) -> Node:
        token = self.current
        keyword = token.value if token.kind == "KW" else ""
        if keyword == "BETWEEN":
            self._advance()
            low = self._parse_value()
            self._expect("KW", "AND between the BETWEEN bounds", "AND")
            high = self._parse_value()

            def between(properties: Mapping[str, str]) -> Tri:
                value = operand(properties)
                above = _compare(">=", value, low(properties))
                if above is False:
                    return False
                below = _compare("<=", value, high(properties))
                if below is False:
                    return False
                return None if above is None or below is None else True

            return between
        if keyword == "IN":
            self._advance()
            self._expect("LPAREN", "'(' after IN")
            choices = {self._parse_string_literal("in the IN list")}
            while self.current.kind == "COMMA":
                self._advance()
                choices.add(self._parse_string_literal("in the IN list"))
            self._expect("RPAREN", "',' or ')' in the IN list")
            frozen = frozenset(choices)

            def member(properties: Mapping[str, str]) -> Tri:
                value = operand(properties)
                return value in frozen if isinstance(value, str) else None

            return member
        if keyword in STRING_OPS:
            self._advance()
            needle = self._parse_string_literal(f"after {keyword}")
            return self._string_test(operand, keyword, needle)
        if negated:
            raise self._error("expected BETWEEN, IN, CONTAINS, STARTSWITH or ENDSWITH after NOT")
        raise self._error("expected a comparison operator, IS, BETWEEN, IN, CONTAINS, STARTSWITH or ENDSWITH")

    @staticmethod
    def _string_test(operand: Getter, keyword: str, needle: str) -> Node:
        """Build a CONTAINS / STARTSWITH / ENDSWITH test; UNKNOWN when the operand is not a string."""

        def evaluate(properties: Mapping[str, str]) -> Tri:
            value = operand(properties)
            if not isinstance(value, str):
                return None
            if keyword == "CONTAINS":
                return needle in value
            if keyword == "STARTSWITH":
                return value.startswith(needle)
            return value.endswith(needle)

        return evaluate


@functools.lru_cache(maxsize=1024)
def _compile_cached(expression: str) -> Callable[[Mapping[str, str]], bool]:
    """Parse an expression once and wrap the tree so UNKNOWN evaluates to False."""
    if not expression.strip():
        raise FilterSyntaxError(expression, 0, "expression is empty")
    node = _Parser(expression).parse()

    def predicate(properties: Mapping[str, str]) -> bool:
        return node(properties) is True

    predicate.__doc__ = f"SQL92 filter {expression!r}"
    return predicate


def compile_sql92(expression: str) -> Callable[[Mapping[str, str]], bool]:
    """Compile a RocketMQ SQL92 filter into a predicate over message properties (cached per expression).

    Raises FilterSyntaxError for a blank or malformed expression.
    """
    if not isinstance(expression, str):
        raise FilterSyntaxError(
            repr(expression), 0, f"expression must be a string, not {type(expression).__name__}"
        )
    return _compile_cached(expression)
