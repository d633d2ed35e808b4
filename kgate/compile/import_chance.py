"""What an import reads that no key can hold: the clock, random numbers, the process's id and the machine's load.

A module that decides its configs by the time (`time.time()`), by random numbers (`random.choice`, `uuid.uuid4()`,
`os.urandom`) or by how long something took reads an input no later run can look up again. Its records are kept
all the same (the variant the first run compiled stays, as docs/performance.md says), and the run says so: each
such read the project's own code makes, directly or through the standard library, is an `unkeyed:` read
(`kgate.compile.import_reads.UNKEYED`), named in the run's notices and, in `kgate diff`, held by that diff's side
alone, so neither side is served a record made before the diff or by the other side. `random` seeded by the project
with a value of its own is no such input: what it draws afterwards is the seed's.
"""

from __future__ import annotations

import importlib
import os
import random
import sys
import time
from types import FrameType
from typing import TYPE_CHECKING, Any

from kgate.compile.import_reads import UNKEYED, value

if TYPE_CHECKING:
    from kgate.compile.import_recorder import Recorder

CLOCK, RANDOM, PROCESS, LOAD = "the clock", "random numbers", "the process's id", "the machine's load"
_CLOCKS = ("time", "time_ns", "monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns", "process_time",
           "process_time_ns", "thread_time", "thread_time_ns", "clock_gettime", "clock_gettime_ns")
# What else differs from one run to the next, by the module that reads it: the process (its id, its parent's, the
# time it and its children used), the machine's load, random bytes the kernel hands out, and what `random` draws
# from such bytes (`random.SystemRandom` and so `secrets`, which call `random._urandom`), or the clock (`uuid1`).
_PER_RUN: tuple[tuple[str, str, str], ...] = (
    ("os", "getpid", PROCESS), ("os", "getppid", PROCESS), ("os", "times", CLOCK), ("os", "getloadavg", LOAD),
    ("os", "getrandom", RANDOM), ("random", "_urandom", RANDOM), ("resource", "getrusage", CLOCK),
    ("uuid", "uuid1", CLOCK))
# The time functions that read the clock when they are given no time of their own (their last argument).
_CLOCK_BY_DEFAULT = {"localtime": 0, "gmtime": 0, "ctime": 0, "asctime": 0, "strftime": 1}
_SAVED: dict[tuple[Any, str], Any] = {}
_SEEDED: list[bool] = [False]  # random's shared generator seeded by the project (with a value) in this import


def patch(rec: Recorder) -> None:
    """Watch the clock and the random numbers for the length of an import."""
    _SEEDED[0] = False
    for name in _CLOCKS:
        _wrap(rec, time, name, CLOCK)
    for name, given in _CLOCK_BY_DEFAULT.items():
        _wrap(rec, time, name, CLOCK, unless_given=given)
    _wrap(rec, os, "urandom", RANDOM)
    for module, name, what in _PER_RUN:
        try:
            owner = importlib.import_module(module)  # imported here, so that what the project imports is the wrapper
        except ImportError:
            continue
        _wrap(rec, owner, name, what)
    shared = getattr(random, "_inst", None)
    # A generator of the project's own made without a seed (`random.Random()`), or seeded again without one, is
    # seeded from random bytes: the method every instance seeds with.
    real_method = _SAVED[(random.Random, "seed")] = random.Random.seed

    def seed_method(self: random.Random, a: Any = None, *args: Any, **kwargs: Any) -> Any:
        if a is None and self is not shared:
            _note(rec, RANDOM)
        return real_method(self, a, *args, **kwargs)

    random.Random.seed = seed_method  # type: ignore[method-assign]
    for name in dir(random):
        if name == "seed" or getattr(getattr(random, name), "__self__", None) is not shared or shared is None:
            continue
        _wrap(rec, random, name, RANDOM, unless_seeded=True)
    real_seed = _SAVED[(random, "seed")] = random.seed

    def seed(a: Any = None, *args: Any, **kwargs: Any) -> Any:
        _SEEDED[0] = a is not None
        if a is None:
            _note(rec, RANDOM)
        return real_seed(a, *args, **kwargs)

    random.seed = seed


def unpatch() -> None:
    for (owner, name), real in _SAVED.items():
        setattr(owner, name, real)
    _SAVED.clear()


def _wrap(rec: Recorder, owner: Any, name: str, what: str, unless_given: int | None = None,
          unless_seeded: bool = False) -> None:
    real = getattr(owner, name, None)
    if real is None:
        return
    _SAVED[(owner, name)] = real

    def call(*args: Any, **kwargs: Any) -> Any:
        if not (unless_given is not None and len(args) > unless_given and args[unless_given] is not None) \
                and not (unless_seeded and _SEEDED[0]):
            _note(rec, what)
        return real(*args, **kwargs)

    setattr(owner, name, call)


def _note(rec: Recorder, what: str) -> None:
    if rec.busy or rec.where is None or not _by_project(rec):
        return
    rec.busy = True
    try:
        rec.add(f"{UNKEYED}:{what}", value(f"{UNKEYED}:{what}", rec.where))
    finally:
        rec.busy = False


_KGATE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _by_project(rec: Recorder) -> bool:
    """Whether the read is the project's: the first code up the stack past this module's wrappers and the standard
    library is a file of the project's, not kgate's or a library's, and the standard library code between them only
    hands the value back (`random.choice`, `uuid.uuid4`): where another module of it reads the clock or random
    numbers for its own use (multiprocessing's authentication key, a wait's timeout, tempfile's names), the value
    decides nothing the project does."""
    frame: FrameType | None = sys._getframe(2)
    where = rec.where
    while frame is not None and where is not None:
        filename = frame.f_code.co_filename
        if filename != __file__ and not filename.startswith("<") and not (filename + os.sep).startswith(rec.skip):
            return os.path.isabs(filename) and where.owned(filename) and not filename.startswith(_KGATE)
        if filename != __file__ and filename.startswith(_KGATE):
            return False
        if filename != __file__ and not filename.startswith("<") \
                and str(frame.f_globals.get("__name__", "")).partition(".")[0] not in _HANDS_BACK:
            return False
        frame = frame.f_back
    return False


# The standard library's modules that give the clock's or random numbers' value back to their caller.
_HANDS_BACK = frozenset({"random", "uuid", "secrets", "datetime", "_pydatetime", "time", "calendar"})
