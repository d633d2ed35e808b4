"""## What it does
Checks that the PTX `.target` of a compiled kernel is the arch-specific
target that was requested (`sm_120a`, not `sm_120`). A CUDA source whose own
build names a bare architecture of the target's family (`-gencode
arch=compute_120,code=sm_120`, CMake `CUDA_ARCHITECTURES 120`) is compiled
the way the build compiles it, so this rule reports what the real build
produces. A family target (`sm_120f`, `sm_100f`) is reported as a note: it
assembles block-scaled MMA and setmaxnreg (measured with nvcc 13.0 and
ptxas 13.4: the same `QMMA.SF` as `sm_120a`), but code behind
`__CUDA_ARCH_FEAT_SM120_ALL` or `__CUDA_ARCH_SPECIFIC__` is compiled out.

## Why is this bad?
Only the `a` targets can assemble the arch-specific instructions: block-scaled
MMA, `setmaxnreg`, the Hopper `wgmma`, Blackwell's `tcgen05`. Behind the
usual `#if` feature macros a build for the bare target silently drops them:
no error, no `QMMA`/`OMMA` in the SASS, a kernel that is wrong or slow.

## Example
PTX that begins with `.target sm_120` when `sm_120a` was requested, from
`nvcc -gencode arch=compute_120,code=sm_120`.

## Use instead
`--generate-code=arch=compute_120a,code=sm_120a` for nvcc (CMake:
`CUDA_ARCHITECTURES 120a`), `-arch=sm_120a` for NVRTC; Triton emits the `a`
target by itself.

## Options
None.
"""

from __future__ import annotations

from collections.abc import Iterable

from kgate.core.artifacts import Artifact
from kgate.core.findings import Severity
from kgate.core.rule import CompiledContext, Report, Rule
from kgate.facts.model import KernelFacts
from kgate.hardware.arch_features import family_note, lost_by_bare, split_arch


def check(facts: KernelFacts, ctx: CompiledContext) -> Iterable[Report]:
    if facts.ptx_target == facts.target:
        return
    compiled = split_arch(facts.ptx_target)
    requested = split_arch(facts.target)
    if compiled and requested and compiled[0] == requested[0] and compiled[1] == "f":
        yield Report(f"PTX targets {facts.ptx_target}, not the requested {facts.target}: "
                     f"{family_note(compiled[0])}", severity=Severity.NOTE)
        return
    family = requested[0] if requested else ""
    yield Report(f"PTX targets {facts.ptx_target}, not the requested {facts.target}: "
                 f"{lost_by_bare(family)} cannot be used")


RULE = Rule(
    code="KG106",
    name="ptx-target",
    layer="compiled",
    severity=Severity.ERROR,
    summary="PTX .target is not the arch-specific target requested",
    check=check,
    doc=__doc__ or "",
    reads=frozenset({Artifact.PTX}),
)
