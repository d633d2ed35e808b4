"""Who calls a launching function and who launches a kernel, for the launch-site reading
(`kgate.collect.pylaunch.Launches`): in the module, and in the project's other modules that import it.

A parameter of the launching function is what the calls of that function pass for it: the module's own calls, or
where it has none, the calls in the project's other modules that import the function (a launcher called from a
layer or a serving backend). A kernel the module never launches may be launched from a module that imports it
(`from .kernels import fwd_kernel` in ops.py). Those modules are found by `kgate.collect.pyproject.Modules` and
read by a reading of their own, parsed only in the definitions that name what is asked about.
"""

from __future__ import annotations

import ast
from bisect import bisect_left
from typing import TYPE_CHECKING, cast

from kgate.collect import pyparts, pysparse
from kgate.collect import pysource as py
from kgate.collect.pyscopes import Scope, call_lines, passed_for, scopes, top_level
from kgate.collect.pyvalues import Names, Verdict
from kgate.collect.source import SourceFile

if TYPE_CHECKING:
    from kgate.collect.pylaunch import Launches
    from kgate.collect.pyproject import Modules


class CallSites:
    """The calls and the launch sites of `Launches`, beyond the module's own launch sites."""

    source: SourceFile
    info: py.ParsedModule
    tree: ast.Module
    names: Names
    bucketing: frozenset[str]
    project: Modules | None
    beyond: bool  # whether the calls in the project's other modules are read now
    runtime_only: bool  # whether only the values that follow the token count are asked for
    _calls: dict[str, list[tuple[ast.Call, Scope]]]

    def passed_elsewhere(self, launched: str, param: str, position: int | None,
                         default: bool) -> list[tuple[ast.expr | None, Verdict]]:
        """`passed` at the launch sites of `launched` in the project's other modules, which import it from this one
        (`from .kernels import fwd_kernel` and `fwd_kernel[grid](...)` in ops.py)."""
        out: list[tuple[ast.expr | None, Verdict]] = []
        for reader, local in self._elsewhere(launched, launches=True):
            for name in local:
                out.extend(reader.passed(name, param, position, default))
        return out

    def _elsewhere(self, name: str, launches: bool) -> list[tuple[Launches, list[str]]]:
        """The readings of the project's other modules that import this module's top-level `name`, each with the
        names they bind it to; with `launches`, read for their launch sites of it."""
        if self.project is None:
            return []
        out = []
        for path, local in self.project.importing(self.source.path, name):
            key = ("launches", path, tuple(local) if launches else (), id(self.names), self.bucketing,
                   self.runtime_only)
            reader = self.project.readers.get(key)
            if reader is None:
                reader = self.project.readers[key] = self._reader(path, local, launches)
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
        reader.beyond = False  # one module away: its own calls are followed, not those of a third module
        return reader

    def _passed_by_callers(self, scope: Scope, name: str) -> list[tuple[ast.expr, Scope, Launches]]:
        """What each call of a top-level function passes for one of its parameters, with the scope of the call and
        the reading of its module: the module's own calls, or where it has none, the calls in the project's other
        modules that import the function; empty when there is no such call, or one passes it otherwise (a
        default, `*args`)."""
        fn = scope.node
        if not (isinstance(fn, py.Function) and top_level(scope)):
            return []
        positional = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args]]
        position = positional.index(name) if name in positional else None
        calls = [(call, caller, cast("Launches", self)) for call, caller in self._callers(fn.name)]
        if not calls and self.beyond:
            calls = [(call, caller, reader) for reader, local in self._elsewhere(fn.name, launches=False)
                     for called in local for call, caller in reader._callers(called)]
        out = []
        for call, caller, reader in calls:
            arg = passed_for(call, name, position)
            if arg is None:
                return []
            out.append((arg, caller, reader))
        return out

    def _callers(self, name: str) -> list[tuple[ast.Call, Scope]]:
        """The calls of a function by name from the module's functions and methods, each with its scope: read from
        the statements whose lines call it (in the definitions parsed on their own when the module was read in
        part)."""
        if name not in self._calls:  # shared by the rules that read the file (`source.derived`)
            marked = call_lines(self.source.text, name)
            # A module read for this name (another module's reading) holds every definition that names it already.
            read_for = name in (self.source.derived.get("needles") or ())
            tree = self.info.tree if read_for else self.tree if self.info.whole or not marked else self._around(marked)
            tree = ast.Module(body=[stmt for stmt in tree.body if within(marked, stmt)], type_ignores=[])
            self._calls[name] = [(node, scope) for scope in scopes(tree) if isinstance(scope.node, py.Function)
                                 for stmt in scope.own if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                                ast.ClassDef)) and within(marked, stmt)
                                 for node in py.expressions(stmt) if isinstance(node, ast.Call)
                                 and isinstance(node.func, ast.Name) and node.func.id == name] if marked else []
        return self._calls[name]

    def _around(self, marked: list[int]) -> ast.Module:
        from kgate.collect.source import UnreadableSource

        parts = pyparts.of(self.source)
        if parts.blocks is None:
            return self.source.tree
        try:
            return parts.parse(pysparse.containing(parts.blocks, marked), None, self.source.rel)
        except UnreadableSource:
            return self.source.tree


def within(marked: list[int], stmt: ast.stmt) -> bool:
    """Whether a statement spans one of the (0-based, sorted) lines `marked`."""
    first, last = stmt.lineno - 1, (stmt.end_lineno or stmt.lineno) - 1
    at = bisect_left(marked, first)
    return at < len(marked) and marked[at] <= last


def split(source: SourceFile) -> list[pysparse.Block] | None:
    """`pysparse.split` of a module's lines, once per run and module text (`kgate.collect.pyparts`)."""
    return pyparts.of(source).blocks
