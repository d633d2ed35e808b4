"""## What it does
Checks that the PTX `.target` of a compiled kernel is the arch-specific
target that was requested (`sm_120a`, not `sm_120`).

## Why is this bad?
Only the `a` targets can assemble the arch-specific instructions: block-scaled
MMA, `setmaxnreg`, the Hopper `wgmma`. Behind the usual `#if` feature macros
a build for the bare target silently drops them: no error, no `QMMA`/`OMMA` in
the SASS, a kernel that is correct and slow.

## Example
PTX that begins with `.target sm_120` when `sm_120a` was requested.

## Use instead
`--generate-code=arch=compute_120a,code=sm_120a` for nvcc, `-arch=sm_120a`
for NVRTC; Triton emits the `a` target by itself.

## Options
None.
"""

from __future__ import annotations

from collections.abc import Iterable

from kgate.facts.model import KernelFacts
from kgate.findings import Severity
from kgate.rule import CompiledContext, Report, Rule


def check(facts: KernelFacts, ctx: CompiledContext) -> Iterable[Report]:
    if facts.ptx_target != facts.target:
        yield Report(f"PTX targets {facts.ptx_target}, not the requested {facts.target}: "
                     f"arch-specific instructions (block-scaled MMA, wgmma, setmaxnreg) cannot be used")


RULE = Rule(
    code="KG106",
    name="ptx-target",
    layer="compiled",
    severity=Severity.ERROR,
    summary="PTX .target is not the arch-specific target requested",
    check=check,
    doc=__doc__ or "",
)
