"""## What it does
Reads the kernel's SASS for local-memory instructions (`LDL`, `STL`)
inside a loop: on a cycle through a backward branch (a `BRA`, or a
jump through a table, whose targets are read from the cubin; the branch
back from a warp shuffle's fallback, which ptxas places after `EXIT`,
closes none). Local memory
is what ptxas uses for register spills and for per-thread arrays it cannot
keep in registers (an array indexed by a value known only at run time).
The SASS is read wherever ptxas reports a stack frame, whatever else the
variant asks for, with the device functions the kernel calls: a loop in a
`__noinline__` helper counts, and so does all of a helper called from
inside a loop (its local memory is paid on every trip), whether ptxas put
it in the kernel's code or listed it apart (`-rdc=true`).

Where the variant spills, its local memory is that spill (at least in part):
the finding is told inside the spill's (KG103), or the register ceiling's
(KG102) where the spill is the ceiling's, as a related place, and counted
once. A stack array indexed at run time in a variant that does not spill is
a finding of its own.

## Why is this bad?
Local memory is private per thread but lives in DRAM behind the L1: an
`LDL` costs a cache access at best and a trip to memory at worst. Once,
at a kernel's start or end, it does not matter; inside the main loop it
is paid on every iteration, by every thread, and it competes with the
loop's real loads for L1. ptxas's log reports the stack frame and the
spill bytes, but not where they are used: a kernel with a small, harmless
spill in its epilogue and one whose inner loop round-trips through the
stack look the same to the spill rule (KG103). This rule names the second.

## Example
```cuda
__global__ void histogram_local(const int* idx, const float* x, float* out, int n) {
    float bins[64];                       // indexed at run time: a stack array
    for (int j = 0; j < 64; ++j) bins[j] = 0.f;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        bins[idx[i] & 63] += x[i];        // LDL + STL on every iteration
    ...
}
```

## Use instead
Keep data indexed at run time in shared memory (with shared atomics where
threads collide), index per-thread arrays only with compile-time indices
(fully unrolled loops), or lower the register pressure of the loop (a
smaller tile, fewer stages, `num_warps`) so that nothing spills inside it.

## Options
None.
"""

from __future__ import annotations

from collections.abc import Iterable

from kgate.core.artifacts import Artifact
from kgate.core.findings import Severity
from kgate.core.rule import CompiledContext, Report, Rule
from kgate.facts.model import KernelFacts


def has_stack_frame(facts: KernelFacts) -> bool:
    """Whether ptxas gave the kernel a stack frame: the kernels whose SASS this rule reads (where its local memory
    is used)."""
    return facts.resources.stack_bytes > 0


def check(facts: KernelFacts, ctx: CompiledContext) -> Iterable[Report]:
    if facts.local_in_loop is None:
        return  # no stack frame, so no SASS was read: there is no local memory to find
    loads, stores = facts.local_in_loop
    if loads == 0 and stores == 0:
        return
    res = facts.resources
    yield Report(f"{loads} local load(s) (LDL) and {stores} local store(s) (STL) inside a loop of the SASS: "
                 f"{res.stack_bytes} bytes stack frame, {res.spill_stores} bytes spill stores")


RULE = Rule(
    code="KG109",
    name="local-memory-in-loop",
    layer="compiled",
    severity=Severity.WARNING,
    summary="Local memory (LDL/STL) inside a loop of the kernel's SASS: a spill or stack array in the hot path",
    check=check,
    doc=__doc__ or "",
    measures=("spill_bytes", "stack_bytes"),  # spills live in the stack frame: both grow together
    caused_by=("KG103",),  # the local memory of a variant that spills is (at least) its spill
    reads=frozenset({Artifact.PTXAS_LOG, Artifact.PTX, Artifact.SASS}),
    sass_when=has_stack_frame,
)
