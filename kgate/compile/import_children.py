"""What the programs a kernel module's import runs read: Python ones, and forked processes, record it themselves.

A module may build its configs by running a script (`subprocess.run([sys.executable, "gen.py"])`) that reads
`config.json`: what the script read decides the kernel as much as what the module read. So every program the
import starts is handed the recorder: its environment carries `KGATE_IMPORT_READS` (where to report, and the
view the names are made in) and puts `boot/sitecustomize.py` first on PYTHONPATH. A Python program loads the
recorder from there before its own code runs, takes both away from its environment again (the program sees the
environment it was given), and writes each read to a report file as it makes it; a process forked during the
import (`os.fork`) goes on recording and writes its reads the same way. When the import ends,
the reports are read back into the import's reads (`Children.merge`).

A read is written before what was read can be used, so what a child read before the import ended is in its report
whether or not it has finished. A variable a child read counts only where it holds what the import's own
environment holds (a value the module set in the child's environment comes from the module, whose reads are
keyed). A Python program the import started that left no report (run with `-I`, `-E` or `-S`, or not yet started
when the import ended) read what no key can hold: the import is not keyable. Any other program (`ldconfig`, `make`,
a shell) is keyed by its own file and by every argument that names a path (`kgate.compile.import_recorder`);
what it reads besides is not seen.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from kgate.compile import import_environ

if TYPE_CHECKING:
    from kgate.compile.import_recorder import Recorder

ENV = "KGATE_IMPORT_READS"
BOOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "boot")
_SHELLS = frozenset(("sh", "bash", "dash", "zsh", "ksh"))
_PYTHON = re.compile(r"^(python|pypy)[\d.]*$")


class Children:
    """Where the processes an import starts report, and which of them must (by token)."""

    def __init__(self, folder: str | None = None) -> None:
        self.folder = folder  # made when the first child starts; given in a child (its own children report there)
        self.expected: dict[str, str] = {}  # token -> the Python program that must leave a report
        self.count = 0

    def token(self) -> str:
        if self.folder is None:
            from kgate.support import scratch

            self.folder = str(scratch.make("kgate-reads-"))
        self.count += 1
        return f"{os.getpid()}-{self.count}"

    def settings(self, rec: Recorder, token: str, pythonpath: str | None) -> str:
        where = rec.where
        assert where is not None and self.folder is not None
        return json.dumps({"folder": self.folder, "token": token, "root": where.root, "roots": list(where.roots),
                           "cwd": where.cwd, "checkout": where.checkout, "skip": list(rec.skip),
                           "pythonpath": pythonpath})

    def expect(self, rec: Recorder, token: str, program: str) -> None:
        if rec.sink is not None:  # in a child: the import's own process checks
            _marker(rec, {"expect": token, "program": program})
        else:
            self.expected[token] = program

    def merge(self, rec: Recorder) -> None:
        """The reports of the processes the import started, read into its reads; the folder removed."""
        folder, self.folder = self.folder, None
        expected, self.expected = dict(self.expected), {}
        if folder is None:
            return
        reported = _guarded(rec, lambda: _reports(rec, folder, expected))
        for token, program in sorted(expected.items()):
            if token not in reported:
                rec.unkeyable(f"{program} ran without reporting what it read")


def _reports(rec: Recorder, folder: str, expected: dict[str, str]) -> set[str]:
    """The reports in `folder` read (then removed): the tokens of the processes that wrote one."""
    from kgate.support import scratch

    reported = set()
    try:
        for name in sorted(os.listdir(folder)):
            reported.add(name.split(".", 1)[0])
            _read_report(rec, os.path.join(folder, name), expected)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        scratch.forget(folder)
    return reported


def _read_report(rec: Recorder, path: str, expected: dict[str, str]) -> None:
    """A child's reads added to the import's (and the programs it started that must report too)."""
    from kgate.compile.import_reads import value

    try:
        with open(path, encoding="utf-8") as handle:  # a line cut short by a kill is the last: read up to it
            lines = [json.loads(line) for line in handle if line.endswith("\n")]
    except (OSError, ValueError):
        rec.unkeyable(f"an unreadable report {os.path.basename(path)}")
        return
    for line in lines:
        if isinstance(line, dict):
            if "expect" in line:
                expected[str(line["expect"])] = str(line.get("program", "a program"))
            continue
        name, held = line
        if name.startswith("env:"):
            variable = name[4:]
            if variable in rec.written or rec.where is None or held != value(name, rec.where):
                continue  # set by the module for its child, or not the import's environment: not an input
        if name in rec.reads and rec.reads[name] != held:
            rec.unkeyable(f"{name} changed while the import read it")
        rec.add(name, held)


def _marker(rec: Recorder, marker: dict[str, Any]) -> None:
    if rec.sink is not None:
        try:
            rec.sink.write(json.dumps(marker) + "\n")
            rec.sink.flush()
        except (OSError, ValueError):
            rec.sink = None


# --------------------------------------------------------------------------- handing the recorder on

def _is_python(word: str) -> bool:
    """Whether a command names a Python interpreter, or a script that one runs (its `#!` line)."""
    found = word if os.sep in word else shutil.which(word)
    if not found or not os.path.isfile(found):
        return False
    if _PYTHON.match(os.path.basename(found)) or _PYTHON.match(os.path.basename(os.path.realpath(found))):
        return True
    try:
        with open(found, "rb") as handle:
            first = handle.readline(256)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


def shell_line(argv: list[str]) -> str | None:
    """The line a command hands to a shell (`sh -c LINE`, `bash -lc LINE`), None where it hands none."""
    if not argv or os.path.basename(argv[0]) not in _SHELLS:
        return None
    for at, word in enumerate(argv[1:-1], 1):
        if not _SHELL_OPTIONS.match(word):
            return None
        if "c" in word:
            return argv[at + 1]
    return None


_SHELL_OPTIONS = re.compile(r"^[-+][a-zA-Z]+$")


def command_words(argv: list[str], shell: bool = False) -> list[str] | None:
    """The words of a command line: a shell line's where it hands one to a shell (`shell`: the whole command is
    one), else its own; None for a shell line that does not split into words."""
    import shlex

    line = " ".join(argv) if shell else shell_line(argv)
    if line is None:
        return list(argv)
    try:
        return shlex.split(line)
    except ValueError:
        return None


def _pythons(argv: list[str], shell: bool = False) -> list[str]:
    """The Python programs a command line runs: itself, or those it runs in turn (a shell line's, a program run
    by `env`, `timeout`, `nice` and their kind)."""
    if argv and not shell and _is_python(argv[0]):
        return [argv[0]]
    words = command_words(argv, shell) or []
    return [w for w in words if not w.startswith("-") and "=" not in w and _is_python(w)]


def runs_python(argv: list[str], program: str) -> bool:
    """Whether a program an import starts is Python or runs Python in turn: a program that reports its reads."""
    return _is_python(program) or bool(_pythons(argv))


def _argv(args: Any) -> list[str]:
    if isinstance(args, (str, bytes, os.PathLike)):
        return [os.fsdecode(args)]
    try:
        return [os.fsdecode(a) for a in args if isinstance(a, (str, bytes, os.PathLike))]
    except TypeError:
        return []


def child_env(rec: Recorder, env: Mapping[Any, Any] | None, argv: list[str], shell: bool = False) -> dict[Any, Any]:
    """The environment a program started by the import gets: `env` (or the import's own), carrying the recorder."""
    base: dict[Any, Any] = dict(env) if env is not None else {os.fsdecode(k): os.fsdecode(v)
                                                                for k, v in import_environ.raw().items()}
    as_bytes = any(isinstance(k, bytes) for k in base)
    pythonpath = base.get(b"PYTHONPATH" if as_bytes else "PYTHONPATH")
    old = os.fsdecode(pythonpath) if pythonpath is not None else None
    token = rec.children.token()
    for program in _pythons(argv, shell):
        rec.children.expect(rec, token, program)
    added = {ENV: rec.children.settings(rec, token, old),
             "PYTHONPATH": BOOT + (os.pathsep + old if old else "")}
    for name, text in added.items():
        base[os.fsencode(name) if as_bytes else name] = os.fsencode(text) if as_bytes else text
    return base


_SAVED: dict[str, Any] = {}


def patch(rec: Recorder) -> None:
    """Every program the import starts gets the recorder: through subprocess, os.system, os.posix_spawn, the
    os.exec functions (os.spawn* among their callers) and multiprocessing's spawn and forkserver starts."""
    import inspect
    import subprocess

    real_init = _SAVED["Popen"] = subprocess.Popen.__init__
    signature = inspect.signature(real_init)

    def popen_init(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            bound = signature.bind(self, *args, **kwargs)
            given, shell = bound.arguments, bool(bound.arguments.get("shell"))
        except TypeError:  # Popen itself says what is wrong with the call
            real_init(self, *args, **kwargs)
            return
        command = _argv(given["args"])
        if given.get("executable") and not shell:  # the program run; args[0] is only its name
            command = [os.fsdecode(given["executable"]), *command[1:]]
        with _within_popen():
            if given.get("env") is None:  # the process's own environment, putenv's included: given for the call
                with _process_env(rec, command, shell):
                    real_init(self, *args, **kwargs)
                return
            given["env"] = _handed_on(rec, given["env"], command, shell)
            real_init(*bound.args, **bound.kwargs)

    subprocess.Popen.__init__ = popen_init  # type: ignore[method-assign]
    real_system = _SAVED["system"] = os.system

    def system(command: Any) -> int:
        line = os.fsdecode(command) if isinstance(command, (str, bytes, os.PathLike)) else ""
        with _process_env(rec, ["sh", "-c", line]):
            return int(real_system(command))

    os.system = system
    real_execv = _SAVED["execv"] = os.execv

    def execv(path: Any, argv: Any) -> None:
        with _process_env(rec, [os.fsdecode(path), *_argv(argv)[1:]]):
            real_execv(path, argv)

    os.execv = execv  # type: ignore[assignment]
    for name in ("posix_spawn", "posix_spawnp", "execve"):
        real = getattr(os, name, None)
        if real is not None:
            _SAVED[name] = real
            setattr(os, name, _with_env(rec, real))
    import multiprocessing.util

    real_spawnv = _SAVED["spawnv_passfds"] = multiprocessing.util.spawnv_passfds

    def spawnv_passfds(path: Any, args: Any, passfds: Any) -> int:  # multiprocessing's spawn and forkserver
        with _process_env(rec, [os.fsdecode(path), *_argv(args)[1:]]):
            return int(real_spawnv(path, args, passfds))

    multiprocessing.util.spawnv_passfds = spawnv_passfds


@contextlib.contextmanager
def _process_env(rec: Recorder, command: list[str], shell: bool = False) -> Iterator[None]:
    """The recorder in this process's own environment (what a program started without an environment of its own
    gets) for the length of a call: as os.putenv sets it, so that os.environ is left as the module made it."""
    data = import_environ.raw()
    now = {name: os.fsdecode(data[os.fsencode(name)]) for name in (ENV, "PYTHONPATH") if os.fsencode(name) in data}
    env = _handed_on(rec, {k: v for k, v in now.items() if k != ENV}, command, shell)
    for name, text in env.items():
        os.putenv(name, text)
    try:
        yield
    finally:
        for name in env:
            os.putenv(name, now[name]) if name in now else os.unsetenv(name)


_POPEN = threading.local()


@contextlib.contextmanager
def _within_popen() -> Iterator[None]:
    """Popen hands the recorder on itself; the os.posix_spawn it may start the program with (Python 3.13) is its own."""
    depth = getattr(_POPEN, "depth", 0)
    _POPEN.depth = depth + 1
    try:
        yield
    finally:
        _POPEN.depth = depth


def _with_env(rec: Recorder, real: Callable[..., Any]) -> Callable[..., Any]:
    """os.posix_spawn, os.posix_spawnp or os.execve, whose environment is their third argument (None, from Python
    3.13 on: the process's own environment, putenv's included)."""
    def call(path: Any, argv: Any, env: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(_POPEN, "depth", 0):
            return real(path, argv, env, *args, **kwargs)
        command = [os.fsdecode(path), *_argv(argv)[1:]]
        if env is None:
            with _process_env(rec, command):
                return real(path, argv, env, *args, **kwargs)
        return real(path, argv, _handed_on(rec, env, command), *args, **kwargs)
    return call


def _guarded(rec: Recorder, make: Callable[[], Any]) -> Any:
    """What kgate itself reads to hand the recorder on is not the module's read."""
    busy, rec.busy = rec.busy, True
    try:
        return make()
    finally:
        rec.busy = busy


def _handed_on(rec: Recorder, env: Mapping[Any, Any] | None, command: list[str], shell: bool = False) -> Any:
    """`child_env`, or where it cannot be made, `env` as given: the program runs as the module asked (the import
    is then not keyable)."""
    try:
        return _guarded(rec, lambda: child_env(rec, env, command, shell))
    except Exception:  # noqa: BLE001 - recording must never change what the module runs
        rec.unkeyable("a program started without the recorder")
        return env


def unpatch() -> None:
    import subprocess

    if "Popen" in _SAVED:
        subprocess.Popen.__init__ = _SAVED.pop("Popen")  # type: ignore[method-assign]
    for name in ("system", "execv", "posix_spawn", "posix_spawnp", "execve"):
        if name in _SAVED:
            setattr(os, name, _SAVED.pop(name))
    if "spawnv_passfds" in _SAVED:
        import multiprocessing.util

        multiprocessing.util.spawnv_passfds = _SAVED.pop("spawnv_passfds")


# --------------------------------------------------------------------------- forked processes

_FORK: dict[str, Any] = {}


def watch_forks(current: Callable[[], Recorder | None]) -> None:
    """A process forked while an import records goes on recording into a report of its own (once per process)."""
    def before() -> None:
        rec = current()
        if rec is not None and rec.where is not None:
            _FORK["token"] = _guarded(rec, rec.children.token)

    def after_in_child() -> None:
        rec, token = current(), _FORK.pop("token", None)
        if rec is None or rec.where is None or token is None or rec.children.folder is None:
            return
        _open_report(rec, rec.children.folder, token)
        rec.children = Children(rec.children.folder)

    def after_in_parent() -> None:
        _FORK.pop("token", None)

    os.register_at_fork(before=before, after_in_child=after_in_child, after_in_parent=after_in_parent)


def _open_report(rec: Recorder, folder: str, token: str) -> None:
    try:
        rec.sink = open(os.path.join(folder, f"{token}.{os.getpid()}.jsonl"), "a", encoding="utf-8")  # noqa: SIM115
    except OSError:
        rec.sink = None


# --------------------------------------------------------------------------- in a Python program an import ran

def start_from_env() -> None:
    """Record this program's reads for the import that started it (`KGATE_IMPORT_READS`), from now until it
    exits; the environment and sys.path are given back as the program was given them."""
    text = os.environ.pop(ENV, None)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != BOOT]
    if not text:
        return
    settings = json.loads(text)
    if settings.get("pythonpath") is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = settings["pythonpath"]
    _record_child(settings)


def _record_child(settings: dict[str, Any]) -> None:
    import atexit

    from kgate.compile import import_environ, import_recorder
    from kgate.compile.import_reads import View

    kgate = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    prefixes = {*settings["skip"], *(os.path.join(p, "") for p in (os.path.dirname(os.path.abspath(os.__file__)), kgate))}
    rec = import_recorder.Recorder(tuple(sorted(prefixes)))
    rec.children = Children(settings["folder"])
    _open_report(rec, settings["folder"], settings["token"])
    if rec.sink is None:
        return
    checkout = settings.get("checkout")
    rec.where = View(settings["root"], tuple(settings["roots"]), import_environ.RealEnv(), settings["cwd"],
                     (checkout[0], checkout[1]) if checkout else None)
    rec.depth = 1
    before, path = set(sys.modules), list(sys.path)
    import_recorder.start_in_child(rec)
    atexit.register(import_recorder.note_imports, rec, before, path)  # extension modules: no file was opened for them
