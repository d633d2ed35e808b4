"""What kgate and a compile worker send each other across the process boundary (`kgate.compile.pool`).

kgate sends a `Task`: the name of what the worker runs and its payload. The worker answers with an `Outcome`
(the pool makes one itself for a task whose worker died or ran past its deadline). Both are frozen dataclasses,
pickled whole, so that a field is named, not a place in a tuple, on both sides of the pipe. What kgate receives is
an `Outcome` or the worker is stopped (`receive`): a project's code runs in the worker and may write to its pipe.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, TypeVar, cast

from kgate.compile.payloads import Reply

Answer = TypeVar("Answer")

# Task name -> "module:function" run in the worker. What it answers (`kgate.compile.payloads`): an `Expansion`
# (the expand tasks), a `CompileReply` (triton.compile, cute.compile), a `CudaReply` (cuda.compile), a `ProbeReply`
# (cuda.probe), the hash of the SASS listing it kept (sass, cuda.sass).
TASKS = {
    "triton.expand": "kgate.compile.triton_backend:expand",
    "triton.compile": "kgate.compile.triton_backend:compile_variant",
    "cute.expand": "kgate.compile.cute_backend:expand",
    "cute.compile": "kgate.compile.cute_backend:compile_call",
    "cuda.compile": "kgate.compile.cuda_backend:compile_source",
    "cuda.sass": "kgate.compile.cuda_backend:disassemble_task",
    "cuda.probe": "kgate.compile.cuda_probe:probe_task",
    "sass": "kgate.compile.sass_task:disassemble_task",
}


@dataclass(frozen=True)
class Task:
    """One task for a compile worker: what it runs (a name of `TASKS`) and the payload that function takes."""

    name: str
    payload: Mapping[str, Any]

    def __post_init__(self) -> None:
        # Refused where it is made: in the worker, an unknown name would end the worker, not fail the task.
        if self.name not in TASKS:
            raise ValueError(f"no compile worker task is named {self.name!r} (known: {', '.join(sorted(TASKS))})")

    @property
    def function(self) -> tuple[str, str]:
        """The module and the function in it that run the task."""
        module, _, func = TASKS[self.name].partition(":")
        return module, func


@dataclass(frozen=True)
class Outcome:
    """What a task came to: the worker's reply, or the pool's word for a task that got none."""

    ok: bool
    # The task's answer (`TASKS` names what each answers: a `kgate.compile.payloads` reply, or the hash of a SASS
    # listing kept), or the error message.
    value: Reply
    seconds: float
    max_rss_kb: int = 0
    user_error: bool = True  # False: an unexpected exception (a bug), with a traceback in value
    # The cache could not take the result (a full disk, the folder deleted): not the kernel's fault; the run
    # stops with exit 2 (`kgate.compile.cache.CacheWriteError`).
    cache_unwritable: bool = False
    # The task was stopped at its deadline, or its worker died: an outcome of this run's circumstances,
    # never replayed by a later run (`kgate.pipeline.fastpath`).
    transient: bool = False
    # The files of the modules the worker imported (path -> state, `kgate.support.reads`): inputs of the run.
    imported: dict[str, Any] | None = None
    # What the imports of the project's modules in the worker read (`kgate.compile.import_recorder`): name -> value.
    reads: dict[str, Any] | None = None
    # Where in the project a user error was raised (file as imported, line), when the task's error says.
    where: tuple[str, int] | None = None

    def answer(self, kind: type[Answer]) -> Answer:
        """The task's answer, as the `kind` its task answers (`Expansion`, `CompileReply`, `CudaReply`, or `str` for
        a listing's hash); a task that failed has none."""
        if not self.ok:
            raise ValueError(f"a failed task has no answer: {self.value}")
        return cast(Answer, self.value)

    @property
    def error(self) -> str:
        """What a failed task says (the error message, or the traceback of an unexpected exception)."""
        return str(self.value)

class UnreadableAnswer(Exception):
    """What a worker sent is no Outcome (bytes a project's code wrote to its pipe): the worker is stopped."""


def receive(conn: Connection) -> Outcome:
    """A worker's answer, which is an Outcome; EOFError or OSError where its pipe closed (it died)."""
    try:
        reply = conn.recv()
    except (EOFError, OSError):
        raise
    except Exception as exc:  # noqa: BLE001 - whatever unpickling the bytes raised
        raise UnreadableAnswer(f"bytes that are no pickle ({type(exc).__name__})") from None
    if not isinstance(reply, Outcome):
        raise UnreadableAnswer(f"a {type(reply).__name__}, not an outcome")
    return reply
