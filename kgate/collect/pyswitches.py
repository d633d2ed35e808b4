"""Switches of the environment: what a condition holds when the process's environment sets none of the variables
it reads (`os.environ.get("X_DEBUG", "0") != "0"`, `"X_DEBUG" in os.environ`, `os.getenv("X_DEBUG")`).

A value chosen by such a condition (`pages if debug else 0`) takes, in a process that sets nothing, the branch the
default picks: a debug bound that is the constant 0 in production is not a run-time size. Only conditions that do
read the environment are judged; a plain module constant (`DEBUG = False`) is left to the caller's own reading.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

from kgate.collect import pysource as py

_ENVIRON = "os.environ"
_GETTERS = frozenset({"os.environ.get", "os.getenv"})
# Conversions and string methods a flag is read through (`int(os.getenv("X", "0"))`, `.lower() in ("1", "true")`).
_CONVERSIONS: dict[str, Callable[[Any], Any]] = {"int": int, "bool": bool, "str": str, "float": float}
_METHODS = frozenset({"lower", "upper", "strip"})
_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
    ast.GtE: operator.ge, ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_, ast.IsNot: operator.is_not,
}
_UNKNOWN = object()
_DEPTH = 12

# name -> the expression a name holds where it is read (None: not one expression the reading can follow)
Lookup = Callable[[str], "ast.expr | None"]


def switched(test: ast.expr, lookup: Lookup, imports: dict[str, str]) -> bool | None:
    """What `test` holds in a process whose environment sets none of the variables it reads: True or False, or None
    where it reads no variable of the environment or the reading cannot tell."""
    reads = [False]
    value = _default(test, lookup, imports, reads, 0)
    if value is _UNKNOWN or not reads[0]:
        return None
    try:
        return bool(value)
    except Exception:  # noqa: BLE001 - an object whose truth cannot be told
        return None


def _default(node: ast.expr, lookup: Lookup, imports: dict[str, str], reads: list[bool], depth: int) -> object:
    if depth > _DEPTH:
        return _UNKNOWN
    depth += 1
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        items = [_default(e, lookup, imports, reads, depth) for e in node.elts]
        return _UNKNOWN if any(i is _UNKNOWN for i in items) else tuple(items)
    if isinstance(node, ast.Name):
        value = lookup(node.id)
        return _UNKNOWN if value is None else _default(value, lookup, imports, reads, depth)
    if isinstance(node, ast.BoolOp):
        # Short-circuit on what is known: `debug and pages` is false when debug is, whatever pages is.
        deciding = isinstance(node.op, ast.Or)
        unknown = False
        last: object = _UNKNOWN
        for operand in node.values:
            last = _default(operand, lookup, imports, reads, depth)
            if last is _UNKNOWN:
                unknown = True
            elif bool(last) is deciding:
                return last
        return _UNKNOWN if unknown else last
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        negated = _default(node.operand, lookup, imports, reads, depth)
        return _UNKNOWN if negated is _UNKNOWN else not negated
    if isinstance(node, ast.IfExp):
        test = _default(node.test, lookup, imports, reads, depth)
        if test is _UNKNOWN:
            return _UNKNOWN
        return _default(node.body if test else node.orelse, lookup, imports, reads, depth)
    if isinstance(node, ast.Compare):
        return _compare(node, lookup, imports, reads, depth)
    if isinstance(node, ast.Call):
        return _call(node, lookup, imports, reads, depth)
    return _UNKNOWN


def _compare(node: ast.Compare, lookup: Lookup, imports: dict[str, str], reads: list[bool], depth: int) -> object:
    left = _default(node.left, lookup, imports, reads, depth)
    for op, right_node in zip(node.ops, node.comparators):
        if isinstance(op, (ast.In, ast.NotIn)) and py.qualified(right_node, imports) == _ENVIRON:
            reads[0] = True  # `"X" in os.environ`: no variable is set
            result: object = isinstance(op, ast.NotIn)
            right: object = _UNKNOWN
        else:
            right = _default(right_node, lookup, imports, reads, depth)
            compare = _COMPARE.get(type(op))
            if left is _UNKNOWN or right is _UNKNOWN or compare is None:
                return _UNKNOWN
            try:
                result = compare(left, right)
            except Exception:  # noqa: BLE001 - values of types that do not compare
                return _UNKNOWN
        if not result:
            return False
        left = right
    return True


def _call(node: ast.Call, lookup: Lookup, imports: dict[str, str], reads: list[bool], depth: int) -> object:
    func = node.func
    name = py.qualified(func, imports)
    if name in _GETTERS:
        reads[0] = True
        default = node.args[1] if len(node.args) > 1 else next(
            (k.value for k in node.keywords if k.arg == "default"), None)
        return None if default is None else _default(default, lookup, imports, reads, depth)
    if isinstance(func, ast.Name) and func.id in _CONVERSIONS and len(node.args) == 1 and not node.keywords:
        value = _default(node.args[0], lookup, imports, reads, depth)
        if value is _UNKNOWN:
            return _UNKNOWN
        try:
            return _CONVERSIONS[func.id](value)
        except Exception:  # noqa: BLE001 - int("yes"): the reading cannot tell
            return _UNKNOWN
    if isinstance(func, ast.Attribute) and func.attr in _METHODS and not node.args and not node.keywords:
        value = _default(func.value, lookup, imports, reads, depth)
        return getattr(value, func.attr)() if isinstance(value, str) else _UNKNOWN
    return _UNKNOWN
