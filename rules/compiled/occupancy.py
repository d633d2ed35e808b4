"""## What it does
For `elementwise` and `reduction` kernels, reports fewer resident warps per
sub-core than the latency-hiding threshold (default 5), computed from the
measured registers and shared memory: CTAs per SM are the smallest of the
register, shared-memory, warp and CTA-slot limits, and warps per sub-core are
CTAs per SM x warps per CTA / 4.

GEMMs and other kinds are not checked: a software-pipelined GEMM hides
latency with its stages and runs fastest at one or two warps per sub-core.

## Why is this bad?
A memory-bound kernel hides DRAM latency with other warps. On sm_120 that
hiding improves about six-fold at 5 or more warps per sub-core and is nearly
absent at 4 or fewer: a register-heavy elementwise kernel runs well below
bandwidth.

## Example
An RMSNorm with 8 warps at 168 registers: 1 CTA per SM by registers, 2 warps
per sub-core.

## Use instead
Keep elementwise and reduction kernels at or below 102 registers per thread
(5 warps per sub-core), use more, smaller CTAs, and reduce in fp32 registers
rather than holding whole rows.

## Options
- `min_warps_per_subcore` (integer, default 5).
- `kinds` (list, default ["elementwise", "reduction"]): kernel kinds checked.
"""

from __future__ import annotations

from collections.abc import Iterable

from kgate.core.artifacts import Artifact
from kgate.core.findings import Severity
from kgate.core.rule import CompiledContext, Option, Report, Rule
from kgate.facts.model import KernelFacts
from kgate.hardware.budgets import max_registers_for, residency


def check(facts: KernelFacts, ctx: CompiledContext) -> Iterable[Report]:
    if facts.kind not in ctx.options["kinds"]:
        return
    minimum = ctx.options["min_warps_per_subcore"]
    res = residency(facts.resources.registers, facts.resources.smem_bytes, facts.num_warps, ctx.profile)
    if res.warps_per_subcore >= minimum:
        return
    yield Report(
        f"{res.warps_per_subcore:g} warps per sub-core (threshold {minimum}): {res.ctas_per_sm} CTA(s) of "
        f"{facts.num_warps} warps per SM, limited by {res.limiter} "
        f"({facts.resources.registers} registers, {facts.resources.smem_bytes} bytes shared); "
        f"{minimum} warps per sub-core needs at most {max_registers_for(minimum, ctx.profile)} registers"
    )


RULE = Rule(
    code="KG105",
    name="occupancy",
    layer="compiled",
    severity=Severity.WARNING,
    summary="Elementwise or reduction kernel below 5 warps per sub-core",
    check=check,
    doc=__doc__ or "",
    options={
        "min_warps_per_subcore": Option(5, "latency-hiding threshold", int, minimum=1),
        "kinds": Option(["elementwise", "reduction"], "kernel kinds checked", list, str),
    },
    reads=frozenset({Artifact.PTXAS_LOG}),
)
