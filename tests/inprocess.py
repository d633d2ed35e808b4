"""Run the `kgate` command line inside the test process, as `python -m kgate ARGS` would run in a process of its own.

Starting a process costs an interpreter, kgate's imports and, for `check`, the import of Triton: most of a
warm run. In this process all of that is paid once per test session. What a process of its own would give
for free is set up here and taken down afterwards:

- the output: file descriptors 1 and 2 point at files of their own for the run (the compile workers and the
  compilers write there too, as they would to a process's stdout and stderr), `sys.stdout` and `sys.stderr`
  are UTF-8 text over them, strict on stdout as a real one is; the text is read back as `subprocess.run(...,
  text=True)` reads it (newlines translated);
- the working folder, the environment (with `TRITON_INTERPRET` left out), `sys.argv` and `sys.path[0]` (the
  working folder, as `-m` puts it there);
- SIGINT and SIGTERM handlers (kgate installs its own), warning filters, the umask;
- what kgate remembers between calls in one process: every `functools` cache in its modules (tool paths and
  versions, the umask, rule modules), the parse index and the read log;
- the workers' fork server outlives the run, as kgate's own would not: a worker takes the folder, the import
  path, the environment and stderr of the run that starts it (`kgate.compile.pool`), so only what the server
  set up before any worker (its import of Triton, which reads the environment) could come from another run.
  A run whose environment or umask is not the one the server started under stops it first and starts its own,
  as a process of its own would;
- modules the run imported from outside kgate and the installed packages (a project's own) are forgotten.

Exit codes are what the process would have: `main()`'s return, a `SystemExit`'s code (its message on stderr,
code 1, when it is text), 1 with the traceback for an exception. Tests that need a process of their own
(signals, concurrency, hangs, isolation from this process's imports) do not use this.
"""

from __future__ import annotations

import functools
import io
import os
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
import warnings
from pathlib import Path

import kgate

PACKAGE = Path(kgate.__file__).resolve().parent
MAIN = str(PACKAGE / "__main__.py")
# Modules from these folders stay loaded between runs: kgate's own (rules included) and installed packages.
KEPT = tuple({str(PACKAGE), str(PACKAGE.parent / "rules"), sys.prefix, sys.base_prefix, sys.exec_prefix})


class _Hung(BaseException):
    """The run took longer than its timeout (a BaseException: nothing in kgate catches it on the way out)."""


def _alarm(_signum: int, _frame: object) -> None:
    raise _Hung


def run(args: list[str], *, cwd: Path, env: dict[str, str] | None = None,
        timeout: float = 900) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `kgate ARGS` run in `cwd` with `env` added to this process's environment.

    Past `timeout` seconds the run is stopped (SIGALRM) and `subprocess.TimeoutExpired` raised, as
    `subprocess.run` would.
    """
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("an in-process kgate run changes the process's descriptors, folder and signals: "
                           "run it from the main thread (kgate_process runs one beside others)")
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    saved_argv, saved_path = sys.argv, list(sys.path)
    saved_streams = (sys.stdout, sys.stderr)
    saved_handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM)}
    saved_umask = os.umask(0o022)
    os.umask(saved_umask)
    modules = set(sys.modules)
    out_file, err_file = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    saved_fds = os.dup(1), os.dup(2)
    hung = False
    try:
        os.environ.update(env or {})
        os.environ.pop("TRITON_INTERPRET", None)
        if _running_server() and _SERVER_STARTED_UNDER != _conditions():
            _stop_fork_server()  # started under other conditions (or outside a run)
        os.chdir(cwd)
        sys.argv = [MAIN, *args]
        sys.path.insert(0, os.getcwd())
        _forget()
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(out_file.fileno(), 1)
        os.dup2(err_file.fileno(), 2)
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="strict",
                                      write_through=True)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8",
                                      errors="backslashreplace", write_through=True)
        signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            with warnings.catch_warnings():
                code = _main()
        except _Hung:
            hung, code = True, -signal.SIGKILL
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        _note_fork_server()
        os.dup2(saved_fds[0], 1)
        os.dup2(saved_fds[1], 2)
        for fd in saved_fds:
            os.close(fd)
        sys.stdout, sys.stderr = saved_streams
        for signum, handler in saved_handlers.items():
            signal.signal(signum, handler)
        os.umask(saved_umask)
        sys.argv, sys.path[:] = saved_argv, saved_path
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        for name in set(sys.modules) - modules:
            if not _kept(sys.modules.get(name)):
                del sys.modules[name]
        _forget()
    stdout, stderr = _text(out_file), _text(err_file)
    if hung:
        raise subprocess.TimeoutExpired(["kgate", *args], timeout, stdout, stderr)
    return code, stdout, stderr


def _main() -> int:
    from kgate.entry import main

    try:
        return main()
    except _Hung:
        raise
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)
        return 1
    except BaseException:  # noqa: BLE001 - what the interpreter would print, and its exit status
        traceback.print_exc()
        return 1


def _text(file: tempfile._TemporaryFileWrapper) -> str:  # type: ignore[name-defined]
    file.seek(0)
    data = file.read()
    file.close()
    return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


def _kept(module: object) -> bool:
    path = getattr(module, "__file__", None)
    return not path or os.path.abspath(path).startswith(KEPT)


# kgate's module -> the functools caches it defines, found once per module object (a module's functions are
# defined once, at its import; looking through every module's names twice a run cost a few milliseconds).
_CACHES: dict[str, tuple[object, list[functools._lru_cache_wrapper]]] = {}


def _forget() -> None:
    """What kgate keeps in memory between commands of one process: each command starts without it."""
    for name, module in list(sys.modules.items()):
        if not (name == "kgate" or name.startswith("kgate.")) or module is None:
            continue
        known = _CACHES.get(name)
        if known is None or known[0] is not module:
            known = _CACHES[name] = (module, [
                value for value in list(vars(module).values())
                if isinstance(value, functools._lru_cache_wrapper) and getattr(value, "__module__", "") == name])
        for cache in known[1]:
            cache.cache_clear()
    pyindex = sys.modules.get("kgate.collect.pyindex")
    if pyindex is not None:
        pyindex._INDEX = pyindex._Index()
        pyindex._RESOLVED.clear()
    reads = sys.modules.get("kgate.support.reads")
    if reads is not None:
        reads._LOG = None


# The environment and umask the running fork server started under (None: not started by a run).
_SERVER_STARTED_UNDER: tuple[dict[str, str], int] | None = None
_SERVER_PID: int | None = None


def _conditions() -> tuple[dict[str, str], int]:
    """The environment (but pytest's name of the test it runs) and the umask."""
    umask = os.umask(0o022)
    os.umask(umask)
    return {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}, umask


def _running_server() -> int | None:
    from multiprocessing import forkserver

    return forkserver._forkserver._forkserver_pid


def _note_fork_server() -> None:
    """At the end of a run (its environment still in place): a fork server this run started is kept, with
    what it started under."""
    global _SERVER_STARTED_UNDER, _SERVER_PID
    pid = _running_server()
    if pid is not None and pid != _SERVER_PID:
        _SERVER_STARTED_UNDER, _SERVER_PID = _conditions(), pid


def _stop_fork_server() -> None:
    """Stop the compile workers' fork server now, as kgate's exit does, and let the next run start its own."""
    from multiprocessing import forkserver

    server = forkserver._forkserver
    pid = server._forkserver_pid
    if pid is None:
        return
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        server._stop()
    except ChildProcessError:  # reaped already
        server._forkserver_pid = server._forkserver_alive_fd = server._forkserver_address = None
