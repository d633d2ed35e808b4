"""Who calls a launching function and who launches a kernel, for the launch-site reading
(`kgate.collect.pylaunch.Launches`): in the module, and in the project's other modules that import it.

A parameter of the launching function is what the calls of that function pass for it: the module's own calls, or
where it has none, the calls in the project's other modules that import the function (a launcher called from a
layer or a serving backend), and theirs in turn, up to `REACH` modules away from the module under lint. A kernel the
module never launches may be launched from a module that imports it (`from .kernels import fwd_kernel` in ops.py). Those modules are found by `kgate.collect.pyproject.Modules` and
read by a reading of their own, parsed only in the definitions that name what is asked about.
"""

from __future__ import annotations

import ast
import functools
import re
from typing import TYPE_CHECKING, cast

from kgate.collect import pyparts, pysparse
from kgate.collect import pysource as py
from kgate.collect.pypicks import chosen_names, picking_lines
from kgate.collect.pyscopes import Scope, at_most, call_lines, passed_for, scopes, top_level, within
from kgate.collect.pyvalues import FEW_VALUES, UNKNOWN, Names, Verdict, integer, worst
from kgate.collect.source import SourceFile

if TYPE_CHECKING:
    from kgate.collect.pylaunch import Launches
    from kgate.collect.pyproject import Modules


# How many modules away from the module under lint the calls of a launching function are followed: a launcher, the
# layer that calls it, the backend that calls the layer.
REACH = 2


class CallSites:
    """The calls and the launch sites of `Launches`, beyond the module's own launch sites."""

    source: SourceFile
    info: py.ParsedModule
    tree: ast.Module
    names: Names
    bucketing: frozenset[str]
    project: Modules | None
    beyond: bool  # whether the calls in the project's other modules are read now
    hops: int  # how many modules away from the module under lint this one is, by the calls followed to it
    runtime_only: bool  # whether only the values that follow the token count are asked for
    named: bool  # whether the module's text may hold an assignment expression (`Scope.named`)
    _calls: dict[str, list[tuple[ast.Call, Scope]]]

    def passed_elsewhere(self, launched: str, param: str, position: int | None,
                         default: bool, owner: str = "") -> list[tuple[ast.expr | None, Verdict]]:
        """`passed` at the launch sites of `launched` in the project's other modules, which import it from this one
        (`from .kernels import fwd_kernel` and `fwd_kernel[grid](...)` in ops.py); with `owner`, the top-level class
        whose static method the kernel is, reached through an import (`kernels.Relu.forward[grid](...)`)."""
        out: list[tuple[ast.expr | None, Verdict]] = []
        for reader, local in self._elsewhere(launched, launches=True, owner=owner):
            for name in local:
                out.extend(reader.passed(name, param, position, default))
        return out

    def _elsewhere(self, name: str, launches: bool, owner: str = "") -> list[tuple[Launches, list[str]]]:
        """The readings of the project's other modules that import this module's top-level `name` (with `owner`, the
        class `name` is a method of), each with the names they bind it to (`owner.name`, as they write it); with
        `launches`, read for their launch sites of it."""
        if self.project is None:
            return []
        out = []
        found = [(path, [f"{dotted}.{name}" for dotted in local]) for path, local in
                 self.project.reaching(self.source.path, owner)] if owner else \
            self.project.importing(self.source.path, name)
        for path, local in found:
            key = ("launches", path, tuple(local) if launches else (), self.hops + 1, type(self.names),
                   frozenset(self.names.runtime), frozenset(self.names.model), self.bucketing, self.runtime_only)
            reader = self.project.readers.get(key)
            if reader is None:
                reader = self.project.readers[key] = self.project.reading(
                    key, functools.partial(self._reader, path, local, launches))
            if reader is not None:
                out.append((cast("Launches", reader), local))
        return out

    def _reader(self, path: str, local: list[str], launches: bool) -> Launches | None:
        """The reading of another module of the project, parsed only in the definitions that name `local`."""
        from kgate.collect.source import UnreadableSource

        assert self.project is not None
        source = self.project.source(path)
        if source is None:
            return None
        source.derived.setdefault("needles", tuple(sorted(local)))
        try:
            info = py.info(source)
        except UnreadableSource:
            return None
        from kgate.collect.pylaunch import Launches

        reader = Launches(source, info, set(local) if launches else set(), set(), self.names, self.bucketing,
                          self.project, self.runtime_only)
        # Modules away from the one under lint: the calls of a module that far are read no further.
        reader.hops = self.hops + 1
        reader.beyond = reader.hops < REACH
        return reader

    def _passed_by_callers(self, scope: Scope, name: str) -> list[tuple[ast.expr, Scope, Launches]]:
        """What each call of a top-level function passes for one of its parameters, with the scope of the call and
        the reading of its module: the module's own calls, or where it has none, the calls in the project's other
        modules that import the function; empty when there is no such call, or one passes it otherwise (a
        default, `*args`)."""
        fn = scope.node
        applied = applied_class(scope)
        method = not applied and own_method(scope)
        owner, takes_class = ("", False) if applied or method else class_method(scope)
        if not (isinstance(fn, py.Function) and (top_level(scope) or applied or method or owner)):
            return []
        positional = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args]]
        position = positional.index(name) if name in positional else None
        called, attr = (applied, "apply") if applied else ("self", fn.name) if method else (owner, fn.name) if owner \
            else (fn.name, "")
        if applied or method or takes_class:  # `Fn.apply(q, k)` passes `forward(ctx, q, k)` its parameters after the
            position = position - 1 if position else None  # context, `self.attend(q, k)` those of `attend(self, q, k)`
        # A method is read where its own class calls it on the instance (`self.attend(...)` in another method).
        # `attend = Fn.apply` at the module's top level: its calls are calls of `Fn.apply` too.
        aliases = applied_aliases(self.source.text, applied) if applied else []
        calls = [(call, caller, cast("Launches", self)) for call, caller in self._callers(called, attr)
                 if not method or _same_class(caller, scope)]
        # A static or class method is called through its class (`Op.run(...)`), or by the class's own methods
        # through `self` or `cls`.
        calls += [(call, caller, cast("Launches", self)) for through in (("self", "cls") if owner else ())
                  for call, caller in self._callers(through, fn.name) if _same_class(caller, scope)]
        calls += [(call, caller, cast("Launches", self)) for alias in aliases for call, caller in self._callers(alias)]
        if not calls and self.beyond and not method:
            calls = [(call, caller, reader) for reader, local in self._elsewhere(called, launches=False)
                     for other in local for call, caller in reader._callers(other, attr)]
            calls += [(call, caller, reader) for alias in aliases
                      for reader, local in self._elsewhere(alias, launches=False)
                      for other in local for call, caller in reader._callers(other)]
        out = []
        for call, caller, reader in calls:
            arg = passed_for(call, name, position)
            if arg is None or applied and call.keywords:
                return []
            if isinstance(call.func, ast.Name) and call.func.id != called and _bounded_by_choice(caller, call.func.id,
                                                                                                  called, arg, reader):
                arg = ast.copy_location(ast.Constant(FEW_VALUES), arg)  # a few values: bounded
            out.append((arg, caller, reader))
        return out

    def saved(self, expr: ast.Attribute, scope: Scope, depth: int, seen: set[tuple[int, str]]) -> Verdict:
        """`ctx.N` read in an autograd function's `backward`: what its `forward` stores there (`ctx.N = N`), read
        in `forward` (whose parameters are what the `Fn.apply` calls pass); UNKNOWN for any other attribute."""
        found = saved_in_forward(expr, scope)
        if not found:
            return Verdict(UNKNOWN)
        forward, values = found
        reader = cast("Launches", self)
        return worst([reader.value(value, forward, depth, seen) for value in values])

    def _callers(self, name: str, attr: str = "") -> list[tuple[ast.Call, Scope]]:
        """The calls of a function by name from the module's functions and methods, each with its scope (with `attr`,
        the calls of that method of the name: `Fn.apply(...)`): read from the statements whose lines call it (in the
        definitions parsed on their own when the module was read in part)."""
        key = f"{name}.{attr}" if attr else name
        if key not in self._calls:  # shared by the rules that read the file (`source.derived`)
            marked = call_lines(self.source.text, name, attr)
            aliases = {} if attr else alias_lines(self.source.text, name)
            if aliases:
                marked = sorted({*marked, *(line for lines in aliases.values() for line in lines)})
            # A module read for this name (another module's reading) holds every definition that names it already.
            read_for = name in (self.source.derived.get("needles") or ())
            tree = self.info.tree if read_for else self.tree if self.info.whole or not marked else self._around(marked)
            tree = ast.Module(body=[stmt for stmt in tree.body if within(marked, stmt)], type_ignores=[])
            self._calls[key] = [(node, scope) for scope in scopes(tree, marked, self.named) if isinstance(scope.node, py.Function)
                                for stmt in scope.own if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                               ast.ClassDef)) and within(marked, stmt)
                                for node in py.expressions(stmt) if isinstance(node, ast.Call)
                                and (calls_name(node.func, name, attr) or isinstance(node.func, ast.Name)
                                     and node.func.id in aliases
                                     and _aliased(scope, node.func.id, name, self.info.constants))] \
                if marked else []
        return self._calls[key]

    def _around(self, marked: list[int]) -> ast.Module:
        from kgate.collect.source import UnreadableSource

        parts = pyparts.of(self.source)
        if parts.blocks is None:
            return self.source.tree
        try:
            return parts.parse(pysparse.containing(parts.blocks, marked), None, self.source.rel)
        except UnreadableSource:
            return self.source.tree


def alias_lines(text: str, name: str) -> dict[str, list[int]]:
    """Local names a function binds to `name` or to a choice among it and others (`kernel = decode if short else
    prefill`, `kgate.collect.pypicks`), each with the 0-based lines of that assignment and of their calls, found in the
    text (`_aliased` checks them)."""
    if name not in text:
        return {}
    return {alias: [*lines, *call_lines(text, alias)] for alias, lines in picking_lines(text, {name}).items()}


def _aliased(scope: Scope, alias: str, name: str, constants: dict[str, ast.expr]) -> bool:
    """Whether every binding of `alias` in the function may hold `name`: bound to it, or to a choice one of whose
    options it is."""
    bindings = scope.env.get(alias)
    if not bindings:
        return False
    return all(name in chosen_names(value, position, constants) for value, position, _count in bindings)


def calls_name(func: ast.expr, name: str, attr: str) -> bool:
    """Whether a call's function is `name` (with `attr`: `name.attr`); `name` may be dotted, a function reached
    through its module (`kernels.launch` after `from pkg import kernels`)."""
    if attr:
        return isinstance(func, ast.Attribute) and func.attr == attr and isinstance(func.value, (ast.Name,
                                                                                                  ast.Attribute)) \
            and py.dotted(func.value) == name
    return isinstance(func, (ast.Name, ast.Attribute)) and py.dotted(func) == name


def own_method(scope: Scope) -> bool:
    """Whether the scope is a method of a class of the module's top level that takes the instance first (`def
    attend(self, q, k)`), called by its class as `self.attend(...)`."""
    fn, owner = scope.node, scope.parent
    if not (isinstance(fn, py.Function) and owner is not None and isinstance(owner.node, ast.ClassDef)
            and top_level(owner)):
        return False
    if any((py.dotted(d) or "").rsplit(".", 1)[-1] in ("staticmethod", "classmethod") for d in fn.decorator_list):
        return False
    first = [*fn.args.posonlyargs, *fn.args.args][:1]
    return bool(first) and first[0].arg == "self"


def class_method(scope: Scope) -> tuple[str, bool]:
    """(the class's name, whether the class comes first) where the scope is a `@staticmethod` or `@classmethod` of a
    class of the module's top level, called as `Op.run(...)`; ("", False) for any other scope."""
    fn, owner = scope.node, scope.parent
    if not (isinstance(fn, py.Function) and owner is not None and isinstance(owner.node, ast.ClassDef)
            and top_level(owner)):
        return "", False
    kinds = {(py.dotted(d) or "").rsplit(".", 1)[-1] for d in fn.decorator_list}
    if "staticmethod" in kinds:
        return owner.node.name, False
    if "classmethod" in kinds:
        return owner.node.name, True
    return "", False


def _bounded_by_choice(caller: Scope, alias: str, name: str, arg: ast.expr, reader: Launches) -> bool:
    """Whether a call through `alias` passes a name that the conditional picking `name` bounds to a few values:
    `attend = decode if q_len <= 16 else prefill`, then `attend(q, q_len=q_len)` reaches `decode` only with
    `q_len` at most 16."""
    if not isinstance(arg, ast.Name):
        return False
    for value, _position, _count in caller.env.get(alias, []):
        if not isinstance(value, ast.IfExp):
            return False
        taken = [holds for branch, holds in ((value.body, True), (value.orelse, False))
                 if isinstance(branch, ast.Name) and branch.id == name]
        if not taken:
            return False
        tests = value.test.values if isinstance(value.test, ast.BoolOp) and isinstance(
            value.test.op, ast.And if taken[0] else ast.Or) else [value.test]
        bounds = [integer(b, reader.info.constants) for t in tests if (b := at_most(arg.id, t, taken[0])) is not None]
        if not any(b is not None and b <= FEW_VALUES for b in bounds):
            return False
    return bool(caller.env.get(alias))


def _same_class(caller: Scope, method: Scope) -> bool:
    """Whether a calling scope is a method of the class `method` belongs to (the module may be parsed in parts,
    so the class is known by its name and line)."""
    ours, theirs = method.parent, caller.parent
    return ours is not None and theirs is not None and isinstance(ours.node, ast.ClassDef) and \
        isinstance(theirs.node, ast.ClassDef) and (theirs.node.name, theirs.node.lineno) == \
        (ours.node.name, ours.node.lineno)


def applied_aliases(text: str, applied: str) -> list[str]:
    """The names a module binds at its top level to an autograd function's `apply` (`attend = Fn.apply`)."""
    needle = f"{applied}.apply"
    out: list[str] = []
    at = text.find(needle)
    while at >= 0:  # only a line that holds `Fn.apply` can bind it: each such line tried once (as `alias_lines`)
        start = text.rfind("\n", 0, at) + 1
        end = text.find("\n", at)
        end = len(text) if end < 0 else end
        match = _APPLIED_ALIAS.match(f"{applied}\0{text[start:end]}")
        if match is not None:
            out.append(match.group(2))
        at = text.find(needle, end + 1)
    return out


# `attend = Fn.apply` at the top level, tried on the class's name, a NUL and the line: the name is matched again by
# reference to the group before the NUL (one expression for every name, not one compiled per name).
_APPLIED_ALIAS = re.compile(r"^(?P<name>[^\0]*)\0(\w+)[ \t]*=[ \t]*(?P=name)\.apply[ \t]*(?:#.*)?$")


def applied_class(scope: Scope) -> str:
    """The autograd function whose `forward` the scope is (a class of the module's top level deriving from
    `Function`, `torch.autograd.Function`), called through `Fn.apply(...)`; "" for any other scope."""
    owner = scope.parent
    if not (isinstance(scope.node, py.Function) and scope.node.name == "forward" and owner is not None
            and isinstance(owner.node, ast.ClassDef) and top_level(owner)):
        return ""
    bases = [(py.dotted(base) or "").rsplit(".", 1)[-1] for base in owner.node.bases]
    return owner.node.name if "Function" in bases else ""


def saved_in_forward(expr: ast.Attribute, scope: Scope) -> tuple[Scope, list[ast.expr]] | None:
    """For `ctx.N` in the `backward` of an autograd function (`ctx` its first parameter): the scope of the class's
    `forward` and every value that one assigns to its context's `N`; None elsewhere, or where one is not seen."""
    fn, owner = scope.node, scope.parent
    if not (isinstance(fn, py.Function) and fn.name == "backward" and owner is not None
            and isinstance(owner.node, ast.ClassDef) and isinstance(expr.value, ast.Name)):
        return None
    params = py.parameters(fn)
    forward = next((stmt for stmt in owner.node.body if isinstance(stmt, py.Function) and stmt.name == "forward"), None)
    if not params or params[0].arg != expr.value.id or forward is None:
        return None
    inner = Scope(forward, owner)
    context = py.parameters(forward)
    if not applied_class(inner) or not context:
        return None
    values: list[ast.expr] = []
    for stmt in inner.own:
        for target, value in _stores(stmt):
            if isinstance(target, ast.Attribute) and target.attr == expr.attr and isinstance(target.value, ast.Name) \
                    and target.value.id == context[0].arg:
                if value is None:
                    return None  # unpacked from something not written out, or stored by a loop
                values.append(value)
    return (inner, values) if values else None


def _stores(stmt: ast.stmt) -> list[tuple[ast.expr, ast.expr | None]]:
    """The targets a statement assigns, each with its value where written out (`a.x, a.y = x, y` pairs them)."""
    if isinstance(stmt, ast.Assign):
        out: list[tuple[ast.expr, ast.expr | None]] = []
        for target in stmt.targets:
            if isinstance(target, ast.Tuple) and isinstance(stmt.value, ast.Tuple) \
                    and len(target.elts) == len(stmt.value.elts):
                out.extend(zip(target.elts, stmt.value.elts))
            elif isinstance(target, ast.Tuple):
                out.extend((elt, None) for elt in target.elts)
            else:
                out.append((target, stmt.value))
        return out
    if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
        return [(stmt.target, stmt.value if isinstance(stmt, ast.AnnAssign) else None)]
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        return [(stmt.target, None)]
    return []


def split(source: SourceFile) -> list[pysparse.Block] | None:
    """`pysparse.split` of a module's lines, once per run and module text (`kgate.collect.pyparts`)."""
    return pyparts.of(source).blocks
