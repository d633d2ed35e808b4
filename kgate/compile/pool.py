"""A small pool of compile worker processes with per-task timeouts.

Why not concurrent.futures: a compiler that hangs must be killed, and a
worker that dies (a segfaulting compiler takes the process with it) must be
replaced without losing the other tasks. Each task runs in a worker process;
a task past its deadline has its worker killed and reported as timed out.

Workers fork from one fork server, which a project's module can stop while a
worker imports it (a module that signals its parent at import). Workers then
run on without it: a worker has ended when its pipe closes or its process is
gone, not when the server's report of it stops; a new worker starts a new
server.

A worker takes what it runs under from kgate as it is when the worker starts, not from the fork server:
multiprocessing hands over the working folder and the import path, and `_Parent` the environment and stderr.
The server is only where Triton is already imported: a worker is the same whichever run of kgate in this
process started it.

A worker's stderr is a file of its own, which kgate copies to its stderr as each task ends: a compiler says some
things only there (MLIR's diagnostics, `file:line:col: error: ...`, before Triton raises "error encountered during
parsing"; LLVM's "Cannot select" for an instruction the target lacks, as it aborts the process), and a failed task's
outcome quotes them.
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import signal
import sys
import sysconfig
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import replace
from multiprocessing.connection import Connection, wait
from typing import Any

from kgate.compile import worker_stderr
from kgate.compile.protocol import Outcome, Task, UnreadableAnswer, receive
from kgate.core.errors import ToolchainError
from kgate.support import interrupts, tools

# Tries to start a worker, each after a longer pause: a fork server on its way out refuses the first.
START_ATTEMPTS = 5
# The most of a worker's stderr read for the stack it dumps when asked (a dump is a few kilobytes per thread).
_DUMP_BYTES = 1 << 20
# How often a worker whose fork server has ended is looked at, in seconds (nothing reports its end).
ORPHAN_POLL = 0.5
class _Parent:
    """What a worker runs under besides its folder and import path (which multiprocessing hands over), taken from
    kgate when the worker starts: kgate's environment with the pool's changes, and its stderr (a file
    descriptor, handed over as multiprocessing hands over the worker's pipe)."""

    def __init__(self, env: dict[str, str | None], stderr: int = 2) -> None:
        self.environ = dict(os.environ)
        for key, value in env.items():
            if value is None:
                self.environ.pop(key, None)
            else:
                self.environ[key] = value
        self.stderr: Any = stderr

    def __reduce__(self) -> tuple[Any, ...]:
        from multiprocessing import reduction

        return _Parent._rebuild, (self.environ, reduction.DupFd(self.stderr))

    @staticmethod
    def _rebuild(environ: dict[str, str], stderr: Any) -> _Parent:
        parent = _Parent.__new__(_Parent)
        parent.environ, parent.stderr = environ, stderr.detach()
        return parent

    def enter(self) -> None:
        """Take these in the worker (before anything of the project runs)."""
        try:
            os.dup2(self.stderr, 2)
            os.close(self.stderr)
        except OSError:
            pass
        os.environ.clear()
        os.environ.update(self.environ)


def _serve(conn: Connection, parent: _Parent, kgate_pid: int, importing: Any = None) -> None:
    import importlib
    import resource

    # A process group of its own, so that a timeout kills the compilers it started too, and so that Ctrl-C at a
    # terminal reaches kgate alone: kgate owns SIGINT (kgate.support.interrupts) and kills its workers when it stops.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        os.setpgid(0, 0)
    except OSError:
        pass
    threading.Thread(target=_watch_kgate, args=(kgate_pid,), daemon=True).start()
    parent.enter()
    # A project's module may start processes with multiprocessing as it is imported, as it may in any program:
    # that the worker is a daemon of kgate's is kgate's business (it kills its workers itself), not the module's.
    multiprocessing.current_process()._config["daemon"] = False  # type: ignore[attr-defined]
    _stdout_to_stderr()
    _dump_stack_on_request()
    from kgate.compile import import_recorder, worker_imports

    worker_imports.IMPORTING = importing  # where kgate reads whether a task stopped in its import
    from kgate.compile.cache import CacheWriteError
    from kgate.core.errors import KgateError
    from kgate.support import reads

    preloaded = set(sys.modules)  # what the fork server imported: kgate, Triton; the rest is the project's
    # A project's module may fork at import (code that starts a background process with os.fork() and lets
    # the child go on): the child finishes the task as a copy of this worker, and must neither answer for it
    # (its answer would be taken for the next task's) nor take the next task from the pipe.
    worker = os.getpid()
    triton_cache = os.environ.get("TRITON_CACHE_DIR")
    imported = reads.Log([os.path.dirname(triton_cache)] if triton_cache else [])
    recorder = import_recorder.recorder([os.path.dirname(triton_cache)] if triton_cache else [])
    while True:
        try:
            task = conn.recv()
        except EOFError:
            return
        if not isinstance(task, Task):  # None: the pool is done with this worker
            return
        started = time.perf_counter()
        module, func = task.function
        try:
            outcome = Outcome(True, getattr(importlib.import_module(module), func)(task.payload), 0.0)
        except CacheWriteError as exc:
            outcome = Outcome(False, exc.reason, 0.0, cache_unwritable=True)
        except KgateError as exc:
            outcome = Outcome(False, str(exc), 0.0, where=getattr(exc, "where", None))
        except Exception:  # noqa: BLE001 - reported to the main process as a bug
            outcome = Outcome(False, traceback.format_exc(), 0.0, user_error=False)
        if os.getpid() != worker:
            os._exit(0)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        # Every module this worker has imported so far (an earlier task's import serves this one too).
        imported.modules(preloaded)
        try:
            conn.send(replace(outcome, seconds=time.perf_counter() - started, max_rss_kb=rss,
                              imported=dict(imported.files), reads=dict(recorder.reads)))
        except (BrokenPipeError, OSError):
            return


def _stdout_to_stderr() -> None:
    """Send what the project's modules print (at import, in a set-up hook) to stderr, never to kgate's stdout:
    stdout carries the report (`--format json`, `sarif`, `github`), which a stray line would make unreadable.
    Done on the file descriptor, so that compilers and C extensions the worker runs are covered too."""
    try:
        sys.stdout.flush()
        os.dup2(2, 1)
    except (OSError, ValueError, AttributeError):
        pass


def _dump_stack_on_request() -> None:
    """Write the worker's stacks to its stderr when kgate sends SIGUSR1 (`_Worker.stack`): where a task that ran
    past its deadline was, before the worker is killed."""
    import faulthandler

    try:
        faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    except (AttributeError, OSError, RuntimeError, ValueError):
        pass


def _watch_kgate(pid: int) -> None:
    """Stop this worker, and the compilers it started, once kgate itself is gone.

    A kgate killed with SIGKILL (or a CI job cancelled) cannot stop its workers; without this, a worker
    compiling a hung kernel would outlive it, with its ptxas, until the compiler gave up. kgate is not
    the worker's parent (the fork server is, and the worker keeps that one alive), so it is watched by pid.
    """
    while tools.alive(pid):
        time.sleep(0.5)
    if os.getpgid(0) == os.getpid():  # our own group: the compilers are in it, nothing else is
        os.killpg(0, signal.SIGKILL)
    os._exit(1)


def _start(ctx: Any, env: dict[str, str | None], stderr: int, triton: bool = True,
           importing: Any = None) -> tuple[Any, Connection]:
    """A worker process and kgate's end of its pipe.

    multiprocessing starts a new fork server when it finds the old one gone, but a request that meets a
    server still on its way out fails (EOFError, a refused connection): that is tried again after a pause.
    """
    problem: BaseException | None = None
    for attempt in range(START_ATTEMPTS):
        conn, child = ctx.Pipe()
        process = ctx.Process(target=_serve, args=(child, _Parent(env, stderr), os.getpid(), importing), daemon=True,
                              name=WORKER_NAME)
        try:
            start_server(triton)  # a server that has ended is started again here, not by multiprocessing
            process.start()
        except (EOFError, OSError) as exc:
            conn.close()
            child.close()
            problem = exc
            time.sleep(0.1 * (attempt + 1))
            continue
        child.close()
        return process, conn
    raise ToolchainError(f"cannot start a compile worker: the workers' fork server did not answer "
                         f"({type(problem).__name__}: {problem})")


class _Worker:
    def __init__(self, ctx: Any, env: dict[str, str | None], triton: bool = True) -> None:
        # The worker's stderr (it writes; kgate reads at its own offset); closed with the worker.
        self.log = tempfile.TemporaryFile()  # noqa: SIM115
        self.logged = 0
        self.tail = ""
        # Set by the worker while it imports a project's module (its set-up hook first): what a task stopped past
        # its deadline was doing where the worker dumps no stack (a module that took SIGUSR1 for its own).
        self.importing = ctx.RawValue("b", 0)
        self.process, self.conn = _start(ctx, env, self.log.fileno(), triton, self.importing)
        self.task: int | None = None
        self.deadline = 0.0
        self.started = 0.0
        # Its fork server has ended: the sentinel is closed for good and says nothing about the worker.
        self.orphaned = False
        # It was asked for its stack (`stack`): what it writes from then on is its dump, which is not shown.
        self.asked = False

    def ended(self, sentinel_ready: bool) -> bool:
        """Whether the worker process has ended; `sentinel_ready`: its fork server's report is readable."""
        if self.orphaned:
            return not tools.alive(self.process.pid or 0)
        if not sentinel_ready:
            return False
        if tools.alive(self.process.pid or 0):  # the server, not the worker, has gone
            self.orphaned = True
            return False
        return True

    def forward(self, echo: bool = True) -> None:
        """Copy to kgate's stderr what the worker wrote to its own since the last copy; keep its task's last lines.
        `echo=False`: keep them only (the stack a stopped worker dumps is read, never shown)."""
        while not self.log.closed and (chunk := os.pread(self.log.fileno(), 1 << 16, self.logged)):
            self.logged += len(chunk)
            self.tail = (self.tail + chunk.decode("utf-8", "replace"))[-16384:]
            if not echo:
                continue
            try:
                sys.stderr.flush()
                os.write(2, chunk)
            except OSError:
                pass

    def end_report(self) -> str:
        """What the task's outcome says: the exit status, where the fork server can still tell it, and the last
        line the worker wrote, where it wrote one (what a compiler that aborted it said)."""
        status = ""
        if not self.orphaned:
            self.process.join(timeout=2)  # its pipe may close a moment before the server reports its end
            if self.process.exitcode is not None:
                status = f" (exit status {self.process.exitcode})"
        self.forward()
        said = worker_stderr.last_words(self.tail)
        return (f"the compile worker died{status} while compiling this kernel"
                + (f"; its last words: {said}" if said else ""))

    def stack(self) -> tuple[str, int, str, bool] | None:
        """Where the worker is now (file, line, function: `worker_stderr.stopped_at`), asked of it by SIGUSR1 and
        read from the stack it dumps to its stderr within half a second; None where it does not answer."""
        pid, ask = self.process.pid, getattr(signal, "SIGUSR1", None)
        if pid is None or ask is None or self.orphaned and not tools.alive(pid):
            return None
        self.forward()  # what it wrote before is shown as ever
        before = self.logged  # the dump is read from here in the worker's stderr file, not from the tail kept:
        # a module that wrote more than the tail holds would leave none of the dump past its old length
        try:
            os.kill(pid, ask)
        except (ProcessLookupError, PermissionError):
            return None
        self.asked = True
        give_up = time.perf_counter() + 0.5
        while time.perf_counter() < give_up:
            self.forward(echo=False)
            if worker_stderr.DUMPED in self._written_since(before) and self.tail.endswith("\n"):
                time.sleep(0.05)  # the rest of the dump (every thread's stack) arrives in the same moment
                self.forward(echo=False)
                break
            time.sleep(0.02)
        return worker_stderr.stopped_at(self._written_since(before), _LIBRARIES)

    def _written_since(self, offset: int) -> str:
        """What the worker wrote to its stderr from `offset` on (its first `_DUMP_BYTES`: a module that goes on
        writing as it waits is not read without end)."""
        try:
            return os.pread(self.log.fileno(), _DUMP_BYTES, offset).decode("utf-8", "replace")
        except (OSError, ValueError):
            return ""

    def kill(self) -> None:
        """Kill the worker and every compiler it started."""
        pid = self.process.pid
        if pid is not None:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if self.process.is_alive():
            self.process.kill()
        self.process.join(timeout=5)
        self.conn.close()
        self.forward(echo=not self.asked)  # the rest of a stack it was asked for is read, never shown
        self.log.close()


def timed_out(task: str, timeout: float, where: tuple[str, int, str, bool] | None, importing: bool = False) -> str:
    """What a task stopped at its deadline says: an import that never ended (the import task's, or the import a
    compile task begins with: `importing`, as the worker said, or the stack it dumped), told apart from a long
    compile, with the project's line the worker was at."""
    at = f"; it was at {where[0]}:{where[1]}, in {where[2]}" if where is not None else ""
    if task.endswith(".expand") or importing or (where is not None and where[3]):
        return (f"importing the kernel's module did not finish within {timeout:g} s, and was stopped{at}: an import "
                f"that waits for a GPU, a server, a lock or input never ends offline (make the wait conditional, or "
                f"give the module a set-up hook); raise `timeout` in the configuration if the import is only slow")
    return (f"compilation timed out after {timeout:g} s (the compiler was stopped{at}; raise `timeout` in the "
            f"configuration if it is expected)")


def with_diagnostics(outcome: Outcome, said: str) -> Outcome:
    """A failed task's outcome with what the compiler printed of its failure (`kgate.compile.worker_stderr`)."""
    if outcome.ok or not outcome.user_error:
        return outcome
    told = worker_stderr.diagnosed(outcome.error, said)
    if told is None:
        return outcome
    value, where = told
    return replace(outcome, value=value, where=outcome.where or where)


# Where the standard library and installed packages live: a frame there is not where a stopped task's wait began.
_LIBRARIES = tuple(dict.fromkeys(os.path.join(folder, "") for name, folder in sysconfig.get_paths().items()
                                  if name in ("stdlib", "platstdlib", "purelib", "platlib") and folder))

PRELOAD = ["kgate.compile.preload"]
# The server of a run that compiles no Triton or CuTe DSL kernel: kgate's CUDA compile path without Triton, and the
# facts stage its workers read each compiled file with (it arrives pickled with the task: imported here by name).
CUDA_PRELOAD = ["kgate.compile.preload_cuda", "kgate.facts.run"]
# The name of every worker process: the fork server starts a process of this name without the program's main module
# (kgate.compile.preload), which a worker never uses and multiprocessing would otherwise run again in it.
WORKER_NAME = "kgate-compile-worker"


def start_server(triton: bool = True) -> None:
    """Start the workers' fork server (if it is not running), when a worker is first needed: a run that finds
    everything in its cache starts none, and pays neither for the server's import of Triton nor for its hash of
    Triton's installation (about a second of CPU). `triton=False` (a run whose workers compile CUDA sources alone):
    a server started now imports kgate's CUDA compile path without Triton (`CUDA_PRELOAD`), which a running server
    of either kind serves; one that a later pool needs Triton from is stopped and started again with it (its workers
    forked before go on without it).

    It starts with SIGINT held back and ignores it from the first line of its preload: a Ctrl-C while it
    imports Triton would otherwise stop it with a traceback of its own on kgate's terminal.
    """
    from multiprocessing import forkserver

    global _SERVER_TRITON
    with interrupts.deferred():
        if triton and _SERVER_TRITON is False and _server_pid() is not None:
            _stop_server()  # it lacks Triton: a new one imports it
        multiprocessing.get_context("forkserver").set_forkserver_preload(PRELOAD if triton else CUDA_PRELOAD)
        before = _server_pid()
        forkserver.ensure_running()
        if _server_pid() != before:
            _SERVER_TRITON = triton
    global _STOP_REGISTERED
    if not _STOP_REGISTERED:
        _STOP_REGISTERED = True
        atexit.register(_stop_server)


_STOP_REGISTERED = False
# Whether the fork server `start_server` started last imported Triton (PRELOAD) or not (CUDA_PRELOAD); None: none.
_SERVER_TRITON: bool | None = None


def _stop_server() -> None:
    """At kgate's exit: end the fork server now. It would end by itself once it sees kgate gone, but only after
    its import of Triton, seconds away when kgate stopped early (an interrupt, a configuration error), and
    meanwhile it holds kgate's stdout and stderr open for whoever reads them."""
    from multiprocessing import forkserver

    pid = _server_pid()
    if pid:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
        # Closes kgate's end of its pipe, reaps it and forgets it: the next start is a new server.
        stop = getattr(forkserver._forkserver, "_stop", None)
        try:
            if stop is not None:
                stop()
            else:
                os.waitpid(pid, 0)
        except OSError:
            pass


def _server_pid() -> int | None:
    """The pid of the fork server multiprocessing knows of (None: none started, or stopped since)."""
    from multiprocessing import forkserver

    return getattr(forkserver._forkserver, "_forkserver_pid", None)


class Pool:
    """Run tasks over `size` worker processes; results arrive through a callback."""

    def __init__(self, size: int, env: dict[str, str | None] | None = None, *, triton: bool = True) -> None:
        """`triton=False`: the tasks compile CUDA sources alone (`start_server`)."""
        self.size = max(1, size)
        self.env = env or {}
        self.triton = triton
        # Workers fork from a server that has imported Triton once (not from this process, which may
        # hold threads, and not spawned afresh, which would import Triton in every worker).
        self.ctx = multiprocessing.get_context("forkserver")
        self.ctx.set_forkserver_preload(PRELOAD if triton else CUDA_PRELOAD)
        self.workers: list[_Worker] = []
        self.peak_rss_kb: dict[int, int] = {}

    def __enter__(self) -> Pool:  # noqa: PYI034 - not subclassed
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the workers. They are idle (every result is in), so nothing is lost by not waiting
        for their interpreters to tear down."""
        for worker in self.workers:
            worker.kill()
        self.workers = []

    def run(self, tasks: Sequence[Task], timeout: float, on_done: Callable[[int, Outcome], None]) -> None:
        """Run every task; call on_done(index, outcome) as each finishes, in completion order."""
        pending = list(range(len(tasks)))
        pending.reverse()
        wanted = min(self.size, len(tasks))
        while len(self.workers) < wanted:
            self.workers.append(_Worker(self.ctx, self.env, self.triton))
        busy: dict[int, _Worker] = {}
        while pending or busy:
            for worker in self.workers:
                if worker.task is None and pending:
                    next_task = pending.pop()
                    worker.forward()
                    worker.tail = ""  # the last words a death quotes are this task's
                    worker.task = next_task
                    worker.started = time.perf_counter()
                    worker.deadline = worker.started + timeout
                    try:
                        worker.conn.send(tasks[next_task])
                    except (BrokenPipeError, OSError):
                        pass  # found dead below
                    busy[id(worker)] = worker
            now = time.perf_counter()
            wait_for = max(0.0, min((w.deadline for w in busy.values()), default=now) - now)
            if any(w.orphaned for w in busy.values()):
                wait_for = min(wait_for, ORPHAN_POLL)
            ready = wait([w.conn for w in busy.values()]
                         + [w.process.sentinel for w in busy.values() if not w.orphaned], timeout=wait_for + 0.01)
            for worker in list(busy.values()):
                index = worker.task
                assert index is not None
                outcome: Outcome | None = None
                closed = False  # the worker's end of the pipe: only its end closes it
                if worker.conn in ready:
                    try:
                        outcome = receive(worker.conn)
                        self.peak_rss_kb[worker.process.pid or 0] = outcome.max_rss_kb
                    except (EOFError, OSError):
                        closed = True
                    except UnreadableAnswer as exc:
                        outcome = Outcome(False, f"the compile worker answered {exc} while compiling this kernel "
                                                 "(bytes something it ran wrote to its pipe): it was stopped",
                                          time.perf_counter() - worker.started, transient=True)
                        self._replace(worker)
                sentinel_ready = not worker.orphaned and worker.process.sentinel in ready
                if outcome is None and (worker.ended(sentinel_ready) or closed):
                    outcome = Outcome(False, worker.end_report(), time.perf_counter() - worker.started, transient=True)
                    self._replace(worker)
                elif outcome is None and time.perf_counter() >= worker.deadline:
                    outcome = Outcome(False, timed_out(tasks[index].name, timeout, worker.stack(),
                                                       bool(worker.importing.value)),
                                      time.perf_counter() - worker.started, transient=True)
                    self._replace(worker)
                if outcome is not None:
                    worker.forward()
                    outcome = with_diagnostics(outcome, worker.tail)
                    del busy[id(worker)]
                    worker.task = None
                    on_done(index, outcome)

    def _replace(self, worker: _Worker) -> None:
        worker.kill()
        position = self.workers.index(worker)
        self.workers[position] = _Worker(self.ctx, self.env, self.triton)

