"""The audit's numbers, computed once so that the HTML and the Markdown report agree.

Per kernel variant and target: the five budgets on every card shown for the
target (registers and occupancy, shared memory and pipeline depth, warps per
sub-core, waves at the declared shapes, intensity against the ridge), the
instruction mix from PTX and SASS, the findings, the differences against the
baseline, and a headroom score that ranks variants by how close they are to
a cliff.

Headroom is the smallest of these margins, each 1 when far from its limit,
0 at the limit and negative past it:

- registers: 1 - registers / 255 (the per-thread cap; past it ptxas spills);
- spills: 1 - spill bytes / cliff (a quarter of the register bytes), 1 without spills;
- shared memory: 1 - bytes per CTA / the target's opt-in budget;
- warps per sub-core, for elementwise and reduction kernels only (a pipelined
  GEMM hides latency in its stages): (warps - 5) / 5, at most 1.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kgate import rules as registry  # type: ignore[attr-defined]
from kgate.core.findings import Finding, sort_findings
from kgate.facts.model import CompileFailure, KernelFacts
from kgate.hardware.budgets import (
    ACCUMULATOR_SHARE,
    WARPS_TABLE,
    Residency,
    Traffic,
    accumulator_registers,
    buffers_that_fit,
    gemm_ctas,
    gemm_traffic,
    max_registers_for,
    registers_per_warp,
    residency,
    spill_cliff_bytes,
    tile,
    warps_per_subcore_by_registers,
    waves,
)
from kgate.hardware.profiles import Profile, primary
from kgate.report.escape import as_bytes
from kgate.report.excerpt import Excerpt
from kgate.report.mma import short_mma

if TYPE_CHECKING:
    from kgate.diff.compare import Diff

Key = tuple[str, str, str]


@dataclass(frozen=True)
class Thresholds:
    """The limits the audit judges by: the rules' options, as configured (`under`)."""

    latency_kinds: tuple[str, ...]  # occupancy (KG105) `kinds`
    latency_warps: int  # occupancy (KG105) `min_warps_per_subcore`
    cliff_fraction: float  # spill (KG103) `cliff_fraction`

    @classmethod
    def under(cls, configured: Mapping[str, Mapping[str, Any]] | None = None) -> Thresholds:
        """The limits under a configuration's rule options (`Selection.options`; none: the rules' defaults)."""
        return cls(tuple(registry.option("KG105", "kinds", configured)),
                   int(registry.option("KG105", "min_warps_per_subcore", configured)),
                   float(registry.option("KG103", "cliff_fraction", configured)))


@dataclass(frozen=True)
class Term:
    """One margin of the headroom score: 1 far from the limit, 0 at it, negative past it."""

    name: str
    value: float
    detail: str


@dataclass(frozen=True)
class Headroom:
    score: float
    limiter: str
    terms: tuple[Term, ...]


@dataclass(frozen=True)
class WaveRow:
    shape: str
    ctas: int | None = None
    waves: int | None = None
    efficiency: float | None = None
    note: str = ""


@dataclass(frozen=True)
class IntensityRow:
    shape: str
    ridge: float
    ridge_estimated: bool
    traffic: Traffic | None = None
    note: str = ""

    @property
    def intensity(self) -> float | None:
        return self.traffic.intensity if self.traffic else None

    @property
    def verdict(self) -> str:
        if self.traffic is None:
            return ""
        return "compute bound" if self.traffic.intensity >= self.ridge else "memory bound"


@dataclass(frozen=True)
class CardBudgets:
    profile: Profile
    registers_per_warp: int  # allocated, in the card's allocation unit
    warps_by_registers: float  # resident warps per sub-core the register file allows
    residency: Residency
    buffers_fit: int | None  # pipeline buffers that fit the card's opt-in budget
    waves: tuple[WaveRow, ...]
    intensity: tuple[IntensityRow, ...]


@dataclass(frozen=True)
class InstructionMix:
    ptx_mma: tuple[tuple[str, str, int], ...]  # short name, full opcode, count
    sass_mma: tuple[tuple[str, int], ...]
    global_loads: tuple[tuple[str, int, int], ...]  # opcode, bits per thread, count
    global_stores: tuple[tuple[str, int, int], ...]
    other: tuple[tuple[str, str, int], ...]  # (what, opcode, count): async copies, shared memory, barriers, PDL
    spill_stores: int  # STL
    spill_loads: int  # LDL
    disassembled: bool


@dataclass(frozen=True)
class KernelAudit:
    facts: KernelFacts
    anchor: str
    findings: tuple[Finding, ...]
    cards: tuple[CardBudgets, ...]
    accumulator: float | None  # fp32 accumulator registers per thread (GEMMs with a known tile)
    spill_cliff: float
    latency_bound_kind: bool  # judged by warps per sub-core
    latency_warps: int  # how many it needs
    mix: InstructionMix
    headroom: Headroom
    baseline: tuple[str, ...] = ()  # differences against the baseline, one line each
    baselined: tuple[Finding, ...] = ()  # findings the baseline accepts (not in `findings`)
    # The variant as headings and tables show it: its readable specialisation (`variant_names`).
    name: str = ""
    # What tells it from the kernel's other variants, for labels that have little room (`variant_names`).
    short: str = ""
    excerpt: Excerpt | None = None  # its PTX and SASS around the instructions that matter

    @property
    def key(self) -> Key:
        return self.facts.key

    @property
    def title(self) -> str:
        """`kernel [variant] @ target`, as `kgate audit` and `kgate check` name a variant."""
        return f"{self.facts.kernel} [{self.name}] @ {self.facts.target}" if self.name else \
            f"{self.facts.kernel} @ {self.facts.target}"


@dataclass(frozen=True)
class Failure:
    failure: CompileFailure
    anchor: str
    findings: tuple[Finding, ...]


@dataclass(frozen=True)
class AuditModel:
    kernels: tuple[KernelAudit, ...]  # by kernel, variant, target
    failures: tuple[Failure, ...]
    cards: tuple[tuple[str, tuple[Profile, ...]], ...]  # per target
    toolchain: tuple[tuple[str, str], ...]
    version: str
    findings: tuple[Finding, ...] = field(default=())
    baseline_state: str = "no baseline"  # e.g. "compared with kgate-baseline.toml"
    baseline_compared: bool = False
    baseline_notes: tuple[str, ...] = ()  # differences that belong to no kernel (toolchain, source files)
    sass_diff: Diff | None = None  # `kgate audit --diff BASE`: the variants whose SASS changed since BASE
    verdict: str = ""  # what `kgate check` would say of the same run, e.g. "fails: 3 findings at error"

    @property
    def ranking(self) -> tuple[KernelAudit, ...]:
        """Closest to a cliff first."""
        return tuple(sorted(self.kernels, key=lambda k: (k.headroom.score, k.key)))


def anchor(*parts: str) -> str:
    text = "-".join(parts)
    slug = re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()[:60]
    return f"{slug}-{hashlib.sha256(as_bytes(text)).hexdigest()[:8]}"


_SHAPE_ORDER = ("M", "N", "K", "ctas", "flops", "bytes")


def shape_label(shape: Mapping[str, int]) -> str:
    """`M=8192, N=4096, K=4096`: GEMM dimensions first (the facts cache does not keep key order)."""
    keys = sorted(shape, key=lambda k: (_SHAPE_ORDER.index(k) if k in _SHAPE_ORDER else len(_SHAPE_ORDER), k))
    return ", ".join(f"{k}={shape[k]}" for k in keys)


def wave_rows(facts: KernelFacts, profile: Profile) -> tuple[WaveRow, ...]:
    if not facts.shapes:
        return (WaveRow("", note="no shape declared"),)
    bm, bn = tile(facts.constexprs, "M"), tile(facts.constexprs, "N")
    rows = []
    for shape in facts.shapes:
        label = shape_label(shape)
        if "ctas" in shape:
            ctas = shape["ctas"]
        elif facts.kind == "gemm" and {"M", "N"} <= set(shape) and bm and bn:
            ctas = gemm_ctas(shape["M"], shape["N"], bm, bn)
        elif facts.kind == "gemm" and {"M", "N"} <= set(shape):
            rows.append(WaveRow(label, note="no tile size among the constexprs (BM/BN, BLOCK_M/BLOCK_N)"))
            continue
        else:
            rows.append(WaveRow(label, note="declare ctas (the grid size) for this shape"))
            continue
        w = waves(ctas, profile)
        rows.append(WaveRow(label, ctas, w.waves, w.efficiency))
    return tuple(rows)


def intensity_rows(facts: KernelFacts, profile: Profile) -> tuple[IntensityRow, ...]:
    estimated = bool({"mma_tflops", "dram_gbps"} & set(profile.estimated))
    if not facts.shapes:
        return (IntensityRow("", profile.ridge, estimated, note="no shape declared"),)
    rows = []
    for shape in facts.shapes:
        label = shape_label(shape)
        traffic: Traffic | None = None
        note = ""
        if "flops" in shape and "bytes" in shape:
            traffic = Traffic(float(shape["flops"]), float(shape["bytes"]))
        elif facts.kind == "gemm" and {"M", "N", "K"} <= set(shape):
            traffic = gemm_traffic(shape["M"], shape["N"], shape["K"], facts.signature)
            note = "" if traffic else "cannot tell A, B and C from the signature's pointers"
        else:
            note = "declare flops and bytes (or M, N, K for a GEMM)"
        rows.append(IntensityRow(label, profile.ridge, estimated, traffic, note))
    return tuple(rows)


def card_budgets(facts: KernelFacts, profile: Profile) -> CardBudgets:
    res = facts.resources
    fit = None
    if facts.smem_buffers and facts.smem_per_buffer:
        fit = buffers_that_fit(res.smem_bytes, facts.smem_buffers, facts.smem_per_buffer, profile.smem_optin_per_cta)
    return CardBudgets(
        profile=profile,
        registers_per_warp=registers_per_warp(max(res.registers, 1), profile),
        warps_by_registers=warps_per_subcore_by_registers(res.registers, profile),
        residency=residency(res.registers, res.smem_bytes, facts.num_warps, profile),
        buffers_fit=fit,
        waves=wave_rows(facts, profile),
        intensity=intensity_rows(facts, profile),
    )


_LOAD_BITS = {"128": 128, "64": 64, "U8": 8, "S8": 8, "U16": 16, "S16": 16}
# Other instructions worth seeing, by what they do.
_OTHER_HEADS = (
    ("async copy to shared", ("LDGSTS", "UTMALDG", "UBLKCP")),  # cp.async, TMA, bulk copy
    ("shared memory", ("LDSM", "LDS", "STS")),
    ("barrier", ("BAR",)),
    ("PDL", ("ACQBULK", "PREEXIT")),  # griddepcontrol.wait / launch_dependents
)


def readable(variant: str) -> str:
    """A Triton variant's name without its tag (`BLOCK=1024,warps=4,stages=3,bf16+fp32#3fa2c1d0` ->
    `BLOCK=1024,warps=4,stages=3,bf16+fp32`): the tag hashes what the launcher decided beyond the readable part."""
    return variant.rsplit("#", 1)[0] if re.search(r"#[0-9a-f]{8}$", variant) else variant


def variant_names(keys: Iterable[Key]) -> dict[Key, tuple[str, str]]:
    """(name, short) of every variant: the name is its readable part, tag included only where another variant of
    the kernel on the same target reads the same; the short form keeps of the name the comma-separated parts that
    differ among the kernel's variants (all of it for a kernel with one variant, or where the parts do not tell
    the variants apart)."""
    keys = sorted(set(keys))
    by_kernel: dict[str, list[Key]] = {}
    for key in keys:
        by_kernel.setdefault(key[0], []).append(key)
    out: dict[Key, tuple[str, str]] = {}
    for group in by_kernel.values():
        seen: dict[tuple[str, str], int] = {}
        for _kernel, variant, target in group:
            seen[(readable(variant), target)] = seen.get((readable(variant), target), 0) + 1
        names = {k: readable(k[1]) if seen[(readable(k[1]), k[2])] == 1 else k[1] for k in group}
        distinct = sorted(set(names.values()))
        common = set.intersection(*(set(n.split(",")) for n in distinct)) if len(distinct) > 1 else set()
        shorts = {n: ",".join(p for p in n.split(",") if p not in common) or n for n in distinct}
        if len(set(shorts.values())) < len(distinct):
            shorts = {n: n for n in distinct}
        for key in group:
            out[key] = (names[key], shorts[names[key]])
    return out


def access_bits(opcode: str) -> int:
    """Bits per thread of an LDG/STG form: LDG.E is 32, LDG.E.128 is 128, LDG.E.U8 is 8."""
    for part in opcode.split(".")[1:]:
        if part in _LOAD_BITS:
            return _LOAD_BITS[part]
    return 32


def instruction_mix(facts: KernelFacts) -> InstructionMix:
    ptx = tuple(sorted((short_mma(op), op, n) for op, n in facts.entry.mma.items()))
    sass = facts.sass
    if sass is None:
        return InstructionMix(ptx, (), (), (), (), 0, 0, False)

    def widths(head: str) -> tuple[tuple[str, int, int], ...]:
        return tuple(sorted(((op, access_bits(op), n) for op, n in sass.family(head).items()),
                            key=lambda row: (-row[1], row[0])))

    other = tuple((what, op, n) for what, heads in _OTHER_HEADS
                  for op, n in sorted(kv for head in heads for kv in sass.family(head).items()))
    return InstructionMix(ptx, tuple(sorted(sass.mma.items())), widths("LDG"), widths("STG"), other,
                          sass.count("STL"), sass.count("LDL"), True)


def headroom(facts: KernelFacts, profile: Profile, res: Residency, limits: Thresholds) -> Headroom:
    regs = facts.resources.registers
    cap = profile.max_registers_per_thread
    terms = [Term("registers", 1 - regs / cap, f"{regs} of {cap} registers per thread")]
    spilled = facts.resources.spill_stores
    cliff = spill_cliff_bytes(regs, limits.cliff_fraction)
    if spilled:
        terms.append(Term("spills", 1 - spilled / cliff if cliff else -1.0,
                          f"{spilled:,} spill bytes, cliff at {cliff:,g}"))
    else:
        terms.append(Term("spills", 1.0, "no spills"))
    smem, budget = facts.resources.smem_bytes, profile.smem_optin_per_cta
    terms.append(Term("shared memory", 1 - smem / budget, f"{smem_shown(facts)} of {budget:,} bytes per CTA"))
    if facts.kind in limits.latency_kinds:
        need = limits.latency_warps
        terms.append(Term("warps per sub-core", min(1.0, (res.warps_per_subcore - need) / need),
                          f"{res.warps_per_subcore:g} warps per sub-core, {need} needed"))
    worst = min(terms, key=lambda t: t.value)
    return Headroom(worst.value, worst.name, tuple(terms))


def audit_kernel(facts: KernelFacts, cards: Sequence[Profile], findings: Iterable[Finding],
                 baseline: Sequence[str] = (), baselined: Iterable[Finding] = (),
                 limits: Thresholds | None = None, name: str = "", short: str = "",
                 excerpt: Excerpt | None = None) -> KernelAudit:
    limits = limits or Thresholds.under()
    bm, bn = tile(facts.constexprs, "M"), tile(facts.constexprs, "N")
    accumulator = None
    if facts.kind == "gemm" and bm and bn:
        accumulator = accumulator_registers(bm, bn, facts.num_warps)
    home = primary(facts.target)
    return KernelAudit(
        facts=facts,
        anchor=anchor(facts.kernel, facts.variant, facts.target),
        findings=tuple(sort_findings(list(findings))),
        cards=tuple(card_budgets(facts, p) for p in cards),
        accumulator=accumulator,
        spill_cliff=spill_cliff_bytes(facts.resources.registers, limits.cliff_fraction),
        latency_bound_kind=facts.kind in limits.latency_kinds,
        latency_warps=limits.latency_warps,
        mix=instruction_mix(facts),
        headroom=headroom(facts, home, residency(facts.resources.registers, facts.resources.smem_bytes,
                                                 facts.num_warps, home), limits),
        baseline=tuple(baseline),
        baselined=tuple(sort_findings(list(baselined))),
        name=name or readable(facts.variant),
        short=short or name or readable(facts.variant),
        excerpt=excerpt,
    )


def register_table(profile: Profile) -> tuple[tuple[int, int], ...]:
    """(warps per sub-core, most registers per thread that allow it), the seed method's table."""
    return tuple((w, max_registers_for(w, profile)) for w in WARPS_TABLE)


def accumulator_over_share(audit: KernelAudit) -> bool:
    regs = audit.facts.resources.registers
    return audit.accumulator is not None and regs > 0 and audit.accumulator > ACCUMULATOR_SHARE * regs


def _by_kernel(findings: Iterable[Finding]) -> dict[Key, list[Finding]]:
    out: dict[Key, list[Finding]] = {}
    for f in findings:
        if f.kernel:
            out.setdefault((f.kernel, f.variant or "", f.target or ""), []).append(f)
    return out


def build(facts: Sequence[KernelFacts], failures: Sequence[CompileFailure], findings: Sequence[Finding],
          cards: Mapping[str, Sequence[Profile]], *, toolchain: Mapping[str, str] | None = None,
          version: str = "", baseline: Mapping[Key, Sequence[str]] | None = None,
          baselined: Sequence[Finding] = (), baseline_state: str = "no baseline", baseline_compared: bool = False,
          baseline_notes: Sequence[str] = (), limits: Thresholds | None = None,
          excerpts: Mapping[Key, Excerpt] | None = None, verdict: str = "") -> AuditModel:
    """The audit of every compiled variant.

    `findings` are the active ones; `baselined` those the baseline accepts;
    `baseline` maps a (kernel, variant, target) to its differences against
    the baseline, one line each; `excerpts` its PTX and SASS around the
    instructions that matter; `verdict` what `kgate check` says of the run.
    """
    active, accepted = _by_kernel(findings), _by_kernel(baselined)
    baseline = baseline or {}
    limits = limits or Thresholds.under()
    names = variant_names(k.key for k in facts)
    excerpts = excerpts or {}
    kernels = tuple(audit_kernel(k, cards.get(k.target, (primary(k.target),)), active.get(k.key, ()),
                                 baseline.get(k.key, ()), accepted.get(k.key, ()), limits, *names[k.key],
                                 excerpt=excerpts.get(k.key))
                    for k in sorted(facts, key=lambda k: k.key))
    failed = tuple(
        Failure(f, anchor(f.kernel, f.variant, f.target, "failed"),
                tuple(sort_findings(active.get((f.kernel, f.variant, f.target), []))))
        for f in sorted(failures, key=lambda f: (f.kernel, f.variant, f.target)))
    tools = tuple(sorted((k, v) for k, v in (toolchain or {}).items() if not k.endswith(".id")))
    card_list = tuple((target, tuple(cards[target])) for target in sorted(cards))
    return AuditModel(kernels, failed, card_list, tools, version, tuple(sort_findings(list(findings))),
                      baseline_state, baseline_compared, tuple(baseline_notes), verdict=verdict)


def smem_shown(facts: KernelFacts) -> str:
    """A kernel's shared memory per CTA as the reports write it: `1,024+?` where it takes dynamic shared memory of a
    size the source does not settle (the figure counts the rest, and the run may give it more)."""
    return f"{facts.resources.smem_bytes:,}" + ("+?" if facts.smem_dynamic_unknown else "")
