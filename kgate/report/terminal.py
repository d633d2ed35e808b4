"""Terminal output: findings one per line, a table per kernel variant and target, one summary line.

Every text from the project (paths, kernel and variant names, messages) goes through `escape.terminal`. Paths
are shown from the folder the command runs in (`kgate.report.paths`).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kgate.core.findings import Finding, Severity
from kgate.core.result import Result
from kgate.report.differences import standing_text
from kgate.report.escape import terminal
from kgate.report.paths import Shown, as_named
from kgate.report.table import aligned

if TYPE_CHECKING:
    from kgate.facts.model import KernelFacts

_COLOURS = {Severity.ERROR: "31", Severity.WARNING: "33", Severity.NOTE: "36"}


def use_colour(choice: str, is_tty: bool, environ: Mapping[str, str] = os.environ) -> bool:
    """Whether to colour: `--color always|never` first, then NO_COLOR (any non-empty value: no colour), then
    FORCE_COLOR (any non-empty value: colour even off a terminal), then whether the output is a terminal."""
    if choice != "auto":
        return choice == "always"
    if environ.get("NO_COLOR"):
        return False
    if environ.get("FORCE_COLOR"):
        return True
    return is_tty


def screen_width() -> int | None:
    """The terminal's width in columns (COLUMNS when set), or None when stdout is not a terminal: a log or a
    file keeps whole lines."""
    import shutil

    columns = shutil.get_terminal_size(fallback=(0, 0)).columns
    return columns or None


def _paint(text: str, code: str, colour: bool) -> str:
    return f"\033[{code}m{text}\033[0m" if colour else text


def finding_line(f: Finding, colour: bool = False, standing: tuple[Any, ...] = (), shown: Shown = as_named) -> str:
    """One finding on one line; `standing`, what the ratchet says of it (`Result.standing_of`), in parentheses
    after its rule's name: `(new)`, `(worse than baseline: spill_bytes 0 -> 120)`; `shown`, how its path is named
    for the reader."""
    where = f"{terminal(shown(f.path))}:{f.line}" + (f":{f.col}" if f.col else "")
    subject = ""
    if f.kernel and f.target:
        subject = f" [{f.kernel}" + (f" {f.variant}" if f.variant else "") + f" @ {f.target}]"
    elif f.kernel:
        subject = f" [{f.kernel}]"
    code = _paint(f"{f.code} {f.severity.value}", _COLOURS[f.severity], colour)
    said = standing_text(standing)
    state = f" ({terminal(said, line_start=False)})" if said else ""
    return (f"{where}: {code} {terminal(f.name, line_start=False)}{state}: "
            f"{terminal(f.message + subject, line_start=False)}")


def related_lines(f: Finding, shown: Shown = as_named) -> list[str]:
    """The finding's other places, one indented line each, under the finding's own line."""
    return [f"    {terminal(f'{shown(place.path)}:{place.line}' if place.path else place.place, line_start=False)}: "
            f"{terminal(place.message, line_start=False)}" for place in f.related]


def _verdict(facts: KernelFacts, by_kernel: dict[tuple[str, str, str], list[Finding]]) -> str:
    found = by_kernel.get(facts.key, [])
    if not found:
        return "ok"
    worst = min(found, key=lambda f: f.severity.rank)
    return f"{worst.severity.value} ({', '.join(sorted({f.name for f in found}))})"


def kernel_table(kernels: list[KernelFacts], findings: list[Finding], *, all_rows: bool = True,
                 width: int | None = None) -> list[str]:
    """The kernel table: a row per kernel variant and target (only those with findings unless `all_rows`), the
    variant column cut so that a row fits in `width` columns when it can, and a line saying how many rows
    were left out."""
    # Imported here: `kgate lint` renders no kernel table and should not pay for these.
    from kgate.hardware.budgets import residency
    from kgate.hardware.profiles import primary
    from kgate.report.mma import short_mma

    by_kernel: dict[tuple[str, str, str], list[Finding]] = {}
    for f in findings:
        if f.kernel and f.variant and f.target:
            by_kernel.setdefault((f.kernel, f.variant, f.target), []).append(f)
    header = ("kernel", "variant", "target", "regs", "spill", "smem", "w/sub", "mma", "verdict")
    shown = short_variants([k.key for k in kernels])
    chosen = [k for k in sorted(kernels, key=lambda k: k.key) if all_rows or k.key in by_kernel]
    # Which capture each row's launch comes from, where any row's does: a capture applies to the targets it bound for.
    origin = any(k.captured for k in chosen)
    rows: list[tuple[str, ...]] = [header + ("captured",) if origin else header]
    fraction = ""
    for k in chosen:
        res = k.resources
        card = primary(k.target)
        occ = residency(res.registers, res.smem_bytes, k.num_warps, card)
        mma = ", ".join(sorted({short_mma(op) for op in k.entry.mma})) or "-"
        smem = f"{res.smem_bytes}+?" if k.smem_dynamic_unknown else str(res.smem_bytes)
        row = (k.kernel, shown[k.key], k.target, str(res.registers), str(res.spill_stores), smem,
               f"{occ.warps_per_subcore:g}", mma, _verdict(k, by_kernel))
        rows.append(row + (", ".join(k.captured) or "-",) if origin else row)
        if not fraction and occ.warps_per_subcore != int(occ.warps_per_subcore):
            fraction = fraction_legend(k, occ.ctas_per_sm, card.name, card.subcores_per_sm)
    hidden = len(kernels) - len(chosen)
    out = _fit(rows, width) if len(rows) > 1 else []
    if hidden:
        out.append(f"{hidden} of {len(kernels)} kernel variant(s) without findings not shown (--show-kernels shows "
                   f"them)")
    if fraction:
        out.append(fraction)
    return out


def fraction_legend(k: KernelFacts, ctas: int, card: str, subcores: int) -> str:
    """What a fractional `w/sub` means, with the numbers of the first row that has one: an average over the
    SM's sub-cores, each of which holds whole warps."""
    warps = ctas * k.num_warps
    return (f"w/sub: resident warps per SM sub-core, CTAs per SM x warps per CTA / sub-cores; a fraction is an "
            f"average: {terminal(k.kernel, line_start=False)} @ {k.target} keeps {ctas} CTA(s) of {k.num_warps} "
            f"warp(s) on each SM of the {card}, {warps} warps over {subcores} sub-cores = {warps / subcores:g}, so "
            f"some sub-cores hold more warps than others")


VARIANT_COLUMN = 1
MIN_VARIANT = 12  # narrower than this, a variant says nothing: the row is left wider than the screen


def _fit(rows: list[tuple[str, ...]], width: int | None) -> list[str]:
    """The table's lines, the variant column cut (with "...") so that the lines fit in `width` columns."""
    lines = aligned(rows, {3, 4, 5, 6})
    widest = max(len(line) for line in lines)
    if width is None or widest <= width:
        return lines
    column = max(len(terminal(row[VARIANT_COLUMN])) for row in rows)
    keep = max(MIN_VARIANT, column - (widest - width))
    cut = [row[:VARIANT_COLUMN] + (_cut(row[VARIANT_COLUMN], keep),) + row[VARIANT_COLUMN + 1:] for row in rows]
    return aligned(cut, {3, 4, 5, 6})


def _cut(text: str, keep: int) -> str:
    """`text` cut to `keep` columns as the terminal shows it (escaped), "..." where it was cut; the "#tag" that
    ends a variant's name stays when there is room for it."""
    if len(terminal(text)) <= keep:
        return text
    head, sep, tag = text.rpartition("#")
    if sep and len(terminal(tag)) + 1 + 3 + 4 <= keep:
        return _cut(head, keep - len(terminal(tag)) - 1) + sep + tag
    end = keep - 3
    while end > 0 and len(terminal(text[:end])) > keep - 3:
        end -= 1
    return text[:end] + "..."


VARIANT_WIDTH = 64


def variant_parts(variant: str) -> list[str]:
    """A variant name's comma-separated parts (a tuple value's own commas, in parentheses, stay inside)."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(variant):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(variant[start:i])
            start = i + 1
    parts.append(variant[start:])
    return parts


def short_variants(keys: list[tuple[str, str, str]]) -> dict[tuple[str, str, str], str]:
    """The variant column: of a Triton variant's name, the parts that tell it from the kernel's other rows (the
    values shared by every row of the kernel are left out), at most VARIANT_WIDTH characters, always with the
    tag that ends the name. Findings and reports keep the whole name. `keys`: (kernel, variant, target)."""
    by_kernel: dict[str, list[tuple[str, str, str]]] = {}
    for key in keys:
        by_kernel.setdefault(key[0], []).append(key)
    out = {}
    for rows in by_kernel.values():
        split = {}
        for key in rows:
            head, sep, tag = key[1].rpartition("#")
            split[key] = (variant_parts(head) if sep else [key[1]], sep + tag if sep else "")
        distinct = {key[1] for key in rows}
        common = set.intersection(*(set(parts) for parts, _tag in split.values())) if len(distinct) > 1 else set()
        for key, (parts, tag) in split.items():
            kept = [p for p in parts if p not in common] or parts[-2:]
            text = ",".join(kept)
            if len(text) + len(tag) > VARIANT_WIDTH:
                text = text[: max(8, VARIANT_WIDTH - len(tag) - 3)] + "..."
            out[key] = text + tag
    return out


def verdict_word(result: Result) -> str:
    """"passed", "FAILED", or, when `--exit-zero` forces exit 0 on a failing run, a failure that says so."""
    if not result.exit_code():
        return "passed"
    return "failed (exit forced to 0 by --exit-zero)" if result.exit_forced() else "FAILED"


def summary_line(result: Result) -> str:
    """The verdict and the counts, each finding counted once: by its severity, and among those below `fail_on`,
    how many fail the run through the ratchet; then the failing differences that are lines of their own."""
    counts = Counter(f.severity for f in result.findings)
    by_ratchet = Counter(f.severity for f in result.failing_by_ratchet())
    parts = [f"{counts.get(s, 0)} {s.value}{'s' if counts.get(s, 0) != 1 else ''}"
             + (f" ({by_ratchet[s]} failing the ratchet)" if by_ratchet.get(s) else "")
             for s in (Severity.ERROR, Severity.WARNING, Severity.NOTE)]
    if result.command == "check":
        subject = f"{len(result.kernels)} kernel variant(s)"
        if result.files_checked:
            subject += f" and {result.files_checked} source file(s)"
    else:
        subject = f"{result.files_checked} file(s)"
    extra = []
    if result.baselined:
        extra.append(f"{result.baselined} baselined")
    if result.suppressed:
        extra.append(f"{result.suppressed} suppressed")
    ratchet = result.ratchet_failures()
    if ratchet:
        extra.append(f"{len(ratchet)} ratchet failure(s)")
    verdict = verdict_word(result)
    tail = f" ({', '.join(extra)})" if extra else ""
    return f"kgate {result.command}: {verdict}: {subject}, {', '.join(parts)}{tail}"


def render(result: Result, *, colour: bool = False, table: bool = True, quiet: bool = False, all_kernels: bool = True,
           width: int | None = None, shown: Shown = as_named) -> str:
    """The terminal report. `quiet`: the findings, the failing ratchet lines and the summary only (no notices);
    `all_kernels` False: the table's rows with findings only; `width`: the screen's, to fit the table in;
    `shown`: a finding's path as printed (`kgate.report.paths.from_here`: from the current folder)."""
    lines: list[str] = []
    if table and result.kernels:
        lines.extend(kernel_table(result.kernels, result.findings, all_rows=all_kernels, width=width))
        lines.append("")
    for f in result.findings:
        lines.append(finding_line(f, colour, result.standing_of(f), shown))
        lines.extend(related_lines(f, shown))
    lines.extend(terminal(str(diff)) for diff in result.ratchet if not quiet or getattr(diff, "fails", True))
    if not quiet:
        lines.extend(terminal(notice) for notice in result.notices)
    if lines and lines[-1] != "":
        lines.append("")
    lines.append(summary_line(result))
    return "\n".join(lines) + "\n"


def statistics_lines(findings: list[Finding]) -> list[str]:
    counts = Counter((f.code, f.name) for f in findings)
    return [f"{n:>5}  {code}  {name}" for (code, name), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
