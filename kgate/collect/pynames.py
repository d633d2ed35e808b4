"""What a name written in a Python module stands for, read from the source without running it.

A kernel module may reach Triton through the project's own modules rather than import it itself:
`from pkg.triton_utils import tl, triton`, `from .utils import jit`, `import pkg.triton_utils as tu` and then
`@tu.triton.jit`, or a package whose `__init__.py` passes them on (`from .triton_utils import *`, its
`__all__`). Such a module imports the real Triton, usually with a stand-in for when it is missing
(`try: import triton` / `except ImportError: triton = _Placeholder()`, or `if HAS_TRITON: ... else: ...`), or a
build of Triton shipped under another distribution name that it binds as `triton` (`import vendor_triton as triton`,
`from vendor_triton import language as tl`): in a module that binds it so, that distribution's names are Triton's.

`exports(tree)` records what a module binds at its top level: a name imported (`Binding.kind` IMPORT), a copy
of a dotted name (ALIAS: `tl = triton.language`), or anything else (LOCAL: a definition, a call's result), with
its star imports and its `__all__`. Where the branches of an `if`, a `try` or a `match` bind a name
differently, an import or an alias is taken over any other value (the other branch is the stand-in for when
the import fails); where statements in sequence bind it, the last one counts.

`Resolver` follows those records from module to module (each read from the module's top-level statements alone, its
definitions' bodies left out, and remembered per file state for the process):
`qualify(path, "tu.triton.jit")` is "triton.jit" when the name leads, through the project's modules, to a
module outside the project; None when it leads to something the project defines itself, or nowhere kgate can
read. A module is the project's when its file is found under the importing module's package root (the folder
above its outermost package) or one of the resolver's roots.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from typing import NamedTuple

from kgate.collect import depends, pyparts
from kgate.collect.source import UnreadableSource, decode, split_lines, try_parse
from kgate.support.filestat import path_state

IMPORT, ALIAS, LOCAL = "import", "alias", "local"
_TRY_STAR = (ast.TryStar,) if hasattr(ast, "TryStar") else ()  # Python 3.11+
# `try` statements: ast.TryStar (3.11+) has ast.Try's fields, so the two are read alike.
_TRIES: tuple[type[ast.Try], ...] = (ast.Try, *_TRY_STAR)
_DEPTH = 16  # modules and aliases followed for one name: a cycle of re-exports ends here
# Packages a project may import under another distribution's name, bound to their own name (`import vendor_triton as
# triton`): the names under that distribution are read as the package's (`_renamed`).
_DISTRIBUTED = ("triton",)

# Where a name leads: (MODULE, a project file or a package folder), (EXTERNAL, a dotted name outside), or, asked for
# (`Resolver.definition`), (DEFINED, "file\nname") for a top-level definition or value of a project module.
MODULE, EXTERNAL, DEFINED = "module", "external", "defined"
Target = tuple[str, str]


class Binding(NamedTuple):
    """What one top-level name of a module is bound to."""

    name: str
    kind: str  # IMPORT, ALIAS or LOCAL
    module: str = ""  # IMPORT: the module imported, or imported from ("" in `from . import x`)
    level: int = 0  # IMPORT: the dots of a relative import
    attr: str = ""  # IMPORT: the name imported from the module ("" for `import module`); ALIAS: the dotted name


@dataclass(frozen=True)
class Exports:
    """A module's top-level names: its bindings, its star imports (module, level) and its `__all__` (None when it
    has none that can be read)."""

    bindings: tuple[Binding, ...] = ()
    stars: tuple[tuple[str, int], ...] = ()
    public: tuple[str, ...] | None = None

    def get(self, name: str) -> Binding | None:
        table = self.__dict__.get("_table")
        if table is None:
            table = {b.name: b for b in self.bindings}
            object.__setattr__(self, "_table", table)
        return table.get(name)

    def exported(self, name: str) -> bool:
        """Whether `from module import *` brings the name."""
        return name in self.public if self.public is not None else not name.startswith("_")


# --------------------------------------------------------------------------- what a module binds


def exports(tree: ast.Module) -> Exports:
    stars: list[tuple[str, int]] = []
    bound = _sequence(tree.body, {}, stars)
    return Exports(tuple(bound.values()), tuple(stars), _public(tree))


def _sequence(body: list[ast.stmt], before: dict[str, Binding], stars: list[tuple[str, int]]) -> dict[str, Binding]:
    """The bindings after statements run in order: each statement's bindings replace the earlier ones."""
    out = dict(before)
    for stmt in body:
        branches = _branches(stmt)
        if branches is None:
            out.update((b.name, b) for b in _bindings(stmt, stars))
            continue
        taken = [_sequence(branch, {}, stars) for branch in branches]
        for name in dict.fromkeys(n for branch in taken for n in branch):
            candidates = [branch[name] for branch in taken if name in branch]
            if len(candidates) < len(taken) and name in out:
                candidates.append(out[name])  # a branch that leaves it as it was
            out[name] = next((c for c in candidates if c.kind != LOCAL), candidates[0])
        if isinstance(stmt, _TRIES):
            out = _sequence(stmt.finalbody, out, stars)
    return out



def _branches(stmt: ast.stmt) -> list[list[ast.stmt]] | None:
    """The alternative bodies of a compound statement (None: a simple statement). A `with` body always runs; a
    loop's body counts as a branch beside running not at all."""
    if isinstance(stmt, ast.If):
        return [stmt.body, stmt.orelse]
    if isinstance(stmt, _TRIES):
        return [stmt.body + stmt.orelse, *(handler.body for handler in stmt.handlers)]
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return [stmt.body]
    if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
        return [[*_loop_target(stmt), *stmt.body, *stmt.orelse], []]
    if isinstance(stmt, ast.Match):
        return [case.body for case in stmt.cases]
    return None


def _loop_target(stmt: ast.stmt) -> list[ast.stmt]:
    target = getattr(stmt, "target", None)
    return [ast.Assign(targets=[target], value=ast.Constant(None))] if target is not None else []


def _bindings(stmt: ast.stmt, stars: list[tuple[str, int]]) -> list[Binding]:
    if isinstance(stmt, ast.Import):
        return [Binding(a.asname, IMPORT, a.name) if a.asname else Binding(a.name.split(".")[0], IMPORT,
                                                                           a.name.split(".")[0])
                for a in stmt.names]
    if isinstance(stmt, ast.ImportFrom):
        stars.extend((stmt.module or "", stmt.level) for a in stmt.names if a.name == "*")
        return [Binding(a.asname or a.name, IMPORT, stmt.module or "", stmt.level, a.name)
                for a in stmt.names if a.name != "*"]
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [Binding(stmt.name, LOCAL)]
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        copied = _dotted(stmt.value)
        out = []
        for target in targets:
            if copied is not None and isinstance(target, ast.Name):
                out.append(Binding(target.id, ALIAS, attr=copied))
            else:
                out.extend(Binding(name, LOCAL) for name in _stored(target))
        return out
    if isinstance(stmt, (ast.AugAssign, ast.Delete, ast.Global)):
        return [Binding(name, LOCAL) for node in ast.walk(stmt) for name in _stored(node)]
    return []


def _stored(target: ast.AST) -> list[str]:
    """The names an assignment target binds (`a`, `a, (b, *c)`); none for `x.y = ...` or `x[i] = ...`."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Starred):
        return _stored(target.value)
    if isinstance(target, (ast.Tuple, ast.List)):
        return [name for element in target.elts for name in _stored(element)]
    return []


def _dotted(node: ast.expr) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _public(tree: ast.Module) -> tuple[str, ...] | None:
    """The names `__all__` lists, when every assignment to it at the top level is a literal list or tuple."""
    names: list[str] = []
    seen = False
    for stmt in tree.body:
        value = None
        if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if not any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                continue
            value = stmt.value
            if not isinstance(stmt, ast.AugAssign):
                names = []
        else:
            continue
        seen = True
        if not (isinstance(value, (ast.List, ast.Tuple)) and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts)):
            return None
        names.extend(e.value for e in value.elts)  # type: ignore[attr-defined]
    return tuple(names) if seen else None


# --------------------------------------------------------------------------- following names across modules


# The folders a project's absolute imports are looked for in, by its root: the configured `python-path` of the
# configuration that governs it (`use_import_roots`, set by the lint run), then the root and its `src` (the
# default, and what a project no run configured has).
_IMPORT_ROOTS: dict[str, tuple[str, ...]] = {}


def use_import_roots(root: str, folders: tuple[str, ...]) -> None:
    """Look for the project at `root`'s absolute imports in `folders` (its `python-path`, relative to it) first."""
    _IMPORT_ROOTS[os.path.abspath(root)] = tuple(os.path.abspath(os.path.join(root, f)) for f in folders)


def import_roots(root: str) -> list[str]:
    """The folders the project at `root` imports from, in order (`use_import_roots`)."""
    root = os.path.abspath(root)
    found = [*_IMPORT_ROOTS.get(root, ()), root, os.path.join(root, "src")]
    return list(dict.fromkeys(found))


class Resolver:
    """Follows names through the project's modules. What it reads (the modules' top-level bindings, the folders it
    looks in) is noted as the verdict's (`kgate.collect.depends`). `roots`: folders absolute imports are looked for
    in, besides the importing module's package root; `inside`: the folder every project file is in (None: wherever
    the roots are)."""

    def __init__(self, roots: list[str], inside: str | None = None) -> None:
        self.roots = [os.path.abspath(r) for r in roots]
        self.inside = os.path.abspath(inside) if inside is not None else None
        self._files: dict[tuple[str, str], tuple[str | None, depends.Reads]] = {}
        # Where a name bound in another module leads, with what following it read (`_name`).
        self._named: dict[tuple[str, str, int, bool], tuple[Target | None, depends.Reads]] = {}
        self._defined = False  # while `definition` asks: a module's own binding is where a name leads

    def qualify(self, path: str, dotted: str, own: Exports | None = None) -> str | None:
        """The qualified name of what `dotted`, written in the module at `path`, stands for: the name outside the
        project it leads to through the project's modules ("triton.jit"), else the name the module's own
        absolute import spells ("kgate.register" where `kgate` is the project's package); None when neither.
        `own`: that module's exports when the caller has them, else read from its file."""
        found = self.target(path, dotted, own)
        if found is not None and found[0] == EXTERNAL:
            return found[1]
        head, dot, rest = dotted.partition(".")
        table = own if own is not None else self._exports(os.path.abspath(path))
        binding = table.get(head) if table is not None else None
        if binding is None or binding.kind != IMPORT or binding.level:
            return None
        base = f"{binding.module}.{binding.attr}" if binding.attr else binding.module
        return base + dot + rest

    def definition(self, path: str, dotted: str, own: Exports | None = None) -> tuple[str, str] | None:
        """(file, name) of the project module's top-level definition or value that `dotted`, written in the module at
        `path`, stands for (`from .kernels import fwd_kernel` in ops.py: (".../kernels.py", "fwd_kernel")); None
        when it leads outside the project or nowhere kgate can read."""
        self._defined = True
        try:
            found = self.target(path, dotted, own)
        finally:
            self._defined = False
        return _defined_at(found)

    def head(self, path: str, name: str, own: Exports) -> tuple[Target | None, depends.Reads]:
        """Where the name `name` (no dot) bound by `own`, statements of the module at `path`, leads as `definition`
        follows it, with what following it read: the first step of `definition(path, f"{name}.{tail}", own)`, taken
        once for the many tails a caller tries (`attribute` takes the rest)."""
        self._defined = True
        try:
            with depends.collecting() as reads:
                found = self._name(os.path.abspath(path), name, own, 0)
        finally:
            self._defined = False
        return found, reads

    def attribute(self, found: Target | None, tail: str) -> tuple[str, str] | None:
        """`definition` of a dotted name whose first part leads to `found` (`head`), followed on through `tail`'s
        parts ("" for none): (file, name) of the project's definition it stands for, or None."""
        self._defined = True
        try:
            for part in tail.split(".") if tail else ():
                if found is None or found[0] != MODULE:
                    return None  # an attribute of a definition or of a name outside the project: never a definition
                found = self._attribute(found, part, 0)
        finally:
            self._defined = False
        return _defined_at(found)

    def target(self, path: str, dotted: str, own: Exports | None = None, depth: int = 0) -> Target | None:
        """Where a dotted name written in a module leads: a module of the project or a name outside it."""
        head, *rest = dotted.split(".")
        found = self._name(os.path.abspath(path), head, own, depth)
        for part in rest:
            if found is None:
                return None
            found = self._attribute(found, part, depth)
        return found

    def _name(self, path: str, name: str, own: Exports | None, depth: int) -> Target | None:
        """Where a name bound at the top level of the module at `path` leads (`own`: that module's bindings as the
        caller has them; None: as its file has them, an answer kept for the resolver's life)."""
        if own is not None:
            return self._followed(path, name, own, depth)
        key = (path, name, depth, self._defined)
        held = self._named.get(key)
        if held is None:
            with depends.collecting() as reads:
                found = self._followed(path, name, None, depth)
            held = self._named[key] = (found, reads)
        else:
            depends.replay(held[1])
        return held[0]

    def _followed(self, path: str, name: str, own: Exports | None, depth: int) -> Target | None:
        if depth > _DEPTH:
            return None
        table = own if own is not None else self._exports(path)
        if table is None:
            return None
        binding = table.get(name)
        if binding is None:
            return self._starred(path, table, name, depth)
        if binding.kind == ALIAS:
            found = self.target(path, binding.attr, own, depth + 1)
            head = binding.attr.split(".", 1)[0]
            if found is None and self._defined and head != binding.attr and \
                    self._followed(path, head, own, depth + 1) == (DEFINED, f"{path}\n{head}"):
                return (DEFINED, f"{path}\n{name}")  # `attend = Fn.apply`: the module's own value, of its own class
            return found
        if binding.kind != IMPORT:  # the module's own definition or value
            return (DEFINED, f"{path}\n{name}") if self._defined else None
        module = _renamed(table, self._module(path, binding.module, binding.level))
        return self._attribute(module, binding.attr, depth) if binding.attr and module is not None else module

    def _starred(self, path: str, table: Exports, name: str, depth: int) -> Target | None:
        """A name a star import brings: from a project module that exports it, or the one module outside."""
        outside = []
        for module, level in table.stars:
            found = self._module(path, module, level)
            if found is None:
                continue
            if found[0] == EXTERNAL:
                outside.append(found)
                continue
            other = self._exports(found[1])
            if other is not None and other.exported(name):
                target = self._name(found[1], name, None, depth + 1)
                if target is not None:
                    return target
        return _renamed(table, (EXTERNAL, f"{outside[0][1]}.{name}")) if len(outside) == 1 else None

    def _attribute(self, found: Target | None, part: str, depth: int) -> Target | None:
        if found is None:
            return None
        kind, where = found
        if kind == EXTERNAL:
            return (EXTERNAL, f"{where}.{part}")
        if kind == DEFINED:
            return None  # an attribute of a definition (a method, a class's value): not followed
        if depends.probe(where) == "f":
            bound = self._name(where, part, None, depth + 1)
            if bound is not None:
                return bound
        sub = self._submodule(where, part)
        return (MODULE, sub) if sub is not None else None

    def _module(self, path: str, module: str, level: int) -> Target | None:
        """What `import module` (relative: `level` dots) in the module at `path` imports."""
        parts = [p for p in module.split(".") if p]
        if level:
            base = os.path.dirname(path)
            for _ in range(level - 1):
                base = os.path.dirname(base)
            found: str | None = base
            for part in parts:
                found = self._submodule(found, part) if found is not None else None
            if found is None:
                return None
            init = os.path.join(found, "__init__.py")
            return (MODULE, init if depends.probe(found) == "d" and depends.probe(init) == "f" else found)
        file = self._absolute(path, parts)
        return (MODULE, file) if file is not None else (EXTERNAL, module)

    def _absolute(self, path: str, parts: list[str]) -> str | None:
        """The project file of an absolute import, looked for in the importer's package root, the roots, and the
        folder that holds the package the importer is itself in (`sglang.srt.x` imported from inside
        `python/sglang/`: `python/`, where a folder without `__init__.py` between them, a namespace package, hides
        it from the package root)."""
        key = (os.path.dirname(path), ".".join(parts))  # what decides: the importer's folder and the module
        held = self._files.get(key)
        if held is None:
            with depends.collecting() as reads:
                found = None
                for base in dict.fromkeys([_package_root(key[0]), *self.roots, *_holding(path, parts[:1])]):
                    found = self._under(base, parts)
                    if found is not None:
                        break
            held = self._files[key] = (found, reads)
        else:
            depends.replay(held[1])
        return held[0]

    def _under(self, base: str, parts: list[str]) -> str | None:
        if not parts or (not _has(base, parts[0]) and not _has(base, parts[0] + ".py")):
            return None  # most imports (torch, triton) are of nothing in the folder: one look at its listing
        stem = os.path.join(base, *parts)
        for candidate in (stem + ".py", os.path.join(stem, "__init__.py")):
            if depends.probe(candidate) == "f" and (self.inside is None or candidate.startswith(self.inside + os.sep)):
                return candidate
        return None

    def _submodule(self, where: str, part: str) -> str | None:
        """A module or package `part` of the package at `where` (its `__init__.py` or its folder)."""
        folder = where if depends.probe(where) == "d" else (os.path.dirname(where)
                                                            if os.path.basename(where) == "__init__.py" else None)
        if folder is None:
            return None
        stem = os.path.join(folder, part)
        for candidate in (stem + ".py", os.path.join(stem, "__init__.py")):
            if depends.probe(candidate) == "f":
                return candidate
        return stem if depends.probe(stem) == "d" else None

    def _exports(self, path: str) -> Exports | None:
        if depends.probe(path) != "f":
            return None
        found, digest, state = _read(path)
        depends.note(depends.EXPORTS + path, depends.stable(state), digest)
        return found


def _renamed(table: Exports, found: Target | None) -> Target | None:
    """A name outside the project as the module's own imports call its package: a Triton distribution under another
    name (`import vendor_triton as triton`) makes `vendor_triton.language` in that module `triton.language`, whether
    imported as `from vendor_triton import language as tl` or reached as `triton.language`."""
    if found is None or found[0] != EXTERNAL:
        return found
    head, dot, rest = found[1].partition(".")
    if head in _DISTRIBUTED:
        return found
    for name in _DISTRIBUTED:
        binding = table.get(name)
        if binding is not None and binding.kind == IMPORT and binding.module == head and not binding.attr and \
                not binding.level:
            return (EXTERNAL, name + dot + rest)
    return found


def _holding(path: str, top: list[str]) -> list[str]:
    """The folder above the top-level package `top` (one name) that the module at `path` is in: the nearest
    ancestor of the module named so that is a package (`__init__.py`) in a folder that is none (a subpackage
    named like it, `fla/conv/triton/`, is not it)."""
    folder = os.path.dirname(path)
    if not top or os.sep + top[0] + os.sep not in folder + os.sep:
        return []  # most imports (torch, triton) name no folder the module is in: no folder is looked at
    while os.path.dirname(folder) != folder:
        parent = os.path.dirname(folder)
        if os.path.basename(folder) == top[0] and _has(folder, "__init__.py") and not _has(parent, "__init__.py"):
            return [parent]
        folder = parent
    return []


def _package_root(folder: str) -> str:
    """The folder absolute imports of a module in `folder` are found from: the one above its outermost package,
    or the folder itself when it is no package."""
    while _has(folder, "__init__.py") and os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)
    return folder


_LISTED: dict[str, tuple[tuple[int, int], frozenset[str]]] = {}


def _has(folder: str, name: str) -> bool:
    """Whether the folder holds an entry `name`, as its listing says; noted as a look for that entry."""
    path = os.path.join(folder, name)
    if name in _entries(folder):
        depends.probe(path)
        return True
    depends.note(depends.PROBE + path, None, "")  # not listed: nothing there, no need to look
    return False


def _entries(folder: str) -> frozenset[str]:
    """The names in a folder, listed again only when the folder changed (one `stat` per question)."""
    try:
        st = os.stat(folder)
    except OSError:
        return frozenset()
    state = (st.st_mtime_ns, st.st_ino)
    held = _LISTED.get(folder)
    if held is None or held[0] != state:
        try:
            names = frozenset(os.listdir(folder))
        except OSError:
            names = frozenset()
        if len(_LISTED) >= 4096:
            _LISTED.clear()
        held = _LISTED[folder] = (state, names)
    return held[1]


# --------------------------------------------------------------------------- reading a module's top level

# By path and file state, for the process: what the module binds, and a digest of it.
_READ: dict[tuple[str, tuple[int, ...]], tuple[Exports | None, str]] = {}
_KEEP = 65536  # a project's modules (a few hundred bytes each): read once per run, however many verdicts follow them


def file_exports(path: str) -> Exports | None:
    """What the module at `path` binds at its top level (None: it cannot be read or parsed)."""
    return _read(path)[0]


def exports_digest(path: str) -> str:
    """A digest of what the module at `path` binds at its top level: a verdict that followed names through the module
    holds while it is the same."""
    return _read(path)[1]


def _read(path: str) -> tuple[Exports | None, str, list[int] | None]:
    """What the module binds, a digest of it, and the state of the file it was read from."""
    state = path_state(path)
    if state is None:
        return None, "", None
    key = (path, tuple(state))
    if key not in _READ:
        while len(_READ) >= _KEEP:
            _READ.pop(next(iter(_READ)))
        tree = _top_level(path)
        found = exports(tree) if tree is not None else None
        _READ[key] = (found, depends.digest(repr(found).encode("utf-8", "surrogateescape")))
    return (*_READ[key], state)


def _top_level(path: str) -> ast.Module | None:
    """The module's top-level statements, with its definitions' bodies left out (they bind nothing outside):
    a parse of a fraction of the text. The whole file where it cannot be split with confidence."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
        text = decode(data, python=True)
    except (OSError, UnreadableSource):
        return None
    parts = pyparts.of_text(data, split_lines(text))
    if parts.blocks is not None:
        try:
            return parts.parse([b for b in parts.blocks if b[2] is None], [b for b in parts.blocks if b[2] is not None],
                               "<unknown>")
        except UnreadableSource:
            pass
    return try_parse(data)


def _defined_at(found: Target | None) -> tuple[str, str] | None:
    """(file, name) of a target that is a definition of the project; None for any other."""
    if found is None or found[0] != DEFINED:
        return None
    file, _newline, name = found[1].partition("\n")
    return file, name
