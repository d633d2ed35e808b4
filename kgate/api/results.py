"""The typed objects `kgate.api` returns: findings, kernel facts, and the results of a lint or a check.

Each is a frozen dataclass built from kgate's own records after the run, so it holds exactly what the JSON
report writes: `to_json()` gives the record `kgate lint --format json` or `kgate check --format json` has in
its `findings` or `kernels` list, key for key (docs/reports.md, "JSON output").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from kgate.core import findings as core
from kgate.core.findings import Severity

if TYPE_CHECKING:  # a lint result has no kernels: the facts modules stay unloaded
    from kgate.core.result import Result
    from kgate.facts.model import KernelFacts as FactsRecord

__all__ = ["CheckResult", "Difference", "Finding", "KernelFacts", "LintResult", "Place", "Severity"]


def _frozen(table: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(sorted(table.items())))


@dataclass(frozen=True)
class Place:
    """A second place a finding points at: a line of a project file (`path`, `line`), or a line of the PTX of
    the finding's kernel variant (`path` empty, `ptx_line`)."""

    path: str
    line: int
    message: str
    ptx_line: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "message": self.message, "ptx_line": self.ptx_line}


@dataclass(frozen=True)
class Finding:
    """One reported problem. `rule` is the rule's name (`spill`), `code` its code (`KG103`); `line` and
    `column` are 1-based; compiled findings name the `kernel`, its `variant` and `target`. `identity` is what
    the baseline pins (never a line number)."""

    code: str
    rule: str
    severity: Severity
    path: str
    line: int
    column: int
    message: str
    end_line: int | None = None
    end_column: int | None = None
    kernel: str | None = None
    variant: str | None = None
    target: str | None = None
    identity: str = ""
    value: int | None = None
    related: tuple[Place, ...] = ()
    # The codes of the findings this one carries as their cause (a spill folded into the register ceiling's).
    folded: tuple[str, ...] = ()
    # What the baseline comparison says of this finding (it is new, or a figure it is about got worse); these
    # differences are not in the result's `differences`.
    ratchet: tuple[Difference, ...] = ()

    @property
    def fails(self) -> bool:
        """Whether this finding's severity fails a run at the default `fail-on` (error and warning do)."""
        return self.severity.fails

    @classmethod
    def of(cls, finding: core.Finding, standing: tuple[Any, ...] = ()) -> Finding:
        """The public form of a finding of kgate's run; `standing`, its baseline differences."""
        return cls(code=finding.code, rule=finding.name, severity=finding.severity, path=finding.path,
                   line=finding.line, column=finding.col, message=finding.message, end_line=finding.end_line,
                   end_column=finding.end_col, kernel=finding.kernel, variant=finding.variant, target=finding.target,
                   identity=finding.identity, value=finding.value,
                   related=tuple(Place(r.path, r.line, r.message, r.ptx_line) for r in finding.related),
                   folded=finding.folded,
                   ratchet=tuple(Difference.of(d) for d in standing))

    def to_json(self) -> dict[str, Any]:
        """The finding's record in the JSON report."""
        return {"code": self.code, "name": self.rule, "severity": self.severity.value, "path": self.path,
                "line": self.line, "col": self.column, "end_line": self.end_line, "end_col": self.end_column,
                "message": self.message, "kernel": self.kernel, "variant": self.variant, "target": self.target,
                "identity": self.identity, "value": self.value, "related": [p.to_json() for p in self.related],
                "folded": list(self.folded), "ratchet": [d.to_json() for d in self.ratchet]}


@dataclass(frozen=True)
class KernelFacts:
    """What the compiler made of one kernel variant for one target.

    Resources are ptxas's: `registers` per thread, `spill_stores` and `spill_loads` in bytes, `stack_bytes`
    of local memory, `smem_bytes` of static shared memory (plus the dynamic size a launch site settles;
    `smem_dynamic_unknown` where the kernel takes dynamic shared memory no source site sizes). Occupancy is computed for the target's first
    device profile: `ctas_per_sm` resident CTAs and `warps_per_subcore` resident warps per SM sub-partition.
    `mma` counts the PTX MMA instructions by full opcode; `sass` counts SASS opcodes where the variant was
    disassembled (None otherwise). Mappings are read-only.
    """

    kernel: str
    variant: str
    target: str
    language: str
    kind: str
    path: str
    line: int
    num_warps: int
    num_stages: int | None
    registers: int
    spill_stores: int
    spill_loads: int
    stack_bytes: int
    smem_bytes: int
    ctas_per_sm: int
    warps_per_subcore: float
    ptx_target: str
    pdl: bool
    pdl_wait: bool
    expect: tuple[str, ...]
    mma: Mapping[str, int]
    sass: Mapping[str, int] | None
    constexprs: Mapping[str, Any] = field(default_factory=dict)
    signature: Mapping[str, str] = field(default_factory=dict)
    specialization: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    source: str = ""
    captured: tuple[str, ...] = ()  # the capture environments the variant's launch on its target was recorded in
    smem_dynamic_unknown: bool = False  # dynamic shared memory no source site sizes, or one launch sizes at run time

    def __hash__(self) -> int:  # the mappings are not hashable; a variant is named by its key
        return hash(self.key)

    @property
    def key(self) -> tuple[str, str, str]:
        """(kernel, variant, target): a variant's name in every report and in the baseline."""
        return (self.kernel, self.variant, self.target)

    @property
    def spills(self) -> int:
        """Bytes spilled: stores plus loads (0 for a kernel that keeps everything in registers)."""
        return self.spill_stores + self.spill_loads

    @property
    def has_mma(self) -> bool:
        return bool(self.mma)

    @property
    def has_block_scale(self) -> bool:
        """Whether the PTX has a block-scaled MMA (`mma.sync ... .block_scale`, QMMA.SF/OMMA.SF in SASS)."""
        return any("block_scale" in opcode for opcode in self.mma)

    @classmethod
    def of(cls, facts: FactsRecord) -> KernelFacts:
        """The public form of a kernel variant's facts record."""
        # Imported here: a lint result has no kernels and does not pay for the hardware model.
        from kgate.hardware.budgets import residency
        from kgate.hardware.profiles import primary

        res = facts.resources
        occupancy = residency(res.registers, res.smem_bytes, facts.num_warps, primary(facts.target))
        return cls(kernel=facts.kernel, variant=facts.variant, target=facts.target, language=facts.language,
                   kind=facts.kind, path=facts.path, line=facts.line, num_warps=facts.num_warps,
                   num_stages=facts.num_stages, registers=res.registers, spill_stores=res.spill_stores,
                   spill_loads=res.spill_loads, stack_bytes=res.stack_bytes, smem_bytes=res.smem_bytes,
                   ctas_per_sm=occupancy.ctas_per_sm, warps_per_subcore=occupancy.warps_per_subcore,
                   ptx_target=facts.ptx_target, pdl=facts.pdl, pdl_wait=facts.entry.has_wait,
                   expect=tuple(facts.expect), mma=_frozen(facts.entry.mma),
                   sass=_frozen(facts.sass.opcodes) if facts.sass is not None else None,
                   constexprs=_frozen(facts.constexprs), signature=_frozen(facts.signature),
                   specialization=_frozen({k: tuple(sorted(v)) for k, v in facts.specialization.items()}),
                   source=facts.source, captured=tuple(facts.captured),
                   smem_dynamic_unknown=facts.smem_dynamic_unknown)

    def to_json(self) -> dict[str, Any]:
        """The variant's record in the JSON report."""
        return {"kernel": self.kernel, "variant": self.variant, "target": self.target, "language": self.language,
                "kind": self.kind, "path": self.path, "line": self.line, "num_warps": self.num_warps,
                "num_stages": self.num_stages, "registers": self.registers, "spill_bytes": self.spill_stores,
                "spill_loads": self.spill_loads, "stack_bytes": self.stack_bytes, "smem_bytes": self.smem_bytes,
                "smem_dynamic_unknown": self.smem_dynamic_unknown, "ptx_target": self.ptx_target, "pdl": self.pdl, "expect": list(self.expect),
                "constexprs": dict(self.constexprs), "signature": dict(self.signature),
                "specialization": {k: list(v) for k, v in self.specialization.items()}, "source": self.source,
                "captured": list(self.captured), "warps_per_subcore": self.warps_per_subcore, "instructions": dict(self.mma),
                "sass": dict(self.sass) if self.sass is not None else None}


@dataclass(frozen=True)
class Difference:
    """What the baseline comparison found: `kind` is NEW, WORSE, IMPROVED, GONE, ... (docs/ratchet.md), `subject`
    a kernel variant or a finding, `fails` whether it fails the run, `old` and `new` the pinned and current
    values."""

    kind: str
    subject: str
    detail: str
    fails: bool
    # A number, or a kernel's figures by name (read-only): not part of the hash.
    old: Any = field(default=None, hash=False)
    new: Any = field(default=None, hash=False)

    @classmethod
    def of(cls, diff: Any) -> Difference:
        def value(v: Any) -> Any:
            return _frozen(v) if isinstance(v, Mapping) else v
        return cls(diff.kind, diff.subject, diff.detail, bool(diff.fails), value(diff.old), value(diff.new))

    def to_json(self) -> dict[str, Any]:
        """The difference's record in the JSON report."""
        def value(v: Any) -> Any:
            return dict(v) if isinstance(v, Mapping) else v
        return {"kind": self.kind, "subject": self.subject, "detail": self.detail, "fails": self.fails,
                "old": value(self.old), "new": value(self.new)}


@dataclass(frozen=True)
class _Result:
    findings: tuple[Finding, ...]
    differences: tuple[Difference, ...]
    exit_code: int  # what the command line exits with: 0 passed, 1 failing findings or a failing ratchet
    suppressed: int  # findings silenced by suppression comments
    baselined: int  # findings the baseline accepts
    files: int  # source files read
    notices: tuple[str, ...]  # what the run said besides its findings (a configured path outside the project)
    fail_on: Severity  # the lowest severity that fails the run

    @property
    def passed(self) -> bool:
        return self.exit_code == 0

    def failing(self) -> tuple[Finding, ...]:
        """The findings that fail the run (at its `fail_on` severity or worse)."""
        return tuple(f for f in self.findings if f.severity.rank <= self.fail_on.rank)


def _result_fields(result: Result) -> dict[str, Any]:
    return {
        "findings": tuple(Finding.of(f, result.standing_of(f)) for f in core.sort_findings(list(result.findings))),
        "differences": tuple(Difference.of(d) for d in result.ratchet),
        "exit_code": result.exit_code(), "suppressed": result.suppressed, "baselined": result.baselined,
        "files": result.files_checked, "notices": tuple(result.notices), "fail_on": result.fail_on,
    }


@dataclass(frozen=True)
class LintResult(_Result):
    """What `kgate.api.lint` found: the source rules' findings after suppressions and the baseline."""

    cached: int = 0  # files answered from the lint cache

    @classmethod
    def of(cls, result: Result) -> LintResult:
        return cls(**_result_fields(result), cached=int(result.stats.get("cached", 0)))


@dataclass(frozen=True)
class CheckResult(_Result):
    """What `kgate.api.check` found: every finding (compiled and source) and the facts of every kernel variant."""

    kernels: tuple[KernelFacts, ...] = ()
    compiled: int = 0  # variants compiled in this run
    cached: int = 0  # variants read from the cache

    def kernel(self, name: str, *, target: str | None = None) -> tuple[KernelFacts, ...]:
        """The variants of a kernel, by its full name (`pkg.mod:fn`) or its function name, on one target or all."""
        return tuple(k for k in self.kernels if name in (k.kernel, k.kernel.rpartition(":")[2])
                     and (target is None or k.target == target))

    @classmethod
    def of(cls, result: Result) -> CheckResult:
        return cls(**_result_fields(result), kernels=tuple(KernelFacts.of(k) for k in sorted(
            result.kernels, key=lambda k: k.key)), compiled=int(result.stats.get("compiled", 0)),
            cached=int(result.stats.get("cached", 0)))
