"""The C++/CUDA sources a build compiles, what they include, and the arch-specific code they use.

A build file owns the C++/CUDA files (and PTX) in its folder and below, except hidden folders, `build` /
`dist` outputs and nested folders that are builds of their own (a `setup.py` or `pyproject.toml`, or a
`CMakeLists.txt` that declares a `project(`: folders reached by `add_subdirectory` inherit the parent's
architectures and stay owned). A source also compiles the project headers it includes (`included`).

Arch-specific code (the rule's patterns, `kgate.hardware.arch_features.ARCH_SPECIFIC_CODE`) is searched in code
only: comments and string literals are blanked, except the strings of inline `asm` statements, which are the
code.
"""

from __future__ import annotations

import codecs
import os
import re
from collections.abc import Iterable, Iterator, Mapping

from kgate.collect.cpp_text import balanced, blank
from kgate.collect.cuda_tree import SOURCES

SOURCE_SUFFIXES = (*SOURCES, ".inc", ".ptx")  # and what a build compiles or includes besides C++: PTX, `.inc`
_OWN_BUILD = ("setup.py", "pyproject.toml")
_CMAKE_PROJECT = re.compile(rb"^\s*project\s*\(", re.MULTILINE | re.IGNORECASE)
_SKIPPED = {"__pycache__", "node_modules", "build", "dist"}
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"\n]+)[>"]', re.MULTILINE)
# An include whose file a macro names (`#include IMPL_HEADER`, `#include KERNEL(gemm)`): any file may be the one.
_COMPUTED_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include(?:_next)?[ \t]+[A-Za-z_]', re.MULTILINE)
_ASM = re.compile(r"\b(?:asm|__asm__|__asm)\b(?:\s+(?:volatile|__volatile__|inline|goto))*\s*\(")


def own_build(folder: str) -> bool:
    """Whether `folder` holds a build of its own."""
    try:
        names = os.listdir(folder)
    except OSError:
        return False
    if any(name in names for name in _OWN_BUILD):
        return True
    if "CMakeLists.txt" in names:
        try:
            with open(os.path.join(folder, "CMakeLists.txt"), "rb") as handle:
                return _CMAKE_PROJECT.search(handle.read().removeprefix(codecs.BOM_UTF8)) is not None
        except OSError:
            return False
    return False


def owned_files(folder: str) -> Iterator[tuple[str, list[str]]]:
    """(folder, its file names, sorted) of `folder` and the folders below it that its build owns: not hidden ones,
    build outputs, or builds of their own."""
    for here, folders, files in os.walk(folder):
        folders[:] = sorted(d for d in folders if not skipped(d) and not own_build(os.path.join(here, d)))
        yield here, sorted(files)


def skipped(name: str) -> bool:
    """Whether a folder of this name is no build's: a hidden one or a build's output."""
    return name.startswith(".") or name in _SKIPPED


def owned_sources(folder: str) -> list[str]:
    """The C++/CUDA files the build files of `folder` own, in walk order."""
    return [os.path.join(here, name) for here, files in owned_files(folder) for name in files
            if name.endswith(SOURCE_SUFFIXES)]


def included(sources: Iterable[str], owned: list[str]) -> set[str]:
    """`sources` and the owned headers they include, directly or through one another. An include is resolved
    against the including file's folder, else against every owned file whose path ends with it."""
    return reached(sources, owned)[0]


def reached(sources: Iterable[str], owned: list[str]) -> tuple[set[str], bool]:
    """`included`, and whether one of the files it reaches includes a file a macro names (`#include IMPL_HEADER`),
    which may be any of them."""
    by_tail: dict[str, list[str]] = {}
    for path in owned:
        parts = path.replace(os.sep, "/").split("/")
        for cut in range(1, len(parts)):
            by_tail.setdefault("/".join(parts[-cut:]), []).append(path)
    known = set(owned)
    out: set[str] = set()
    computed = False
    pending = [path for path in sources if path in known]
    while pending:
        path = pending.pop()
        if path in out:
            continue
        out.add(path)
        names, by_macro = _includes(path)
        computed = computed or by_macro
        for name in names:
            local = os.path.normpath(os.path.join(os.path.dirname(path), name))
            pending += [local] if local in known else by_tail.get(os.path.normpath(name).replace(os.sep, "/"), [])
    return out, computed


def _includes(path: str) -> tuple[list[str], bool]:
    """The files `path` includes by name, and whether it includes one a macro names."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return [], False
    if b"include" not in data:
        return [], False
    text = data.removeprefix(codecs.BOM_UTF8).decode("utf-8", "replace")
    return _INCLUDE.findall(text), _COMPUTED_INCLUDE.search(text) is not None


def arch_uses(paths: Iterable[str], patterns: Mapping[str, re.Pattern[str]],
              needles: Iterable[bytes]) -> dict[str, tuple[str, str]]:
    """Name -> (the first of `paths` whose code matches that pattern, the text it matched). A file holding none of
    `needles` (byte strings one of which every match holds) is not read further."""
    wanted = dict(patterns)
    needles = tuple(needles)
    found: dict[str, tuple[str, str]] = {}
    for path in paths:
        if len(found) == len(wanted):
            break
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError:
            continue
        if not any(needle in data for needle in needles):
            continue
        code = code_of(data.decode("utf-8", "replace"))
        for family, pattern in wanted.items():
            match = None if family in found else pattern.search(code)
            if match is not None:
                found[family] = (path, match.group(0))
    return found


def code_of(text: str) -> str:
    """C++/CUDA or PTX text with comments and string literals blanked, the strings of inline `asm` kept."""
    code = blank(text).code
    if "asm" not in code:
        return code
    pieces = []
    done = 0
    for match in _ASM.finditer(code):
        if match.start() < done:
            continue
        end = balanced(code, match.end() - 1)
        pieces += [code[done:match.start()], text[match.start():end]]
        done = end
    pieces.append(code[done:])
    return "".join(pieces)
