"""One parse per Python source file, remembered across runs.

Planning a check needs, for every module that defines a registered kernel:
its top-level functions (where they start and end, a hash of their text,
the names they use, their parameters and decorators), the hash of the rest
of the module, and its imports. All of it comes from one `ast.parse`, kept
in memory for the run and in `<cache>/v1/pyindex.json` across runs, keyed by
the file's size and modification and change times, so a run in which the
file did not change does not parse it at all.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kgate.collect.pysource import dotted, spelled_constexpr
from kgate.collect.source import try_parse
from kgate.support import jsondoc, reads
from kgate.support.atomicio import read_cached
from kgate.support.filestat import path_state

INDEX_VERSION = 5


@dataclass(frozen=True)
class DefInfo:
    name: str
    start: int  # first line, decorators included
    end: int
    line: int  # the `def` line
    text_hash: str
    uses: tuple[str, ...]  # names the body and decorators use, and the dotted names they read (`h.tile`)
    kind: str  # "function" | "class"
    # The decorators as written ("triton.jit", "tu.triton.jit", "jit"; the called name of `@f(...)`), "?" for one
    # that is not a name (`@table[0]`): what they name is followed through the imports where it is read
    # (`kgate.collect.static_kernel`), since it may pass through other modules of the project.
    decorators: tuple[str, ...] = ()
    params: tuple[tuple[str, bool, bool], ...] | None = None  # (name, constexpr, has default); None: not simple


@dataclass(frozen=True)
class ModuleSummary:
    """What the planner reads of one module (not `kgate.collect.pysource.ParsedModule`, the rules' view of a tree)."""

    parsed: bool
    rest_hash: str  # the module's code outside top-level functions and classes
    defs: dict[str, DefInfo] = field(default_factory=dict)
    imports: tuple[tuple[str, int, str], ...] = ()  # (module, level, imported name)
    # Top-level functions and classes whose name is bound again somewhere in the module (`k = autotune(...)(k)`,
    # an import, `global k`), and "*" when a star import may rebind any of them: what the module exports under
    # that name is then not the definition itself.
    rebound: tuple[str, ...] = ()
    # The top-level functions and classes the code that runs at import names (the module's other statements, the
    # decorators and default values of its definitions, its classes' bodies): a helper that builds the autotune
    # configs, a class whose attributes a constant reads. What they compute can reach any kernel of the module.
    at_import: tuple[str, ...] = ()


class _Index:
    def __init__(self) -> None:
        self.file: Path | None = None
        self.entries: dict[str, list[Any]] = {}
        self.loaded = False
        self.dirty = False
        self.memory: dict[str, tuple[list[int] | None, ModuleSummary]] = {}

    def use(self, cache_dir: Path) -> None:
        target = cache_dir / "v1" / "pyindex.json"
        if target != self.file:
            self.file, self.loaded, self.entries, self.dirty = target, False, {}, False

    def _load(self) -> None:
        self.loaded = True
        if self.file is None:
            return
        try:
            data = jsondoc.loads(read_cached(self.file) or b"null")  # a record that is not a regular file: none
            if data.get("version") == INDEX_VERSION and isinstance(data.get("files"), dict):
                self.entries = data["files"]
        except (OSError, ValueError, AttributeError):  # jsondoc.NotJSON is a ValueError
            self.entries = {}

    def get(self, path: Path) -> ModuleSummary:
        key = str(path)
        stat = path_state(path)
        reads.note(key, stat)  # judged by its stat alone when the index holds it: an input all the same
        held = self.memory.get(key)
        if held is not None and held[0] == stat:
            return held[1]
        if not self.loaded:
            self._load()
        stored = self.entries.get(key)
        info = None
        try:
            if stored is not None and stored[0] == stat:
                info = _from_json(stored[1])
        except (KeyError, TypeError, ValueError, AttributeError, IndexError):
            info = None  # not an entry this index wrote (a hand edit, a disk error): parsed again
        if info is None:
            info = parse_module(path)
            if stat is not None:
                self.entries[key] = [stat, _to_json(info)]
                self.dirty = True
        self.memory[key] = (stat, info)
        return info

    def save(self) -> None:
        if not self.dirty or self.file is None:
            return
        from kgate.support.atomicio import write_cached

        live = {k: v for k, v in self.entries.items() if os.path.exists(k)}
        try:
            write_cached(self.file, json.dumps({"version": INDEX_VERSION, "files": live},
                                               separators=(",", ":")).encode())
        except OSError:
            pass  # costs a parse next time, nothing else
        self.dirty = False


_INDEX = _Index()


def use_cache(cache_dir: Path) -> None:
    """Remember parses in this cache folder (the project's `cache-dir`)."""
    _INDEX.use(cache_dir)


def save() -> None:
    _INDEX.save()


_RESOLVED: dict[Path, Path] = {}


def module_info(path: Path) -> ModuleSummary:
    resolved = _RESOLVED.get(path)
    if resolved is None:
        resolved = _RESOLVED[path] = path.resolve()
    return _INDEX.get(resolved)


# --------------------------------------------------------------------------- parsing


def _decorator_name(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    return dotted(node) or "?"


def _rebound(tree: ast.Module, names: set[str]) -> tuple[str, ...]:
    """Which of `names` (the top-level definitions) something else in the module binds too; "*" for a star
    import. Anything that binds a name counts, wherever it is (a function's local of the same name too):
    erring that way costs an import of the module, never a wrong plan."""
    bound: set[str] = set()
    top = set(map(id, tree.body))
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                bound.add("*" if alias.name == "*" else (alias.asname or alias.name).split(".")[0])
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound.update(node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and id(node) not in top:
            bound.add(node.name)  # a nested definition of the same name (conservative: it may say `global`)
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            bound.add(node.rest)
    # A name defined twice at the top level: the later definition is the one the module exports.
    seen: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name in seen:
                bound.add(node.name)
            seen.add(node.name)
    return tuple(sorted(bound & (names | {"*"})))


def _params(node: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[tuple[str, bool, bool], ...] | None:
    args = node.args
    if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs:
        return None
    positional = args.args
    defaults = [False] * (len(positional) - len(args.defaults)) + [True] * len(args.defaults)
    return tuple((a.arg, spelled_constexpr(a.annotation), d) for a, d in zip(positional, defaults))


def _names(node: ast.AST) -> tuple[str, ...]:
    """The names a tree uses, and the dotted names it reads (`h.tile`, `pkg.helpers.tile`)."""
    found = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    found |= {name for n in ast.walk(node) if isinstance(n, ast.Attribute) for name in [dotted(n)] if name}
    return tuple(sorted(found))


def parse_module(path: Path) -> ModuleSummary:
    try:
        data = path.read_bytes()
    except OSError:
        data = b""
    tree = try_parse(data)  # None: a syntax error, nesting too deep, a file too large to parse
    if tree is None:
        return ModuleSummary(False, hashlib.sha256(data).hexdigest())
    text = data.decode("utf-8", errors="replace")
    lines = text.splitlines(keepends=True)
    defs: dict[str, DefInfo] = {}
    rest: list[str] = []
    for node in tree.body:
        decorators = getattr(node, "decorator_list", [])
        start = min([node.lineno] + [d.lineno for d in decorators])
        end = node.end_lineno or node.lineno
        segment = "".join(lines[start - 1: end])
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            uses = _names(node)
            is_function = not isinstance(node, ast.ClassDef)
            defs[node.name] = DefInfo(
                name=node.name, start=start, end=end, line=node.lineno,
                text_hash=hashlib.sha256(segment.encode()).hexdigest(), uses=uses,
                kind="function" if is_function else "class",
                decorators=tuple(_decorator_name(d) for d in decorators),
                params=_params(node) if is_function else None,  # type: ignore[arg-type]
            )
        else:
            rest.append(segment)
    imports: list[tuple[str, int, str]] = []
    for found in ast.walk(tree):
        if isinstance(found, ast.Import):
            imports.extend((alias.name, 0, "") for alias in found.names)
        elif isinstance(found, ast.ImportFrom):
            imports.extend((found.module or "", found.level, alias.name) for alias in found.names)
    return ModuleSummary(True, hashlib.sha256("".join(rest).encode()).hexdigest(), defs, tuple(imports),
                         _rebound(tree, set(defs)), _at_import(tree, set(defs)))


def _at_import(tree: ast.Module, names: set[str]) -> tuple[str, ...]:
    """Which of `names` (the top-level definitions) the code that runs while the module is imported names: every
    statement but a definition's body, where a function's decorators, defaults and annotations and a class's whole
    body but its methods' bodies run."""
    used: set[str] = set()
    for node in tree.body:
        for part in _run_at_import(node):
            used.update(n.id for n in ast.walk(part) if isinstance(n, ast.Name))
    return tuple(sorted(used & names))


def _run_at_import(node: ast.AST) -> list[ast.AST]:
    """The parts of a top-level statement that run when the module is imported."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        args = node.args
        annotations = [a.annotation for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg)
                       if a is not None and a.annotation is not None]
        return [*node.decorator_list, *args.defaults, *(d for d in args.kw_defaults if d is not None), *annotations,
                *([node.returns] if node.returns is not None else [])]
    if isinstance(node, ast.ClassDef):
        return [*node.decorator_list, *node.bases, *node.keywords,
                *(part for stmt in node.body for part in _run_at_import(stmt))]
    return [node]


def _to_json(info: ModuleSummary) -> dict[str, Any]:
    return asdict(info)


def _from_json(data: dict[str, Any]) -> ModuleSummary:
    defs = {}
    for name, raw in data["defs"].items():
        raw = dict(raw)
        raw["uses"] = tuple(raw["uses"])
        raw["decorators"] = tuple(raw["decorators"])
        raw["params"] = tuple(tuple(p) for p in raw["params"]) if raw["params"] is not None else None
        defs[name] = DefInfo(**raw)
    info = ModuleSummary(data["parsed"], data["rest_hash"], defs, tuple(tuple(i) for i in data["imports"]),
                         tuple(data["rebound"]), tuple(data["at_import"]))
    _check(info)
    return info


def _check(info: ModuleSummary) -> None:
    """ValueError unless a remembered parse has the types a fresh one has: the planner trusts them."""
    def ok(value: Any, kind: type) -> bool:
        return isinstance(value, kind) and not (kind is int and isinstance(value, bool))

    good = ok(info.parsed, bool) and ok(info.rest_hash, str) and all(
        len(item) == 3 and ok(item[0], str) and ok(item[1], int) and ok(item[2], str) for item in info.imports) \
        and all(ok(name, str) for name in info.rebound + info.at_import)
    for name, d in info.defs.items():
        good = good and name == d.name and ok(d.name, str) and all(ok(v, int) for v in (d.start, d.end, d.line)) \
            and ok(d.text_hash, str) and d.kind in ("function", "class") \
            and all(ok(v, str) for v in d.uses + d.decorators) and (d.params is None or all(
                len(p) == 3 and ok(p[0], str) and ok(p[1], bool) and ok(p[2], bool) for p in d.params))
    if not good:
        raise ValueError("not a remembered parse")
