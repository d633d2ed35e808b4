"""The names a `reset_to_zero` or `restore_value` argument of the autotuner holds: a literal list, a module
constant, or a local list of the function that applies the autotuner followed through its assignments on every
path (`ListPaths`), with the conditions under which it holds each name."""

from __future__ import annotations

import ast
from typing import Any, cast

from kgate.collect import pyautotune
from kgate.collect import pysource as py
from kgate.collect.pyguards import COMPARE
from kgate.collect.pysource import Function


def protected(bound: pyautotune.Bound | None,
               constants: dict[str, ast.expr]) -> tuple[set[str], dict[str, str]] | None:
    """(names a reset list always holds, name -> the condition under which it holds it) for a `reset_to_zero` or
    `restore_value` argument; None for a list kgate cannot read (trusted: it may name anything).

    A literal list (or a module constant holding one) is read as is. A local variable of the function that applies
    the autotuner is followed through the assignments, appends, extends and `+=` of literals before the call, on
    every path through the `if`s on the way (`ListPaths`)."""
    if bound is None:
        return set(), {}
    own = bound.module.constants
    if py.resolvable(bound.expr, own):
        return {name for name, _node in py.string_items(bound.expr, own)}, {}
    expr = pyautotune.strip(bound.expr)
    if not (bound.local and bound.scope is not None and isinstance(expr, ast.Name)):
        return None
    paths = ListPaths(expr.id, own).at(bound.scope, bound.expr)
    if not paths:
        return None
    names = {name for _conditions, held in paths for name in held}
    always = {name for name in names if all(name in held for _conditions, held in paths)}
    sometimes = {}
    for name in names - always:
        holding = [conditions for conditions, held in paths if name in held]
        common = [c for c in holding[0] if all(c in other for other in holding[1:])]
        sometimes[name] = " and ".join(common) if common else " or ".join(
            "(" + " and ".join(conditions) + ")" for conditions in holding)
    return always, sometimes


_UNKNOWN = object()
_PATHS = 32


class ListPaths:
    """The values a local list of names takes on each path to a statement: (the conditions of the `if`s taken, the
    names it holds). A path on which the list is assigned anything else (a call, another variable), changed by a
    method other than `append`/`extend`, or not assigned at all makes the whole list unreadable (None)."""

    def __init__(self, name: str, constants: dict[str, ast.expr]) -> None:
        self.name = name
        self.constants = constants

    def at(self, scope: Function, node: ast.AST) -> list[tuple[tuple[str, ...], frozenset[str]]] | None:
        if any(a.arg == self.name for a in py.parameters(scope)):
            return None
        found = self._walk(scope.body, node, [((), _UNKNOWN)])
        if found is None or not found[1]:
            return None
        out = []
        for conditions, value in found[1]:
            if value is _UNKNOWN:
                return None
            out.append((conditions, value[0]))
        return out

    def _mentions(self, node: ast.AST) -> bool:
        return any(isinstance(n, ast.Name) and n.id == self.name for n in ast.walk(node))

    def _walk(self, body: list[ast.stmt], node: ast.AST, paths: list) -> tuple[bool, list] | None:
        """(reached `node`, the paths there, or those that leave the block when it is not in it); None: unreadable."""
        for stmt in body:
            if len(paths) > _PATHS:
                return None
            if any(n is node for n in ast.walk(stmt)):
                if isinstance(stmt, ast.If) and not any(n is node for n in ast.walk(stmt.test)):
                    inside = any(n is node for s in stmt.body for n in ast.walk(s))
                    branch = stmt.body if inside else stmt.orelse
                    taken = self._branch(stmt.test, inside, paths)
                    return self._walk(branch, node, taken)
                inner = [s for field in ("body", "orelse", "finalbody") for s in getattr(stmt, field, None) or []
                         if isinstance(s, ast.stmt)]
                if inner and not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    return self._walk(inner, node, paths)
                return True, paths
            if not paths:
                return False, paths
            stepped = self._step(stmt, node, paths)
            if stepped is None:
                return None
            paths = stepped
        return False, paths

    def _step(self, stmt: ast.stmt, node: ast.AST, paths: list) -> list | None:
        if isinstance(stmt, (ast.Return, ast.Raise)):
            return []
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or not self._mentions(stmt):
            return paths
        if isinstance(stmt, ast.If):
            out = []
            for taken, branch in ((True, stmt.body), (False, stmt.orelse)):
                found = self._walk(branch, node, self._branch(stmt.test, taken, paths))
                if found is None:
                    return None
                out.extend(found[1])
            return out
        if isinstance(stmt, (ast.For, ast.While)):
            found = self._walk(stmt.body, node, paths)  # once, or not at all
            return None if found is None else paths + [p for p in found[1] if p not in paths]
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            found = self._walk(stmt.body, node, paths)
            return None if found is None else found[1]
        change = self._change(stmt)
        if change is None:
            return None
        replace, added = change
        out = []
        for conditions, value in paths:
            if replace:
                out.append((conditions, added))
            elif value is _UNKNOWN or value[1]:
                return None  # added to a list not yet assigned, or to None
            else:
                out.append((conditions, (value[0] | added[0], False)))
        return out

    def _change(self, stmt: ast.stmt) -> tuple[bool, tuple[frozenset[str], bool]] | None:
        """(whether it replaces the value, the names it gives or adds and whether it is None)."""
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if len(targets) == 1 and isinstance(targets[0], ast.Name) and targets[0].id == self.name \
                    and stmt.value is not None and not self._mentions(stmt.value):
                return self._literal(stmt.value, True)
            return None
        if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name) and isinstance(stmt.op, ast.Add) \
                and not self._mentions(stmt.value):
            return self._literal(stmt.value, False)
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            call = stmt.value
            func = call.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == self.name \
                    and len(call.args) == 1 and not call.keywords and not self._mentions(call.args[0]):
                if func.attr == "append" and isinstance(call.args[0], ast.Constant) \
                        and isinstance(call.args[0].value, str):
                    return False, (frozenset({call.args[0].value}), False)
                if func.attr == "extend":
                    return self._literal(call.args[0], False)
        return None

    def _literal(self, value: ast.expr, replace: bool) -> tuple[bool, tuple[frozenset[str], bool]] | None:
        if isinstance(value, ast.Constant) and value.value is None:
            return (True, (frozenset(), True)) if replace else None
        if isinstance(value, (ast.List, ast.Tuple)) and py.resolvable(value, self.constants) \
                or isinstance(value, ast.Name) and py.resolvable(value, self.constants):
            return replace, (frozenset(name for name, _node in py.string_items(value, self.constants)), False)
        return None

    def _branch(self, test: ast.expr, taken: bool, paths: list) -> list:
        """The paths that take one branch of an `if`: a test on the list itself is decided by its value on the
        path; any other test adds itself (or its negation) to the path's conditions."""
        out = []
        text = ast.unparse(test)
        for conditions, value in paths:
            decided = self._decide(test, value) if self._mentions(test) else None
            if decided is None:
                condition = text if taken else (text[4:] if text.startswith("not ") else
                                                 f"not {text}" if isinstance(test, (ast.Name, ast.Attribute))
                                                 else f"not ({text})")
                out.append(((*conditions, condition), value))
            elif decided == taken:
                out.append((conditions, value))
        return out

    def _decide(self, test: ast.expr, value: object) -> bool | None:
        if value is _UNKNOWN:
            return None
        names, none = cast("tuple[Any, bool]", value)
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            inner = self._decide(test.operand, value)
            return None if inner is None else not inner
        if isinstance(test, ast.Name) and test.id == self.name:
            return bool(names) and not none
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            left, op, right = test.left, test.ops[0], test.comparators[0]
            if isinstance(left, ast.Name) and left.id == self.name and isinstance(right, ast.Constant) \
                    and right.value is None and isinstance(op, (ast.Is, ast.IsNot)):
                return none == isinstance(op, ast.Is)
            if isinstance(left, ast.Call) and isinstance(left.func, ast.Name) and left.func.id == "len" \
                    and len(left.args) == 1 and isinstance(left.args[0], ast.Name) \
                    and left.args[0].id == self.name and isinstance(right, ast.Constant) \
                    and isinstance(right.value, int) and type(op) in COMPARE and not none:
                return bool(COMPARE[type(op)](len(names), right.value))
        return None
