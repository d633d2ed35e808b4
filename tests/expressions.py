"""GitHub Actions' expression language, as far as workflows use it (tests/actions.py): `||`, `&&`, `==`, `!=`,
`!`, parentheses, function calls, context paths, string and number literals; strings compare without regard
to case, as GitHub compares them."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

_TOKEN = re.compile(r"\s*(?:(\|\||&&|==|!=|!|\(|\)|,)|'((?:[^']|'')*)'|(-?\d+(?:\.\d+)?)|([A-Za-z_][\w.-]*))")


def tokens(text: str) -> list[tuple[str, Any]]:
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if not match or match.end() == pos:
            raise ValueError(f"cannot read the expression {text!r} at {pos}")
        op, string, number, name = match.groups()
        if op is not None:
            out.append(("op", op))
        elif string is not None:
            out.append(("value", string.replace("''", "'")))
        elif number is not None:
            out.append(("value", float(number)))
        else:
            out.append(("name", name))
        pos = match.end()
    return out


class Evaluator:
    """GitHub's expression grammar, as far as workflows use it: ||, &&, ==, !=, !, calls, context paths."""

    def __init__(self, tokens: list[tuple[str, Any]], lookup: Callable[[str], Any],
                 call: Callable[[str, list[Any]], Any]) -> None:
        self.tokens, self.pos, self.lookup, self.call = tokens, 0, lookup, call

    def peek(self) -> tuple[str, Any] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, op: str | None = None) -> tuple[str, Any]:
        token = self.tokens[self.pos]
        if op is not None and token != ("op", op):
            raise ValueError(f"expected {op!r}, found {token!r}")
        self.pos += 1
        return token

    def parse(self) -> Any:
        value = self.or_()
        if self.peek() is not None:
            raise ValueError(f"unexpected {self.peek()!r}")
        return value

    def or_(self) -> Any:
        value = self.and_()
        while self.peek() == ("op", "||"):
            self.take()
            right = self.and_()
            value = value if truthy(value) else right
        return value

    def and_(self) -> Any:
        value = self.compare()
        while self.peek() == ("op", "&&"):
            self.take()
            right = self.compare()
            value = right if truthy(value) else value
        return value

    def compare(self) -> Any:
        value = self.unary()
        while self.peek() in (("op", "=="), ("op", "!=")):
            op = self.take()[1]
            right = self.unary()
            equal = _loose(value) == _loose(right)
            value = equal if op == "==" else not equal
        return value

    def unary(self) -> Any:
        if self.peek() == ("op", "!"):
            self.take()
            return not truthy(self.unary())
        return self.primary()

    def primary(self) -> Any:
        kind, value = self.take()
        if kind == "value":
            return value
        if (kind, value) == ("op", "("):
            inner = self.or_()
            self.take(")")
            return inner
        if kind != "name":
            raise ValueError(f"unexpected {value!r}")
        if value in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[value]
        if self.peek() == ("op", "("):
            self.take()
            args = []
            while self.peek() != ("op", ")"):
                args.append(self.or_())
                if self.peek() == ("op", ","):
                    self.take()
            self.take(")")
            return self.call(value, args)
        return self.lookup(value)


def truthy(value: Any) -> bool:
    return value not in (None, False, 0, 0.0, "")


def _loose(value: Any) -> Any:
    """GitHub compares strings without regard to case."""
    return value.lower() if isinstance(value, str) else value


def as_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return "" if value is None else str(value)
