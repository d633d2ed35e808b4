"""Whether any build of the project compiles a C++/CUDA file: a copy kept beside the built one (`gemv_backup.cu`),
or a header no built source includes, is never compiled, and what it launches never runs.

A file is taken to be compiled by no build only where that can be read for certain; in any doubt it is compiled:

- its build is the nearest folder at or above it, inside the project, that holds a build of its own (a
  `setup.py`, a `pyproject.toml`, or a `CMakeLists.txt` that declares a `project(`); with none, it is compiled;
- every build file that build owns (`CMakeLists.txt`, `*.cmake`, `setup.py`) names its units' sources as
  written (names, or a `file(GLOB ...)` of a folder), at least one such unit exists, and no other build tool's
  file is there (a Makefile, Bazel, Meson, Ninja, a shell script);
- no Python module of that build compiles sources itself (`torch.utils.cpp_extension`'s `load`, a `CUDAExtension`
  outside `setup.py`), and no file of it other than C++ names the file;
- the file is none of those sources, and none of them includes it, directly or through other headers
  (`kgate.collect.build_sources.included`, which resolves an include generously).
"""

from __future__ import annotations

import ast
import fnmatch
import os
import re

from kgate.collect.build_sources import SOURCE_SUFFIXES, included, own_build, owned_files, owned_sources

_BUILD_FILES = ("CMakeLists.txt", "setup.py")
_OTHER_BUILDS = frozenset({"Makefile", "makefile", "GNUmakefile", "meson.build", "BUILD", "BUILD.bazel",
                           "WORKSPACE", "build.ninja", "SConstruct", "premake5.lua", "xmake.lua"})
_OTHER_SUFFIXES = (".mk", ".bzl", ".ninja")
_SCRIPTS = (".sh", ".bash")  # another build where it runs a compiler itself, not where it runs CMake or setup.py
_COMPILERS = re.compile(rb"(?<![\w.-])(?:nvcc|hipcc|g\+\+|gcc|clang\+\+|clang|c\+\+|cc|icpx|nvc\+\+)(?![\w.-])")
_COMPILES = (b"cpp_extension", b"CUDAExtension", b"load_inline")
_READ = 1 << 20  # what is read of a file that may name a source (a larger one is data)
_SOURCE_NAME = re.compile(rb"[\w./+-]+\.(?:" + b"|".join(re.escape(s[1:].encode()) for s in SOURCE_SUFFIXES) + rb")\b")


def unbuilt(path: str, root: str, memo: dict[str, frozenset[str] | None]) -> bool:
    """Whether no build of the project under `root` compiles `path` (a C++/CUDA file), for certain. `memo` keeps
    what each build compiles (None: not known) for the run's other files."""
    owner = _owner(os.path.abspath(path), os.path.abspath(root))
    if owner is None:
        return False
    if owner not in memo:
        named = _named(owner)
        memo[owner] = None if named is None else _compiled(owner, named)
    compiled = memo[owner]
    return compiled is not None and os.path.abspath(path) not in compiled and \
        os.path.basename(path) not in compiled


def _owner(path: str, root: str) -> str | None:
    folder = os.path.dirname(path)
    while True:
        if own_build(folder):
            return folder
        if folder == root or not folder.startswith(root.rstrip(os.sep) + os.sep):
            return None
        folder = os.path.dirname(folder)


def _compiled(owner: str, named: frozenset[str]) -> frozenset[str] | None:
    """The files the build in `owner` compiles (its sources and the headers they include, by path) and the names
    its other files mention (`named`: a file of that name is taken to be built), None where that cannot be read
    for certain."""
    from kgate.collect.build_units import units

    owned = owned_sources(owner)
    sources: set[str] = set()
    found = 0
    for folder, name in _build_files(owner):
        if name is None:
            return None  # another build tool's file
        path = os.path.join(folder, name)
        try:
            with open(path, encoding="utf-8-sig", errors="replace") as handle:
                text = handle.read()
            tree = ast.parse(text) if name == "setup.py" else None
        except (OSError, SyntaxError, ValueError):
            return None
        for unit in units(name, text, tree).units:
            if unit.unread:
                return None
            found += 1
            sources |= {os.path.normpath(os.path.join(folder, source)) for source in unit.sources}
            sources |= {p for pattern in unit.patterns for p in _matching(folder, pattern, owned)}
    if not found:
        return None
    return frozenset(included(sorted(sources), owned)) | named


def _build_files(owner: str) -> list[tuple[str, str | None]]:
    """(folder, name) of each build file the build in `owner` owns; (folder, None) for another build tool's."""
    out: list[tuple[str, str | None]] = []
    for here, files in owned_files(owner):
        for name in files:
            if name in _OTHER_BUILDS or name.endswith(_OTHER_SUFFIXES) or (
                    name.endswith(_SCRIPTS) and _compiles(os.path.join(here, name))):
                out.append((here, None))
            elif name in _BUILD_FILES or name.endswith(".cmake"):
                out.append((here, name))
    return out


def _compiles(script: str) -> bool:
    """Whether a shell script names a compiler (or cannot be read): it may compile sources of its own choosing."""
    try:
        with open(script, "rb") as handle:
            return _COMPILERS.search(handle.read(1 << 20)) is not None
    except OSError:
        return True


def _matching(folder: str, pattern: str, owned: list[str]) -> list[str]:
    """The owned files a glob of the build file in `folder` matches (`DIR/**/NAME`: at any depth under DIR)."""
    if "**" in pattern:
        top, _, name = pattern.partition("**")
        base = os.path.normpath(os.path.join(folder, top))
        return [p for p in owned if p.startswith(base + os.sep) and fnmatch.fnmatchcase(os.path.basename(p),
                                                                                          name.strip(os.sep))]
    base = os.path.normpath(os.path.join(folder, os.path.dirname(pattern)))
    name = os.path.basename(pattern)
    return [p for p in owned if os.path.dirname(p) == base and fnmatch.fnmatchcase(os.path.basename(p), name)]


def _named(owner: str) -> frozenset[str] | None:
    """The names of C++/CUDA files that the build's files other than C++ mention (a script or a module may compile
    them by name); None where a Python module of it compiles sources itself (what it compiles is not read)."""
    out: set[str] = set()
    for here, files in owned_files(owner):
        for file in files:
            if file.endswith(SOURCE_SUFFIXES):
                continue
            try:
                with open(os.path.join(here, file), "rb") as handle:
                    data = handle.read(_READ)
            except OSError:
                continue
            if file.endswith(".py") and file != "setup.py" and any(c in data for c in _COMPILES):
                return None
            out.update(os.path.basename(m.decode("utf-8", "replace")) for m in _SOURCE_NAME.findall(data))
    return frozenset(out)
