"""## What it does
Reports a kernel variant whose shared memory per CTA (Triton's dynamic
allocation plus any static shared memory) is above the target's opt-in
budget: 101376 bytes (99 KB) on sm_120a, 232448 bytes on sm_100a and sm_90a.
The message gives the budget and, for a pipelined kernel, how many stages of
its per-stage footprint would fit.

For a CUDA kernel the static `__shared__` memory is ptxas's figure, and the
dynamic part is read from the source: the third argument of a
`kernel<<<grid, block, bytes>>>` launch, the size a
`cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes)`
opts the kernel into, or the `dynamicSmemBytes` of the `cudaLaunchKernelEx`
configuration, the largest of them (a site may name the kernel through a
function-pointer variable its function assigns: `auto kernel = &k<T>;`)
where the file settles `bytes` to a number (literals, `sizeof` of built-in types, and the constants and
object-like macros the file and its project headers define once), or where the
compiler does: `sizeof(typename Kernel::SharedStorage)`, a type's
`SharedStorageSize`, as CUTLASS's adapter pattern sizes a kernel's storage, is
evaluated for each instantiation by a probe compile of the kernel's file
(docs/cuda.md). The finding points at that site too. A size only the run knows
(a variable computed from the problem), one whose names only the site's own
scope could say (a class's own member), or one a library's launcher sets in the
library's header (CUTLASS's own adapter), is not counted: the kernel is judged
on its static shared memory alone, and the report says the dynamic size is
unknown (`smem` column `0+?`, `smem_dynamic_unknown` in JSON). A kernel that
one launch gives a settled size and another a size only the run knows (or one
the compiler was to size and could not) is judged on the settled part and
reported as unknown too (`1024+?`), unless a settled `cudaFuncSetAttribute`
opt-in caps what its launches take.

## Why is this bad?
The launch fails at run time ("out of resource: shared memory") on the card
the kernel was meant for, and nothing fails on the machine it was written on:
a tile tuned on an H100 (228 KB) does not fit an RTX 5090 (99 KB).

## Example
A bf16 GEMM with BLOCK_M = BLOCK_N = 128, BLOCK_K = 128 and 4 stages needs
(128 + 128) x 128 x 2 x 4 = 256 KB.

## Use instead
Fewer stages (at least 3 to hide a DRAM load, 2 for an L2 hit), a smaller
BLOCK_K, or a narrower operand dtype: fp8 operands double the stages that fit.

## Options
None.
"""

from __future__ import annotations

from collections.abc import Iterable

from kgate.core.artifacts import Artifact
from kgate.core.findings import Related, Severity
from kgate.core.rule import CompiledContext, Report, Rule
from kgate.facts.model import KernelFacts
from kgate.hardware.budgets import stages_that_fit


def check(facts: KernelFacts, ctx: CompiledContext) -> Iterable[Report]:
    smem = facts.resources.smem_bytes
    budget = ctx.profile.smem_optin_per_cta
    if smem <= budget:
        return
    message = f"{smem} bytes of shared memory per CTA, over the {facts.target} budget of {budget} bytes"
    related: tuple[Related, ...] = ()
    if facts.smem_set_at:
        path, _, line = facts.smem_set_at.rpartition(":")
        dynamic = facts.resources.smem_dynamic
        message += f" ({dynamic} of them dynamic, given at {facts.smem_set_at})"
        related = (Related(path, int(line), f"{dynamic} bytes of dynamic shared memory given here"),)
    buffers, per_buffer = facts.smem_buffers, facts.smem_per_buffer
    if buffers and per_buffer and facts.num_stages:
        other = smem - buffers * per_buffer
        fit = max(0, (budget - other) // per_buffer)
        extra = facts.num_stages - buffers  # stages the compiler does not buffer
        message += (f": {buffers} pipeline buffers of {per_buffer} bytes at num_stages={facts.num_stages}; "
                    f"{fit} fit (num_stages={fit + extra})" if fit >= 1 else
                    f": not even one pipeline buffer of {per_buffer} bytes fits")
    elif facts.num_stages and facts.num_stages > 1:
        fit = stages_that_fit(smem, facts.num_stages, budget)
        message += f"; about {fit} of its {facts.num_stages} stages would fit"
    yield Report(message, related=related)


RULE = Rule(
    code="KG104",
    name="smem-budget",
    layer="compiled",
    severity=Severity.ERROR,
    summary="Shared memory per CTA above the target's opt-in budget",
    check=check,
    doc=__doc__ or "",
    measures=("smem_bytes",),
    reads=frozenset({Artifact.PTXAS_LOG, Artifact.TTGIR}),
)
