"""Functions of a module as the launch-site reading sees them (`kgate.collect.pylaunch`): each one's own assignments
by name, the scopes around it, the lines that launch or call something, and what a call passes.
"""

from __future__ import annotations

import ast
import re
from bisect import bisect_left
from collections.abc import Iterator

from kgate.collect import pysource as py
from kgate.collect.pyvalues import shape_of

_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # as Python numbers lines
_OWN, _ENV = "_kgate_own", "_kgate_env"  # a function's own statements and what they bind, kept on its node

class Scope:
    """A function (or the module) as the launch sites see it: its own assignments, by name."""

    def __init__(self, node: ast.AST, parent: Scope | None, bound: dict[str, tuple[ast.expr, Scope]] | None = None,
                 named: bool | None = None):
        self.node = node
        self.parent = parent
        self.bound = bound or {}  # a helper's parameters: the caller's argument and scope
        # Whether the module's text may hold an assignment expression (it spells `:=`): only then are the statements'
        # expressions walked for one. As the scope around it has it, where not given.
        self.named: bool = named if named is not None else parent.named if parent is not None else True
        # What a function's statements are and bind depends on its tree alone, which nothing changes once parsed:
        # kept on the node, for the many scopes of one function the readings make (a node freed with its tree).
        kept = node.__dict__
        own = kept.get(_OWN)
        if own is None:
            own = kept[_OWN] = _own_statements(node)
        self.own: list[ast.stmt] = own
        self._env: dict[str, list[tuple[ast.expr | None, int | None, int]]] | None = None

    @property
    def env(self) -> dict[str, list[tuple[ast.expr | None, int | None, int]]]:
        """name -> (value, position in an unpacked value or None, how many names it was unpacked into); read only."""
        if self._env is None:
            kept = self.node.__dict__
            env = kept.get(_ENV)
            if env is None:
                env = kept[_ENV] = {}
                for stmt in self.own:
                    for target, value in _assignments(stmt, self.named):
                        _bind(env, target, value)
            self._env = env
        return self._env

    @property
    def params(self) -> set[str]:
        return {a.arg for a in py.parameters(self.node)} if isinstance(self.node, py.Function) else set()

def _own_statements(node: ast.AST) -> list[ast.stmt]:
    """The statements of a function, class or module, not those of the definitions inside it."""
    body = getattr(node, "body", [])
    out: list[ast.stmt] = []
    stack: list[ast.AST] = list(reversed(body))
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, ast.stmt):
            out.append(stmt)
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
        children: list[ast.AST] = []
        for name in ("body", "handlers", "orelse", "finalbody", "cases"):
            children.extend(getattr(stmt, name, None) or ())
        stack.extend(reversed(children))
    return out

def asserted_equal(scope: Scope, name: str) -> list[ast.expr]:
    """What the function asserts the name equals: `assert dim == bias.size(0)`, one part of an `and`, or an entry of
    a tuple compared with a shape (`assert (dim, width) == weight.shape` gives `weight.shape[0]`)."""
    out: list[ast.expr] = []
    for stmt in scope.own:
        if not isinstance(stmt, ast.Assert):
            continue
        tests = stmt.test.values if isinstance(stmt.test, ast.BoolOp) and isinstance(stmt.test.op, ast.And) \
            else [stmt.test]
        for test in tests:
            if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
                out.extend(_equal_to(name, test.left, test.comparators[0]))
                out.extend(_equal_to(name, test.comparators[0], test.left))
    return out

def bounded_above(scope: Scope, name: str) -> list[ast.expr]:
    """The upper bounds the function enforces on the name before going on: `assert q_len <= 16` (one part of an
    `and`), or `if q_len > 16: raise ...` (one part of an `or`); a strict bound is given as written (`< 16`: 16)."""
    out: list[ast.expr] = []
    for stmt in scope.own:
        if isinstance(stmt, ast.Assert):
            tests = stmt.test.values if isinstance(stmt.test, ast.BoolOp) and isinstance(stmt.test.op, ast.And) \
                else [stmt.test]
            out.extend(bound for test in tests if (bound := at_most(name, test, holds=True)) is not None)
        elif isinstance(stmt, ast.If) and stmt.body and isinstance(stmt.body[-1], ast.Raise):
            tests = stmt.test.values if isinstance(stmt.test, ast.BoolOp) and isinstance(stmt.test.op, ast.Or) \
                else [stmt.test]
            out.extend(bound for test in tests if (bound := at_most(name, test, holds=False)) is not None)
    return out

def at_most(name: str, test: ast.expr, holds: bool) -> ast.expr | None:
    """The bound `test` puts on `name` from above where it holds (`holds`) or where it fails: `name <= b` holding,
    `name > b` failing, either way round (`b >= name`), or their strict forms."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return at_most(name, test.operand, not holds)
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    op, left, right = test.ops[0], test.left, test.comparators[0]
    flipped = {ast.Lt: ast.Gt, ast.LtE: ast.GtE, ast.Gt: ast.Lt, ast.GtE: ast.LtE}
    if isinstance(right, ast.Name) and right.id == name and type(op) in flipped:
        op, left, right = flipped[type(op)](), right, left
    if not (isinstance(left, ast.Name) and left.id == name):
        return None
    return right if isinstance(op, (ast.LtE, ast.Lt) if holds else (ast.Gt, ast.GtE)) else None

def _equal_to(name: str, side: ast.expr, other: ast.expr) -> list[ast.expr]:
    """What `name` is said to equal where `side == other` is asserted."""
    if isinstance(side, ast.Name) and side.id == name:
        return [other]
    if not isinstance(side, ast.Tuple):
        return []
    out: list[ast.expr] = []
    for at, item in enumerate(side.elts):
        if not (isinstance(item, ast.Name) and item.id == name):
            continue
        if isinstance(other, ast.Tuple) and len(other.elts) == len(side.elts):
            out.append(other.elts[at])
        elif isinstance(other, ast.Attribute) and other.attr == "shape":
            out.append(ast.copy_location(ast.Subscript(value=other, slice=ast.Constant(at), ctx=ast.Load()), other))
    return out

def scopes(tree: ast.Module, marked: list[int] | None = None, named: bool = True) -> Iterator[Scope]:
    """Every function and class of a module as a scope, with the scopes it is in, outer before inner; with `marked`
    (0-based, sorted lines), only those that span one of them (the others hold no statement on those lines); `named`:
    whether the module's text may hold an assignment expression (`Scope.named`)."""
    module = Scope(tree, None, named=named)
    module._env = {}
    stack = [module]
    while stack:
        scope = stack.pop()
        if scope is not module:
            yield scope
        stack.extend(Scope(stmt, scope) for stmt in reversed(scope.own)
                     if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                     and (marked is None or within(marked, stmt)))


def within(marked: list[int], stmt: ast.stmt) -> bool:
    """Whether a statement spans one of the (0-based, sorted) lines `marked`."""
    first, last = stmt.lineno - 1, (stmt.end_lineno or stmt.lineno) - 1
    at = bisect_left(marked, first)
    return at < len(marked) and marked[at] <= last


def top_definitions(tree: ast.Module) -> Iterator[py.Function]:
    """The functions defined at a module's top level (under an `if` or a `try` too), in order."""
    return (stmt for stmt in _own_statements(tree) if isinstance(stmt, py.Function))

def top_level(scope: Scope) -> bool:
    """A definition at the module's top level (its parent is the module)."""
    return scope.parent is not None and scope.parent.parent is None

def unpacked(tensor: ast.expr, scope: Scope) -> list[str | None] | None:
    """The names a tensor's whole shape is unpacked into (`B, T, H = x.shape`) in the scope or those around it,
    one per dimension ("_" and the like as written); None where it is not unpacked so."""
    written = py.dotted(tensor)
    here: Scope | None = scope
    while written is not None and here is not None:
        names: dict[int, str] = {}
        total = 0
        for name, bindings in here.env.items():
            for value, position, count in bindings:
                shape = shape_of(value) if value is not None and position is not None else None
                if shape is not None and shape[1] and shape[2] and py.dotted(shape[0]) == written:
                    names[position] = name  # type: ignore[index]
                    total = count
        if names:
            return [names.get(i) for i in range(total)] if all(0 <= p < total for p in names) else None
        here = here.parent
    return None

def _assignments(stmt: ast.stmt, named: bool = True) -> Iterator[tuple[ast.expr, ast.expr | None]]:
    if named:
        yield from _named(stmt)
    if isinstance(stmt, ast.Match):
        for case in stmt.cases:
            yield from _captured(case.pattern, stmt.subject)
    if isinstance(stmt, ast.Assign):
        for target in stmt.targets:
            yield target, stmt.value
    elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) and stmt.value is not None:
        yield stmt.target, stmt.value
    elif isinstance(stmt, (ast.For, ast.AsyncFor)):
        yield stmt.target, None
    elif isinstance(stmt, (ast.With, ast.AsyncWith)):
        for item in stmt.items:
            if item.optional_vars is not None:
                yield item.optional_vars, None

_BODIES = frozenset({"body", "orelse", "handlers", "finalbody", "cases"})


def _named(stmt: ast.stmt) -> Iterator[tuple[ast.expr, ast.expr]]:
    """The assignment expressions (`(n := x.shape[0])`) of a statement's own expressions, which bind in the
    enclosing function as an assignment does: not those of its nested statements (read as statements of their
    own) nor of a lambda's body (its own scope)."""
    stack: list[ast.AST] = [value for name, value in ast.iter_fields(stmt) if name not in _BODIES
                            for value in (value if isinstance(value, list) else [value]) if isinstance(value, ast.AST)]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.stmt, ast.Lambda)):
            continue
        if isinstance(node, ast.NamedExpr):
            yield node.target, node.value
        stack.extend(ast.iter_child_nodes(node))


def _captured(pattern: ast.pattern, subject: ast.expr) -> Iterator[tuple[ast.expr, ast.expr | None]]:
    """What a `case` pattern binds from the match's subject, read as an assignment: `case n:` or `case _ as n`
    binds the subject, `case (n, d):` unpacks it as `n, d = subject` does (a name of any other pattern is bound
    to a value kgate does not read)."""
    if isinstance(pattern, ast.MatchAs) and pattern.name is not None and pattern.pattern is None:
        yield ast.Name(id=pattern.name, ctx=ast.Store()), subject
    elif isinstance(pattern, ast.MatchSequence) and all(
            isinstance(p, ast.MatchStar) or isinstance(p, ast.MatchAs) and p.pattern is None for p in pattern.patterns):
        names: list[ast.expr] = []
        for p in pattern.patterns:
            name = p.name if isinstance(p, (ast.MatchStar, ast.MatchAs)) else None
            target: ast.expr = ast.Name(id=name or "_", ctx=ast.Store())
            names.append(ast.Starred(value=target, ctx=ast.Store()) if isinstance(p, ast.MatchStar) else target)
        yield ast.Tuple(elts=names, ctx=ast.Store()), subject
    else:
        for node in ast.walk(pattern):
            name = getattr(node, "name", None)
            if isinstance(node, (ast.MatchAs, ast.MatchStar)) and name is not None:
                yield ast.Name(id=name, ctx=ast.Store()), None


def _bind(env: dict[str, list[tuple[ast.expr | None, int | None, int]]], target: ast.expr,
          value: ast.expr | None) -> None:
    if isinstance(target, ast.Name):
        env.setdefault(target.id, []).append((value, None, 0))
    elif isinstance(target, (ast.Tuple, ast.List)):
        elts = target.elts
        if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(elts) and not any(
                isinstance(e, ast.Starred) for e in [*elts, *value.elts]):
            for sub, part in zip(elts, value.elts):
                _bind(env, sub, part)
            return
        if (isinstance(value, (ast.Tuple, ast.List)) and value.elts and isinstance(value.elts[0], ast.Starred)
                and not any(isinstance(e, ast.Starred) for e in [*elts, *value.elts[1:]])
                and len(elts) > len(value.elts) - 1):
            # `T, D, G = *x.shape, groups`: the names before the trailing values unpack the starred shape
            tail = len(value.elts) - 1
            head = elts[:len(elts) - tail]
            for sub, part in zip(elts[len(elts) - tail:], value.elts[1:]):
                _bind(env, sub, part)
            _bind(env, ast.Tuple(elts=head, ctx=ast.Store()), value.elts[0].value)
            return
        star = next((i for i, e in enumerate(elts) if isinstance(e, ast.Starred)), None)
        for i, sub in enumerate(elts):
            if isinstance(sub, ast.Starred):
                sub = sub.value
            position = i if star is None or i < star else i - len(elts)
            if isinstance(sub, ast.Name):
                env.setdefault(sub.id, []).append((value, position, len(elts)))

def launch_lines(text: str, names: set[str]) -> list[int]:
    """The 0-based lines on which one of `names` is subscripted or `.run`: found with `str.find`, not a regular
    expression built per module (compiling one costs more than the search)."""
    found: set[int] = set()
    for name in names:
        line_of = _Lines(text)
        at = text.find(name)
        while at >= 0:
            end = at + len(name)
            before = text[at - 1] if at else " "
            rest = text[end:end + 8].lstrip(" \t")
            if not (before.isalnum() or before == "_") and (rest.startswith("[") or rest.startswith(".run") or (
                    rest.startswith(")") and rest[1:].lstrip(" \t").startswith("["))):
                found.add(line_of(at))
            at = text.find(name, end)
    return sorted(found)

def call_lines(text: str, name: str, attr: str = "") -> list[int]:
    """The 0-based lines on which a function `name` is called by its bare name (with `attr`, its method `attr`:
    `name.apply(`), found with `str.find`."""
    found: set[int] = set()
    called = "." + attr if attr else ""
    line_of = _Lines(text)
    at = text.find(name)
    while at >= 0:
        end = at + len(name)
        before = text[at - 1] if at else " "
        if not (before.isalnum() or before in "_.") and text.startswith(called, end) and \
                text[end + len(called):end + len(called) + 8].lstrip(" \t").startswith("("):
            found.add(line_of(at))
        at = text.find(name, end)
    return sorted(found)

class _Lines:
    """The 0-based line of offsets asked in increasing order, each counted on from the one before (a count from the
    top of the text for each was most of a search through a long module); from the top again for a smaller one."""

    __slots__ = ("at", "line", "returns", "text")

    def __init__(self, text: str) -> None:
        self.text, self.at, self.line = text, 0, 0
        self.returns = "\r" in text  # a carriage return ends a line too, and a "\r\n" is one end

    def __call__(self, at: int) -> int:
        text = self.text
        if self.returns:
            return len(_LINE_BREAK.findall(text, 0, at))
        if at < self.at:
            self.at, self.line = 0, 0
        self.line += text.count("\n", self.at, at)
        self.at = at
        return self.line

def launched_name(node: ast.AST) -> str | None:
    """`k[grid](...)`, `k.run(...)`, or `wrap(k)[grid](...)` (a launch through a wrapper such as
    `torch.library.wrap_triton`): the name `k`, dotted where it is written so (`kernels.Relu.forward[grid](...)`,
    a kernel that is a static method of a class another module defines)."""
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    if isinstance(func, ast.Subscript) and isinstance(func.value, (ast.Name, ast.Attribute)):
        return py.dotted(func.value)
    if isinstance(func, ast.Subscript) and isinstance(func.value, ast.Call):
        wrapped = func.value
        if len(wrapped.args) == 1 and not wrapped.keywords and isinstance(wrapped.args[0], (ast.Name, ast.Attribute)):
            return py.dotted(wrapped.args[0])
    if isinstance(func, ast.Attribute) and func.attr == "run" and isinstance(func.value, (ast.Name, ast.Attribute)):
        return py.dotted(func.value)
    return None

def passed_for(call: ast.Call, param: str, position: int | None) -> ast.expr | None:
    for keyword in call.keywords:
        if keyword.arg == param:
            return keyword.value
    if position is not None:
        for i, arg in enumerate(call.args):
            if isinstance(arg, ast.Starred):
                return None
            if i == position:
                return arg
    return None
