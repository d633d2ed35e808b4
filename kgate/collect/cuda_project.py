"""The project's C++/CUDA files as the launch search reads them beyond the file under lint.

Read only when a file's own text cannot settle a launch: the calls of a function defined in one file and
called from others, and the macros and functions that read the last error. One `Project` per lint run and
project root (`project`); each file is read and blanked at most once (its blanking shared with the file's own
lint: `kgate.collect.cpp_text.shared_blank`). A verdict that reads it depends on the
project's C++ and CUDA files together (`kgate.collect.depends`: the lint cache answers it while none of them
changed).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Sequence

from kgate.collect import depends
from kgate.collect.cpp_flow import Flow, line_starts
from kgate.collect.cpp_statements import is_call
from kgate.collect.cpp_text import balanced, calls_of, macros, shared_blank
from kgate.collect.cuda_checks import (
    NAMED_WORD,
    NEEDLES,
    RUNTIME_QUERIES,
    SYNC_NEEDLES,
    CheckedSyncs,
    Checks,
    Counts,
    checks_of,
    definitions,
    last_error_reads,
    readers,
)
from kgate.collect.cuda_tree import sources as _sources
from kgate.collect.cuda_tree import tree_state
from kgate.collect.depends import blake2b
from kgate.collect.files import project_root

# Bytes of C++ identifiers kept, every other byte a space: `data.translate(_WORD_BYTES).split()` are its words.
_WORD_BYTES = bytes(c if chr(c).isascii() and (chr(c).isalnum() or c == ord("_")) else ord(" ") for c in range(256))
_ROUNDS = 8  # macros and functions followed through one another to a read of the last error


class Project:
    """The project's other C++/CUDA files, read when a file's own text cannot settle a launch: the macros and
    functions that read the last error, and the calls of a function defined in one file and called from others.
    One per lint run and project root (`project`); each file is read and blanked at most once."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._files: list[tuple[str, str]] | None = None
        self._data: dict[str, bytes] = {}
        self._flows: dict[str, Flow] = {}
        self._checks: dict[tuple[str, ...], dict[str, Counts | None]] = {}
        self._syncs: dict[str, Counts | None] | None = None
        self._words: dict[str, frozenset[bytes]] = {}
        self._state: tuple[list[int] | None] | None = None  # (the state,) once read
        self._named: frozenset[str] | None = None
        self._defines: dict[str, list[tuple[str | None, str]]] = {}

    def files(self) -> list[tuple[str, str]]:
        if self._files is None:
            self._files = _sources(self.root)
        return self._files

    def state(self) -> list[int] | None:
        """The state of the project's C++ and CUDA files together (None: one was written too recently to vouch)."""
        if self._state is None:
            self._state = (tree_state(self.root, self.files()),)
        return self._state[0]

    def digest(self) -> str:
        """A digest of the project's C++ and CUDA files together: which there are and the bytes of each."""
        summary = blake2b(digest_size=16)
        for rel, path in self.files():
            summary.update(f"{rel}\0{depends.digest(self.data(rel, path))}\n".encode("utf-8", "surrogateescape"))
        return summary.hexdigest()

    def data(self, rel: str, path: str) -> bytes:
        if rel not in self._data:
            try:
                with open(path, "rb") as handle:
                    self._data[rel] = handle.read()
            except OSError:
                self._data[rel] = b""
        return self._data[rel]

    def last_error_checks(self, configured: Sequence[str]) -> dict[str, Counts | None]:
        """The project's macros and host functions whose body reads the last error, directly or through another
        such one: name -> the numbers of arguments a call must pass to read it (None: a macro any use of which
        expands). `configured` are the check macros the project names (`kgate.collect.cuda_checks`)."""
        key = tuple(configured)
        if key not in self._checks:
            self._checks[key] = self._readers(configured)
        return self._checks[key]

    def named_definitions(self) -> frozenset[str]:
        """The names that say they read the last error (`getLastCudaError`, `CHECK_LAST_CUDA_ERROR`) which the
        project defines itself, as a macro or a host function that is not a member: what a call of one does is its
        definition's, not its name's."""
        if self._named is None:
            found: set[str] = set()
            for rel, path in self.files():
                if not any(n in self.data(rel, path) for n in NEEDLES):
                    continue
                flow = self._flow(rel, path)
                names = {m.group() for m in NAMED_WORD.finditer(flow.code)} - set(RUNTIME_QUERIES)
                if names:
                    found.update(m.name for m in macros(flow.code) if m.name in names)
                    found.update(name for name, *_ in definitions(flow.code, flow, names))
            self._named = frozenset(found)
        return self._named

    def _readers(self, configured: Sequence[str]) -> dict[str, Counts | None]:
        found: dict[str, Counts | None] = {}
        needles = (*NEEDLES, *(name.encode() for name in configured))
        files = [(rel, path) for rel, path in self.files() if any(n in self.data(rel, path) for n in needles)]
        named = self.named_definitions()
        reads = last_error_reads(configured, {}, named)
        for _ in range(_ROUNDS):
            new: dict[str, Counts | None] = {}
            for rel, path in files:
                flow = self._flow(rel, path)
                for name, counts in readers(flow.code, flow, reads):
                    if name not in found:
                        known = new.get(name, frozenset())
                        new[name] = None if counts is None or known is None else known | counts
            # An overload that does not read the last error takes the calls with its numbers of arguments.
            every = last_error_reads(configured, {**found, **new}, named)
            others = self._other_counts([n for n, counts in new.items() if counts is not None], every)
            new = {name: counts if counts is None else counts - others.get(name, frozenset())
                   for name, counts in new.items()}
            # A macro a file defines again without the read (`#else`, or after an `#undef`) checks nothing there.
            unread = self._redefined_unread(list(new), every)
            new = {name: counts for name, counts in new.items() if name not in unread}
            new = {name: counts for name, counts in new.items() if counts is None or counts}
            if not new:
                break
            found.update(new)
            # The next round looks for calls of what this one found, in the files that name one of them.
            reads = checks_of((), new)
            files = [(rel, path) for rel, path in self.files() if self._mentions_any(rel, path, new)]
        return found

    def _redefined_unread(self, names: list[str], reads: Checks) -> set[str]:
        """The macros among `names` that a file defines both with a body that reads the last error and with one that
        does not: under `#if` and `#else`, or again after an `#undef`. Which one a build sees is the build's."""
        out: set[str] = set()
        wanted = set(names)
        if not names:
            return out
        defining = re.compile(rb"#[ \t]*define[ \t]+(?:" + b"|".join(re.escape(n.encode()) for n in sorted(names)) +
                              rb")\b")
        for rel, path in self.files():
            if b"define" not in self.data(rel, path) or defining.search(self.data(rel, path)) is None:
                continue
            code = self._flow(rel, path).code
            seen: dict[str, set[bool]] = {}
            for macro in macros(code):
                if macro.name in wanted:
                    seen.setdefault(macro.name, set()).add(reads.search(code, macro.body, macro.end) is not None)
            out.update(name for name, kinds in seen.items() if len(kinds) > 1)
        return out

    def sync_checks(self) -> dict[str, Counts | None]:
        """The project's macros and host functions whose body holds a synchronizing call whose error is read (a test
        program's `validate_result`, `CHECK_SYNC()`), directly: name -> the numbers of arguments a call may pass."""
        if self._syncs is None:
            found: dict[str, Counts | None] = {}
            for rel, path in self.files():
                if any(needle in self.data(rel, path) for needle in SYNC_NEEDLES):
                    flow = self._flow(rel, path)
                    for name, counts in readers(flow.code, flow, CheckedSyncs()):
                        known = found.get(name, frozenset())
                        found[name] = None if counts is None or known is None else known | counts
            self._syncs = found
        return self._syncs

    def _other_counts(self, names: list[str], reads: Checks) -> dict[str, Counts]:
        """Name -> the numbers of arguments the definitions of that function that do not read the last error take."""
        out: dict[str, Counts] = {}
        if not names:
            return out
        # A file that may define one: the name, its parameters and a body (a cheap test before a file is blanked).
        head = re.compile(rb"(?:" + b"|".join(re.escape(n.encode()) for n in sorted(names)) + rb")\s*\((?:[^;{}()]|\{[^;{}]*\}|\([^()]*\))*\)[^;{}]*\{")
        for rel, path in self.files():
            if self._mentions_any(rel, path, names) and head.search(self.data(rel, path)):
                flow = self._flow(rel, path)
                for name, start, end, counts in definitions(flow.code, flow, names):
                    if reads.search(flow.code, start, end) is None:
                        out[name] = out.get(name, frozenset()) | counts
        return out

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
                if not is_call(code, call) or defines(code, match.end() - 1) or _directive(code, call):
                    continue
                end = code.find(";", balanced(code, match.end() - 1))
                yield rel, flow, call, end if end >= 0 else len(code)

    def macro_definitions(self, name: str) -> list[tuple[str | None, str]]:
        """(parameter list, body) of each `#define` of `name` in the project's files, blanked; each name read once."""
        if name not in self._defines:
            out: list[tuple[str | None, str]] = []
            for rel, path in self.files():
                if self._mentions(rel, path, name.encode()) and b"define" in self.data(rel, path):
                    code = self._flow(rel, path).code
                    out += [(m.params, code[m.body:m.end]) for m in macros(code) if m.name == name]
            self._defines[name] = out
        return self._defines[name]

    def definers(self, name: str) -> list[str]:
        """The files that define a function `name` with its body."""
        needle = name.encode()
        out = []
        for rel, path in self.files():
            if self._mentions(rel, path, needle):
                flow = self._flow(rel, path)
                if next(definitions(flow.code, flow, [name]), None) is not None:
                    out.append(rel)
        return out

    def _mentions_any(self, rel: str, path: str, names: Iterable[str]) -> bool:
        """Whether the file holds one of `names` as a word."""
        return any(self._mentions(rel, path, name.encode()) for name in names if not name.isascii()) or \
            not self._words_of(rel, path).isdisjoint(name.encode() for name in names if name.isascii())

    def _mentions(self, rel: str, path: str, name: bytes) -> bool:
        """Whether the file may call `name`: it holds the name as a word. The files' words are read once, on the
        first question (a lint asks about many functions, and searching every file for each costs more)."""
        if not name.isascii():
            return name in self.data(rel, path)
        return name in self._words_of(rel, path)

    def _words_of(self, rel: str, path: str) -> frozenset[bytes]:
        words = self._words.get(rel)
        if words is None:
            words = self._words[rel] = frozenset(self.data(rel, path).translate(_WORD_BYTES).split())
        return words

    def _flow(self, rel: str, path: str) -> Flow:
        if rel not in self._flows:
            blanked = shared_blank(self.data(rel, path).decode("utf-8", "replace"))
            self._flows[rel] = Flow(blanked.code, line_starts(blanked.code), 0, blanked.comment_lines)
        return self._flows[rel]


def nearest(caller: str, definer: str, definers: Iterable[str]) -> bool:
    """Whether `definer` is among the definitions of a function nearest to a file that calls it: those in the
    deepest folder that holds the caller and a definition. A repository of several extensions defines the same
    `cuda_forward` in each; the one an extension's other files call is their own."""
    def shared(rel: str) -> int:
        count = 0
        for mine, theirs in zip(os.path.dirname(caller).split("/"), os.path.dirname(rel).split("/")):
            if mine != theirs or not mine:
                break
            count += 1
        return count

    return shared(definer) >= max((shared(rel) for rel in definers), default=0)


def _directive(code: str, at: int) -> bool:
    """Whether `at` is on a preprocessor line (`#define NAME(...)` names a macro; it is no use of it)."""
    return code[code.rfind("\n", 0, at) + 1:at].lstrip().startswith("#")


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
    root = project_root(path, rel)
    for known_run, known_root, found in _CACHE:
        if known_run is run and known_root == root:
            break
    else:
        found = Project(root or os.sep)
        _CACHE[:] = [*[entry for entry in _CACHE if entry[0] is run], (run, root, found)]
    state = found.state()
    depends.note(depends.CPP + found.root, state, found.digest() if state is None else None)
    return found
