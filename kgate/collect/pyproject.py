"""The project's other Python modules as the launch reading sees them (`kgate.collect.pylaunch`): which modules import
a name, and the module each of them is.

A kernel defined in one module is often launched from another (`from .kernels import fwd_kernel` in `ops.py`), and
its launcher called from a third (a layer, a serving backend). Following a launch argument there needs the modules
that import a name: they are read from the import statements of every Python file of the project (a scan of the
text, no parse, kept across runs: `kgate.collect.pyimports`), and a module is parsed only when it imports a name
asked about, once. What a name written in one of them stands for is followed through the project's modules as
everywhere (`kgate.collect.pynames`). Every question asked and every module read is noted as the verdict's
(`kgate.collect.depends`): the verdict holds while the files that import the name, and those read, do.
"""

from __future__ import annotations

import ast
import bisect
import copy
import itertools
import os
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from kgate.collect import depends, pyparts
from kgate.collect import pysource as py
from kgate.collect.files import project_root
from kgate.collect.pyimports import Index, import_statements, index_of
from kgate.collect.pynames import DEFINED, IMPORT, MODULE, Exports, Resolver, exports, import_roots
from kgate.collect.pyscopes import launch_lines
from kgate.collect.source import SourceFile, UnreadableSource, try_parse
from kgate.support.filestat import path_state

_CHECKING_FOLDERS = frozenset({"test", "tests", "testing", "bench", "benchmark", "benchmarks"})
_CHECKING_FILES = ("test_", "bench_", "benchmark_")
_IMPORT = b"import"


class _Heads:
    """Where the names some import statements of a module bind lead (`Modules._table`)."""

    __slots__ = ("reads", "defined", "modules")

    def __init__(self) -> None:
        self.reads: depends.Reads = {}
        self.defined: dict[Any, list[tuple[int, int, int, str]]] = {}
        self.modules: list[tuple[int, int, str, Any]] = []


_NOTHING = _Heads()  # what statements that spell nothing bind (never added to)


class _Plan:
    """The modules that import one package's word (`Modules._plan`), each read for that word: what reading each read
    (and a block of them together), those whose names lead to a module, those whose names lead to a definition of
    each file, and their statements' text together."""

    __slots__ = ("word", "members", "others", "each", "blocks", "leading", "defining", "starts", "text")

    def __init__(self, word: str) -> None:
        self.word = word
        self.members: set[str] = set()
        self.others: list[str] = []
        self.each: list[depends.Reads] = []  # what reading each read
        self.blocks: list[depends.Reads] = []  # what reading each `_BLOCK` of them in turn read
        self.leading: set[str] = set()
        self.defining: dict[str, set[str]] = {}  # file -> the modules with a name that leads to a definition of it
        self.starts: list[int] = []  # where each module's statements start in `text`, less one (its NUL)
        self.text = b""

    def replay_without(self, path: str) -> None:
        """Note what reading all of them but the module at `path` read (a module is never asked about itself)."""
        skip = self.others.index(path) if path in self.members else -1
        for number, block in enumerate(self.blocks):
            if number != skip // _BLOCK or skip < 0:
                depends.replay(block)
                continue
            for at in range(number * _BLOCK, min(len(self.each), (number + 1) * _BLOCK)):
                if at != skip:
                    depends.replay(self.each[at])

    def spelling(self, word: bytes) -> Iterator[str]:
        """The modules whose import statements spell `word` (as bytes anywhere in their text)."""
        at = self.text.find(word)
        while at >= 0:
            index = bisect.bisect_right(self.starts, at) - 1
            yield self.others[index]
            at = self.text.find(word, self.starts[index + 1])  # the next module's statements


_BLOCK = 16  # modules of a plan whose reads are noted together


class Modules:
    """The Python modules of one project, read beyond the module under lint: which import a name, and each one as a
    source file (parsed on first use, with what the rules derive from it)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.resolver = Resolver(import_roots(root), inside=root)
        self._index: Index | None = None
        self._sources: dict[str, tuple[SourceFile | None, Any, str | None]] = {}  # with its state and digest
        # What a reading of a module keeps (pylaunch's), for one file's verdicts: it reads on as it is asked.
        self.readers: dict[tuple[object, ...], object] = depends.per_file({})
        # Each reading as built, once per run, with what building it read (`reading`).
        self._readings: dict[tuple[object, ...], tuple[Any, depends.Reads]] = {}
        self.asked = 0  # questions answered: a file's verdict that asked one read beyond the file
        self._imports: dict[str, list[list[Any]]] = {}  # path -> [statement's text, what it binds (None: unread)]
        self._digests: dict[str, str] = {}  # path -> the digest of its import statements
        self._bound: dict[tuple[str, ...], tuple[list[str], depends.Reads]] = {}
        self._importing: dict[tuple[str, str], tuple[list[tuple[str, list[str]]], depends.Reads]] = {}
        self._heads_of: dict[tuple[str, int], list[tuple[str, Any, depends.Reads]]] = {}
        self._words: dict[str, tuple[tuple[str, ...], list[str]]] = {}
        self._tables: dict[tuple[str, str], _Heads] = {}
        self._plans: dict[str, _Plan] = {}
        self._attributes: dict[tuple[Any, str], tuple[tuple[str, str] | None, depends.Reads]] = {}
        self._blobs: dict[str, bytes] = {}
        # path -> its import statements (None where it cannot be read), and the read to note of it
        self._others: dict[str, tuple[list[list[Any]] | None, str, Any, str | None]] = {}
        self._checking: dict[str, bool] = {}
        self._parts: dict[tuple[str, str], str] = {}  # (path, function) -> `parts_digest` of the module for it

    def release(self) -> None:
        """Drop the modules read and the readings built of them, once the run's files are linted (`SourceContext.
        shared`): what the rules derived from a module refers back to it, a cycle the collector, frozen with the rest
        of the run, would never free."""
        for source, _state, _digest in self._sources.values():
            if source is not None:
                source.derived.clear()
        self._sources.clear()
        self._readings.clear()

    def reading(self, key: tuple[object, ...], build: Callable[[], Any]) -> Any:
        """A reading of another module for one file's verdicts (`build`, None where the module cannot be read): built
        once per run, and what building it read noted again for every later file that asks (`depends.replay`); each
        file gets a copy of it as built, since what a file asks of a reading changes how far it reads on."""
        held = self._readings.get(key)
        if held is None:
            with depends.collecting() as reads:
                built = build()
            held = self._readings[key] = (built, reads)
        else:
            depends.replay(held[1])
        return copy.copy(held[0]) if held[0] is not None else None

    def importers(self, name: str) -> list[str]:
        """The modules (absolute paths) whose import statements name `name`: what they import, or the module they
        import it from (`from .cumsum import f` names `cumsum` and `f`)."""
        self.asked += 1
        found = self.index().importers(name)
        depends.note(depends.IMPORTS + self.root + "\n" + name, self.index().state, self._digest(found))
        return found

    def prepare(self, names: Iterable[str]) -> None:
        """Find the modules that import each of these names together (`Index.prepare`)."""
        self.index().prepare(names)

    def index(self) -> Index:
        if self._index is None:
            self._index = index_of(self.root)
        return self._index

    def state(self) -> list[int] | None:
        """The state of the project's Python files together (None: one was written too recently to vouch)."""
        return self.index().state

    def importers_digest(self, name: str) -> str:
        """A digest of which files import `name` (`importers`): a verdict that asked holds while it is the same."""
        return self._digest(self.index().importers(name))

    def _digest(self, paths: list[str]) -> str:
        cut = len(self.root.rstrip(os.sep)) + 1  # the index's paths are the root's own, joined
        return depends.digest("\n".join(sorted(p[cut:] for p in paths)).encode("utf-8", "surrogateescape"))

    def source(self, path: str) -> SourceFile | None:
        """The module at `path` as a source file, None when it cannot be read."""
        found, state, digest = self._read(path)
        depends.note(path, state, digest)
        return found

    def _read(self, path: str) -> tuple[SourceFile | None, Any, str | None]:
        """The module at `path` as a source file, with the state it was read in and a digest of its bytes."""
        if path not in self._sources:
            state = depends.stable(path_state(path))
            try:
                with open(path, "rb") as handle:
                    data = handle.read()
            except OSError:
                self._sources[path] = (None, None, None)
            else:
                rel = os.path.relpath(path, self.root).replace(os.sep, "/")
                source = SourceFile(path, rel, data)
                pyparts.keep(source)  # read again for other files' verdicts: its parsed parts are kept for the run
                self._sources[path] = (source, state, depends.digest(data))
        return self._sources[path]

    def tree(self, path: str) -> ast.Module | None:
        """The syntax tree of the module at `path`, None when it cannot be read or parsed."""
        source = self.source(path)
        if source is None:
            return None
        try:
            return source.tree
        except UnreadableSource:
            return None

    def function(self, path: str, name: str) -> tuple[SourceFile, py.Function] | None:
        """The first top-level function `name` of the module at `path`, with the module; None where the module cannot
        be read or parsed, or defines no such function. Noted as a read of the module but for the bodies of its other
        top-level functions (`depends.PARTS`): a helper imported from a module of many (`from .utils import
        calculate_settings`) is read again only when it, or what the module binds, changes, not after an edit
        inside another function of that module."""
        source, state, digest = self._read(path)
        try:
            tree = source.tree if source is not None else None
        except UnreadableSource:
            tree = None
        if source is None or tree is None:
            depends.note(path, state, digest)  # what is there instead, whole
            return None
        found = self._parts.get((path, name))
        if found is None:
            from kgate.collect.pyautotune import parts_digest

            parts = pyparts.of(source)  # the split the run keeps of a module read for other files' verdicts
            found = self._parts[(path, name)] = parts_digest(source.data, [name], parses=True,
                                                             split=(parts.lines, parts.blocks))
        depends.note(f"{depends.PARTS}{path}\n{name}", state, found)
        fn = next((stmt for stmt in tree.body if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))
                   and stmt.name == name), None)
        return (source, fn) if fn is not None else None

    def bindings_of(self, path: str, wanted: tuple[str, str], word: str = "") -> list[str]:
        """The names the module at `path` binds to the definition `wanted` (file, name) by its imports, under any
        alias: at its top level, or inside a function (a launcher is often imported where it is called); with
        `word`, those it imports by that name (one a package passes the definition on under: `from pkg import
        fwd` where pkg/__init__.py says `from .kernels import fwd_kernel as fwd`)."""
        key = (path, *wanted, word) if word else (path, *wanted)
        held = self._bound.get(key)
        if held is None:
            with depends.collecting() as reads:
                # Only the module's import statements are read here: an edit elsewhere in it changes nothing.
                source, state, digest = self._read(path)
                if source is None:
                    depends.note(path, state, digest)
                    found = {}
                else:
                    depends.note(depends.STATEMENTS + path, state, self._statements_digest(source))
                    found = self.imported(source, {word or wanted[1]}, by_import=True)
            held = self._bound[key] = ([local for local, where in found.items() if where == wanted], reads)
        else:
            depends.replay(held[1])
        return held[0]

    def bound(self, source: SourceFile) -> set[str]:
        """The names the module `source` binds by `from ... import` statements, at any depth, read from their text."""
        return {word for statement in self._statements(source) if statement[0].lstrip().startswith(b"from")
                for word in _bound_words(statement[0])}

    def _statements(self, source: SourceFile) -> list[list[Any]]:
        path = os.path.abspath(source.path)
        statements = self._imports.get(path)
        if statements is None:
            data = source.data
            statements = self._imports[path] = [[data[start:end], None] for start, end in import_statements(data)]
        return statements

    def _statements_digest(self, source: SourceFile) -> str:
        """`statements_digest` of a module, from the import statements read of it once (a module imported by many is
        asked about once per name and module it binds)."""
        path = os.path.abspath(source.path)
        found = self._digests.get(path)
        if found is None:
            found = self._digests[path] = depends.digest(b"\n".join(s[0] for s in self._statements(source)))
        return found

    def imported(self, source: SourceFile, names: set[str], by_import: bool = False) -> dict[str, tuple[str, str]]:
        """Local name -> (file, name) of each definition of the project's modules that the module `source` imports by
        name (`from .kernels import fwd_kernel as fwd`), at its top level or inside a function, among `names`: the
        names it binds, or with `by_import` the names it imports (`fwd_kernel`)."""
        path = os.path.abspath(source.path)
        out: dict[str, tuple[str, str]] = {}
        # A dotted name is reached through the module its first part binds (`kernels.fwd` after `from . import
        # kernels`, `kn.fwd` after `import pkg.kernels as kn`, `pkg.kernels.fwd` after `import pkg.kernels`).
        dotted: dict[str, list[str]] = {}
        for name in names:
            head, dot, _rest = name.partition(".")
            if dot and not by_import:
                dotted.setdefault(head, []).append(name)
        spelled = [name.partition(".")[0].encode("utf-8") for name in names]
        for statement in self._statements(source):
            if not any(word in statement[0] for word in spelled):
                continue
            if statement[1] is None:
                statement[1] = _statement_exports(statement[0]) or Exports()
            own = statement[1]
            for binding in own.bindings:
                if binding.kind != IMPORT:
                    continue
                if binding.name not in out and (binding.attr if by_import else binding.name) in names:
                    found = self.resolver.definition(path, binding.name, own)
                    if found is not None:
                        out[binding.name] = found
                for name in dotted.get(binding.name, ()):
                    if name not in out and (found := self.resolver.definition(path, name, own)) is not None:
                        out[name] = found
        return out

    def launched(self, source: SourceFile) -> set[str]:
        """The names the module `source` launches (`k[grid](...)`, `k.run(...)`, `wrap(k)[grid](...)`) that an import
        of it binds, or that are reached through a module an import binds (`kernels.fwd[grid](...)` after `from .
        import kernels`, `pkg.kernels.fwd[grid](...)` after `import pkg.kernels`): candidates, read from the text, for
        `imported` to resolve."""
        text = source.text
        out = {name for name in self.bound(source) if launch_lines(text, {name})}
        # A launch is on one line: the dotted names are searched for only in the lines that hold `[` or `.run`.
        dotted = {match.group(1) for match in _DOTTED_LAUNCH.finditer("\n".join(_LAUNCH_LINES.findall(text)))}
        if dotted:
            heads = {binding.name for binding in self._bindings(source)}
            out |= {name for name in dotted if name.partition(".")[0] in heads}
        return out

    def _bindings(self, source: SourceFile) -> Iterator[Any]:
        """What each import statement of the module binds (`import a.b` binds `a`; `from x import y as z`, `z`)."""
        for statement in self._statements(source):
            if statement[1] is None:
                statement[1] = _statement_exports(statement[0]) or Exports()
            yield from (binding for binding in statement[1].bindings if binding.kind == IMPORT)

    def kernel(self, path: str, name: str) -> tuple[py.Function, py.Imports] | None:
        """The Triton kernel `name` defined at the top level of the module at `path`, with that module's imports (what
        its annotations are read through); None where it is no kernel."""
        held = self.function(path, name)
        if held is None:
            return None
        source, fn = held
        imports = py.info(source).imports
        return (fn, imports) if py.is_kernel(fn, imports) else None

    def importing(self, path: str, name: str) -> list[tuple[str, list[str]]]:
        """The other modules that import the top-level `name` of the module at `path`, each with the names they bind
        it to."""
        path = os.path.abspath(path)

        def compute() -> list[tuple[str, list[str]]]:
            found = [(other, local) for other in self.importers(name) if other != path
                     and not self._checks(other)
                     if (local := self.bindings_of(other, (path, name)))]
            found.extend(self._renamed(path, name, found))
            # And the modules that reach it as an attribute of its module (`kernels.fwd` after `from . import
            # kernels`, `kn.fwd` after `import pkg.kernels as kn`, `pkg.kernels.fwd` after `import pkg.kernels`).
            merged = {other: list(local) for other, local in found}
            for other, local in self._reaching(path, name):
                held = merged.setdefault(other, [])
                held.extend(dotted for dotted in local if dotted not in held)
            return list(merged.items())

        return self._held((path, name), compute)

    def reaching(self, path: str, owner: str) -> list[tuple[str, list[str]]]:
        """The other modules that reach the top-level `owner` (a class) of the module at `path` through an import, each
        with the dotted names they write for it: `Relu` after `from .act import Relu`, `act.Relu` after `from . import
        act`, `kernels.Relu` after `from pkg import kernels` where the package's `__init__.py` passes `act`'s names on
        (`from .act import *`). A kernel that is a static method of a class is launched as `kernels.Relu.forward`."""
        path = os.path.abspath(path)
        return self._held((path, "." + owner), lambda: self._reaching(path, owner))

    def _held(self, key: tuple[str, str], compute: Callable[[], list[tuple[str, list[str]]]]) \
            -> list[tuple[str, list[str]]]:
        """What `compute` finds for `key`, computed once per run; a later ask replays the reads it made."""
        held = self._importing.get(key)
        if held is None:
            with depends.collecting() as reads:
                found = compute()
            held = self._importing[key] = (found, reads)
        else:
            self.asked += 1
            depends.replay(held[1])
        return held[0]

    def _reaching(self, path: str, owner: str) -> list[tuple[str, list[str]]]:
        words, routes = self._spelled(path)
        # The names an import that reaches it spells: the class, its module, or a package above it that passes it on.
        others = dict.fromkeys(other for word in (owner, *words) for other in self.importers(word))
        spelling = [(word, word.encode("utf-8")) for word in dict.fromkeys((owner, *words))]
        # Of the modules that import a package's word, most bind nothing that leads to this module's definitions:
        # what reading them for that word reads is noted together (`_Plan`, one per word, shared by every module of
        # the package), and only those that spell the definition's or the module's own name (or another package's
        # word they do not import), or bind a name that leads to a module or to a definition of this one, are read
        # one by one, as are the modules that import the definition's or the module's own name.
        packages = tuple(dict.fromkeys(words[1:]))
        whole = set(others)
        if packages:
            plans = [self._plan(word) for word in packages]
            index = self.index()
            for plan in plans:
                whole.difference_update(plan.members)
            for plan in plans:
                plan.replay_without(path)
                whole.update(plan.leading)
                whole.update(plan.defining.get(path, ()))
                for word in dict.fromkeys((owner, *words)):
                    if word == plan.word:
                        continue
                    if word in packages:  # read with the plan of that word where it imports it
                        held = plans[packages.index(word)].members
                        whole.update(other for other in plan.spelling(word.encode("utf-8")) if other not in held)
                    else:
                        whole.update(plan.spelling(word.encode("utf-8")))
            for word in dict.fromkeys((owner, words[0])):
                if word not in packages:
                    whole.update(index.importers(word))
        out = []
        for other in others:
            if other in whole and other != path and not self._checks(other):
                local = self._visit(other, path, owner, spelling, routes)
                if local:
                    out.append((other, local))
        return out

    def _visit(self, other: str, path: str, owner: str, spelling: list[tuple[str, bytes]], routes: list[str]) \
            -> list[str]:
        """The dotted names the module `other` writes for the definition `owner` of the module at `path` through the
        names its import statements bind, each statement read for the words of `spelling`; what it read noted."""
        held = self._others.get(other)
        if held is None:
            source, state, digest = self._read(other)
            held = self._others[other] = (None, other, state, digest) if source is None else \
                (self._statements(source), depends.STATEMENTS + other, state, self._statements_digest(source))
        statements, key, state, digest = held
        depends.note(key, state, digest)  # the module, where it cannot be read; else its import statements
        if statements is None:
            return []
        want = (path, owner)
        defined = (DEFINED, f"{path}\n{owner}")
        found: list[tuple[int, int, int, str]] = []  # (statement, binding, route) of each name: the order read
        blob = self._blobs.get(other)
        if blob is None:
            blob = self._blob(other, statements)
        tables = self._tables
        for word, spelled in spelling:
            if spelled not in blob:  # most of the modules asked about spell the definition's own name nowhere
                continue
            table = tables.get((other, word))
            if table is None:
                table = self._table(other, statements, word)
            depends.replay(table.reads)  # the first step of following each name its statements bind
            found.extend(table.defined.get(defined, ()))
            for index, position, name, head in table.modules:
                for at, route in enumerate(routes, 1):
                    if self._attribute(head, route + owner) == want:
                        found.append((index, position, at, f"{name}.{route}{owner}"))
        return list(dict.fromkeys(dotted for *_at, dotted in sorted(found)))

    def _attribute(self, head: Any, tail: str) -> tuple[str, str] | None:
        """`Resolver.attribute`, kept for the run with what it read: the modules that bind a package (`import
        flag_gems`) all lead to the same module, and each launcher follows the same tails from it."""
        key = (head, tail)
        held = self._attributes.get(key)
        if held is None:
            with depends.collecting() as reads:
                found = self.resolver.attribute(head, tail)
            held = self._attributes[key] = (found, reads)
        else:
            depends.replay(held[1])
        return held[0]

    def _plan(self, word: str) -> _Plan:
        """The modules that import a package's word (`_spelled`), each read for that word: what reading it read, and
        where its names lead. Kept for the run: the definitions of every module of the package ask about the same
        ones."""
        plan = self._plans.get(word)
        if plan is not None:
            return plan
        plan = self._plans[word] = _Plan(word)
        spelled = word.encode("utf-8")
        blobs: list[bytes] = []
        # (Which modules import the word is noted by every question, `_reaching`, not here.)
        for other in self.index().importers(word):
            if other in plan.members or self._checks(other):
                continue
            with depends.apart(), depends.collecting() as reads:  # noted by each question, in the part it needs
                held = self._others.get(other)
                if held is None:
                    source, state, digest = self._read(other)
                    held = self._others[other] = (None, other, state, digest) if source is None else \
                        (self._statements(source), depends.STATEMENTS + other, state,
                         self._statements_digest(source))
                statements, key, state, digest = held
                depends.note(key, state, digest)
                blob = b""
                if statements is not None:
                    blob = self._blobs.get(other) or self._blob(other, statements)
                    if spelled in blob:
                        table = self._tables.get((other, word))
                        if table is None:
                            table = self._table(other, statements, word)
                        depends.replay(table.reads)
                        if table.modules:
                            plan.leading.add(other)
                        for head in table.defined:
                            plan.defining.setdefault(head[1].partition("\n")[0], set()).add(other)
            plan.members.add(other)
            plan.others.append(other)
            plan.each.append(reads)
            blobs.append(blob)
        # Each module's statements after a NUL, which no word spells: where a word is found says whose they are.
        plan.starts = list(itertools.accumulate((len(blob) + 1 for blob in blobs), initial=0))
        plan.text = b"".join(b"\0" + blob for blob in blobs)
        for at in range(0, len(plan.each), _BLOCK):
            merged: depends.Reads = {}
            for reads in plan.each[at:at + _BLOCK]:
                merged.update(reads)
            plan.blocks.append(merged)
        return plan

    def _spelled(self, path: str) -> tuple[tuple[str, ...], list[str]]:
        """The words an import of a definition of the module at `path` spells besides the definition's name (the
        module's and up to two packages above it), and the routes from a name bound to one of them to the module:
        kept for the run."""
        found = self._words.get(path)
        if found is None:
            words = [os.path.splitext(os.path.basename(path))[0]]
            folder = os.path.dirname(path)
            for _ in range(2):
                if not os.path.isfile(os.path.join(folder, "__init__.py")):
                    break
                words.append(os.path.basename(folder))
                folder = os.path.dirname(folder)
            # The module's dotted name from each package above it: what follows a name bound to a package or the
            # module.
            chain = [word for word in reversed(words) if word != "__init__"]
            found = self._words[path] = (tuple(words), ["", *(".".join(chain[at:]) + "." for at in range(len(chain)))])
        return found

    def _table(self, path: str, statements: list[list[Any]], word: str) -> _Heads:
        """Where the names bound by the import statements of the module at `path` that spell `word` (as bytes anywhere
        in their text) lead (`_heads`), together: the definitions, each with the (statement, binding, 0) and name of
        each binding that leads to it, and the modules, each (statement, binding, name, module); and what following
        them read. Kept for the run: the definitions of one module, and of the modules of one package, ask with the
        same words."""
        key = (path, word)
        table = self._tables.get(key)
        if table is not None:
            return table
        spelled = word.encode("utf-8")
        # One search of all its statements: most modules spell a definition's name nowhere.
        if spelled not in self._blob(path, statements):
            self._tables[key] = _NOTHING
            return _NOTHING
        table = self._tables[key] = _Heads()
        for index, statement in enumerate(statements):
            if spelled not in statement[0]:
                continue
            for position, (name, head, reads) in enumerate(self._heads(path, index, statement)):
                table.reads.update(reads)
                if head is None:
                    continue
                if head[0] == DEFINED:
                    table.defined.setdefault(head, []).append((index, position, 0, name))
                elif head[0] == MODULE:
                    table.modules.append((index, position, name, head))
        return table

    def _blob(self, path: str, statements: list[list[Any]]) -> bytes:
        """The text of the module's import statements together, searched once for a word they may spell."""
        blob = self._blobs.get(path)
        if blob is None:
            blob = self._blobs[path] = b"\n".join(statement[0] for statement in statements)
        return blob

    def _checks(self, path: str) -> bool:
        """`checks_kernels` of a module of the project, by its path: kept for the run."""
        found = self._checking.get(path)
        if found is None:
            found = self._checking[path] = checks_kernels(os.path.relpath(path, self.root))
        return found

    def _heads(self, path: str, index: int, statement: list[Any]) -> list[tuple[str, Any, depends.Reads]]:
        """Each name the import statement `index` of the module at `path` binds, where the name leads as
        `Resolver.definition` follows it, and what following it read (`Resolver.head`): kept for the run, since the
        modules that reach a definition are asked about for every definition of a module and the modules its
        package holds, and most import statements of a project spell its packages' names."""
        key = (path, index)
        found = self._heads_of.get(key)
        if found is None:
            if statement[1] is None:
                statement[1] = _statement_exports(statement[0]) or Exports()
            found = self._heads_of[key] = [(binding.name, *self.resolver.head(path, binding.name, statement[1]))
                                           for binding in statement[1].bindings if binding.kind == IMPORT]
        return found

    def _renamed(self, path: str, name: str, found: list[tuple[str, list[str]]]) -> list[tuple[str, list[str]]]:
        """The modules that import the definition under a name a module of `found` passes it on as (a package's
        `from .kernels import fwd_kernel as fwd`, then `from pkg import fwd`), and so on up to `_RENAMES` such
        steps: `importers(name)` does not list them, as their import statements never spell `name`."""
        out: list[tuple[str, list[str]]] = []
        seen = {path, *(other for other, _local in found)}
        frontier = [(other, alias) for other, local in found for alias in local if alias != name]
        for _ in range(_RENAMES):
            step: list[tuple[str, str]] = []
            for _other, alias in frontier:
                for importer in self.importers(alias):
                    if importer in seen or self._checks(importer):
                        continue
                    local = self.bindings_of(importer, (path, name), alias)
                    if local:
                        seen.add(importer)
                        out.append((importer, local))
                        step.extend((importer, bound) for bound in local if bound != alias)
            frontier = step
        return out


# `a.b.name[` or `a.b.name.run(` or `a.b.name)[` (a launch through a wrapper): a dotted name launched.
_DOTTED_LAUNCH = re.compile(r"(?<![\w.])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)[ \t]*(?:\[|\.run[ \t]*\(|\)[ \t]*\[)")

# The lines that may hold a launch `_DOTTED_LAUNCH` finds: whatever it matches lies within one line (no part of it
# matches a line's end) and holds `[` or `.run`.
_LAUNCH_LINES = re.compile(r"^.*(?:\[|\.run).*$", re.MULTILINE)

_RENAMES = 3  # packages passing a definition on under a new name, followed from one to the next


def read_ahead(path: str, rel: str, ctx: Any) -> Modules:
    """The project of the module at `path` with its import index read (`kgate.core.rule.Rule.read_ahead`); `ctx`: the
    rule's SourceContext."""
    project = modules(ctx.shared, path, rel)
    project.index()
    return project


def checks_kernels(rel: str) -> bool:
    """Whether a module is a test or a benchmark (in a `test`, `tests`, `bench` or `benchmark(s)` folder, or named
    `test_*.py`, `*_test.py`, `conftest.py`, `bench_*.py`): it runs kernels on shapes of its own choosing, to check
    or time them, not as the project calls them."""
    parts = rel.replace(os.sep, "/").split("/")
    name = parts[-1]
    return bool(_CHECKING_FOLDERS.intersection(parts[:-1])) or name.startswith(_CHECKING_FILES) \
        or name.endswith("_test.py") or name == "conftest.py"


def _bound_words(text: bytes) -> Iterator[str]:
    """The names a `from ... import a, b as c` statement's text binds (`a`, `c`)."""
    listed = text[text.find(_IMPORT) + len(_IMPORT):]
    listed = b"\n".join(line.partition(b"#")[0] for line in listed.splitlines())
    for part in listed.replace(b"(", b" ").replace(b")", b" ").replace(b"\\", b" ").split(b","):
        words = part.split()
        if words and (word := words[-1].decode("utf-8", "replace")).isidentifier():
            yield word


def _statement_exports(text: bytes) -> Exports | None:
    """What one import statement's text binds; None when it does not parse as one. Kept for the run by the text: the
    modules of a project write the same statements again and again (`import torch`, `from fla.utils import
    input_guard`), and what one binds is the same wherever it stands."""
    if text in _EXPORTS_OF:
        return _EXPORTS_OF[text]
    tree = try_parse(text.strip())
    found = _EXPORTS_OF[text] = None if tree is None or len(tree.body) != 1 or \
        not isinstance(tree.body[0], (ast.Import, ast.ImportFrom)) else exports(tree)
    return found


_EXPORTS_OF: dict[bytes, Exports | None] = depends.per_run({})


def modules(shared: dict[Any, Any], path: str, rel: str) -> Modules:
    """The project of the module at `path` whose project-relative name is `rel` (its root: the path less that name),
    kept in `shared` (a lint run's `SourceContext.shared`), so that the rules and files of one run read the project
    once, and a later run reads it again."""
    path = os.path.abspath(path)
    root = project_root(path, rel)
    key = (Modules, root)
    found = shared.get(key)
    if not isinstance(found, Modules):
        found = shared[key] = Modules(root or os.sep)
    return found
