"""What the programs a kernel module's import runs, and the libraries and databases it opens, read: each is keyed by
its own file, and a program by every argument that names a path (`kgate.compile.import_recorder` calls `note` for
the audit events that start or open them). A Python program reports its own reads
(`kgate.compile.import_children`); what another reads besides is not seen (`printenv X` reads a variable, `git
rev-parse HEAD` a repository), so no key can hold the import: it is marked unkeyable, nothing made from it is kept
or replayed, and it is marked (`unseen:NAME`) so that the run says which program it ran.

A shell line is read for the words it runs, wherever it is handed to a shell (`os.system`, `shell=True`, `sh -c`,
`os.popen`), and a relative path as the program reads it: from the folder it is started in (`cwd=`).
"""

from __future__ import annotations

import os
import shutil
import sys
from types import FrameType
from typing import TYPE_CHECKING, Any

from kgate.compile import import_children
from kgate.compile.import_reads import UNSEEN, value

if TYPE_CHECKING:
    from kgate.compile.import_recorder import Recorder


def note(rec: Recorder, event: str, args: tuple[Any, ...]) -> None:
    """What the program, library or database an audit event starts or opens reads (`_PROGRAMS` in the recorder)."""
    program = args[0] if args else None
    if event == "sqlite3.connect":
        _note_database(rec, program)
        return
    if event == "sqlite3.connect/handle":
        _watch_attached(rec, program)
        return
    if event == "ctypes.dlopen":
        _note_library(rec, program)
        return
    if event == "os.system":  # a shell line: the shell, and every word of it that names a path
        argv, folder = ["sh", "-c", os.fsdecode(program) if program is not None else ""], None
        program = "sh"
    else:
        argv = [os.fsdecode(a) for a in (args[1] if len(args) > 1 and isinstance(args[1], (list, tuple)) else [])
                if isinstance(a, (str, bytes, os.PathLike))]
        cwd = args[2] if event == "subprocess.Popen" and len(args) > 2 else None  # where its relative paths lead
        folder = os.fsdecode(cwd) if isinstance(cwd, (str, bytes, os.PathLike)) else None
    words = argv[1:] if import_children.shell_line(argv) is None else import_children.command_words(argv)
    if words is None:
        rec.unkeyable("a shell line that does not split into words")
        return
    if isinstance(program, (str, bytes, os.PathLike)):
        program = os.fsdecode(program)
        found = _in_folder(folder, program) if os.sep in program else shutil.which(program)
        rec.note("file", found or program)
        if not import_children.runs_python(argv, program) and rec.where is not None and not _library_lookup():
            # What it reads besides (the environment, a repository's history, the clock) is not seen, so no key
            # can hold it: nothing made from the import is kept (`unrecorded`), and the run names the program.
            name = f"{UNSEEN}:{os.path.basename(program)}"
            rec.add(name, value(name, rec.where))
            rec.unkeyable(f"{os.path.basename(program)} ran")
    for word in words:
        path = _in_folder(folder, word)
        if os.path.isfile(path):
            rec.note("file", path)
        elif os.path.sep in word:  # a path the program may test for or make: whether it is there
            rec.note("stat", path)


def _library_lookup() -> bool:
    """Whether the program is run by `ctypes.util.find_library` looking a library's file name up (`ldconfig -p`,
    `gcc`, `objdump`): the standard library's own search, whose answer matters only as the library a `dlopen`
    then opens, which is keyed by its file (`_note_library`). torch's CUDA build runs one at its first CUDA
    query, so a kernel module that asks `torch.cuda.is_available()` at import would otherwise be said to have run
    a program on every check."""
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        module = str(frame.f_globals.get("__name__", ""))
        if module == "ctypes.util":
            return True
        if module not in _STARTERS and not module.startswith("kgate."):
            return False
        frame = frame.f_back
    return False


# The standard library's modules between the code that starts a program and the audit event.
_STARTERS = frozenset({"subprocess", "os", "posixpath", "shutil"})


def _in_folder(folder: str | None, path: str) -> str:
    """`path` as a program started in `folder` (None: this process's) reads it."""
    return os.path.join(folder, path) if folder else path


def _note_database(rec: Recorder, database: Any) -> None:
    """A database file by its name, relative to the folder it runs in, or a URI."""
    if isinstance(database, (str, bytes, os.PathLike)):
        name = os.fsdecode(database)
        if name.startswith("file:"):
            from urllib.parse import unquote, urlsplit

            parts = urlsplit(name)
            name = "" if "mode=memory" in parts.query else unquote(parts.path)
        if name and name != ":memory:":
            rec.note("file", name)


def _watch_attached(rec: Recorder, connection: Any) -> None:
    """The databases a connection attaches (`ATTACH DATABASE 'other.db'`) are read as its own file is: sqlite tells
    its authorizer of each (a connection whose owner sets an authorizer of its own tells no more)."""
    import sqlite3

    def authorize(action: int, name: str | None, *_: Any) -> int:
        if action == sqlite3.SQLITE_ATTACH and rec.where is not None and not rec.busy:
            rec.busy = True  # kgate's own look at the file is not the module's
            try:
                _note_database(rec, name)
            finally:
                rec.busy = False
        return sqlite3.SQLITE_OK

    try:
        connection.set_authorizer(authorize)
    except (AttributeError, sqlite3.Error):
        rec.unkeyable("a database connection kgate cannot watch")


def _note_library(rec: Recorder, library: Any) -> None:
    """A library by its path; a bare name by where the loader finds it (LD_LIBRARY_PATH's folders first)."""
    if not isinstance(library, (str, bytes, os.PathLike)):
        return
    name = os.fsdecode(library)
    if os.path.sep in name:
        rec.note("file", name)
        return
    rec.note_env("LD_LIBRARY_PATH")
    where = rec.where
    for folder in filter(None, (where.env.get("LD_LIBRARY_PATH", "") if where else "").split(os.pathsep)):
        rec.note("file" if os.path.isfile(os.path.join(folder, name)) else "stat", os.path.join(folder, name))
