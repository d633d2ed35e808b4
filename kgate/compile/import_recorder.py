"""The reads of a kernel module's import, recorded as they happen (`kgate.compile.import_reads` names them).

A compile worker records the reads of the imports it runs (`recording`): every file opened for reading, every
folder listed or path tested for existence by the project's code, every environment variable looked up (the
whole environment where it is iterated), every module looked for and not found, the files of every module
imported, and what else reads a file: a program run, a library loaded, a database opened. What the audit hook
cannot see (the environment, `os.stat` and its kin, `importlib.util.find_spec`) is watched by patching it for
the length of the import. A Python program the import runs, and a process it forks, records its own reads the
same way and hands them back (`kgate.compile.import_children`); any other program is keyed by its own file and
by every argument that names a path.

What no Python code of the import looks up is keyed all the same (`PROCESS_VARIABLES`, `INTERPRETER`: the time zone,
the locale, `__debug__`), and the command line it sees is its own, the same on every run (`sys.argv == [""]`, as an
interpreter without a script has it): kgate's arguments (`--format json`) are not the kernel module's.
"""

from __future__ import annotations

import json
import os
import re
import sys
from types import FrameType
from typing import IO, Any

from kgate.compile import (
    import_chance,
    import_children,
    import_environ,
    import_programs,
    import_reads,
    import_text,
    import_times,
)
from kgate.compile.import_reads import (
    INTERPRETER,
    UNRECORDED,
    WORKING_TREE,
    Reads,
    View,
    keyable_file,
    search_folders,
    value,
)
from kgate.compile.sides import checked_out, of_the_working_tree, on_this_side
from kgate.support.perthread import PerThreadFlag


class Recorder:
    """The reads of the imports a worker runs, name -> value when first read, over all its tasks (a module one
    task imported serves the next: its reads stay this worker's)."""

    # Set while the recorder itself reads (its hook, a wrapper's note): what it reads then is not the import's. Each
    # thread's own: a read the import makes in one thread while kgate's watcher thread is in the hook is recorded.
    busy = PerThreadFlag()

    def __init__(self, skip: tuple[str, ...]) -> None:
        self.reads: Reads = {}
        self.skip = skip  # prefixes never read as inputs: kgate's cache, the standard library, kgate, /proc
        self.where: View | None = None
        self.depth = 0
        self.written: set[str] = set()  # variables the project set itself before reading them
        self.made: set[str] = set()  # files the import made or emptied before reading them: its output, no input
        # While a registration is bound: the folder of the compiler's package, whose own reads (a module it imports
        # late, a variable it reads) are the toolchain's, keyed by its version, not the project's.
        self.toolchain = ""
        self.sink: IO[str] | None = None  # in a child process: where each read is written as it is made
        self.children = import_children.Children()

    def wanted(self, path: str) -> bool:
        from kgate.support import scratch

        # A module's bytecode is a cache of its source, which is read (and keyed) as the module's file; its
        # header holds the source's time, which a checkout or a test run changes without changing the source.
        if path.endswith(".pyc") and os.path.basename(os.path.dirname(path)) == "__pycache__":
            return False
        return not (path + os.sep).startswith(self.skip) and not scratch.made_here(path)

    def add(self, name: str, held: Any) -> None:
        if name in self.reads:
            return
        self.reads[name] = held
        if self.sink is not None:
            try:
                self.sink.write(json.dumps([name, held]) + "\n")
                self.sink.flush()
            except (OSError, ValueError, TypeError):
                self.sink = None

    def unkeyable(self, what: str) -> None:
        """A read whose value cannot be named: the import's records are never kept."""
        self.add(f"{UNRECORDED}:{what}", None)

    def by_toolchain(self) -> bool:
        """Whether the read being made is the compiler's own while a registration is bound: the code nearest the
        read, past the standard library and kgate, is the compiler's, and no code of the project's runs it (a
        module the compiler imports late; a heuristic the compiler calls makes the project's reads, and so does
        a compiler function the heuristic calls)."""
        if not self.toolchain or self.where is None:
            return False
        frame: FrameType | None = sys._getframe(1)
        nearest = None
        while frame is not None:
            filename = frame.f_code.co_filename
            if filename.startswith(self.toolchain):
                nearest = nearest or "compiler"
            elif os.path.isabs(filename) and self.where.owned(filename):
                return False
            elif not (filename.startswith("<") or (filename + os.sep).startswith(self.skip)):
                nearest = nearest or "other"
            frame = frame.f_back
        return nearest == "compiler"

    def note(self, kind: str, path: str) -> None:
        where = self.where
        if where is None or self.by_toolchain():
            return
        relative = not os.path.isabs(path)
        path = os.path.abspath(path)
        if path in self.made or (self.toolchain and path.startswith(self.toolchain)):
            return
        if kind == "file" and not keyable_file(path):  # a device, a pipe, a socket: in /dev or anywhere else
            self.unkeyable(path)
            return
        if path.startswith(_MAGIC_LINKS):  # /proc/self/cwd/..., /dev/fd/3: the file it leads to is read
            path = os.path.realpath(path)
        if where.checkout is not None and not checked_out(path, where.checkout) and os.path.lexists(
                on_this_side(path, where.checkout)):  # on a base's side, a file of the working tree the base holds
            # A file's bytes read from the working tree's copy are not the base's; a folder (its state, its listing)
            # is read as the base's own, as are the files in it the import goes on to open.
            if kind == "file" and not os.path.isdir(path) and of_the_working_tree(path, where.checkout):
                self.unkeyable(f"{WORKING_TREE} {path}")
                return
            path = on_this_side(path, where.checkout)  # the same bytes: read as the base's own copy
        if kind == "file" and _ENVIRON_FILE.fullmatch(path):  # /proc/self/environ: the environment, read as a file
            self.note_env("*")
            return
        if not self.wanted(path):
            return
        if relative:
            self.add("cwd:", value("cwd:", where))
        name = f"{kind}:{where.name(path)}"
        if name not in self.reads:
            self.add(name, value(name, where))

    def note_from_a_wrapper(self, kind: str, path: Any, failure: str) -> None:
        """`note` for a library call kgate wraps (`os.stat`, `os.path.getmtime`): one at a time, and never breaking
        the call; a path it cannot note makes the import's records unkeyable (`failure` says what)."""
        if self.busy or not isinstance(path, (str, bytes, os.PathLike)):
            return
        self.busy = True
        try:
            self.note(kind, os.fsdecode(path))
        except Exception:  # noqa: BLE001 - recording must never break the import
            self.unkeyable(failure)
        finally:
            self.busy = False

    def note_env(self, name: str) -> None:
        if self.where is not None and name not in self.written and f"env:{name}" not in self.reads \
                and not self.by_toolchain():
            self.add(f"env:{name}", value(f"env:{name}", self.where))


# Where the system keeps links to the files a process has (/proc/self/cwd, /dev/fd/3): a read through one reads
# the file it leads to.
_MAGIC_LINKS = ("/proc/", "/dev/fd/", "/dev/std")
# A process's environment as the system shows it (`/proc/self/environ` leads to `/proc/<pid>/environ`): the whole
# environment read, as iterating os.environ is.
_ENVIRON_FILE = re.compile(r"/proc/(?:\d+|self|thread-self)(?:/task/\d+)?/environ")
_RECORDER: Recorder | None = None
_HOOKED = False


def recorder(skip: list[str]) -> Recorder:
    """This process's recorder (made once; the audit hook is installed once per process)."""
    global _RECORDER, _HOOKED
    if _RECORDER is None:
        prefixes = {os.path.abspath(p) for p in skip} | {os.path.dirname(os.path.abspath(os.__file__)), "/proc",
                                                         "/dev", "/sys"}
        prefixes.add(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # kgate's own package
        _RECORDER = Recorder(tuple(sorted(p.rstrip(os.sep) + os.sep for p in prefixes)))
        import_children.watch_forks(lambda: _RECORDER)
    if not _HOOKED:
        sys.addaudithook(_hook)
        _HOOKED = True
    return _RECORDER


class recording:  # used as a `with` statement, as `open` is
    """Record the reads of the imports made inside it (the project's set-up hook, its kernel module)."""

    def __init__(self, root: str, roots: list[str], cwd: str | None = None,
                 checkout: tuple[str, str] | None = None) -> None:
        self.root, self.roots, self.cwd, self.checkout = root, roots, cwd, checkout
        self.before: set[str] = set()
        self.path: list[str] = []
        self.argv: list[str] = []
        self.was: str | None = None

    def __enter__(self) -> Recorder | None:
        rec = _RECORDER
        if rec is None:  # not in a compile worker: nothing records
            return None
        rec.depth += 1
        if rec.depth == 1:
            if self.cwd is not None and os.path.isdir(self.cwd):  # the side's own folder (a base's checkout)
                self.was = os.getcwd()
                os.chdir(self.cwd)
            self.before, self.path, self.argv = set(sys.modules), list(sys.path), sys.argv
            sys.argv = [""]
            patch(rec)
        rec.where = View(os.path.abspath(self.root), tuple(os.path.abspath(r) for r in self.roots),
                         import_environ.RealEnv(), os.getcwd(), self.checkout)
        for name in import_reads.PROCESS_VARIABLES:
            rec.note_env(name)
        rec.add(f"{INTERPRETER}:", value(f"{INTERPRETER}:", rec.where))
        return rec

    def __exit__(self, *exc: object) -> None:
        rec = _RECORDER
        if rec is None:
            return
        rec.depth -= 1
        if rec.depth:
            return
        unpatch()
        sys.argv = self.argv
        if self.was is not None:
            os.chdir(self.was)
            self.was = None
        note_imports(rec, self.before, self.path)
        rec.children.merge(rec)
        rec.where = None


def note_imports(rec: Recorder, before: set[str], sys_path: list[str]) -> None:
    """The files of the modules imported since `before`, and the files that would change what a name imported or
    looked for resolves to: a file appearing in a python-path folder, or in a folder the import put on sys.path
    (since it was `sys_path`)."""
    resolved = set()  # names whose resolution a file appearing in a python-path folder would change
    searched = False  # whether a module was found in a PYTHONPATH folder, or looked for and not found anywhere
    pythonpath = tuple(os.path.join(f, "") for f in search_folders(rec.where)) if rec.where is not None else ()
    for name, module in list(sys.modules.items()):
        if name in before:
            continue
        path = getattr(module, "__file__", None)
        if rec.toolchain and isinstance(path, str) and os.path.abspath(path).startswith(rec.toolchain):
            continue  # a module of the compiler's, imported late as it binds a registration
        if isinstance(path, str):
            rec.note("file", path)
        places = [path] if isinstance(path, str) else list(getattr(module, "__path__", None) or [])
        searched = searched or any(isinstance(p, str) and os.path.abspath(p).startswith(pythonpath) for p in places)
        if rec.where is not None and any(isinstance(p, str) and rec.where.owned(os.path.abspath(p))
                                         for p in places):
            resolved.add(name)  # the project's module: an earlier folder, a package of its name shadows it
        resolved.add(name.partition(".")[0])  # an installed one: a project module of its name shadows it
    roots = list(rec.where.roots) if rec.where is not None else []
    added = [p for p in sys.path if isinstance(p, str) and p not in sys_path]
    folders = list(dict.fromkeys([*roots, *(os.path.abspath(p or os.curdir) for p in added)]))
    import importlib.machinery

    suffixes = importlib.machinery.all_suffixes()  # a module is also a .pyc or an extension built in place
    for name in _LOOKED_FOR | resolved:
        if name not in sys.modules or name in resolved:  # not found: a file that appears later is imported
            for folder in folders:
                base = os.path.join(folder, *name.split("."))
                for candidate in (*(base + suffix for suffix in suffixes), base, os.path.join(base, "__init__.py")):
                    rec.note("stat", candidate)
    if (searched or any(name not in sys.modules for name in _LOOKED_FOR)) and rec.where is not None \
            and "PYTHONPATH" not in rec.written:
        rec.add("pythonpath:", value("pythonpath:", rec.where))  # which folders decide where such a module is found
    _LOOKED_FOR.clear()


_LOOKED_FOR: set[str] = set()


_SAVED: dict[str, Any] = {}


def patch(rec: Recorder) -> None:
    """Watch what the audit hook cannot see: the environment, and paths tested with `os.stat`; and hand the
    recorder to the programs the import starts."""
    for environ in (os.environ, getattr(os, "environb", None)):
        if environ is not None and type(environ) is os._Environ:
            import_environ.watch(environ)
    import_environ.watch_data()
    import_environ.watch_user_base(rec)
    real_stat, real_lstat = os.stat, os.lstat
    _SAVED.update(stat=real_stat, lstat=real_lstat)

    def watched(real: Any, kind: str = "stat") -> Any:
        def call(path: Any, *args: Any, **kwargs: Any) -> Any:
            rec.note_from_a_wrapper(kind, path, "a path look-up")
            return real(path, *args, **kwargs)
        return call

    os.stat, os.lstat = watched(real_stat), watched(real_lstat, "lstat")
    import_times.patch(rec)  # the times of the statuses the project's code is handed, and os.path.getmtime's
    real_access, real_readlink = _SAVED["access"], _SAVED["readlink"] = os.access, os.readlink
    os.access = watched(real_access)
    os.readlink = watched(real_readlink, "link")
    real_getcwd, real_getcwdb = _SAVED["getcwd"], _SAVED["getcwdb"] = os.getcwd, os.getcwdb

    def folder_read(real: Any) -> Any:  # the folder the import runs in, read as a name (Path.cwd())
        def call() -> Any:
            if not rec.busy and rec.where is not None:
                rec.add("cwd:", value("cwd:", rec.where))
            return real()
        return call

    os.getcwd, os.getcwdb = folder_read(real_getcwd), folder_read(real_getcwdb)
    import importlib.util

    real_find = _SAVED["find_spec"] = importlib.util._find_spec  # type: ignore[attr-defined]

    def find_spec(name: str, *args: Any, **kwargs: Any) -> Any:  # importlib.util.find_spec raises no audit event
        if isinstance(name, str) and not rec.by_toolchain():
            _LOOKED_FOR.add(name)
        return real_find(name, *args, **kwargs)

    importlib.util._find_spec = find_spec  # type: ignore[attr-defined]
    _patch_path_accessor()
    import_text.patch(rec)
    import_chance.patch(rec)
    import_children.patch(rec)


def _patch_path_accessor() -> None:
    """Python 3.10's `pathlib` calls `os.stat`, `os.readlink` and `os.getcwd` through an accessor class that took
    them when pathlib was imported (`Path.exists`, `.is_file`, `.resolve`, `Path.cwd`): give it the watched ones."""
    import pathlib

    accessor = getattr(pathlib, "_NormalAccessor", None)
    if accessor is None:
        return
    for name in ("stat", "readlink", "getcwd"):
        real = _SAVED.get(name)
        if real is not None and vars(accessor).get(name) is real:
            _SAVED["accessor:" + name] = real
            setattr(accessor, name, staticmethod(getattr(os, name)))


def _unpatch_path_accessor() -> None:
    import pathlib

    for key in [key for key in _SAVED if key.startswith("accessor:")]:
        setattr(pathlib._NormalAccessor, key.removeprefix("accessor:"), _SAVED.pop(key))  # type: ignore[attr-defined]


def unpatch() -> None:
    for environ in (os.environ, getattr(os, "environb", None)):
        if environ is not None:
            import_environ.unwatch(environ)
    import_environ.unwatch_data()
    import_environ.unwatch_user_base()
    if _SAVED:
        import importlib.util

        _unpatch_path_accessor()
        import_times.unpatch()
        os.stat, os.lstat = _SAVED.pop("stat"), _SAVED.pop("lstat")
        os.access, os.readlink = _SAVED.pop("access"), _SAVED.pop("readlink")
        os.getcwd, os.getcwdb = _SAVED.pop("getcwd"), _SAVED.pop("getcwdb")
        importlib.util._find_spec = _SAVED.pop("find_spec")  # type: ignore[attr-defined]
    import_text.unpatch()
    import_chance.unpatch()
    import_children.unpatch()


def _caller_module() -> str:
    frame = sys._getframe(2).f_back  # _caller_module, _kind_of_listing, _hook, then whoever listed (or nobody)
    return frame.f_globals.get("__name__", "") if frame is not None else ""


def _kind_of_listing(event: str) -> str | None:
    """How a listing counts: not at all where the import system made it (it lists every folder of sys.path it
    looks in; what it imports is recorded by module instead), by the distributions in it where importlib.metadata
    made it (it looks every folder of sys.path over for them, the project's too), else by every name in it, and
    where os.scandir made it (glob, os.walk) by what its entries tell of each (DirEntry.is_dir, .stat) too."""
    caller = _caller_module()
    if caller.startswith(("_frozen_importlib", "importlib._bootstrap")):
        return None
    if caller.startswith(("importlib.metadata", "importlib_metadata")):
        return "dists"
    return "entries" if event == "os.scandir" else "dir"


# What the hook reads: files opened, folders listed, imports, and what else reads a file: a program run (a Python
# one reports its own reads; another is keyed by its file and by every argument that names a path), a library
# loaded, a database opened. A connection made (a socket: a server's answer) cannot be keyed.
_PROGRAMS = ("subprocess.Popen", "os.posix_spawn", "os.exec", "os.system", "ctypes.dlopen", "sqlite3.connect",
             "sqlite3.connect/handle")
_UNKEYABLE = ("socket.connect", "socket.sendto", "socket.sendmsg")
_FOREIGN = ("ctypes.dlsym", "ctypes.dlsym/handle")  # a function of a loaded library looked up, to be called
_EVENTS = frozenset(("open", "os.listdir", "os.scandir", "import", *_FOREIGN, *_PROGRAMS, *_UNKEYABLE))


def _called_by_the_project(rec: Recorder) -> bool:
    """Whether the nearest code past the standard library and kgate is the project's own (a library's use of
    ctypes, a driver's, is not the import's read)."""
    assert rec.where is not None
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not (filename.startswith("<") or (filename + os.sep).startswith(rec.skip)):
            return os.path.isabs(filename) and rec.where.owned(filename)
        frame = frame.f_back
    return False


def _reads_content(mode: Any, flags: int) -> bool:
    """Whether an open can read what the file held: for reading, or for reading and writing ("r+", "a+",
    O_RDWR) unless it empties or makes the file first ("w+", "x+", O_TRUNC, O_EXCL)."""
    if mode is not None:
        mode = str(mode)
        return "r" in mode or "+" in mode and not any(c in mode for c in "wx")
    return flags & os.O_ACCMODE != os.O_WRONLY and not flags & (os.O_TRUNC | os.O_EXCL)


def _was_read(rec: Recorder, path: str) -> bool:
    """Whether the import read the file's content before (then it stays an input of the import)."""
    return rec.where is not None and f"file:{rec.where.name(os.path.abspath(path))}" in rec.reads


def _makes(mode: Any, flags: int, path: str) -> bool:
    """Whether an open for writing makes the file's content anew: it empties it ("w", "x", O_TRUNC, O_EXCL) or
    there was none (an append to an existing file keeps what it held)."""
    if not os.path.lexists(path):
        return True
    return any(c in str(mode) for c in "wx") if mode is not None else bool(flags & (os.O_TRUNC | os.O_EXCL))


def _hook(event: str, args: tuple[Any, ...]) -> None:
    rec = _RECORDER
    if event not in _EVENTS or rec is None or rec.where is None or rec.busy:
        return
    rec.busy = True
    try:
        if rec.by_toolchain():  # while a registration is bound: what the compiler itself does
            return
        if event == "import":
            if isinstance(args[0], str):
                _LOOKED_FOR.add(args[0])
            return
        if event in _PROGRAMS:
            import_programs.note(rec, event, args)
            return
        if event in _UNKEYABLE:
            rec.unkeyable(f"{event} {args[1] if len(args) > 1 else ''}")
            return
        if event in _FOREIGN:  # a C function the project looks up through ctypes reads what no hook sees
            if _called_by_the_project(rec):
                rec.unkeyable("a C function called through ctypes (what it reads is not seen)")
            return
        path = args[0] if args else None
        if event == "open":
            if not isinstance(path, (str, bytes, os.PathLike)):
                return
            if _reads_content(args[1], args[2]):
                rec.note("file", os.fsdecode(path))
                # The code that opened it; none where the interpreter opens a program's main script.
                import_text.note_open(rec, os.fsdecode(path), sys._getframe(0).f_back)
            elif _makes(args[1], args[2], os.fsdecode(path)) and not _was_read(rec, os.fsdecode(path)):
                rec.made.add(os.path.abspath(os.fsdecode(path)))  # what it holds from now on is the import's own
        elif (kind := _kind_of_listing(event)) is None:
            return
        elif path is None or isinstance(path, (str, bytes, os.PathLike)):
            rec.note(kind, "." if path is None else os.fsdecode(path) or ".")
        else:  # a folder listed through its descriptor: which one cannot be told
            rec.unkeyable("a folder listed through its descriptor")
    except Exception:  # noqa: BLE001 - recording must never break the import
        rec.unkeyable("a read the recorder missed")  # a key that no later run will find
    finally:
        rec.busy = False


def current() -> Recorder | None:
    """This process's recorder, where it has one (a compile worker's, a program an import started)."""
    return _RECORDER


def start_in_child(rec: Recorder) -> None:
    """Make `rec` this process's recorder, recording from now on (a Python program an import started)."""
    global _RECORDER, _HOOKED
    _RECORDER = rec
    if not _HOOKED:
        sys.addaudithook(_hook)
        _HOOKED = True
    patch(rec)


import_environ.watch_with(current)
