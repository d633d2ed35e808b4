"""The audit in a screenful of Markdown, to paste as a pull-request comment: the verdict, the counts, the variants
closest to a cliff and the first findings, and where the full report is.

GitHub takes at most 65,536 characters in a comment; this stays far below (`LIMIT`), however many variants,
findings or how long their names: rows are counted, texts clipped before they are escaped, and rows dropped
until it fits. The full Markdown twin (report.md) and the page (report.html) keep everything.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping

from kgate.core.findings import Finding
from kgate.report.audit_md import code, table
from kgate.report.audit_model import AuditModel, KernelAudit, Key
from kgate.report.audit_tables import baselined_note, headroom_text
from kgate.report.escape import markdown as cell

LIMIT = 12_000  # characters: a screenful is far less; this bounds what hostile names can make of it
ROWS = 8  # variants closest to a cliff
FINDINGS = 8
NAME_ROOM, MESSAGE_ROOM = 90, 160  # characters of a variant's title and a finding's message
NEAR = 0.15  # headroom under this is near a cliff (the page's amber)
TAG = re.compile(r"#[0-9a-f]{8}$")  # what ends a Triton variant's name (`kgate.report.audit_model.readable`)


def clip(text: str, room: int) -> str:
    return text if len(text) <= room else text[:room - 1] + "\u2026"


def headline(model: AuditModel) -> str:
    verdict = model.verdict or "not judged"
    past = sum(1 for k in model.kernels if k.headroom.score < 0)
    near = sum(1 for k in model.kernels if 0 <= k.headroom.score < NEAR)
    return f"## kgate audit: {cell(verdict)}\n\n" + (
        f"{len(model.kernels)} kernel variant(s) compiled, {len(model.failures)} failed, "
        f"{len(model.findings)} finding(s){_severities(model.findings)}{baselined_note(model)}; "
        f"{past} past a cliff, {near} within {NEAR:.0%} of one. Baseline: {cell(model.baseline_state)}.")


def _severities(findings: tuple[Finding, ...]) -> str:
    counts = Counter(f.severity.value for f in findings)
    return f" ({', '.join(f'{n} {s}' for s, n in sorted(counts.items()))})" if counts else ""


def _title(k: KernelAudit) -> str:
    return code(named(k.facts.kernel, variant_label(k.name, k.short, NAME_ROOM // 2), k.facts.target))


def named(kernel: str, variant: str, target: str) -> str:
    """`kernel [variant] @ target`, the kernel's name clipped so that the target stays (`variant_label` has
    fitted the variant)."""
    return f"{clip(kernel, NAME_ROOM // 2)} [{variant}] @ {clip(target, 20)}"


def variant_label(name: str, short: str, room: int) -> str:
    """A variant in `room` characters: its name where it fits, else what tells it from the kernel's other
    variants (`short`, as the terminal table's variant column shows it), clipped before its tag so that the
    tag stays: two variants of one kernel never read the same."""
    return name if len(name) <= room else clip_before_tag(short, room)


def clip_before_tag(text: str, room: int) -> str:
    """`text` in `room` characters, cut before the `#tag` that ends a variant's name, which stays."""
    if len(text) <= room:
        return text
    tag = TAG.search(text)
    if tag is None or len(tag.group()) + 2 > room:
        return clip(text, room)
    return clip(text[:tag.start()], room - len(tag.group())) + tag.group()


def _finding_line(f: Finding, labels: Mapping[Key, tuple[str, str]]) -> str:
    if f.kernel:
        # A variant that did not compile has no audit of its own: its whole name, which keeps the tag.
        name, short = labels.get((f.kernel, f.variant or "", f.target or ""), (f.variant or "",) * 2)
        where = named(f.kernel, variant_label(name, short, NAME_ROOM // 2), f.target or "")
    else:
        where = clip(f"{f.path}:{f.line}", NAME_ROOM)
    return (f"- {f.code} {f.severity.value} {code(where)}: "
            f"{cell(clip(' '.join(f.message.split()), MESSAGE_ROOM))}")


def render(model: AuditModel, rows: int = ROWS, findings: int = FINDINGS) -> str:
    while True:
        text = _render(model, rows, findings)
        if len(text) <= LIMIT or rows + findings == 0:
            return text
        rows, findings = max(0, rows - 2), max(0, findings - 2)


def _render(model: AuditModel, rows: int, findings: int) -> str:
    lines = [headline(model), ""]
    ranked = model.ranking
    if ranked:
        lines += [f"Closest to a cliff ({min(rows, len(ranked))} of {len(ranked)}):", ""]
        lines += table(("#", "variant", "headroom", "limited by", "findings"),
                       [(str(n), _title(k), headroom_text(k.headroom.score), cell(k.headroom.limiter),
                         str(len(k.findings))) for n, k in enumerate(ranked[:rows], 1)])
        lines.append("")
    if model.failures:
        lines += [f"Did not compile: {len(model.failures)}, first "
                  f"{code(clip(model.failures[0].failure.kernel, NAME_ROOM))}.", ""]
    if model.findings:
        worst = sorted(model.findings, key=lambda f: f.severity.rank)[:findings]  # stable: in report order
        lines += [f"Findings ({len(worst)} of {len(model.findings)}, the most severe first):", ""]
        labels = {k.key: (k.name, k.short) for k in model.kernels}
        lines += [_finding_line(f, labels) for f in worst]
        lines.append("")
    lines.append("The full report, every variant's budgets on each card, its instruction mix and its PTX and SASS: "
                 "report.html (one self-contained page) and report.md, where `kgate audit -o DIR` wrote this file.")
    return "\n".join(lines) + "\n"
