"""Which sources a build setting compiles: the targets of a CMake file and the extensions of a `setup.py`.

A setting written for a unit compiles that unit's sources only: a CMake target's own properties and options
(`set_target_properties(t PROPERTIES CUDA_ARCHITECTURES ...)`, `set_property(TARGET t ...)`,
`target_compile_options(t ...)`), a source file's (`set_source_files_properties(f ...)`), a variable used only
by those (`list(APPEND T_FLAGS -gencode ...)` then `target_compile_options(t ${T_FLAGS})`), a `setup.py`
extension's arguments and the module-level names they use (`CUDAExtension("m", ["m.cu"],
extra_compile_args={"nvcc": NVCC})`). Any other setting is the whole build's, except where a unit sets its
own architectures: CMake's `CMAKE_CUDA_ARCHITECTURES` is only the default of a target's
`CUDA_ARCHITECTURES`, and torch's `TORCH_CUDA_ARCH_LIST` is not used for an extension whose nvcc flags
name an architecture.

Sources are read as written, relative to the build file's folder (`${CMAKE_CURRENT_SOURCE_DIR}/`
and the like dropped, variables set in the same file expanded), or to the folder a caller names with the
folders CMake's directory variables stand for (`places`: a `.cmake` file's relative paths are its includer's).
A unit with a source that cannot be read so (a glob, a variable set elsewhere) has unknown sources.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from kgate.collect import pysource as py
from kgate.collect.build_settings import cmake_close
from kgate.collect.build_sources import SOURCE_SUFFIXES
from kgate.support.comments import comments

_COMMAND = re.compile(r"^[ \t]*(\w+)[ \t]*\(", re.MULTILINE)
_TOKEN = re.compile(r'"((?:[^"\\]|\\.)*)"|([^\s"()]+)')
_VARIABLE = re.compile(r"\$\{(\w+)\}")
_PLACE = re.compile(r"^\$\{(CMAKE_CURRENT_SOURCE_DIR|CMAKE_CURRENT_LIST_DIR|PROJECT_SOURCE_DIR|CMAKE_SOURCE_DIR)\}(?:/|$)")
# Where CMake's directory variables lead, relative to the folder the sources are read against (None: not known).
Places = Mapping[str, str | None]
HERE: Places = {"CMAKE_CURRENT_SOURCE_DIR": "", "CMAKE_CURRENT_LIST_DIR": "", "PROJECT_SOURCE_DIR": "",
                "CMAKE_SOURCE_DIR": ""}
_TARGET_KEYWORDS = frozenset({"STATIC", "SHARED", "MODULE", "OBJECT", "INTERFACE", "EXCLUDE_FROM_ALL", "WIN32",
                              "MACOSX_BUNDLE", "WITH_SOABI", "NO_EXTRAS", "THIN_LTO", "PRIVATE", "PUBLIC"})
_ARCHITECTURES = "CUDA_ARCHITECTURES"


@dataclass
class Unit:
    """A CMake target, a group of source files given properties, or a `setup.py` extension."""

    sources: set[str] = field(default_factory=set)  # as written, relative to the build file's folder
    known: bool = True  # whether every source could be read
    # The globs among its sources (`file(GLOB V "csrc/*.cu")`, relative to the build file's folder; a recursive one
    # as `DIR/**/NAME`), which leave it not `known`: what they match is decided by the files there when it is built.
    patterns: set[str] = field(default_factory=set)
    unread: bool = False  # a source that is neither a name nor a glob (a variable set elsewhere, a generator)
    lines: set[int] = field(default_factory=set)  # lines of the settings written for this unit
    # The build-wide default the unit's own architectures replace: "CUDA_ARCHITECTURES" for a CMake target with that
    # property, "TORCH_CUDA_ARCH_LIST" for an extension whose nvcc flags name an architecture; "" if none.
    replaces: str = ""


@dataclass(frozen=True)
class Units:
    units: tuple[Unit, ...]

    def for_line(self, line: int) -> list[Unit]:
        """The units whose settings the line writes ([] for a setting of the whole build)."""
        return [unit for unit in self.units if line in unit.lines]

    def replacing(self, default: str) -> list[Unit]:
        """The units a build-wide `default` architecture list does not reach: they set their own."""
        return [unit for unit in self.units if unit.replaces == default]


def units(name: str, text: str, tree: ast.Module | None, places: Places = HERE) -> Units:
    """The units of the build file called `name` (`CMakeLists.txt`, `*.cmake`, `setup.py`). `places`: the folders
    CMake's directory variables stand for, relative to the one the sources are read against (by default the build
    file's own, which all four are)."""
    if name == "CMakeLists.txt" or name.endswith(".cmake"):
        return Units(tuple(_cmake_units(text, places)))
    if name == "setup.py" and tree is not None:
        return Units(tuple(_setup_units(tree)))
    return Units(())


# --------------------------------------------------------------------------- CMake


@dataclass(frozen=True)
class _Command:
    name: str
    args: tuple[str, ...]
    first: int  # line
    last: int


def _commands(text: str) -> list[_Command]:
    spans = [(c.start, c.end) for c in comments(text, "cmake")]
    out = []
    for match in _COMMAND.finditer(text):
        if any(start <= match.start() < end for start, end in spans):
            continue
        close = cmake_close(text, match.end() - 1)
        inner = text[match.end():close]
        args = tuple(m.group(1) if m.group(1) is not None else m.group(2) for m in _TOKEN.finditer(inner))
        first = text.count("\n", 0, match.start()) + 1
        out.append(_Command(match.group(1).lower(), args, first, first + text.count("\n", match.start(), close)))
    return out


def cmake_includes(text: str) -> list[str]:
    """What the `include()` commands of a CMake file name (a path, or a module name)."""
    return [command.args[0] for command in _commands(text) if command.name == "include" and command.args]


def _cmake_units(text: str, places: Places) -> Iterator[Unit]:
    commands = _commands(text)
    values = _variables(commands, places)
    targets: dict[str, Unit] = {}
    for command in commands:
        if command.name.endswith(("add_library", "add_executable", "add_module")) and command.args:
            unit = targets.setdefault(command.args[0], Unit())
            _add_sources(unit, command.args[1:], values, places)
        elif command.name == "target_sources" and command.args:
            _add_sources(targets.setdefault(command.args[0], Unit()), command.args[1:], values, places)
    files: list[Unit] = []
    scoped = [_scoped(command, targets, values, files, places) for command in commands]
    for command, owners in zip(commands, scoped):
        for unit in owners:
            unit.lines.update(range(command.first, command.last + 1))
            if _ARCHITECTURES in command.args:
                unit.replaces = _ARCHITECTURES
    # A variable used only where units' settings are written belongs to those units.
    for command in commands:
        if command.name in ("set", "list") and command.args:
            variable = command.args[1] if command.name == "list" and len(command.args) > 1 else command.args[0]
            users = [i for i, c in enumerate(commands) if c is not command and "${" + variable + "}" in " ".join(c.args)]
            if users and all(scoped[i] for i in users):
                for i in users:
                    for unit in scoped[i]:
                        unit.lines.update(range(command.first, command.last + 1))
    yield from targets.values()
    yield from files


def _scoped(command: _Command, targets: dict[str, Unit], values: dict[str, list[str]], files: list[Unit],
            places: Places) -> list[Unit]:
    """The units a command writes settings for: targets, or a group of files it gives properties ([] if none)."""
    args = command.args
    if command.name == "set_target_properties":
        cut = args.index("PROPERTIES") if "PROPERTIES" in args else len(args)
        return [targets[t] for t in args[:cut] if t in targets]
    if command.name == "target_compile_options" and args:
        return [targets[args[0]]] if args[0] in targets else []
    if command.name == "set_property" and len(args) > 1 and args[0] in ("TARGET", "SOURCE"):
        cut = next((i for i, a in enumerate(args) if a in ("PROPERTY", "APPEND", "APPEND_STRING")), len(args))
        if args[0] == "TARGET":
            return [targets[t] for t in args[1:cut] if t in targets]
        return [_file_unit(args[1:cut], values, files, places)]
    if command.name == "set_source_files_properties":
        cut = args.index("PROPERTIES") if "PROPERTIES" in args else len(args)
        return [_file_unit(args[:cut], values, files, places)]
    return []


def _file_unit(names: tuple[str, ...], values: dict[str, list[str]], files: list[Unit], places: Places) -> Unit:
    unit = Unit()
    _add_sources(unit, names, values, places)
    files.append(unit)
    return unit


def _variables(commands: list[_Command], places: Places) -> dict[str, list[str]]:
    """Variable -> the words `set()` and `list(APPEND)` give it in the file (the last `set` and what follows)."""
    out: dict[str, list[str]] = {}
    for command in commands:
        if command.name == "set" and command.args:
            words = [a for a in command.args[1:] if a not in ("CACHE", "PARENT_SCOPE", "FORCE")]
            out[command.args[0]] = [w for a in words for w in a.split(";") if w]
        elif command.name == "list" and len(command.args) > 1 and command.args[0] == "APPEND":
            out.setdefault(command.args[1], []).extend(w for a in command.args[2:] for w in a.split(";") if w)
        elif command.name == "file" and len(command.args) > 2 and command.args[0] in ("GLOB", "GLOB_RECURSE"):
            out[command.args[1]] = _globs(command.args[0], command.args[2:], places)
    return out


def _globs(kind: str, args: tuple[str, ...], places: Places) -> list[str]:
    """The patterns of a `file(GLOB ...)`, a recursive one's as `DIR/**/NAME`; `$` (unread) where one cannot be
    read so (relative to another folder, a pattern in a folder's name)."""
    out: list[str] = []
    words = iter(args)
    for word in words:
        if word in ("LIST_DIRECTORIES", "RELATIVE"):
            next(words, None)
            if word == "RELATIVE":
                return ["$"]  # names relative to another folder: not where the build file reads them
            continue
        if word in ("CONFIGURE_DEPENDS", "FOLLOW_SYMLINKS"):
            continue
        pattern = _placed(word, places)
        folder, name = os.path.split(pattern)
        if any(ch in folder for ch in "*?[") or "$" in pattern:
            out.append("$")
        elif kind == "GLOB_RECURSE":
            out.append(os.path.join(folder, "**", name) if folder else os.path.join("**", name))
        else:
            out.append(pattern)
    return out


def _placed(word: str, places: Places) -> str:
    """A path with the directory variable it starts with replaced by the folder it stands for (`$...`: not known)."""
    found = _PLACE.match(word)
    if found is None:
        return word
    where = places.get(found.group(1))
    if where is None:
        return "$" + word
    rest = word[found.end():]
    return os.path.join(where, rest) if where else rest


def _add_sources(unit: Unit, words: tuple[str, ...], values: dict[str, list[str]], places: Places,
                 depth: int = 0) -> None:
    for word in words:
        whole = _VARIABLE.fullmatch(word)
        if whole is not None and whole.group(1) in values and depth < 4:
            _add_sources(unit, tuple(values[whole.group(1)]), values, places, depth + 1)
            continue
        for part in word.split(";"):
            if part in _TARGET_KEYWORDS or not part:
                continue
            path = _placed(part, places)
            if "$" in path:
                unit.known, unit.unread = False, True
            elif any(ch in path for ch in "*?["):
                unit.known = False
                unit.patterns.add(os.path.normpath(path))
            elif path.endswith(SOURCE_SUFFIXES):
                unit.sources.add(os.path.normpath(path))


# --------------------------------------------------------------------------- setup.py


def _setup_units(tree: ast.Module) -> Iterator[Unit]:
    module = {t.id: node for node in tree.body if isinstance(node, ast.Assign)
              for t in node.targets if isinstance(t, ast.Name)}
    changed = _changed(tree)
    # A list of sources is read from the one assignment that binds its name, when nothing else changes it.
    fixed = {name: node for name, node in module.items() if changed.get(name, 0) == 1}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not (py.dotted(node.func) or "").endswith("Extension"):
            continue
        unit = Unit()
        sources = node.args[1] if len(node.args) > 1 else py.argument(node, "sources")
        names = _strings(sources, fixed) if sources is not None else None
        unit.known = names is not None
        unit.unread = names is None
        unit.sources = {os.path.normpath(n) for n in names or () if n.endswith(SOURCE_SUFFIXES)}
        used: list[ast.expr | ast.stmt] = [node, *_assignments_used(node, module)]
        unit.lines = {line for part in used for line in range(part.lineno, (part.end_lineno or part.lineno) + 1)}
        flags = py.argument(node, "extra_compile_args")
        parts = [flags, *_assignments_used(flags, module)] if flags is not None else []
        if any(isinstance(c, ast.Constant) and isinstance(c.value, str) and "arch" in c.value
               for part in parts for c in ast.walk(part)):
            unit.replaces = "TORCH_CUDA_ARCH_LIST"
        yield unit


def _changed(tree: ast.Module) -> dict[str, int]:
    """Name -> how many times the script binds or changes what it holds: each binding (an assignment, a loop's target,
    `+=`), each item assigned or deleted (`srcs[0] = ...`) and each method called on it (`srcs.append(...)`,
    `srcs.extend(glob(...))`), anywhere in the script."""
    out: dict[str, int] = {}
    for node in ast.walk(tree):
        name = None
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            name = node.id
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del)) and \
                isinstance(node.value, ast.Name):
            name = node.value.id
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
            name = node.func.value.id
        if name is not None:
            out[name] = out.get(name, 0) + 1
    return out


def _assignments_used(node: ast.AST, module: dict[str, ast.Assign]) -> list[ast.Assign]:
    """The module-level assignments of the names `node` reads, and of the names those read (two levels)."""
    out: list[ast.Assign] = []
    pending = [node]
    for _ in range(2):
        found = [module[n.id] for part in pending for n in ast.walk(part)
                 if isinstance(n, ast.Name) and n.id in module and module[n.id] not in out]
        out += found
        pending = list(found)
    return out


def _strings(expr: ast.expr, module: dict[str, ast.Assign]) -> list[str] | None:
    """The strings a list of source names holds: literals, `os.path.join` of literals, a module-level name bound to
    such a list; None for anything else (a glob, a comprehension)."""
    if isinstance(expr, ast.Name) and expr.id in module:
        return _strings(module[expr.id].value, module)
    if not isinstance(expr, (ast.List, ast.Tuple)):
        return None
    out = []
    for item in expr.elts:
        if isinstance(item, ast.Constant) and isinstance(item.value, str):
            out.append(item.value)
        elif isinstance(item, ast.Call) and (py.dotted(item.func) or "").endswith("join") and all(
                isinstance(a, ast.Constant) and isinstance(a.value, str) for a in item.args):
            out.append(os.path.join(*(str(getattr(a, "value", "")) for a in item.args)))
        else:
            return None
    return out
