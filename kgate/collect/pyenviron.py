"""Where a Python module sets a variable of its own process's environment, and to what.

Every spelling that changes `os.environ` for the process and the children it starts: an item assigned
(`os.environ["X"] = v`, through a name bound to `os.environ` itself: `env = os.environ`), `os.putenv`,
`os.environ.setdefault`, `__setitem__`, `update` (a dict, pairs, keywords), `|=`, pytest's
`monkeypatch.setenv` and `monkeypatch.setitem(os.environ, ...)`, and `mock.patch.dict(os.environ, ...)`
(as a decorator or a context manager alike). A copy (`dict(os.environ)`) is not the environment.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from kgate.collect import pysource as py

# (where it is set, the value it is given; None where the call gives no value that can be read)
Setting = tuple[ast.AST, "ast.expr | None"]


def environ_names(tree: ast.Module, imports: dict[str, str]) -> set[str]:
    """Names bound to os.environ itself (not a copy): `env = os.environ`, `env: dict = os.environ`, `(env :=
    os.environ)`."""
    out: set[str] = set()
    for stmt in py.statements(tree):
        if isinstance(stmt, ast.Assign) and py.qualified(stmt.value, imports) == "os.environ":
            out.update(t.id for t in stmt.targets if isinstance(t, ast.Name))
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None and isinstance(stmt.target, ast.Name) \
                and py.qualified(stmt.value, imports) == "os.environ":
            out.add(stmt.target.id)
    for node in ast.walk(tree):
        if isinstance(node, ast.NamedExpr) and py.qualified(node.value, imports) == "os.environ":
            out.add(node.target.id)
    return out


class Environ:
    """The settings of one variable in one module (`variable`; `environ`: the module's `environ_names`)."""

    def __init__(self, variable: str, imports: dict[str, str], constants: dict[str, ast.expr],
                 environ: set[str]) -> None:
        self.variable = variable
        self.imports = imports
        self.constants = constants
        self.environ = environ

    def is_environ(self, expr: ast.AST) -> bool:
        return py.qualified(expr, self.imports) == "os.environ" or (isinstance(expr, ast.Name)
                                                                    and expr.id in self.environ)

    def is_key(self, expr: ast.AST | None) -> bool:
        return py.string_value(expr, self.constants) == self.variable

    def settings(self, node: ast.AST) -> Iterator[Setting]:
        """(where, value) for each place this node sets the variable in the process environment."""
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Subscript) and self.is_environ(target.value) and self.is_key(target.slice):
                    yield target, node.value
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.BitOr) and self.is_environ(node.target):
            yield from self.mapping(node.value)
        elif isinstance(node, ast.Call):
            yield from self._call(node)

    def _call(self, node: ast.Call) -> Iterator[Setting]:
        func = node.func
        name = py.qualified(func, self.imports)
        if name == "os.putenv" and self.is_key(py.argument(node, "key", 0)):
            yield node, py.argument(node, "value", 1)
        elif isinstance(func, ast.Attribute) and func.attr in ("setdefault", "__setitem__") \
                and self.is_environ(func.value) and self.is_key(py.argument(node, "key", 0)):
            yield node, py.argument(node, "default", 1) if node.args[1:] or node.keywords else None
        elif isinstance(func, ast.Attribute) and func.attr == "update" and self.is_environ(func.value):
            for arg in node.args:
                yield from self.mapping(arg)
            yield from self._keywords(node)
        elif isinstance(func, ast.Attribute) and func.attr == "setenv" and self.is_key(py.argument(node, "name", 0)):
            yield node, py.argument(node, "value", 1)
        elif isinstance(func, ast.Attribute) and func.attr == "setitem" and len(node.args) >= 2 \
                and self.is_environ(node.args[0]) and self.is_key(py.argument(node, "name", 1)):
            yield node, py.argument(node, "value", 2)  # monkeypatch.setitem(os.environ, KEY, VALUE)
        elif (name or py.dotted(func) or "").endswith("patch.dict") and node.args and \
                (self.is_environ(node.args[0]) or py.string_value(node.args[0], self.constants) == "os.environ"):
            if len(node.args) > 1:
                yield from self.mapping(node.args[1])
            yield from self._keywords(node)

    def mapping(self, expr: ast.expr) -> Iterator[Setting]:
        """The variable's entries in a mapping given to the environment: a dict, pairs, `dict(X=...)`."""
        if isinstance(expr, (ast.List, ast.Tuple, ast.Set)):  # pairs: `os.environ.update([(KEY, VALUE)])`
            for item in expr.elts:
                if isinstance(item, (ast.Tuple, ast.List)) and len(item.elts) == 2 \
                        and py.string_value(item.elts[0], self.constants) == self.variable:
                    yield item, item.elts[1]
            return
        if isinstance(expr, ast.Dict):
            for key, value in zip(expr.keys, expr.values):
                if key is not None and py.string_value(key, self.constants) == self.variable:
                    yield key, value
        elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "dict":
            yield from self._keywords(expr)

    def _keywords(self, call: ast.Call) -> Iterator[Setting]:
        for keyword in call.keywords:
            if keyword.arg == self.variable:
                yield keyword, keyword.value
