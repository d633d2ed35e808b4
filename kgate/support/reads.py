"""What a run read, recorded as it reads it: the inputs a replay of the run must find unchanged.

A replay (`kgate.pipeline.fastpath`) is only as good as its list of inputs. A walk of
the project cannot know what a check reads outside it or in its excluded
folders (a kernel module under a `python-path` entry elsewhere, a
`compile_commands.json` in an excluded `build/`), so the run records its
reads as they happen, through an audit hook (`sys.addaudithook`): every
file opened for reading and every folder listed, with its state taken at
that moment, before the read. What the hook cannot see is noted by the code
that does it (`note`, `note_env`): the environment variables a kernel module's import looked up, a file judged unchanged by its stat alone (the parse
index), a module path looked for and not found (a file that appears there
later is imported instead), and the modules compile workers import (each
sends the files of the modules it imported back with its result).

Not recorded: kgate's own cache (it is build output, checked record by
record), the temporary folders this run made (`kgate.support.scratch`), Python's standard library (the replay's key holds Python's
version), kgate's package, and the system's pseudo-files. Installed
packages are recorded as any file is: a module of one that a kernel module
imports (in a compile worker, or opened here) is an input of the run, with
its size, times and inode; Triton is also watched through its own files.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Container
from typing import Any

from kgate.support import scratch
from kgate.support.filestat import path_state
from kgate.support.perthread import PerThreadFlag


def listing(folder: str, ignored: list[str]) -> list[str] | None:
    """The names in a folder, less those the run writes itself (its cache, its report)."""
    try:
        names = os.listdir(folder)
    except (OSError, ValueError):
        return None
    skip = set(ignored)
    return sorted(n for n in names if n not in skip)


class Log:
    """Files (path -> state) and folders (path -> [names, names left out]) read, and where not to look."""

    # Set while the hook takes a read's state (its own stat and listing are not reads); each thread's own, so that a
    # read in one thread while another is in the hook is recorded all the same.
    busy = PerThreadFlag()

    def __init__(self, skip: list[str], listed: Container[str] = ()) -> None:
        self.files: dict[str, list[int] | None] = {}
        self.dirs: dict[str, list[list[str]]] = {}
        self.listed = listed  # folders the run's snapshot listed already: not listed again as each is walked
        # Outputs and caches of the run: never inputs. Python's standard library and kgate's own package are
        # watched otherwise (the replay's key holds Python's version; kgate's files); installed packages are not:
        # a module of one that a kernel module imports is an input like any other.
        self.skip = {os.path.abspath(p) for p in skip}
        prefixes = {os.path.abspath(p) for p in skip}
        prefixes |= {os.path.dirname(os.path.abspath(os.__file__))}  # the standard library, lib-dynload in it
        prefixes |= {os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "/proc", "/dev", "/sys"}
        self.prefixes = tuple(sorted(p.rstrip(os.sep) + os.sep for p in prefixes))
        self.env: dict[str, str | None] = {}  # variables the imports of kernel modules looked up (`note_env`)
        self.broken = False  # a read the hook failed to record: this run must not be replayed

    def wanted(self, path: str) -> bool:
        # The temporary folders this run made are its own output; a project in one named like them is not.
        return path not in self.skip and not (path + os.sep).startswith(self.prefixes) \
            and not scratch.made_here(path)

    def modules(self, before: set[str]) -> None:
        """The files of the modules imported since `before` (names in sys.modules), in this process."""
        for name, module in list(sys.modules.items()):
            path = getattr(module, "__file__", None) if name not in before else None
            if isinstance(path, str):
                self.file(path)

    def file(self, path: str, state: list[int] | None | bool = False) -> None:
        path = os.path.abspath(path)
        if path not in self.files and self.wanted(path):
            self.files[path] = path_state(path) if state is False else state  # type: ignore[assignment]

    def folder(self, path: str) -> None:
        path = os.path.abspath(path)
        if path in self.dirs or path in self.listed or not self.wanted(path):
            return
        ignored = sorted(os.path.basename(p) for p in self.skip if os.path.dirname(p) == path)
        names = listing(path, ignored)
        if names is not None:
            self.dirs[path] = [names, ignored]


_LOG: Log | None = None
_HOOKED = False


def start(skip: list[str], listed: Container[str] = ()) -> Log:
    """Record this process's reads from now on (until `stop`); the hook is installed once per process. `listed`: the
    folders the run's snapshot holds the listings of."""
    global _LOG, _HOOKED
    _LOG = Log(skip, listed)
    if not _HOOKED:
        sys.addaudithook(_hook)
        _HOOKED = True
    return _LOG


def stop() -> Log | None:
    global _LOG
    log, _LOG = _LOG, None
    return log


def note(path: str | os.PathLike[str], state: list[int] | None | bool = False) -> None:
    """A file this run depends on that the hook cannot see being read (its state now, or `state`)."""
    log = _LOG
    if log is not None:
        log.file(os.fspath(path), state)


def note_folder(path: str | os.PathLike[str]) -> None:
    """A folder this run depends on that the hook cannot see being listed (its listing now)."""
    log = _LOG
    if log is not None:
        log.folder(os.fspath(path))


def note_unreadable() -> None:
    """An input this run depends on whose value cannot be taken again (a device, a pipe): never replayed."""
    log = _LOG
    if log is not None:
        log.broken = True


def env_value(name: str) -> str | None:
    """A variable as the replay compares it; `*` (the whole environment, iterated) as a hash of it."""
    if name != "*":
        return os.environ.get(name)
    import hashlib

    return hashlib.sha256(repr(sorted(os.environ.items())).encode()).hexdigest()


def note_env(name: str) -> None:
    """An environment variable a kernel module's import looked up (its value in this process now)."""
    log = _LOG
    if log is not None:
        log.env.setdefault(name, env_value(name))


_EVENTS = frozenset(("open", "os.listdir", "os.scandir"))


def _hook(event: str, args: tuple[Any, ...]) -> None:
    log = _LOG
    if event not in _EVENTS or log is None or log.busy:
        return
    log.busy = True  # the hook's own stat and listing must not be recorded (or recurse)
    try:
        path = args[0] if args else None
        if event == "open":
            mode, flags = args[1], args[2]
            if mode is None:
                writing = bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))
            else:
                writing = any(c in str(mode) for c in "wax+")
            if not writing and isinstance(path, (str, bytes, os.PathLike)):
                log.file(os.fsdecode(path))
        else:
            if path is None:
                path = "."
            if isinstance(path, (str, bytes, os.PathLike)):
                log.folder(os.fsdecode(path))
    except Exception:  # noqa: BLE001 - recording must never break the run; a read it missed means no replay
        log.broken = True
    finally:
        log.busy = False
