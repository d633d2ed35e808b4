"""The tables both audit renderers print, cell by cell, so that the HTML and the Markdown agree."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kgate.hardware.profiles import Profile
from kgate.report.audit_model import (
    AuditModel,
    InstructionMix,
    IntensityRow,
    KernelAudit,
    WaveRow,
    accumulator_over_share,
    register_table,
)

RIDGE_NOTE = (
    "Ridge = the card's bf16-into-fp32 MMA rate / its DRAM bandwidth (device profile data, marked estimate where "
    "the profile says so). Block-scaled fp8 and fp4 MMA run faster than bf16, so for those kernels the true ridge "
    "is higher than shown."
)


def baselined_note(model: AuditModel) -> str:
    """`, 3 accepted by the baseline` when the baseline accepted any finding."""
    accepted = sum(len(k.baselined) for k in model.kernels)
    return f", {accepted} accepted by the baseline" if accepted else ""


def percent(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{100 * value:.{digits}f}%"


def headroom_text(score: float) -> str:
    """A headroom score as a percentage; far past a cliff the size no longer matters."""
    return "< -100%" if score < -1 else percent(score, 0)


def number(value: Any) -> str:
    """Numbers the way the report prints them: integers grouped, floats to 3 significant digits."""
    if value is None:
        return "-"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, float):
        if value == int(value) and abs(value) < 1e15:
            return f"{int(value):,}"
        return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)



@dataclass(frozen=True)
class Row:
    budget: int  # 1..5
    label: str
    cells: tuple[str, ...]  # one per card
    status: tuple[str, ...] = ()  # "ok" | "warn" | "bad" | "" per cell


def _status(used: float, limit: float, warn_at: float = 0.9) -> str:
    if limit <= 0:
        return ""
    return "bad" if used > limit else "warn" if used >= warn_at * limit else "ok"


def table_position(registers: int, profile: Profile) -> str:
    """Where a register count sits in the warps-per-sub-core table."""
    for warps, limit in sorted(register_table(profile), reverse=True):
        if registers <= limit:
            return f"row {warps} warps/sub-core (<= {limit} registers)"
    first, limit = register_table(profile)[0]
    return f"above row {first} (more than {limit} registers)"


def budget_rows(audit: KernelAudit) -> tuple[Row, ...]:
    facts, res = audit.facts, audit.facts.resources
    rows: list[Row] = []

    def add(budget: int, label: str, cells: Iterable[str], status: Iterable[str] = ()) -> None:
        rows.append(Row(budget, label, tuple(cells), tuple(status)))

    cards = audit.cards
    add(1, "registers per thread", (f"{res.registers} of {c.profile.max_registers_per_thread}" for c in cards),
        (_status(res.registers, c.profile.max_registers_per_thread - 1, 0.94) for c in cards))
    add(1, "registers per warp (allocated)", (number(c.registers_per_warp) for c in cards))
    add(1, "CTAs per SM by registers", (number(c.residency.ctas_by_registers) for c in cards))
    add(1, "warps-per-sub-core table", (table_position(res.registers, c.profile) for c in cards))
    if audit.accumulator is not None:
        share = audit.accumulator / res.registers if res.registers else 0.0
        text = f"{audit.accumulator:g} registers, {percent(share, 0)} of {res.registers} (keep under 60%)"
        add(1, "fp32 accumulator (estimate)", (text for _ in cards),
            ("warn" if accumulator_over_share(audit) else "ok" for _ in cards))
    spill = f"{res.spill_stores} B stored, {res.spill_loads} B loaded (cliff {audit.spill_cliff:g} B)"
    add(1, "spills", (spill for _ in cards),
        ((_status(res.spill_stores, audit.spill_cliff, 0.0) if res.spill_stores else "ok") for _ in cards))
    add(2, "shared memory per CTA",
        (f"{number(res.smem_bytes)}{'+?' if facts.smem_dynamic_unknown else ''} of "
         f"{number(c.profile.smem_optin_per_cta)} B "
         f"({percent(res.smem_bytes / c.profile.smem_optin_per_cta, 0)})" for c in cards),
        (_status(res.smem_bytes, c.profile.smem_optin_per_cta) for c in cards))
    if facts.smem_buffers and facts.smem_per_buffer:
        add(2, "pipeline buffers that fit",
            (f"{c.buffers_fit} of {facts.smem_per_buffer:,} B each; it has {facts.smem_buffers} "
             f"(num_stages={facts.num_stages})" for c in cards),
            (("bad" if (c.buffers_fit or 0) < facts.smem_buffers else "ok") for c in cards))
    else:
        add(2, "pipeline buffers that fit", ("no multi-buffered pipeline in the IR" for _ in cards))
    add(2, "CTAs per SM by shared memory", (number(c.residency.ctas_by_smem) for c in cards))
    add(3, "CTAs per SM", (f"{c.residency.ctas_per_sm} (limited by {c.residency.limiter})" for c in cards),
        (("bad" if c.residency.ctas_per_sm == 0 else "ok") for c in cards))
    need = audit.latency_warps
    if audit.latency_bound_kind:
        add(3, "warps per sub-core", (f"{c.residency.warps_per_subcore:g} (needs {need})" for c in cards),
            (("ok" if c.residency.warps_per_subcore >= need else "bad") for c in cards))
    else:
        add(3, "warps per sub-core",
            (f"{c.residency.warps_per_subcore:g} ({need} required of elementwise and reduction kernels only; this "
             f"one is {'a GEMM' if facts.kind == 'gemm' else 'neither'})" for c in cards))
    for i in range(len(cards[0].waves) if cards else 0):
        label = f"waves at {cards[0].waves[i].shape}" if cards[0].waves[i].shape else "waves"
        add(4, label, (_wave_cell(c.waves[i]) for c in cards), (_wave_status(c.waves[i]) for c in cards))
    for i in range(len(cards[0].intensity) if cards else 0):
        row0 = cards[0].intensity[i]
        label = f"intensity at {row0.shape}" if row0.shape else "intensity"
        add(5, label, (_intensity_cell(c.intensity[i]) for c in cards))
    return tuple(rows)


def same_on_every_card(audit: KernelAudit) -> tuple[tuple[Row, ...], tuple[Row, ...]]:
    """The budget rows split in two: those that read the same on every card (shown once, under all their names)
    and the others, one cell per card. With one card, every row is a card's own."""
    rows = budget_rows(audit)
    if len(audit.cards) < 2:
        return (), rows
    same = [len(set(r.cells)) == 1 and len(set(r.status or ("",))) == 1 for r in rows]
    return (tuple(r for r, s in zip(rows, same) if s), tuple(r for r, s in zip(rows, same) if not s))


def cards_named(audit: KernelAudit) -> str:
    """`RTX 5090 and RTX 5060 Ti 16G`: the cards a shared row stands for."""
    names = [c.profile.name for c in audit.cards]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _wave_cell(row: WaveRow) -> str:
    if row.efficiency is None:
        return row.note
    return f"{row.ctas:,} CTAs, {row.waves} waves, {percent(row.efficiency)} efficient"


def _wave_status(row: WaveRow) -> str:
    if row.efficiency is None:
        return ""
    return "ok" if row.efficiency >= 0.9 else "warn" if row.efficiency >= 0.75 else "bad"


def _intensity_cell(row: IntensityRow) -> str:
    star = " (estimate)" if row.ridge_estimated else ""
    if row.intensity is None:
        return f"{row.note}; ridge {row.ridge:.0f} FLOP/B{star}"
    return f"{row.intensity:,.0f} FLOP/B vs ridge {row.ridge:.0f}{star}: {row.verdict}"


def mix_rows(mix: InstructionMix) -> tuple[tuple[str, str, str], ...]:
    """(what, instruction, count) rows of the instruction mix."""
    rows: list[tuple[str, str, str]] = [("PTX MMA", f"{short} ({full})", number(n)) for short, full, n in mix.ptx_mma]
    if not mix.ptx_mma:
        rows.append(("PTX MMA", "none", "0"))
    if not mix.disassembled:
        rows.append(("SASS", "not disassembled", "-"))
        return tuple(rows)
    rows += [("SASS MMA", op, number(n)) for op, n in mix.sass_mma] or [("SASS MMA", "none", "0")]
    rows += [("global load", f"{op} ({bits}-bit)", number(n)) for op, bits, n in mix.global_loads]
    rows += [("global store", f"{op} ({bits}-bit)", number(n)) for op, bits, n in mix.global_stores]
    rows += [("spill traffic", "STL (stores to local)", number(mix.spill_stores)),
             ("spill traffic", "LDL (loads from local)", number(mix.spill_loads))]
    rows += [(what, op, number(n)) for what, op, n in mix.other]
    return tuple(rows)
