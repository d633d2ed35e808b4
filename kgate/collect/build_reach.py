"""Whether any build of the project compiles a C++/CUDA file: a copy kept beside the built one (`gemv_backup.cu`),
or a header no built source includes, is never compiled, and what it launches never runs.

The project's builds are read together, since one build may compile another's files (a `setup.py` in `python/`
that lists `../csrc/op.cu`, a source that includes `../common/launch.cuh`). A file is taken to be compiled by no
build only where that can be read for certain; in any doubt it is compiled:

- it lies under a build of the project (a folder that holds a `setup.py`, a `pyproject.toml`, or a
  `CMakeLists.txt` that declares a `project(`); a file under none is compiled, and so is what it includes;
- every build is read: the sources its build files (`CMakeLists.txt`, `*.cmake`, `setup.py`) name as written
  (names, a list a `setup.py` binds once and never changes, and whatever a `file(GLOB ...)` matches), read from
  the folder CMake reads them from (a `.cmake` file's relative paths from the folder of the file that includes it,
  `${PROJECT_SOURCE_DIR}` from the folder that declares the `project(`). A build that cannot be read so (another
  build tool's file, a script or Python module that runs a compiler or builds an extension itself, a source that is
  neither a name nor a glob) compiles every file under its folder, and where its build files lead above their own
  folder (`..`, `CMAKE_SOURCE_DIR`), or where such a file lies under no build, any file of the project. A build
  that names no sources (a `pyproject.toml` alone) compiles its own files, not those of the builds below it;
- no file of the project other than C++ names the file (a script or a module may compile it by name);
- no compiled file includes it, directly or through other headers, wherever in the project they are
  (`kgate.collect.build_sources.reached`, which resolves an include generously), and none includes a file that a
  macro names (`#include IMPL_HEADER`), which may be any.
"""

from __future__ import annotations

import ast
import fnmatch
import os
import re

from kgate.collect.build_sources import SOURCE_SUFFIXES, own_build, owned_files, reached, skipped

_BUILD_FILES = ("CMakeLists.txt", "setup.py")
_OTHER_BUILDS = frozenset({"meson.build", "BUILD", "BUILD.bazel", "WORKSPACE", "build.ninja", "SConstruct",
                           "SConscript", "premake5.lua", "xmake.lua", "Justfile", "justfile", "Taskfile.yml"})
_MAKEFILES = ("Makefile", "makefile", "GNUmakefile")  # and their variants: `Makefile.cuda`, `Makefile.am`
_OTHER_SUFFIXES = (".mk", ".make", ".bzl", ".ninja")
# Scripts: another build where one runs a compiler itself, not where it runs CMake or setup.py.
_SCRIPTS = (".sh", ".bash", ".zsh", ".ksh", ".fish", ".bat", ".cmd", ".ps1")
_COMPILERS = re.compile(rb"(?<![\w.-])(?:nvcc|hipcc|g\+\+|gcc|clang\+\+|clang|c\+\+|cc|icpx|nvc\+\+)(?![\w.-])")
# A Python module that compiles sources itself: an extension it builds (`torch.utils.cpp_extension.load`, a
# `setuptools.Extension` outside `setup.py`) or a compiler it names as a program (`["nvcc", ...]`).
_PY_BUILDS = re.compile(rb"cpp_extension|load_inline|Extension\s*\(")
_PY_COMPILERS = re.compile(rb"[\"'/\\](?:nvcc|hipcc|g\+\+|gcc|clang\+\+|clang|c\+\+|icpx|nvc\+\+)(?:[\"'\s]|\.exe)")
# A build file that leads above its own folder, where a build that cannot be read may take its sources from.
_UPWARD = re.compile(rb"(?:^|[\s\"'(=:,/\\])\.\.(?:[/\\\"'\s),]|$)|CMAKE_SOURCE_DIR|dirname\(\s*os\.path\.dirname"
                     rb"|\.parent\.parent|\.parents\[", re.MULTILINE)
_READ = 1 << 20  # what is read of a file that may name a source (a larger one is data)
_SOURCE_SUFFIX = re.compile(rb"\.(?:" + b"|".join(re.escape(s[1:].encode()) for s in SOURCE_SUFFIXES) + rb")\b")
_NAME_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.+-")
# Byte strings one of which a Python file holds where it may name a compiler (tested before the pattern is tried).
_COMPILER_NEEDLES = (b"nvcc", b"hipcc", b"gcc", b"g++", b"clang", b"c++", b"icpx")
_PROJECT = re.compile(r"^\s*project\s*\(", re.MULTILINE | re.IGNORECASE)


def unbuilt(path: str, root: str, memo: dict[str, _Reading]) -> bool:
    """Whether no build of the project under `root` compiles `path` (a C++/CUDA file), for certain. `memo` keeps the
    reading of the project for the run's other files."""
    root = os.path.abspath(root)
    if root not in memo:
        memo[root] = _Reading(_Project(root))
    return memo[root].unbuilt(os.path.abspath(path))


class _Reading:
    """What the project's builds compile, read as far as a file's question needs: the file's own build first (most
    files it names or includes, and then the rest of the project is not read), the whole project where that build
    leaves the file out."""

    def __init__(self, project: _Project) -> None:
        self.project = project
        self.own: dict[str, frozenset[str] | None] = {}
        self.whole: tuple[frozenset[str] | None] | None = None

    def unbuilt(self, path: str) -> bool:
        owner = self.project.owner(path)
        if owner is None:
            return False
        if owner not in self.own:
            self.own[owner] = _built_by(owner, self.project)
        built = self.own[owner]
        if built is None or path in built or os.path.basename(path) in built:
            return False
        if self.whole is None:
            self.whole = (_unbuilt_files(self.project),)
        found = self.whole[0]
        return found is not None and path in found


class _Project:
    """The project's files as the builds' reading needs them: its build folders, its C++/CUDA files, its others."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.builds: list[str] = []
        self.sources: list[str] = []
        self.others: list[str] = []
        for here, folders, files in os.walk(root):
            folders[:] = sorted(d for d in folders if not skipped(d))
            if own_build(here):
                self.builds.append(here)
            for name in sorted(files):
                (self.sources if name.endswith(SOURCE_SUFFIXES) else self.others).append(os.path.join(here, name))
        self._build_set = set(self.builds)
        self._heads: dict[str, bytes | None] = {}

    def head(self, path: str) -> bytes | None:
        """The first megabyte of a file (None: it cannot be read), each file read once."""
        if path not in self._heads:
            try:
                with open(path, "rb") as handle:
                    self._heads[path] = handle.read(_READ)
            except OSError:
                self._heads[path] = None
        return self._heads[path]

    def owner(self, path: str) -> str | None:
        """The nearest build folder at or above the file's folder, None for none."""
        folder = os.path.dirname(path)
        while True:
            if folder in self._build_set:
                return folder
            if folder == self.root or not folder.startswith(self.root.rstrip(os.sep) + os.sep):
                return None
            folder = os.path.dirname(folder)


def _built_by(build: str, project: _Project) -> frozenset[str] | None:
    """What one build compiles, by path (its sources and the files they include), and the names its own files other
    than C++ mention; None where that cannot be read. A file outside it is no more than what this build says of it:
    the whole project decides."""
    compiled = _compiled(build, project)
    if compiled is None:
        return None
    named: set[str] = set()
    for here, names in owned_files(build):
        for name in names:
            data = None if name.endswith(SOURCE_SUFFIXES) else project.head(os.path.join(here, name))
            named.update(_source_names(data) if data is not None else ())
    built, computed = reached(sorted(compiled), project.sources)
    return None if computed else frozenset(built) | frozenset(named)


def _unbuilt_files(project: _Project) -> frozenset[str] | None:
    """The C++/CUDA files of the project no build compiles, None where that cannot be read."""
    if not project.builds:
        return None
    roots: set[str] = set()
    named: set[str] = set()
    for path in project.others:
        data = project.head(path)
        if data is None:
            continue
        if _another_build(path, data) and project.owner(path) is None:
            return None  # a build of its own choosing, under no build: it may compile any file of the project
        named.update(_source_names(data))
    for build in project.builds:
        compiled = _compiled(build, project)
        if compiled is None:
            if _leads_up(build, project):
                return None
            roots.update(p for p in project.sources if p.startswith(build + os.sep))
        else:
            roots |= compiled
    roots.update(p for p in project.sources if project.owner(p) is None)
    roots.update(p for p in project.sources if os.path.basename(p) in named)
    built, computed = reached(sorted(roots), project.sources)
    if computed:
        return None  # a compiled file includes a file a macro names: it may be any
    return frozenset(p for p in project.sources if p not in built)


def _source_names(data: bytes) -> set[str]:
    """The names of C++/CUDA files a file's text mentions (`ops.cu` of `csrc/ops.cu`): each found from its suffix
    back to the start of its name, so a long run of word characters is read once."""
    out: set[str] = set()
    for match in _SOURCE_SUFFIX.finditer(data):
        start = match.start()
        while start > 0 and data[start - 1] in _NAME_BYTES:
            start -= 1
        if start < match.start():
            out.add(data[start:match.end()].decode("utf-8", "replace"))
    return out


def _another_build(path: str, data: bytes | None) -> bool:
    """Whether a file of the project other than C++ is another build tool's, or a script or Python module that
    compiles sources itself (a file that cannot be read is taken to)."""
    name = os.path.basename(path)
    if name in _OTHER_BUILDS or name.startswith(_MAKEFILES) or name.endswith(_OTHER_SUFFIXES):
        return True
    if name == "setup.py" or name.endswith((".cmake", ".txt", ".md", ".rst", ".json", ".toml", ".cfg", ".yaml",
                                            ".yml", ".csv")):
        return False
    if data is None:
        return name.endswith((".py", *_SCRIPTS))
    if name.endswith(".py"):
        return _PY_BUILDS.search(data) is not None or any(needle in data for needle in _COMPILER_NEEDLES) and \
            _PY_COMPILERS.search(data) is not None
    if name.endswith(_SCRIPTS) or data.startswith(b"#!"):
        return _COMPILERS.search(data) is not None
    return False


def _compiled(build: str, project: _Project) -> set[str] | None:
    """The sources the build files of the build in `build` name (by path), None where that cannot be read for
    certain; all of its own files where it names none (it may compile them in a way kgate does not read)."""
    from kgate.collect.build_units import units

    files = [(here, name) for here, names in owned_files(build) for name in names]
    cmake = {os.path.join(here, name): _text(os.path.join(here, name)) for here, name in files
             if name == "CMakeLists.txt" or name.endswith(".cmake")}
    top = build if _PROJECT.search(cmake.get(os.path.join(build, "CMakeLists.txt")) or "") else None
    sources: set[str] = set()
    found = 0
    for here, name in files:
        path = os.path.join(here, name)
        if name.endswith(SOURCE_SUFFIXES):
            continue
        if _another_build(path, project.head(path)):
            return None
        if name not in _BUILD_FILES and not name.endswith(".cmake"):
            continue
        text = cmake[path] if path in cmake else _text(path)
        if text is None:
            return None
        try:
            tree = ast.parse(text) if name == "setup.py" else None
        except (SyntaxError, ValueError):
            return None
        bases = _bases(path, cmake) if name.endswith(".cmake") else [here]
        for base in bases:
            places = {"CMAKE_CURRENT_SOURCE_DIR": "", "CMAKE_CURRENT_LIST_DIR": os.path.relpath(here, base),
                      "PROJECT_SOURCE_DIR": None if top is None else os.path.relpath(top, base),
                      "CMAKE_SOURCE_DIR": None if top != project.root else os.path.relpath(top, base)}
            for unit in units(name, text, tree, places).units:
                if unit.unread or "$" in unit.patterns:
                    return None
                found += 1
                sources |= {os.path.normpath(os.path.join(base, source)) for source in unit.sources}
                sources |= {p for pattern in unit.patterns for p in _matching(base, pattern, project.sources)}
        if not bases and any(unit.sources or unit.patterns or unit.unread for unit in units(name, text, tree).units):
            return None  # a `.cmake` file no file of the build includes: where its paths lead is not known
    if not found:  # a build that names no sources (a pyproject.toml alone) tells nothing of its own files
        return {os.path.join(here, name) for here, name in files if name.endswith(SOURCE_SUFFIXES)}
    return sources


def _text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8-sig", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def _bases(path: str, cmake: dict[str, str | None], depth: int = 0) -> list[str]:
    """The folders a `.cmake` file's relative paths are read from: those of the CMake files of its build that
    `include()` it (by path or as a module), theirs again for an including `.cmake` file."""
    from kgate.collect.build_units import cmake_includes

    name = os.path.basename(path)
    out: list[str] = []
    for other, text in sorted(cmake.items()):
        if other == path or text is None or name.removesuffix(".cmake") not in text:
            continue
        if not any(os.path.basename(i) in (name, name.removesuffix(".cmake")) for i in cmake_includes(text)):
            continue
        if other.endswith(".cmake"):
            out += _bases(other, cmake, depth + 1) if depth < 4 else []
        else:
            out.append(os.path.dirname(other))
    return sorted(set(out))


def _leads_up(build: str, project: _Project) -> bool:
    """Whether a build file of the build in `build` names a folder above its own."""
    for here, names in owned_files(build):
        for name in names:
            path = os.path.join(here, name)
            if name.endswith(SOURCE_SUFFIXES) or not (name in _BUILD_FILES or name.endswith(".cmake") or
                                                      _another_build(path, project.head(path))):
                continue
            data = project.head(path)
            if data is None or _UPWARD.search(data) is not None:
                return True
    return False


def _matching(folder: str, pattern: str, owned: list[str]) -> list[str]:
    """The files a glob of the build file in `folder` matches (`DIR/**/NAME`: at any depth under DIR)."""
    if "**" in pattern:
        top, _, name = pattern.partition("**")
        base = os.path.normpath(os.path.join(folder, top))
        return [p for p in owned if p.startswith(base + os.sep) and fnmatch.fnmatchcase(os.path.basename(p),
                                                                                          name.strip(os.sep))]
    base = os.path.normpath(os.path.join(folder, os.path.dirname(pattern)))
    name = os.path.basename(pattern)
    return [p for p in owned if os.path.dirname(p) == base and fnmatch.fnmatchcase(os.path.basename(p), name)]
