"""The reports of `kgate diff`: terminal, JSON and Markdown (short enough for a pull-request comment).

Every text that comes from the project (kernel and variant names, SASS operands, source paths) is escaped
for where it is shown (`kgate.report.escape`); nothing here reads a file.
"""

from __future__ import annotations

import re
from typing import Any

from kgate.diff.compare import STATUSES, Diff, Figures, Row
from kgate.report.escape import json_text, markdown, markdown_code, terminal

# A pull-request comment stays readable: at most this many changed rows, and the SASS of the first few.
MARKDOWN_ROWS = 30
MARKDOWN_LISTINGS = 3


def counts_line(diff: Diff) -> str:
    counts = diff.counts()
    shown = [f"{counts[s]} {s}" for s in STATUSES[:4]] + [f"{counts[s]} {s}" for s in STATUSES[4:] if counts[s]]
    return ", ".join(shown)


def _pair(before: Any, after: Any) -> str:
    if before is None and after is None:
        return "-"
    if before == after:
        return str(before)
    return f"{'-' if before is None else before} -> {'-' if after is None else after}"


def figures(row: Row) -> list[tuple[str, str]]:
    """(name, "before -> after") for registers, spill bytes, shared memory and instruction count."""
    b, a = row.before, row.after

    def get(f: Figures | None, name: str) -> Any:
        return getattr(f, name) if f is not None else None

    out = [(label, _pair(get(b, name), get(a, name))) for label, name in
           (("regs", "registers"), ("spill", "spill_bytes"), ("smem", "smem_bytes"))]
    if get(b, "instructions") is not None or get(a, "instructions") is not None:
        out.append(("instructions", _pair(get(b, "instructions"), get(a, "instructions"))))
    return out


def families(row: Row) -> str:
    return ", ".join(f"{name} {a} -> {b}" for name, (a, b) in row.families.items() if name != "total")


# --------------------------------------------------------------------------- terminal


def render_terminal(diff: Diff, *, quiet: bool = False) -> str:
    lines = [f"kgate diff: {terminal(diff.base.label)} -> {terminal(diff.head.label)}", counts_line(diff)]
    for row in diff.not_identical():
        lines.append("")
        lines.append(f"{row.status:<8} {terminal(row.kernel)}  {terminal(row.variant)}  {terminal(row.target)}")
        if row.before is not None or row.after is not None:
            lines.append("         " + "  ".join(f"{name} {value}" for name, value in figures(row)))
        moved = families(row)  # empty where only the total moved (an arithmetic instruction more or less)
        if moved:
            lines.append("         " + terminal(moved))
        if row.note:
            lines.append("         " + terminal(row.note))
        if row.lines and not quiet:
            lines.append(f"         first difference at instruction {row.first}:")
            width = max(len(ln.text) for ln in row.lines)
            for ln in row.lines:
                source = f"  {terminal(ln.source)}" if ln.source else ""
                lines.append(f"         {ln.sign} {terminal(ln.text).ljust(width)}{source}")
    lines.append("")
    lines.append(summary(diff))
    return "\n".join(lines) + "\n"


def summary(diff: Diff) -> str:
    counts = diff.counts()
    total = sum(counts.values())
    verdict = "SASS identical" if counts["identical"] == total else f"{total - counts['identical']} of {total} differ"
    sides = f"{diff.base.compiled + diff.head.compiled} compiled, {diff.base.cached + diff.head.cached} from cache"
    return f"kgate diff: {total} variant(s), {verdict} ({sides})"


# --------------------------------------------------------------------------- JSON


def render_json(diff: Diff) -> str:
    def side(s: Any) -> dict[str, Any]:
        return {"label": s.label, "toolchain": s.toolchain, "compiled": s.compiled, "cached": s.cached,
                "seconds": round(s.seconds, 3)}

    data = {"base": side(diff.base), "head": side(diff.head), "counts": diff.counts(),
            "identical": not diff.not_identical(), "variants": [r.to_json() for r in diff.rows]}
    return json_text(data) + "\n"


# --------------------------------------------------------------------------- Markdown


def render_markdown(diff: Diff) -> str:
    counts = diff.counts()
    out = [f"### kgate diff: {markdown(diff.base.label)} → {markdown(diff.head.label)}", ""]
    if not diff.not_identical():
        out.append(f"SASS identical: all {counts['identical']} kernel variant(s).")
        return "\n".join(out) + "\n"
    out.append(counts_line(diff) + ".")
    out.append("")
    out.append("| status | kernel | variant | target | regs | spill | smem | instructions | opcode families |")
    out.append("|---|---|---|---|---|---|---|---|---|")
    rows = diff.not_identical()
    for row in rows[:MARKDOWN_ROWS]:
        shown = dict(figures(row))
        variant = markdown_code(row.variant, table=True) + (
            f" (was {markdown_code(row.was, table=True)})" if row.was else "")
        cells = [row.status, markdown_code(row.kernel, table=True), variant,
                 markdown(row.target), *(markdown(shown.get(k, "")) for k in ("regs", "spill", "smem", "instructions")),
                 markdown(families(row) or (row.note if not row.was else ""))]
        out.append("| " + " | ".join(cells) + " |")
    if len(rows) > MARKDOWN_ROWS:
        out.append("")
        out.append(f"… and {len(rows) - MARKDOWN_ROWS} more (`kgate diff --format json` lists every one).")
    listed = [r for r in rows if r.lines][:MARKDOWN_LISTINGS]
    for row in listed:
        summary_text = (f"{markdown(row.kernel)} {markdown(row.variant)} {markdown(row.target)}: first difference at "
                        f"instruction {row.first}")
        out += ["", f"<details><summary>{summary_text}</summary>", "", _fence(row), "", "</details>"]
    return "\n".join(out) + "\n"


def _fence(row: Row) -> str:
    from kgate.report.escape import visible

    body = [f"{ln.sign} {visible(ln.text)}" + (f"    // {visible(ln.source)}" if ln.source else "")
            for ln in row.lines]
    fence = "`" * max(3, max((len(run) for line in body for run in re.findall("`+", line)), default=0) + 1)
    return "\n".join([f"{fence}diff", *body, fence])
