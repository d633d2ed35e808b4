"""What a verdict read beyond its own file, noted where it is read: the lint cache answers a file's verdict only while
every such read still gives what it gave (`Check`).

A rule's verdict on one file may read other files of the project: the module a kernel module takes Triton from, the
modules that launch its kernels or call its launchers, the C++ files that call a launching helper. Each read is
noted with a key, the state its source was in when it was read (`kgate.support.filestat`) and a digest of what it
gave:

- a file's bytes (key: its path): a file touched but not changed still holds;
- what a module binds at its top level (`exports:PATH`): an edit inside a function of that module leaves every
  verdict that only followed a name through it as it was;
- a module's import statements (`import-statements:PATH`): what asking which names it imports from where reads;
- a module but for the bodies of its top-level functions other than those named (`parts:PATH` newline `NAMES`,
  comma-separated; `kgate.collect.pyautotune.parts_digest`): what reading a wrapper of the autotuner there reads,
  and a helper or a kernel another module imports from it (`kgate.collect.pyproject.Modules.function`);
- whether a path is a file, a folder or nothing (`probe:PATH`): a module that appears where an import was looked
  for, or goes, does not hold; one added beside it does;
- which Python files of a project import a name (`imports:ROOT` newline `NAME`): the state of the project's Python
  files together, and which files do: an edit to a module that neither imported the name nor imports it now holds;
- the project's C++ and CUDA files together (`cpp:ROOT`): their states, or where one was written too recently to
  vouch for it, a digest of their bytes.

A state read less than two seconds after its file was written is not kept (the file may change again within the
same tick of its clock): such a read holds only while its digest does.

Readers note as they read, into every collection open (`collecting`). A reader that keeps an answer for later files
keeps what computing it noted beside it, and notes that again whenever it answers from it (`replay`): a verdict
depends on what it read, whichever verdict read it first. What a reader keeps for one file's verdicts only is
registered with `per_file` and cleared between files (`new_file`); what holds while no file changes, with `per_run`
(cleared when a lint run starts, `new_run`). The lint engine opens one collection per file (`kgate.evaluate.source`).
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from kgate.support.filestat import current, path_state

try:  # the builtin module: `hashlib` would load OpenSSL
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - a Python built without it
    from hashlib import blake2b

EXPORTS, STATEMENTS, PROBE, IMPORTS, CPP = "exports:", "import-statements:", "probe:", "imports:", "cpp:"
PARTS = "parts:"
_RACY_NS = 2_000_000_000

# key -> (state, digest): the state None where it cannot vouch (gone, or written too recently), the digest None
# where the state alone decides.
Reads = dict[str, tuple[Any, str | None]]

_open: list[Reads] = []
_taken: list[dict[int, Reads]] = []  # per collection open: the kept answers' reads replayed into it, by identity
_per_file: list[dict[Any, Any]] = []
_per_run: list[dict[Any, Any]] = []
_trees: list[dict[Any, Any]] = []


def digest(data: bytes) -> str:
    return blake2b(data, digest_size=16).hexdigest()


def note(key: str, state: Any, found: str | None) -> None:
    """A read of `key` in `state` that gave what `found` digests, into every collection open. (A source read twice in
    one run gives the same both times: a run's reads are taken to be of files that do not change while it runs.)"""
    for reads in _open:
        reads[key] = (state, found)


def replay(reads: Reads) -> None:
    """Note again what an answer kept for later noted when it was computed: into each collection open that has not
    taken it already (a kept answer is asked again and again while one file's verdicts are read, and its reads, once
    kept, do not change)."""
    key = id(reads)
    for held, taken in zip(_open, _taken):
        if key not in taken:
            taken[key] = reads  # held, so that no other answer's reads take its id while the collection is open
            held.update(reads)


@contextmanager
def collecting() -> Iterator[Reads]:
    """A collection of what is read inside the block (nested collections each get every read)."""
    reads: Reads = {}
    _open.append(reads)
    _taken.append({})
    try:
        yield reads
    finally:
        for index in range(len(_open) - 1, -1, -1):  # by identity: two collections that read nothing are equal
            if _open[index] is reads:
                del _open[index]
                del _taken[index]
                break


@contextmanager
def apart() -> Iterator[None]:
    """Inside the block, the collections open outside it take nothing: for an answer built ahead for many questions,
    whose reads each question replays in the part it needs."""
    held = _open[:], _taken[:]
    del _open[:], _taken[:]
    try:
        yield
    finally:
        _open[:], _taken[:] = held


def per_file(store: dict[Any, Any]) -> dict[Any, Any]:
    """Register a reader's store of answers that hold for one file's verdicts only (cleared by `new_file`)."""
    _per_file.append(store)
    return store


def new_file() -> None:
    for store in _per_file:
        store.clear()


def per_run(store: dict[Any, Any], trees: bool = False) -> dict[Any, Any]:
    """Register a reader's store of answers that hold while no file changes: one lint run's (cleared by `new_run`).
    `trees`: it holds syntax trees, dropped once the run's files are linted (`release`)."""
    _per_run.append(store)
    if trees:
        _trees.append(store)
    return store


def release() -> None:
    """Drop the stores of syntax trees once the run's files are linted: nothing reads them again, and writing the
    results and the report then takes the memory they held rather than more."""
    for store in _trees:
        store.clear()


def new_run() -> None:
    for store in _per_run:
        store.clear()
    new_file()


def stable(state: list[int] | None) -> list[int] | None:
    """A file's state as a read may keep it: None for one written less than two seconds ago."""
    if state is None or len(state) < 4 or state[1] >= time.time_ns() - _RACY_NS:
        return None
    return state


def file(path: str, found: str | None) -> None:
    """A read of the file at `path`, whose bytes `found` digests (None: it could not be read)."""
    note(path, stable(path_state(path)), found)


def probe(path: str) -> str:
    """A look for a file or folder at `path` (`os.path.isfile`, a folder's listing): what is there (`kind`), noted."""
    found = _KINDS.get(path)
    if found is None:
        found = _KINDS[path] = kind(path)
    for reads in _open:
        reads[PROBE + path] = (None, found)
    return found


# What each look found, for the run: the resolvers look for the same candidates from file after file, and a run's
# reads are taken to be of files that do not change while it runs (`note`).
_KINDS: dict[str, str] = per_run({})


def kind(path: str) -> str:
    """"f" for a file at `path`, "d" for a folder, "o" for anything else, "" for nothing there (links followed)."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return ""
    return "d" if stat.S_ISDIR(mode) else "f" if stat.S_ISREG(mode) else "o"


class Check:
    """Whether the reads a cached verdict noted still give what they gave, each source looked at once per run.

    `keys`: the keys of every read the verdicts to be checked noted, so that the questions of which files import a
    name are answered together, in one pass over the project's import words, the first time one is asked."""

    def __init__(self, keys: Callable[[], Iterable[Any]] | None = None) -> None:
        self._now: dict[str, tuple[Any, str | None]] = {}
        self._trees: dict[tuple[str, str], Any] = {}
        self._states: dict[str, Any] = {}  # a path's state now, and what a look for it finds ("kind:" + path)
        self._held: dict[tuple[Any, ...], bool] = {}  # each read asked about, answered once
        self._keys = keys
        self._prepared: set[str] = set()  # the roots whose names asked about are answered together
        self._cpp: dict[str, Any] = {}  # the state of each root's C++ files together
        # The reads of a file that held by their digest where no state was kept (the file had been written just
        # before it was read) and the file's state now is one to keep: that state, to be kept in their place. (The
        # state of the project's files together, which any edit changes, is not kept again this way: every entry
        # would be written again after each edit.)
        self._settled: dict[tuple[Any, ...], list[int]] = {}
        self.unsettled = False  # whether the reads `holds` last found to hold include one of those

    def holds(self, reads: Any) -> bool:
        """Whether every read holds (reads not as `Reads` lists them, [[key, state, digest], ...]: not)."""
        unsettled = False
        try:
            for key, state, found in reads:
                read = asked(key, state, found)
                held = self._held.get(read)
                if held is None:
                    held = self._held[read] = isinstance(key, str) and self._holds(key, state, found)
                    if held and state is None and not key.startswith((PROBE, IMPORTS, CPP)):
                        now = self._state_now(key)
                        if now is not None:
                            self._settled[read] = list(now)
                if not held:
                    return False
                unsettled = unsettled or read in self._settled
        except (TypeError, ValueError):
            return False
        self.unsettled = unsettled
        return True

    def refreshed(self, reads: Any) -> list[Any]:
        """`reads`, which `holds` found to hold, with the state now of each file read without a state kept (written
        just before the read: a checkout, then the hook). Kept as they were, such reads would be answered by digest
        again on every later run."""
        out: list[Any] = []
        for key, state, found in reads:
            now = self._settled.get(asked(key, state, found))
            out.append([key, state if now is None else now, found])
        return out

    def _state_now(self, key: str) -> Any:
        """The state now of the file a read of one file is of, where it is one to keep."""
        path = _path_of(key)
        now = self._states.get(path, False)
        if now is False:
            now = self._states[path] = stable(current(path))
        return now

    def _holds(self, key: str, state: Any, found: str | None) -> bool:
        if key.startswith(IMPORTS):
            root, _newline, name = key[len(IMPORTS):].partition("\n")
            return self._imports(root, name, state, found)
        if key.startswith(PROBE):
            if key not in self._states:
                self._states[key] = kind(key[len(PROBE):])
            return self._states[key] == found
        if key.startswith(CPP):
            root = key[len(CPP):]
            if state is not None and self._cpp_state(root) == state:
                return True
            return found is not None and self._tree(CPP, root).digest() == found
        now = self._state_now(key)
        if state is not None and now == state:
            return True
        return found is not None and self._digest(key, _path_of(key)) == found

    def _digest(self, key: str, path: str) -> str | None:
        if key not in self._now:
            self._now[key] = (None, _digest_now(key, path))
        return self._now[key][1]

    def _cpp_state(self, root: str) -> Any:
        """The state of the project's C++ files together (without loading what reads them: most runs lint none)."""
        if root not in self._cpp:
            from kgate.collect.cuda_tree import tree_state

            self._cpp[root] = tree_state(root)
        return self._cpp[root]

    def _tree(self, what: str, root: str) -> Any:
        if (what, root) not in self._trees:
            if what == CPP:
                from kgate.collect.cuda_project import Project

                self._trees[(what, root)] = Project(root)
            else:
                from kgate.collect.pyproject import Modules

                self._trees[(what, root)] = Modules(root)
        return self._trees[(what, root)]

    def _imports(self, root: str, name: str, state: Any, found: str | None) -> bool:
        modules = self._tree(IMPORTS, root)
        if state is not None and modules.state() == state:
            return True
        if found is None:
            return False
        if root not in self._prepared and self._keys is not None:
            self._prepared.add(root)
            head = IMPORTS + root + "\n"
            modules.prepare([key[len(head):] for key in self._keys() if isinstance(key, str) and key.startswith(head)])
        return modules.importers_digest(name) == found


def asked(key: Any, state: Any, found: Any) -> tuple[Any, ...]:
    """A read as a key of the answers about it: its key, its state (a tuple: hashable), what it gave."""
    return (key, tuple(state) if state is not None else None, found)


def shared(key: Any, state: Any, found: Any) -> tuple[Any, ...]:
    """`asked`, one tuple for each read however many verdicts noted it: the results of a run keep their reads with
    them, and a project's modules read much the same files (the 181 verdicts of flash-linear-attention that read
    beyond their file noted about 170,000 reads between them, of a few thousand different ones)."""
    read = asked(key, state, found)
    return _SHARED.setdefault(read, read)


_SHARED: dict[tuple[Any, ...], tuple[Any, ...]] = per_run({})


def _path_of(key: str) -> str:
    """The file a read of one file (its bytes, exports, statements or parts) is of."""
    if key.startswith(PARTS):
        return key[len(PARTS):].partition("\n")[0]
    return key.removeprefix(EXPORTS).removeprefix(STATEMENTS)


def _digest_now(key: str, path: str) -> str | None:
    if key.startswith(EXPORTS):
        from kgate.collect.pynames import exports_digest

        return exports_digest(path)
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    if key.startswith(STATEMENTS):
        from kgate.collect.pyimports import statements_digest

        return statements_digest(data)
    if key.startswith(PARTS):
        from kgate.collect.pyautotune import parts_digest

        names = key.partition("\n")[2]
        return parts_digest(data, names.split(",") if names else [])
    return digest(data)
