"""How kgate stops when it is asked to: SIGINT (Ctrl-C) and SIGTERM (a cancelled CI job, `kill`).

The `kgate` process owns these two signals, here and nowhere else. The first one raises `Interrupted`
(a KeyboardInterrupt, so that nothing that catches `Exception` can take it for an error of its own) in the
main thread; on its way out every `with` and `finally` runs: the compile workers and the compilers they
started are killed, temporary files removed, and a file being written (the baseline, a cache record, a
report) is left as it was or whole, never in part. kgate then prints one line and exits with 128 + the
signal's number, as a shell reports a command a signal stopped: 130 for SIGINT, 143 for SIGTERM.

- The handlers are installed whatever kgate inherited: a kgate started from a script's background job
  (`kgate check &` without job control) begins with SIGINT ignored, and would otherwise run to the end of a
  long compile with the user's `kill -INT` or Ctrl-C lost.
- A second signal while kgate is stopping stops it at once (same exit code); the compile workers still
  end within a second, since each watches kgate's pid.
- Helper processes never act on an interrupt themselves. The workers' fork server is started with SIGINT
  blocked and ignores it from its first instruction (`helper_ignores_interrupts`), and the workers it forks
  inherit that; they are in process groups of their own, so Ctrl-C at a terminal reaches only kgate, which
  kills them. A command kgate runs for the user (`kgate capture -- CMD`) is the exception: it shares the
  terminal, gets Ctrl-C as kgate does, and kgate waits for it to end (see `kgate.support.tools.run_user_command`).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

SIGNALS = (signal.SIGINT, signal.SIGTERM)
_NAMES: dict[int, str] = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated"}

_received: list[int] = []  # the signals this process received, in order
_reported = False
_done = False  # the command has returned (or stopped): only the interpreter's exit is left


class Interrupted(KeyboardInterrupt):
    """A SIGINT or SIGTERM reached kgate: it stops, cleaning up on the way out."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def install() -> None:
    """Make SIGINT and SIGTERM stop this process through `Interrupted` (the `kgate` command calls it first)."""
    for signum in SIGNALS:
        signal.signal(signum, _on_signal)


def _on_signal(signum: int, _frame: object) -> None:
    _received.append(signum)
    if len(_received) == 1 and not _done:
        raise Interrupted(signum)
    # Asked again while stopping, or once the command is done and kgate only exits: stop now (the workers see
    # kgate gone and end themselves).
    for stream in (sys.stdout, sys.stderr):  # what was printed still reaches its reader (os._exit drops buffers)
        try:
            stream.flush()
        except (OSError, RuntimeError, ValueError):  # closed, or interrupted mid-write (a reentrant flush)
            pass
    report(_received[0])
    os._exit(exit_code(_received[0]))


def received() -> int | None:
    """The first SIGINT or SIGTERM this process received, or None."""
    return _received[0] if _received else None


def signal_of(exc: BaseException) -> int:
    """The signal behind an interrupt: a plain KeyboardInterrupt (no handler of kgate's installed) is SIGINT."""
    return exc.signum if isinstance(exc, Interrupted) else signal.SIGINT


def exit_code(signum: int) -> int:
    return 128 + signum


def report(signum: int) -> int:
    """Say once that kgate stopped, and return its exit code."""
    global _reported
    if not _reported:
        _reported = True
        try:
            print(f"kgate: {_NAMES.get(signum, 'stopped')}", file=sys.stderr, flush=True)
        except (OSError, ValueError):  # stderr closed or gone with the terminal: the exit code still says it
            pass
    return exit_code(signum)


def run(main: Callable[[], int]) -> int:
    """Run the `kgate` command with the handlers installed; an interrupt becomes one line and 128 + N.

    An interrupt that something on the way swallowed (a library's `except BaseException`) still decides
    the exit code: kgate was asked to stop, and a result it reports afterwards is not a pass.
    """
    global _done, _reported
    _received.clear()  # a run of its own (the command runs once per process; an in-process caller may run it again)
    _reported = _done = False
    try:
        try:
            install()  # inside: a signal that lands between its two handlers is handled here too
            code = main()
        finally:
            _done = True  # the command's own clean-up has run: an interrupt from here on need not unwind anything
    except KeyboardInterrupt as exc:
        return report(received() or signal_of(exc))
    except Exception as exc:
        inner = _interrupt_within(exc)
        if inner is None:
            raise
        return report(received() or signal_of(inner))
    if received() is not None:
        return report(received() or signal.SIGINT)
    return code


def _interrupt_within(exc: BaseException) -> BaseException | None:
    """The interrupt an exception was raised from, if any: Python wraps what some hooks raise (an interrupt that
    lands in a class's `__set_name__` while a module imports is a RuntimeError whose cause is the interrupt)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


@contextmanager
def deferred() -> Iterator[None]:
    """Hold SIGINT back in this thread for a moment; one that arrives meanwhile is handled at the end.

    Used around the start of a helper process: it inherits the blocked signal, and `helper_ignores_interrupts`
    turns that into ignoring it, with no moment in between where a Ctrl-C would stop it with a traceback.
    """
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def helper_ignores_interrupts() -> None:
    """In a helper process started under `deferred`: ignore SIGINT from now on (kgate, its parent, owns it)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
