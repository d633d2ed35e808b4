"""The times of a file that an import reads: when it was last modified, changed or read.

A stat of a path (`os.path.exists`, `Path.is_file`) is keyed by what it tells that a checkout keeps: the path's
kind, size and permissions (`kgate.compile.import_reads`), not its times, which every checkout and copy moves with
the content kept. A module that acts on a time (`os.path.getmtime(stamp) > os.path.getmtime(source)`, a cache
of its own that is "fresh" for an hour) reads the time itself: `os.path.getmtime`, `getatime` and `getctime`, and
a time field (`st_mtime`, `st_mtime_ns`, index 8, ...) of a status the project's own code took (`os.stat`,
`os.lstat`, `Path.stat`), are `mtime:`, `atime:` or `ctime:` reads, keyed by that time (`lmtime:` and the others
for a link's own, by `os.lstat`). Only the status the
project's code is handed back carries the watch; the standard library's own stats (the import system's, `shutil`'s)
are the plain ones.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kgate.compile.import_recorder import Recorder

TIME_KINDS = ("mtime", "atime", "ctime")
KINDS = (*TIME_KINDS, *(f"l{kind}" for kind in TIME_KINDS))  # `lmtime:`: a link's own time, read by os.lstat
_FIELDS = {"st_atime": "atime", "st_atime_ns": "atime", "st_mtime": "mtime", "st_mtime_ns": "mtime",
           "st_ctime": "ctime", "st_ctime_ns": "ctime", "st_birthtime": "ctime", "st_birthtime_ns": "ctime"}
_INDEXES = {7: "atime", 8: "mtime", 9: "ctime"}  # stat.ST_ATIME, ST_MTIME, ST_CTIME
_SAVED: dict[str, Any] = {}
_HERE = (os.path.abspath(__file__), os.path.join(os.path.dirname(os.path.abspath(__file__)), "import_recorder.py"))


class Status:
    """A file's status as the project's code gets it: the real one, saying which of its times are read."""

    __slots__ = ("_status", "_read")

    def __init__(self, status: os.stat_result, read: Callable[[str], None]) -> None:
        self._status = status
        self._read = read

    def __getattr__(self, name: str) -> Any:
        if name in _FIELDS:
            self._read(_FIELDS[name])
        return getattr(self._status, name)

    def __getitem__(self, index: Any) -> Any:
        picked = range(len(self._status))[index]
        for at in picked if isinstance(picked, range) else [picked]:
            if at in _INDEXES:
                self._read(_INDEXES[at])
        return self._status[index]

    def __len__(self) -> int:
        return len(self._status)

    def __iter__(self) -> Iterator[Any]:
        for kind in TIME_KINDS:
            self._read(kind)
        return iter(self._status)

    def __eq__(self, other: object) -> bool:
        for kind in TIME_KINDS:
            self._read(kind)
        return self._status == (other._status if isinstance(other, Status) else other)

    def __hash__(self) -> int:
        for kind in TIME_KINDS:
            self._read(kind)
        return hash(self._status)

    def __repr__(self) -> str:
        return repr(self._status)

    def __reduce__(self) -> Any:
        for kind in TIME_KINDS:
            self._read(kind)
        return self._status.__reduce__()


def patch(rec: Recorder) -> None:
    """Watch the times read, for the length of an import (after `os.stat` is watched for the paths it tests)."""
    for kind in TIME_KINDS:
        real = _SAVED["get" + kind] = getattr(os.path, "get" + kind)
        setattr(os.path, "get" + kind, _time_reader(rec, real, kind))
    for name in ("stat", "lstat"):
        real = _SAVED[name] = getattr(os, name)
        setattr(os, name, _status_taker(rec, real, "l" if name == "lstat" else ""))


def unpatch() -> None:
    for name, real in _SAVED.items():
        setattr(os.path if name.startswith("get") else os, name, real)
    _SAVED.clear()


def _time_reader(rec: Recorder, real: Any, kind: str) -> Any:
    def call(path: Any, *args: Any, **kwargs: Any) -> Any:
        if _for_project(rec):
            rec.note_from_a_wrapper(kind, path, "a file's time")
        return real(path, *args, **kwargs)
    return call


def _status_taker(rec: Recorder, real: Any, link: str) -> Any:
    def call(path: Any, *args: Any, **kwargs: Any) -> Any:
        status = real(path, *args, **kwargs)
        if rec.busy or rec.where is None or not isinstance(path, (str, bytes, os.PathLike)) \
                or not _for_project(rec):
            return status
        own = link or ("" if kwargs.get("follow_symlinks", True) else "l")  # os.stat(p, follow_symlinks=False)
        return Status(status, lambda kind: rec.note_from_a_wrapper(own + kind, path, "a file's time"))
    return call


def _for_project(rec: Recorder) -> bool:
    """Whether the value goes to the project's own code: the first code up the stack past kgate's wrappers and
    `pathlib` (whose `Path.stat` hands the status back) is a file of the project's."""
    where = rec.where
    frame: FrameType | None = sys._getframe(2)
    while frame is not None and where is not None:
        filename = frame.f_code.co_filename
        if filename in _HERE:
            frame = frame.f_back
            continue
        if filename.startswith("<") or (filename + os.sep).startswith(rec.skip):
            if str(frame.f_globals.get("__name__", "")).partition(".")[0] != "pathlib":  # 3.13: pathlib._local
                return False
            frame = frame.f_back
            continue
        return os.path.isabs(filename) and where.owned(filename)
    return False
