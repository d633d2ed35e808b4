"""What importing a kernel's module read, and the cache key it makes.

A kernel module can read anything while it is imported: a `tune.json` beside it that lists its autotune
configs, a constant from a module it imports by `importlib.import_module`, an environment variable. What it
read decides what kgate compiles, so a compile record, an expansion record and each side of a revision diff
are keyed on it, not on the module's text and its static imports alone.

A compile worker records the reads of the imports it runs (`Recorder`): every file opened for reading, every
folder listed or path tested for existence by the project's code, every environment variable looked up (the
whole environment where it is iterated), every module looked for and not found, and the files of every module
imported. Each read is kept as a name (`file:./tune.json`, `env:MYPROJ_BLOCK`) and the value it had when it was
read (`value`): a file under the project's folders by its content, elsewhere by its state (size, times, inode),
a folder by its listing, a variable by its value. Names under the project's root are relative to it, so that the
base revision's checkout and the working tree name the same file alike, and differ only where its content does.

The cache holds, beside each static key (`pre`), the lists of names its imports read (`remember`); a run looks
each list up again (`find`): the key is the static key with the names' values now, so a record is found only
where every input its import read still holds what it held. Nothing of the other side of a diff, nor of an
earlier state of a file, can stand in.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from kgate.compile.cache import Cache, digest
from kgate.support.filestat import path_state

Reads = dict[str, Any]  # name -> value when read
UNRECORDED = "unrecorded"  # a read the recorder could not name (a folder listed by descriptor, an error)
_DISTRIBUTIONS = (".dist-info", ".egg-info", ".egg")
MANIFEST = "reads"  # the cache kind that lists, per static key, the names its imports read
_KEPT_LISTS = 8  # read lists kept per static key (the same module under other inputs: an env var, a branch)


@dataclass(frozen=True)
class View:
    """Where names resolve: the project's root, the folders whose files count by content, the environment the
    import ran under (the worker's: kgate's with the pool's changes)."""

    root: str
    roots: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str = ""  # the folder the import runs in: what a relative path names

    def path(self, name: str) -> str:
        return os.path.join(self.root, name[2:]) if name.startswith("./") else name

    def name(self, path: str) -> str:
        path = os.path.abspath(path)
        if path == self.root or path.startswith(self.root.rstrip(os.sep) + os.sep):
            return "./" + os.path.relpath(path, self.root).replace(os.sep, "/")
        return path

    def owned(self, path: str) -> bool:
        return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in self.roots)


def view(root: str, roots: list[str], env_changes: Mapping[str, str | None], cwd: str) -> View:
    """The view of the main process onto what a worker (started with `env_changes`, importing in `cwd`) reads."""
    env = dict(os.environ)
    for key, changed in env_changes.items():
        if changed is None:
            env.pop(key, None)
        else:
            env[key] = changed
    return View(os.path.abspath(root), tuple(os.path.abspath(r) for r in roots), env, os.path.abspath(cwd))


def value(name: str, where: View) -> Any:
    """What a read name holds now (None: nothing there)."""
    kind, _, rest = name.partition(":")
    if kind == UNRECORDED:
        return os.urandom(8).hex()  # never what it was: no later run finds the record
    if kind == "env":
        return _whole_env(where.env) if rest == "*" else where.env.get(rest)
    if kind == "cwd":  # a relative path was read: which folder it is relative to
        return where.name(where.cwd)
    path = where.path(rest)
    if kind == "dir":
        try:
            return sorted(os.listdir(path))
        except (OSError, ValueError):
            return None
    if kind == "stat":
        return _kind_of(path)
    if kind == "link":  # where a symlink points (os.readlink)
        try:
            return os.readlink(path)
        except (OSError, ValueError):
            return None
    if kind == "dists":  # what importlib.metadata looks for in a folder: the installed distributions' metadata
        try:
            return sorted(n for n in os.listdir(path) if n.lower().endswith(_DISTRIBUTIONS))
        except (OSError, ValueError):
            return None
    if where.owned(os.path.abspath(path)):
        return _content(path)
    return path_state(path)


def _whole_env(env: Mapping[str, str]) -> str:
    return hashlib.sha256(repr(sorted(env.items())).encode()).hexdigest()


def _content(path: str) -> str | None:
    try:
        with open(path, "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()
    except (OSError, ValueError):
        return None


def _kind_of(path: str) -> str | None:
    import stat

    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    if stat.S_ISREG(mode):  # what a stat tells of a file besides that it is one: its size (os.path.getsize)
        return f"file:{os.stat(path).st_size}"
    return "dir" if stat.S_ISDIR(mode) else "other"


def key(pre: str, reads: Reads) -> str:
    """The key of a record made from an import that read `reads` (name -> value), under static key `pre`."""
    return digest(MANIFEST, pre, sorted(reads.items()))


def find(cache: Cache, pre: str, where: View) -> tuple[str, Reads] | None:
    """(key, reads) of the first list of names recorded under `pre` whose values now have a record (the caller
    says which kind: it looks the key up); None when no list was recorded. The lists are tried newest first."""
    lists = cache.get(MANIFEST, pre, _names_shape)
    for names in lists or []:
        reads = {name: value(name, where) for name in names}
        made = key(pre, reads)
        if cache.get(MANIFEST, made, _names_shape) is not None:  # written with the record: that state was seen
            return made, reads
    return None


def remember(cache: Cache, pre: str, reads: Reads) -> str:
    """Record that an import under `pre` read `reads`; its key."""
    names = sorted(reads)
    lists = [n for n in cache.get(MANIFEST, pre, _names_shape) or [] if n != names]
    cache.put(MANIFEST, pre, [names, *lists][:_KEPT_LISTS])
    made = key(pre, reads)
    cache.put(MANIFEST, made, [names])
    return made


def _names_shape(value: Any) -> None:
    if not isinstance(value, list) or not all(isinstance(n, list) and all(isinstance(s, str) for s in n)
                                              for n in value):
        raise TypeError("not lists of names")


def agree(first: Reads, second: Reads) -> bool:
    """Whether two imports saw the same values wherever both read (a file edited between them did not)."""
    return all(second[name] == held for name, held in first.items() if name in second)


# --------------------------------------------------------------------------- in a compile worker


class Recorder:
    """The reads of the imports a worker runs, name -> value when first read, over all its tasks (a module one
    task imported serves the next: its reads stay this worker's)."""

    def __init__(self, skip: tuple[str, ...]) -> None:
        self.reads: Reads = {}
        self.skip = skip  # prefixes never read as inputs: kgate's cache, the standard library, kgate, /proc
        self.where: View | None = None
        self.busy = False
        self.depth = 0
        self.written: set[str] = set()  # variables the project set itself before reading them

    def wanted(self, path: str) -> bool:
        from kgate.support import scratch

        # A module's bytecode is a cache of its source, which is read (and keyed) as the module's file; its
        # header holds the source's time, which a checkout or a test run changes without changing the source.
        if path.endswith(".pyc") and os.path.basename(os.path.dirname(path)) == "__pycache__":
            return False
        return not (path + os.sep).startswith(self.skip) and not scratch.made_here(path)

    def note(self, kind: str, path: str) -> None:
        where = self.where
        if where is None:
            return
        relative = not os.path.isabs(path)
        path = os.path.abspath(path)
        if not self.wanted(path):
            return
        if relative and "cwd:" not in self.reads:
            self.reads["cwd:"] = value("cwd:", where)
        name = f"{kind}:{where.name(path)}"
        if name not in self.reads:
            self.reads[name] = value(name, where)

    def note_env(self, name: str) -> None:
        if self.where is not None and name not in self.written and f"env:{name}" not in self.reads:
            self.reads[f"env:{name}"] = value(f"env:{name}", self.where)


_RECORDER: Recorder | None = None
_HOOKED = False


def recorder(skip: list[str]) -> Recorder:
    """This worker's recorder (made once; the audit hook is installed once per process)."""
    global _RECORDER, _HOOKED
    if _RECORDER is None:
        prefixes = {os.path.abspath(p) for p in skip} | {os.path.dirname(os.path.abspath(os.__file__)), "/proc",
                                                         "/dev", "/sys"}
        prefixes.add(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # kgate's own package
        _RECORDER = Recorder(tuple(sorted(p.rstrip(os.sep) + os.sep for p in prefixes)))
    if not _HOOKED:
        sys.addaudithook(_hook)
        _HOOKED = True
    return _RECORDER


class recording:  # used as a `with` statement, as `open` is
    """Record the reads of the imports made inside it (the project's set-up hook, its kernel module)."""

    def __init__(self, root: str, roots: list[str], cwd: str | None = None) -> None:
        self.root, self.roots, self.cwd = root, roots, cwd
        self.before: set[str] = set()
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
            self.before = set(sys.modules)
            _patch(rec)
        rec.where = View(os.path.abspath(self.root), tuple(os.path.abspath(r) for r in self.roots), _RealEnv(),
                         os.getcwd())
        return rec

    def __exit__(self, *exc: object) -> None:
        rec = _RECORDER
        if rec is None:
            return
        rec.depth -= 1
        if rec.depth:
            return
        _unpatch()
        if self.was is not None:
            os.chdir(self.was)
            self.was = None
        resolved = set()  # names whose resolution a file appearing in a python-path folder would change
        for name, module in list(sys.modules.items()):
            if name in self.before:
                continue
            path = getattr(module, "__file__", None)
            if isinstance(path, str):
                rec.note("file", path)
            places = [path] if isinstance(path, str) else list(getattr(module, "__path__", None) or [])
            if rec.where is not None and any(isinstance(p, str) and rec.where.owned(os.path.abspath(p))
                                             for p in places):
                resolved.add(name)  # the project's module: an earlier folder, a package of its name shadows it
            resolved.add(name.partition(".")[0])  # an installed one: a project module of its name shadows it
        for name in _LOOKED_FOR | resolved:
            if name not in sys.modules or name in resolved:  # not found: a file that appears later is imported
                for folder in rec.where.roots if rec.where is not None else ():
                    base = os.path.join(folder, *name.split("."))
                    for candidate in (base + ".py", base, os.path.join(base, "__init__.py")):
                        rec.note("stat", candidate)
        _LOOKED_FOR.clear()
        rec.where = None


_LOOKED_FOR: set[str] = set()


class _RealEnv(Mapping[str, str]):
    """The environment as it is, read without being recorded (the recorder's own view of it)."""

    def __getitem__(self, name: str) -> str:
        return _env_data()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(_env_data())

    def __len__(self) -> int:
        return len(_env_data())


def _env_data() -> dict[str, str]:
    return {os.fsdecode(k): os.fsdecode(v) for k, v in os.environ._data.items()}  # type: ignore[attr-defined]


class _ReadEnviron(os._Environ):  # type: ignore[name-defined,misc]
    """os.environ that records what the project looks up in it."""

    def __getitem__(self, name: Any) -> Any:
        _note_env(name)
        return super().__getitem__(name)

    def __setitem__(self, name: Any, item: Any) -> None:
        rec = _RECORDER
        if rec is not None and isinstance(name, (str, bytes)):
            rec.written.add(os.fsdecode(name))
        super().__setitem__(name, item)

    def __iter__(self) -> Iterator[Any]:
        _note_env("*")
        return super().__iter__()

    def __len__(self) -> int:
        _note_env("*")
        return super().__len__()


def _note_env(name: Any) -> None:
    rec = _RECORDER
    if rec is not None and not rec.busy and isinstance(name, (str, bytes)):
        rec.busy = True
        try:
            rec.note_env(os.fsdecode(name))
        finally:
            rec.busy = False


_SAVED: dict[str, Any] = {}


def _patch(rec: Recorder) -> None:
    """Watch what the audit hook cannot see: the environment, and paths tested with `os.stat`."""
    for environ in (os.environ, getattr(os, "environb", None)):
        if environ is not None and type(environ) is os._Environ:  # type: ignore[attr-defined]
            environ.__class__ = _ReadEnviron
    real_stat, real_lstat = os.stat, os.lstat
    _SAVED.update(stat=real_stat, lstat=real_lstat)

    def watched(real: Any, kind: str = "stat") -> Any:
        def call(path: Any, *args: Any, **kwargs: Any) -> Any:
            if not rec.busy and isinstance(path, (str, bytes, os.PathLike)):
                rec.busy = True
                try:
                    rec.note(kind, os.fsdecode(path))
                except Exception:  # noqa: BLE001 - recording must never break the import
                    rec.reads[f"{UNRECORDED}:"] = None
                finally:
                    rec.busy = False
            return real(path, *args, **kwargs)
        return call

    os.stat, os.lstat = watched(real_stat), watched(real_lstat)
    real_access, real_readlink = _SAVED["access"], _SAVED["readlink"] = os.access, os.readlink
    os.access = watched(real_access)
    os.readlink = watched(real_readlink, "link")
    import importlib.util

    real_find = _SAVED["find_spec"] = importlib.util._find_spec  # type: ignore[attr-defined]

    def find_spec(name: str, *args: Any, **kwargs: Any) -> Any:  # importlib.util.find_spec raises no audit event
        if isinstance(name, str):
            _LOOKED_FOR.add(name)
        return real_find(name, *args, **kwargs)

    importlib.util._find_spec = find_spec  # type: ignore[attr-defined]


def _unpatch() -> None:
    for environ in (os.environ, getattr(os, "environb", None)):
        if environ is not None and type(environ) is _ReadEnviron:
            environ.__class__ = os._Environ  # type: ignore[attr-defined]
    if _SAVED:
        import importlib.util

        os.stat, os.lstat = _SAVED.pop("stat"), _SAVED.pop("lstat")
        os.access, os.readlink = _SAVED.pop("access"), _SAVED.pop("readlink")
        importlib.util._find_spec = _SAVED.pop("find_spec")  # type: ignore[attr-defined]


def _caller_module() -> str:
    frame = sys._getframe(3)  # _caller_module, _kind_of_listing, _hook, then whoever listed
    return frame.f_globals.get("__name__", "") if frame is not None else ""


def _kind_of_listing() -> str | None:
    """How a listing counts: not at all where the import system made it (it lists every folder of sys.path it
    looks in; what it imports is recorded by module instead), by the distributions in it where importlib.metadata
    made it (it looks every folder of sys.path over for them, the project's too), else by every name in it."""
    caller = _caller_module()
    if caller.startswith(("_frozen_importlib", "importlib._bootstrap")):
        return None
    return "dists" if caller.startswith(("importlib.metadata", "importlib_metadata")) else "dir"


# What the hook reads: files opened, folders listed, imports, and what else reads a file: a program run (its own
# reads are not seen: it is keyed by its file and by every argument that names a file), a library loaded, a
# database opened.
_PROGRAMS = ("subprocess.Popen", "os.posix_spawn", "os.exec", "os.system", "ctypes.dlopen", "sqlite3.connect")
_EVENTS = frozenset(("open", "os.listdir", "os.scandir", "import", *_PROGRAMS))


def _note_program(rec: Recorder, event: str, args: tuple[Any, ...]) -> None:
    import shutil

    import shlex

    program = args[0] if args else None
    if event == "sqlite3.connect":  # a database file by its name, relative to the folder it runs in, or a URI
        if isinstance(program, (str, bytes, os.PathLike)):
            database = os.fsdecode(program)
            if database.startswith("file:"):
                from urllib.parse import unquote, urlsplit

                parts = urlsplit(database)
                database = unquote(parts.path)
                if "mode=memory" in parts.query:
                    database = ""
            if database and database != ":memory:":
                rec.note("file", database)
        return
    if event == "ctypes.dlopen":  # a library by its path; a bare name is looked up where the loader looks
        if isinstance(program, (str, bytes, os.PathLike)) and os.path.sep in os.fsdecode(program):
            rec.note("file", os.fsdecode(program))
        return
    if event == "os.system":  # a shell line: the shell, and every word of it that names a path
        try:
            argv = ["sh", *shlex.split(os.fsdecode(program))] if program is not None else []
        except ValueError:
            rec.reads[f"{UNRECORDED}:"] = None
            return
        program = "sh"
    else:
        argv = list(args[1]) if len(args) > 1 and isinstance(args[1], (list, tuple)) else []
    if isinstance(program, (str, bytes, os.PathLike)):
        found = shutil.which(os.fsdecode(program))
        rec.note("file", found or os.fsdecode(program))
    for arg in argv[1:]:
        if not isinstance(arg, (str, bytes, os.PathLike)):
            continue
        arg = os.fsdecode(arg)
        if os.path.isfile(arg):
            rec.note("file", arg)
        elif os.path.sep in arg:  # a path the program may test for or make: whether it is there
            rec.note("stat", arg)


def _hook(event: str, args: tuple[Any, ...]) -> None:
    rec = _RECORDER
    if rec is None or rec.where is None or rec.busy or event not in _EVENTS:
        return
    rec.busy = True
    try:
        if event == "import":
            if isinstance(args[0], str):
                _LOOKED_FOR.add(args[0])
            return
        if event in _PROGRAMS:
            _note_program(rec, event, args)
            return
        path = args[0] if args else None
        if event == "open":
            mode, flags = args[1], args[2]
            writing = bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)) if mode is None else \
                any(c in str(mode) for c in "wax+")
            if not writing and isinstance(path, (str, bytes, os.PathLike)):
                rec.note("file", os.fsdecode(path))
        elif (kind := _kind_of_listing()) is None:
            return
        elif path is None or isinstance(path, (str, bytes, os.PathLike)):
            rec.note(kind, "." if path is None else os.fsdecode(path) or ".")
        else:  # a folder listed through its descriptor: which one cannot be told
            rec.reads[f"{UNRECORDED}:"] = None
    except Exception:  # noqa: BLE001 - recording must never break the import
        rec.reads[f"{UNRECORDED}:"] = None  # a read that was missed: a key that no later run will find
    finally:
        rec.busy = False
