"""Where a call runs in a function's body: the `if`s around it (and their value under known constexpr values),
and whether another call runs before it on every path to it."""

from __future__ import annotations

import ast
from typing import Any


def _contains(stmt: ast.AST, node: ast.AST) -> bool:
    return any(n is node for n in ast.walk(stmt))


def before(body: list[ast.stmt], first: ast.Call, then: ast.Call) -> bool:
    """Whether `first` runs before `then` whenever `then` runs: an earlier statement of a block around both,
    not under an `if` of its own (loops are allowed), or both in the same branch of an `if`."""
    at_first = next((i for i, stmt in enumerate(body) if _contains(stmt, first)), None)
    at_then = next((i for i, stmt in enumerate(body) if _contains(stmt, then)), None)
    if at_first is None or at_then is None or at_first > at_then:
        return False
    if at_first < at_then:
        return _unconditional(body[at_first], first)
    stmt = body[at_first]
    if isinstance(stmt, ast.If):
        return any(_contains_all(branch, first, then) and before(branch, first, then)
                   for branch in (stmt.body, stmt.orelse))
    inner = [s for field in ("body", "orelse", "finalbody") for s in getattr(stmt, field, None) or []
             if isinstance(s, ast.stmt)]
    return bool(inner) and before(inner, first, then)


def _contains_all(body: list[ast.stmt], *nodes: ast.AST) -> bool:
    return all(any(_contains(stmt, node) for stmt in body) for node in nodes)


def _unconditional(stmt: ast.stmt, call: ast.Call) -> bool:
    """Whether `call` runs whenever `stmt` does, loops aside: no `if`, `try` or nested definition in between."""
    if isinstance(stmt, (ast.Expr, ast.Assign, ast.AnnAssign, ast.AugAssign)):
        return True
    if isinstance(stmt, (ast.For, ast.While, ast.With)):
        return any(_contains(s, call) and _unconditional(s, call) for s in stmt.body)
    return False



def guards(body: list[ast.stmt], call: ast.Call) -> list[tuple[ast.expr, bool]]:
    """(test, branch taken) of each `if` around `call` in a statement list, outermost first."""
    for stmt in body:
        if not any(node is call for node in ast.walk(stmt)):
            continue
        if isinstance(stmt, ast.If):
            for taken, branch in ((True, stmt.body), (False, stmt.orelse)):
                if any(node is call for s in branch for node in ast.walk(s)):
                    return [(stmt.test, taken), *guards(branch, call)]
            return []  # the call is in the test itself
        inner = [s for field in ("body", "orelse", "finalbody") for s in getattr(stmt, field, None) or []
                 if isinstance(s, ast.stmt)]
        return guards(inner, call)
    return []


COMPARE = {ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b, ast.Lt: lambda a, b: a < b,
            ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b}


def truth(test: ast.expr, values: dict[str, object]) -> bool | None:
    """A guard's value under one config's constexpr values; None when it depends on anything else."""
    if isinstance(test, ast.Name):
        return bool(values[test.id]) if test.id in values else None
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = truth(test.operand, values)
        return None if inner is None else not inner
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in COMPARE:
        sides: list[Any] = []
        for side in (test.left, test.comparators[0]):
            if isinstance(side, ast.Constant):
                sides.append(side.value)
            elif isinstance(side, ast.Name) and side.id in values:
                sides.append(values[side.id])
            else:
                return None
        try:
            return bool(COMPARE[type(test.ops[0])](*sides))
        except TypeError:
            return None
    return None
