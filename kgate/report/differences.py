"""Baseline differences (`kgate.ratchet.compare.Difference`) as the reporters place them.

A difference's subject is a kernel key (`kernel|variant|target`), a finding
key (`code|path|identity`, where a compiled finding's identity is
`kernel|variant|target[|extra]`), or `baseline` for a toolchain change.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the terminal report of `kgate lint` reads this module and has no kernels
    from kgate.facts.model import KernelFacts

Key = tuple[str, str, str]


def owner(diff: Any) -> Key | None:
    """The (kernel, variant, target) a difference is about, if it is about one kernel variant."""
    if getattr(diff, "kind", "") == "TOOLCHAIN":
        return None
    parts = str(getattr(diff, "subject", "")).split("|")
    if len(parts) == 3:
        return parts[0], parts[1], parts[2]
    if len(parts) >= 5:
        return parts[2], parts[3], parts[4]
    return None


def location(diff: Any, kernels: Sequence[KernelFacts]) -> tuple[str, int] | None:
    """Where to point at: the kernel's definition, or the file of a source finding."""
    key = owner(diff)
    if key is not None:
        for facts in kernels:
            if facts.key == key:
                return facts.path, facts.line
    parts = str(getattr(diff, "subject", "")).split("|")
    if len(parts) >= 3 and "." in parts[1]:
        return parts[1], 1
    return None


def describe(diff: Any) -> str:
    """One line: kind, subject, detail, and whether it fails the run."""
    verdict = "fails" if getattr(diff, "fails", False) else "accepted"
    return f"{diff.kind} {diff.subject}: {diff.detail} ({verdict})"


def per_kernel_line(diff: Any) -> str:
    """The line shown under a kernel: the rule code when the subject is a finding, then the detail."""
    parts = str(diff.subject).split("|")
    what = f"{parts[0]} " if len(parts) >= 5 else ""
    verdict = "fails" if diff.fails else "accepted"
    return f"{diff.kind} {what}{diff.detail} ({verdict})"


def standing_text(shown: Sequence[Any]) -> str:
    """What the ratchet adds to a finding's own line: `new` (with the counts when some are pinned), `worse than
    baseline: registers 167 -> 255`, both, or "" for a finding it says nothing of; `accepted` where none fails."""
    parts = []
    new = [d for d in shown if d.kind == "NEW"]
    if new:
        counted = [d.detail for d in new if isinstance(d.old, int) and d.old]  # "3 finding(s), 2 pinned"
        parts.append("new" + (f": {', '.join(counted)}" if counted else ""))
    worse = [d.detail for d in shown if d.kind == "WORSE"]
    if worse:
        parts.append(f"worse than baseline: {', '.join(worse)}")
    if parts and not any(d.fails for d in shown):
        parts.append("accepted")
    return "; ".join(parts)
