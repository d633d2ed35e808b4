"""What a check hands on: its options and the run it assembled (read by the pipeline, the shard results and the commands)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from kgate.core.config import PythonEntry
from kgate.core.findings import Finding, Severity
from kgate.facts.run import CompileRun
from kgate.ratchet.compare import RunState
from kgate.shard.plan import Plan, ShardSpec


@dataclass(frozen=True)
class CheckOptions:
    targets: tuple[str, ...] = ()  # empty: the configured targets
    kernels: tuple[str, ...] = ()  # globs on kernel names; empty: all
    jobs: int | None = None
    sass: bool = False
    no_cache: bool = False
    fail_on: Severity = Severity.ERROR
    # Run the source rules over the project too (the whole gate); off for a run restricted to kernels.
    source: bool = True
    shard: ShardSpec | None = None  # gate only this slice of the units (`--shard I/N`)
    language: str | None = None  # "triton" or "cuda": only those kernels (`--language`); None: both


class SourcePart(NamedTuple):
    """What the source rules contributed to a check: findings after their suppressions."""

    findings: list[Finding]
    suppressed: int
    files: int  # source files read


@dataclass(frozen=True)
class CheckRun:
    """One check's run, assembled once (`kgate.pipeline.check.assemble`): its kernels, findings and the ratchet's view,
    before the baseline judges it."""

    entries: list[PythonEntry]
    compiled: CompileRun
    findings: list[Finding]
    state: RunState
    suppressed: int = 0  # findings silenced by suppression comments
    files_checked: int = 0  # source files the source rules read
    # What `kgate merge` needs from a shard: compiled findings before suppression comments, the source part.
    raw: list[Finding] = field(default_factory=list)
    source: SourcePart | None = None
    plan: Plan | None = None
    seconds: dict[str, float] = field(default_factory=dict)  # compile seconds per timings key, this run
    covered: frozenset[str] = frozenset()  # kernel names selected (Triton entries, CUDA kernels and files)
