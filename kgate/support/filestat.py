"""A file's state from its status alone: what says "unchanged" without reading it.

One shape for every record that remembers a file this way (the run record a replay checks, the run's
recorded reads, the parse index, the lint cache, the identity of a tool or an installation): the size,
the modification and change times and the inode. A rewrite that keeps the size and the modification
time still moves the change time, and a file replaced by another (a checkout, `mv`) has another inode.
The records compare these lists with each other, so they must all be made here.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

FileState = list[int]
_KNOWN: list[Mapping[str, FileState | None]] = []  # states a run took of its inputs before it began (`known`)
_LISTED: list[Mapping[str, list[os.DirEntry[str]]]] = []  # and the entries of its folders, sorted by name


def state_of(st: os.stat_result) -> FileState:
    """The state of a file from its status: [size, mtime_ns, ctime_ns, inode]."""
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def path_state(path: str | os.PathLike[str]) -> FileState | None:
    """The state of the file at `path` (links followed), or None where there is none to stat."""
    try:
        return state_of(os.stat(path))
    except (OSError, ValueError):  # ValueError: a name with a NUL byte
        pass
    try:  # a link to nothing is still there: its own state (a link made again to another missing target differs)
        return [-1, *state_of(os.lstat(path))]
    except (OSError, ValueError):
        return None


def identity(path: str | os.PathLike[str]) -> str:
    """A file's name and state as one string (a tool's identity in a cache key); OSError where it cannot be read."""
    return ":".join([os.fspath(path), *(str(n) for n in state_of(os.stat(path)))])


@contextmanager
def known(states: Mapping[str, FileState | None] | None,
          entries: Mapping[str, list[os.DirEntry[str]]] | None = None) -> Iterator[None]:
    """For the length of a run: the states of its inputs as the run took them before it began (its snapshot,
    `kgate.pipeline.fastpath.Snapshot`), which `current` answers without a second `stat`, and the entries of the
    folders it listed, which `listed` answers without a second listing. The run reads the project as it was then; an
    edit made meanwhile is seen by the next run (the run record keeps the states the snapshot took)."""
    _KNOWN.append(states or {})
    _LISTED.append(entries or {})
    try:
        yield
    finally:
        _KNOWN.pop()
        _LISTED.pop()


def listed(folder: str) -> list[os.DirEntry[str]]:
    """The entries of `folder`, sorted by name: as the run's snapshot listed them (`known`), else as they are now
    (OSError where it cannot be listed)."""
    if _LISTED:
        found = _LISTED[-1].get(folder)
        if found is not None:
            return found
    with os.scandir(folder) as entries:
        return sorted(entries, key=lambda e: e.name)


def wrote() -> None:
    """The run itself has written project files (`kgate lint --fix`): the states it took before no longer describe
    them, nor every other name of them (a link), so from now on `current` states every file as it is (the lint
    after the fix would otherwise find the results of the files as they were)."""
    if _KNOWN:
        _KNOWN[-1] = {}
        _LISTED[-1] = {}


def current(path: str) -> FileState | None:
    """The state of the file at `path` (links followed) as this run knows it (`known`), else as it is now."""
    if _KNOWN:
        found = _KNOWN[-1].get(path, _MISSING)
        if found is not _MISSING:
            return found  # type: ignore[return-value]
    return path_state(path)


def currents(paths: list[str]) -> list[FileState | None]:
    """`current` of each of `paths` (a walk's files), in one go."""
    known: Mapping[str, object] = _KNOWN[-1] if _KNOWN else {}
    found = [known.get(path, _MISSING) for path in paths]
    return [path_state(path) if state is _MISSING else state  # type: ignore[misc]
            for path, state in zip(paths, found)]


_MISSING = object()
