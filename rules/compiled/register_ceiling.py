"""## What it does
Reports a kernel variant whose registers per thread, as ptxas allocated them,
are at or above a threshold (default 240; 255 is the hardware cap).

A variant at the ceiling that spills is one finding, this one: the spill
(KG103) and the local memory it puts inside a loop (KG109) are what the
ceiling causes, so they are reported inside it, as related places, and
counted once (its severity is the worst of the three). The fix is here: the
spill and the local memory go away with the registers, never apart from them.

## Why is this bad?
A kernel at the ceiling has no room left: the next change to it (one more
live value, a new compiler version) makes ptxas spill to local memory, and
the kernel that ran fine yesterday falls off a cliff. At the cap itself ptxas
has usually spilled already. Registers also set occupancy: 240 registers
allow one 8-warp CTA per SM.

## Example
A 128x128 fp32 accumulator with 8 warps, 3 stages and a fused epilogue:
`Used 245 registers` in the ptxas log.

## Use instead
A smaller tile (BLOCK_N 64), more warps to share the accumulator, fewer
pipeline stages, or an epilogue that stores in slices. If the kernel is
meant to sit there, pin it in the baseline: any growth then fails.

## Options
- `threshold` (integer, default 240): report at or above this many registers.
"""

from __future__ import annotations

from collections.abc import Iterable

from kgate.core.artifacts import Artifact
from kgate.core.findings import Severity
from kgate.core.rule import CompiledContext, Option, Report, Rule
from kgate.facts.model import KernelFacts


def check(facts: KernelFacts, ctx: CompiledContext) -> Iterable[Report]:
    threshold = ctx.options["threshold"]
    registers = facts.resources.registers
    if registers >= threshold:
        cap = ctx.profile.max_registers_per_thread
        yield Report(f"{registers} registers per thread (threshold {threshold}, cap {cap})")


RULE = Rule(
    code="KG102",
    name="register-ceiling",
    layer="compiled",
    severity=Severity.ERROR,
    summary="Registers per thread at or above the ceiling threshold",
    check=check,
    doc=__doc__ or "",
    options={"threshold": Option(240, "report at or above this many registers per thread", int, minimum=1)},
    measures=("registers",),
    reads=frozenset({Artifact.PTXAS_LOG}),
)
