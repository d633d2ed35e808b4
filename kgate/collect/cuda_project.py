"""The project's C++/CUDA files as the launch search reads them beyond the file under lint.

Read only when a file's own text cannot settle a launch: the calls of a function defined in one file and
called from others, and the macros and functions that read the last error. One `Project` per lint run and
project root (`project`); each file is read and blanked at most once.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

from kgate.collect.cpp_flow import Flow, is_call, line_starts
from kgate.collect.cpp_text import balanced, blank, calls_of

SOURCES = (".cu", ".cuh", ".cpp", ".cc", ".cxx", ".h", ".hpp", ".hh", ".inl")
HEADERS = (".h", ".cuh", ".hpp", ".hh", ".inl")
_SKIPPED = {"__pycache__", "node_modules", "build", "dist"}
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)((?:[^\n]*\\\n)*[^\n]*)", re.MULTILINE)
# Bytes of C++ identifiers kept, every other byte a space: `data.translate(_WORD_BYTES).split()` are its words.
_WORD_BYTES = bytes(c if chr(c).isascii() and (chr(c).isalnum() or c == ord("_")) else ord(" ") for c in range(256))
_READS_LAST_ERROR = re.compile(r"\b(?:cudaGetLastError|cudaPeekAtLastError|hipGetLastError|hipPeekAtLastError)\b")


class Project:
    """The project's other C++/CUDA files, read when a file's own text cannot settle a launch: the macros that
    read the last error, and the calls of a function defined in one file and called from others. One per lint
    run and project root (`project`); each file is read and blanked at most once."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._files: list[tuple[str, str]] | None = None
        self._data: dict[str, bytes] = {}
        self._flows: dict[str, Flow] = {}
        self._macros: frozenset[str] | None = None
        self._words: dict[str, frozenset[bytes]] = {}

    def files(self) -> list[tuple[str, str]]:
        if self._files is None:
            found: list[tuple[str, str]] = []
            for here, folders, names in os.walk(self.root):
                folders[:] = sorted(d for d in folders if not d.startswith(".") and d not in _SKIPPED)
                for name in sorted(names):
                    if name.endswith(SOURCES):
                        path = os.path.join(here, name)
                        found.append((os.path.relpath(path, self.root).replace(os.sep, "/"), path))
            self._files = found
        return self._files

    def data(self, rel: str, path: str) -> bytes:
        if rel not in self._data:
            try:
                with open(path, "rb") as handle:
                    self._data[rel] = handle.read()
            except OSError:
                self._data[rel] = b""
        return self._data[rel]

    def last_error_macros(self) -> frozenset[str]:
        """Names of the macros the project defines whose expansion reads the last error."""
        if self._macros is None:
            names: set[str] = set()
            for rel, path in self.files():
                data = self.data(rel, path)
                if b"#" in data and b"LastError" in data:
                    text = data.decode("utf-8", "replace")
                    names.update(m.group(1) for m in _DEFINE.finditer(text) if _READS_LAST_ERROR.search(m.group(2)))
            self._macros = frozenset(names)
        return self._macros

    def calls(self, name: str, besides: str) -> Iterator[tuple[str, Flow, int, int]]:
        """(file, its flow, offset, end of statement) of each call of the function `name` outside `besides`."""
        needle = name.encode()
        for rel, path in self.files():
            if rel == besides or not self._mentions(rel, path, needle):
                continue
            flow = self._flow(rel, path)
            code = flow.code
            for match in calls_of(code, name):
                call = match.start()
                if not is_call(code, call) or defines(code, match.end() - 1):
                    continue
                end = code.find(";", balanced(code, match.end() - 1))
                yield rel, flow, call, end if end >= 0 else len(code)

    def _mentions(self, rel: str, path: str, name: bytes) -> bool:
        """Whether the file may call `name`: it holds the name as a word. The files' words are read once, on the
        first question (a lint asks about many functions, and searching every file for each costs more)."""
        if not name.isascii():
            return name in self.data(rel, path)
        words = self._words.get(rel)
        if words is None:
            words = self._words[rel] = frozenset(self.data(rel, path).translate(_WORD_BYTES).split())
        return name in words

    def _flow(self, rel: str, path: str) -> Flow:
        if rel not in self._flows:
            code = blank(self.data(rel, path).decode("utf-8", "replace")).code
            self._flows[rel] = Flow(code, line_starts(code), 0)
        return self._flows[rel]


def defines(code: str, paren: int) -> bool:
    """Whether the `(` at `paren` opens a definition's or a declaration's parameters rather than a call's: what
    follows the `)` is a body or a `;` after a type-led head (`void f(int);`)."""
    after = balanced(code, paren)
    rest = code[after:after + 200].lstrip()
    return rest.startswith(("{", "const", "noexcept", "->", "override"))


_CACHE: list[tuple[object, str, Project]] = []


def project(run: object, path: str, rel: str) -> Project:
    """The project of the file at `path` whose project-relative name is `rel` (its root: the path less that
    name), shared by the files of one run: `run` is an object that lives as long as the run (a lint run's
    rule context), so a later run reads the files again."""
    path = os.path.abspath(path)
    rel = rel.replace("/", os.sep)
    root = path[:-len(rel)].rstrip(os.sep) if path.endswith(rel) else os.path.dirname(path)
    for known_run, known_root, found in _CACHE:
        if known_run is run and known_root == root:
            return found
    found = Project(root or os.sep)
    _CACHE[:] = [*[entry for entry in _CACHE if entry[0] is run], (run, root, found)]
    return found
