"""What a run hands to the reporters."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kgate.core.findings import Finding, Severity

if TYPE_CHECKING:  # a lint run has no kernels: keep the facts modules out of its imports
    from kgate.facts.model import KernelFacts
    from kgate.ratchet.compare import Comparison
    from kgate.ratchet.gate import Verdict


@dataclass(frozen=True)
class Result:
    """A run's report, built once: by `judged` where the baseline gave its verdict (`kgate.ratchet.gate.apply`), and a
    command that adds to it (its notices, a shard's or a version matrix's object) makes another with
    `dataclasses.replace`."""

    command: str  # "check" or "lint"
    findings: list[Finding]  # active findings, after suppressions and the baseline
    kernels: list[KernelFacts] = field(default_factory=list)
    # Ratchet differences (NEW/WORSE/IMPROVED/GONE/TOOLCHAIN) that no finding of the report says: a line each.
    ratchet: list[Any] = field(default_factory=list)
    # The differences a finding already says (it is new, or a figure it is about got worse), by finding: shown on
    # the finding itself, never as lines of their own (`kgate.ratchet.compare.Comparison.standing`).
    standing: dict[Finding, tuple[Any, ...]] = field(default_factory=dict)
    notices: list[str] = field(default_factory=list)
    baselined: int = 0  # findings accepted by the baseline
    suppressed: int = 0  # findings silenced by suppression comments
    files_checked: int = 0
    fail_on: Severity = Severity.ERROR
    stats: dict[str, Any] = field(default_factory=dict)
    # A shard's run (`kgate check --shard`): what `kgate merge` needs, written as the JSON's `shard` object.
    shard: dict[str, Any] | None = None
    # A version-matrix run (`kgate check --triton`, `--cute-dsl`): the comparison, written as the JSON's `matrix` object.
    matrix: dict[str, Any] | None = None
    # `--exit-zero`: the command exits 0 whatever the verdict, and every report that states one says so.
    exit_zero: bool = False

    @classmethod
    def judged(cls, command: str, findings: list[Finding], verdict: Verdict | None, **fields: Any) -> Result:
        """The report of a run whose `findings` the baseline judged (`verdict`; None: no baseline): the findings it
        does not accept, how many it does, the differences, and what it noted after the run's own notices."""
        if verdict is None:
            return cls(command, findings, **fields)
        comparison: Comparison = verdict.comparison
        notices = [*fields.pop("notices", []), *verdict.notices]
        return cls(command, comparison.active, baselined=len(comparison.baselined), ratchet=comparison.unattached,
                   standing=comparison.standing, notices=notices, **fields)

    def failing(self) -> list[Finding]:
        return [f for f in self.findings if f.severity.rank <= self.fail_on.rank]

    def ratchet_failures(self) -> list[Any]:
        """The failing differences that are lines of their own (those a finding says are on the finding)."""
        return [d for d in self.ratchet if getattr(d, "fails", False)]

    def standing_of(self, finding: Finding) -> tuple[Any, ...]:
        """What the ratchet says of a reported finding: its NEW and WORSE differences, or nothing."""
        return self.standing.get(finding, ())

    def failing_by_ratchet(self) -> list[Finding]:
        """Findings below `fail_on` that fail the run all the same: a figure they are about got worse, or their
        kernel is new to the baseline."""
        return [f for f in self.findings if f.severity.rank > self.fail_on.rank
                and any(getattr(d, "fails", False) for d in self.standing_of(f))]

    def exit_code(self) -> int:
        """The verdict: 1 when the run fails (findings at `fail_on` or above, or the ratchet), else 0."""
        return 1 if self.failing() or self.ratchet_failures() or self.failing_by_ratchet() else 0

    def exit_forced(self) -> bool:
        """Whether `--exit-zero` turns a failing verdict into exit status 0."""
        return self.exit_zero and self.exit_code() != 0

    def exit_status(self) -> int:
        """What the command exits with: the verdict, or 0 under `--exit-zero`."""
        return 0 if self.exit_zero else self.exit_code()
