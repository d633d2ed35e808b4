"""One cause, one finding: the findings of one kernel variant that follow from another one reported beside it.

A tile at the register cap is reported by three rules at once: the register ceiling (KG102), the spill it forces
(KG103) and the local memory that spill puts inside the main loop (KG109). They are one problem with one fix, and
counted three times they would read as three. A compiled rule declares which rules' findings are the cause of its
own (`Rule.caused_by`: KG103 is caused by KG102, KG109 by KG103); where a variant has both, the caused finding is
folded into its cause, and that one into its own cause, up to the root: the finding no other finding on the variant
causes. What is reported is the root alone, once in the summary, the ratchet and every report, with

- its identity, and so its baseline key, unchanged: the root's rule's, as if it had been reported alone;
- the most severe of the severities of its parts (a spill past the cliff keeps the run failing under a register
  ceiling that a project made a warning);
- its own message, then which rules it carries, and each folded finding as a related place (its rule, severity and
  message) followed by that finding's own related places;
- the folded codes in `Finding.folded`, so that the baseline can tell a pin of a folded part from a pin of nothing.

It runs after the suppression comments: a finding suppressed on its own is no part of anything, and a suppressed
root leaves its causes' findings to stand (the next one down becomes the root).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

from kgate import rules as registry  # type: ignore[attr-defined]
from kgate.core.findings import Finding, Related, sort_findings

Row = tuple[str, str, str]  # (kernel, variant, target)


def folded(findings: list[Finding]) -> list[Finding]:
    """The findings with every one that another finding on its kernel variant causes folded into its root."""
    compiled = set(registry.codes("compiled"))
    by_row: dict[Row, dict[str, Finding]] = defaultdict(dict)
    for f in findings:
        if f.code in compiled and f.kernel and f.variant and f.target and not f.folded:
            by_row[(f.kernel, f.variant, f.target)].setdefault(f.code, f)
    replaced: dict[int, Finding | None] = {}  # id of a finding -> what stands for it (None: folded away)
    for row in by_row.values():
        for root, parts in _trees(row).items():
            replaced[id(root)] = _fold(root, parts)
            replaced.update((id(part), None) for part in parts)
    if not replaced:
        return findings
    out = [replaced.get(id(f), f) for f in findings]
    return sort_findings([f for f in out if f is not None])


def _trees(row: dict[str, Finding]) -> dict[Finding, list[Finding]]:
    """Each root among one variant's findings and the findings folded into it, in the order of the causes."""
    roots: dict[Finding, list[Finding]] = {}
    for code in sorted(row, key=_depth):
        root = _root(code, row)
        if root != code:
            roots.setdefault(row[root], []).append(row[code])
    return roots


def _root(code: str, row: dict[str, Finding], seen: frozenset[str] = frozenset()) -> str:
    """The code at the end of the chain of reported causes from `code` (itself, when no cause is reported)."""
    for cause in registry.load(code).caused_by:
        if cause in row and cause not in seen:
            return _root(cause, row, seen | {code})
    return code


def _depth(code: str) -> tuple[int, str]:
    """How far a rule is from a root cause, for the order folded findings are told in (the nearest first)."""
    depth, causes = 0, registry.load(code).caused_by
    while causes and depth < 8:
        depth += 1
        causes = tuple(c for cause in causes for c in registry.load(cause).caused_by)
    return depth, code


def _fold(root: Finding, parts: list[Finding]) -> Finding:
    worst = min((root, *parts), key=lambda f: f.severity.rank).severity
    names = ", ".join(f"{p.code} {p.name}" for p in parts)
    places: list[Related] = list(root.related)
    for part in parts:
        places.append(Related(part.path, part.line, f"{part.code} {part.severity.value} {part.name}: {part.message}"))
        places.extend(part.related)
    message = f"{root.message}; with what it causes on this variant, reported here once: {names}"
    return replace(root, severity=worst, message=message, related=tuple(places),
                   folded=tuple(p.code for p in parts))
