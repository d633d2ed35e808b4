"""The audit report as Markdown: the same numbers as the HTML page, as tables.

Every text from the project (kernel and variant names, paths, messages, baseline lines) goes through
`escape.markdown` or, in a code span, `escape.markdown_code`: no raw HTML, link or table pipe gets through.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from kgate.report.audit_model import AuditModel, KernelAudit, smem_shown
from kgate.report.audit_tables import (
    RIDGE_NOTE,
    baselined_note,
    cards_named,
    headroom_text,
    mix_rows,
    percent,
    same_on_every_card,
)
from kgate.report.escape import markdown as cell
from kgate.report.escape import markdown_code, visible
from kgate.report.excerpt import KINDS

HEADROOM_NOTE = (
    "Headroom is the smallest margin of a variant to a cliff, measured on its target's SM: "
    "registers (1 - registers/255), spills (1 - spill bytes/cliff, the cliff a quarter of the register bytes), "
    "shared memory (1 - bytes/opt-in budget) and, for elementwise and reduction kernels, warps per sub-core "
    "((warps - 5)/5, at most 1); 5 and the quarter are the occupancy and spill rules' options. "
    "100% is far from every limit, 0% is at one, negative is past it."
)


def code(text: object) -> str:
    """A code span in a table cell."""
    return markdown_code(text, table=True)


def table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return out


def header_lines(model: AuditModel) -> list[str]:
    tools = cell(", ".join(f"{k} {v}" for k, v in model.toolchain) or "no compiler ran")
    cards = "; ".join(f"{target}: {', '.join(p.name for p in profiles)}" for target, profiles in model.cards)
    return [
        "# kgate audit",
        "",
        f"kgate {model.version}, {tools}. Cards: {cards}.",
        "",
        (f"{len(model.kernels)} kernel variant(s) compiled, {len(model.failures)} failed, "
         f"{len(model.findings)} finding(s){baselined_note(model)}. Baseline: {cell(model.baseline_state)}."),
        "",
        *(f"- {cell(note, line_start=True)}" for note in model.baseline_notes),
        *([""] if model.baseline_notes else []),
    ]


def summary_lines(model: AuditModel) -> list[str]:
    lines = ["## Closest to a cliff", "", HEADROOM_NOTE, ""]
    rows = []
    for n, k in enumerate(model.ranking, 1):
        res = k.facts.resources
        card = k.cards[0].residency if k.cards else None
        rows.append((str(n), f"[{cell(k.facts.kernel)}](#{k.anchor})", code(k.name or "-"), cell(k.facts.target),
                     headroom_text(k.headroom.score), cell(k.headroom.limiter), str(res.registers),
                     str(res.spill_stores), smem_shown(k.facts),
                     f"{card.warps_per_subcore:g}" if card else "-", str(len(k.findings))))
    lines += table(("#", "kernel", "variant", "target", "headroom", "limited by", "regs", "spill B", "smem B",
                    "warps/sub-core", "findings"), rows) if rows else ["No kernel variant compiled."]
    lines.append("")
    if model.failures:
        lines += ["## Did not compile", ""]
        lines += table(("kernel", "variant", "target", "where", "error"),
                       [(cell(f.failure.kernel), code(f.failure.variant or "-"), cell(f.failure.target or "-"),
                         code(f"{f.failure.path}:{f.failure.line}"), cell(f.failure.message))
                        for f in model.failures])
        lines.append("")
    return lines


def finding_rows(k: KernelAudit) -> list[tuple[str, ...]]:
    groups = (("active", k.findings), ("baselined", k.baselined))
    return [(x.code, x.severity.value, x.name, status, cell(x.message)) for status, group in groups for x in group]


def baseline_lines(k: KernelAudit, model: AuditModel) -> list[str]:
    if not model.baseline_compared:
        return [f"Not compared: {cell(model.baseline_state)}."]
    return [f"- {cell(line, line_start=True)}" for line in k.baseline] or ["No differences."]


def kernel_lines(k: KernelAudit, model: AuditModel) -> list[str]:
    f = k.facts
    expect = f", expects {', '.join(f.expect)}" if f.expect else ""
    lines = [
        f'## <a id="{k.anchor}"></a>{cell(f.kernel)} [{cell(k.name or "-")}] @ {cell(f.target)}',
        "",
        (f"Variant {markdown_code(f.variant, table=False)}; {markdown_code(f'{f.path}:{f.line}', table=False)}; "
         f"{cell(f.kind)}, {f.num_warps} warps, "
         f"num_stages={f.num_stages}{expect}. Headroom {headroom_text(k.headroom.score)} "
         f"(limited by {k.headroom.limiter})."),
        "",
        "### Budgets",
        "",
    ]
    same, own = same_on_every_card(k)
    if same:
        lines += table(("#", "budget", cell(cards_named(k))), [(str(r.budget), cell(r.label), cell(r.cells[0]))
                                                              for r in same])
        lines += [""] if own else []
    if own:
        lines += table(("#", "budget", *(cell(c.profile.name) for c in k.cards)),
                       [(str(r.budget), cell(r.label), *(cell(c) for c in r.cells)) for r in own])
    lines += ["", "Headroom terms: " + "; ".join(f"{t.name} {percent(t.value, 0)} ({cell(t.detail)})"
                                                  for t in k.headroom.terms) + ".", "", RIDGE_NOTE, ""]
    lines += ["### Instruction mix", ""]
    lines += table(("what", "instruction", "count"),
                   [(cell(a), code(b), cell(c)) for a, b, c in mix_rows(k.mix)])
    lines += ["", "### Findings", ""]
    rows = finding_rows(k)
    lines += table(("code", "severity", "rule", "status", "message"), rows) if rows else ["None."]
    lines.append("")
    lines += excerpt_lines(k)
    lines += ["### Against the baseline", ""]
    lines += baseline_lines(k, model)
    lines.append("")
    return lines


def fenced(lines: Sequence[str]) -> list[str]:
    """A fenced block that no line inside can close: the fence is longer than any run of tildes in them."""
    longest = max((len(run) for line in lines for run in re.findall("~+", line)), default=0)
    fence = "~" * max(3, longest + 1)
    return [fence, *lines, fence]


def excerpt_lines(k: KernelAudit) -> list[str]:
    """The PTX and SASS around the instructions that matter, each window a fenced block; `>` marks them."""
    x = k.excerpt
    if x is None:
        return []
    counts = ", ".join(f"{n:,} {kind}" for kind, n in x.counts.items()) or f"no {', '.join(KINDS)}"
    lines = ["### PTX and SASS", "", f"{cell(counts)}.", ""]
    lines += [f"- {cell(note, line_start=True)}" for note in x.notes] + ([""] if x.notes else [])
    for listing in x.listings:
        if not listing.windows:
            lines += [f"{listing.name}: none of them.", ""]
        for w in listing.windows:
            total = dict(listing.counts)[w.kind]
            where = markdown_code(f"{w.file}:{w.line}" if w.line else "no source line", table=False)
            source = f" {markdown_code(w.source.strip(), table=False)}" if w.source.strip() else ""
            lines += [f"{listing.name}, {w.kind} {w.nth} of {total:,}, from {where}{source}:", ""]
            width = max(len(line.place) for line in w.lines)
            # Shown as it is inside the fence; only invisible characters are written as escapes.
            lines += fenced([visible(f"{'>' if line.marked else ' '} {line.place:<{width}}  {line.text}")
                             for line in w.lines])
            lines.append("")
    return lines


def render(model: AuditModel) -> str:
    lines = header_lines(model) + summary_lines(model)
    if model.sass_diff is not None:
        from kgate.report.audit_diff import markdown_lines

        lines += markdown_lines(model.sass_diff)
    for k in model.kernels:
        lines += kernel_lines(k, model)
    return "\n".join(lines).rstrip() + "\n"
