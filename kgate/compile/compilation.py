"""What a compile run is and hands on, shared by the Triton and CUDA engines: the callbacks a run takes (progress,
the facts stage's needs), how it went (`RunSummary`), the `Compilation` it hands to the facts stage, counted as it
runs in a `Tally`, and the worker processes' environment and number.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

from kgate.collect.modules import setup_env
from kgate.compile.autotune import Autotuned
from kgate.compile.cache import CacheWriteError
from kgate.compile.protocol import Outcome
from kgate.compile.sides import DIFF_RUN
from kgate.compile.units import Compiled, CompileFailure
from kgate.core.config import Config
from kgate.core.rule import CapturedKernel
from kgate.support import reads

Progress = Callable[[int, int, str], None]


# What the facts stage lacks of a unit to carry out the run's plan (`kgate.core.artifacts`): the symbols whose SASS
# it wants and the unit's listing does not hold ([] for none), disassembled from the unit's cubin; None where it
# cannot use the unit (a damaged artifact, a Triton variant whose lines no longer place in its file): it is
# compiled again.
Needs = Callable[[Compiled], "list[str] | None"]


# `needs` for the compile worker that compiled a unit (a picklable factory: each compile makes its own): the facts
# stage reads the unit there, right after its compile and while other units compile, and the SASS it lacks is
# disassembled there (`kgate.compile.worker_facts`). A factory's `needs` also keeps the unit's facts in the cache.
Analyse = Callable[[], Needs]


@dataclass(frozen=True)
class RunSummary:
    """How a compile run went, handed on unchanged from the compile stage (`Compilation`) to the facts stage
    (`kgate.facts.run.CompileRun`): the failures, the counts, the toolchain, the captures and locations."""

    failures: list[CompileFailure] = field(default_factory=list)
    compiled: int = 0
    cached: int = 0
    toolchain: dict[str, str] = field(default_factory=dict)
    compile_seconds: dict[str, float] = field(default_factory=dict)
    # The captured specialisations per kernel, for the capture rules, and where each kernel is defined.
    captured: list[CapturedKernel] = field(default_factory=list)
    locations: dict[str, tuple[str, int]] = field(default_factory=dict)
    # The autotuned kernels' configs, for the severity of a finding in some of them (`kgate.evaluate.configs`).
    autotuned: list[Autotuned] = field(default_factory=list)
    # False when an outcome came from this run's circumstances (a timeout, a worker that died): the run is
    # not recorded for replay (`kgate.pipeline.fastpath`), so the next one compiles again.
    replayable: bool = True
    # Per kernel module, the programs its import ran whose own reads are not seen (said in the run's notices).
    unseen: dict[str, list[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Compilation(RunSummary):
    """What the compile stage hands on: every compiled unit (from this run or the cache) and every failure."""

    units: list[Compiled] = field(default_factory=list)


Made = TypeVar("Made", bound=Compilation)


@dataclass
class Tally:
    """A compile run as the compile stage counts it while it runs; it hands on the `Compilation` made of it at the
    end (`made`), which nothing changes after."""

    failures: list[CompileFailure] = field(default_factory=list)
    compiled: int = 0
    cached: int = 0
    toolchain: dict[str, str] = field(default_factory=dict)
    compile_seconds: dict[str, float] = field(default_factory=dict)
    captured: list[CapturedKernel] = field(default_factory=list)
    locations: dict[str, tuple[str, int]] = field(default_factory=dict)
    autotuned: list[Autotuned] = field(default_factory=list)
    replayable: bool = True
    unseen: dict[str, list[str]] = field(default_factory=dict)
    units: list[Compiled] = field(default_factory=list)

    def made(self, kind: type[Made], **more: Any) -> Made:
        """The run as a `kind` (a `Compilation`), with the fields `more` gives besides the counted ones."""
        counted = {f.name: getattr(self, f.name) for f in fields(kind) if hasattr(self, f.name) and f.name not in more}
        return kind(**counted, **more)


def worker_env(config: Config) -> dict[str, str | None]:
    return {
        **setup_env(config),
        "TRITON_INTERPRET": None,  # a compile under the interpreter compiles nothing
        "TRITON_CACHE_DIR": str(config.root / config.cache_dir / "triton"),
        "TRITON_ALWAYS_COMPILE": "1",
        # Triton looks its cache up all the same: through kgate's reader (no pipe, device or link followed).
        "TRITON_CACHE_MANAGER": "kgate.compile.triton_cache:GuardedCache",
        # Importing the project's kernel modules must not leave bytecode in its tree.
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONWARNINGS": "ignore",
        DIFF_RUN: os.environ.get(DIFF_RUN),  # the diff this run is a side of, if any
    }


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


def note_imported(imported: dict[str, Any] | None) -> list[str]:
    """Note the files of the modules a compile worker imported (path -> state when imported) as inputs of
    this run (`kgate.support.reads`); their paths, to keep in the record."""
    for path, state in (imported or {}).items():
        reads.note(path, state)
    return sorted(imported or {})


def stop_if_cache_unwritable(config: Config, outcome: Outcome) -> None:
    if outcome.cache_unwritable:
        raise CacheWriteError(outcome.error, config.cache_dir)


def first_line(outcome: Outcome) -> str:
    text = outcome.error.strip()
    if not outcome.user_error:
        # An unexpected exception in kgate's own worker code: keep its last line, say it is a bug.
        last = text.splitlines()[-1] if text else "unknown error"
        return f"internal error in kgate's compile worker: {last}"
    return text


def note_recorded(meta: dict[str, Any]) -> None:
    """The same for a record from the cache: the modules its compile imported, in their state now."""
    imported = meta.get("imported")
    for path in imported if isinstance(imported, list) else []:
        if isinstance(path, str):
            reads.note(path)
