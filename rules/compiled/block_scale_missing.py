"""## What it does
Checks that a kernel expected to use block-scaled MMA really contains a
block-scaled MMA instruction in its PTX (`mma.sync ... kind::mxf8f6f4.block_scale`
on sm_120a, `tcgen05.mma ... block_scale` on sm_100a), in its entry or in
any device function it calls, directly or not. The message names what the
compiler emitted instead, and any call whose code is not in the PTX. A
kernel expects block scaling when its registration says
`expect = ["block_scale"]`, or when the specialisation compiled calls
`tl.dot_scaled` (itself or in a function it calls, however its source
reaches it) and the registration does not set `expect` itself: read from
Triton's first IR of that specialisation, so a branch its constexprs remove
(`if USE_SCALED: ... tl.dot_scaled ... else: tl.dot`), a comment or a string
does not count; the same for a plain, an autotuned, a heuristics, a wrapped
or a captured kernel. A CUDA kernel expects it when a `[[tool.kgate.cuda]]`
table's `expect` globs name it (`expect = { "mxf8_gemm*" = ["block_scale"] }`).

On a target without native block scaling (sm_90a) the missing instruction is
reported as a note: there the fallback is the only code the compiler can make.

## Why is this bad?
`tl.dot_scaled` that falls back to a bf16 MMA gives correct answers at half
the speed, with no error or warning. Whether it falls back depends on the
compiler version (Triton 3.5.1 falls back on sm_120a, 3.6 and later emit the
native instruction), so the same source can be right on one machine and wrong
on the next. Only the compiled artifact tells.

## Example
```python
@triton.jit
def mxfp8_gemm(a, a_scale, b, b_scale, c, ...):
    ...
    acc = tl.dot_scaled(a_tile, sa, "e4m3", b_tile, sb, "e4m3", acc)
```
compiled by a Triton that lowers it to `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32`
(SASS `HMMA.16816.F32.BF16`).

## Use instead
Use a compiler that emits the native instruction for the target, operand
formats that the instruction supports (e4m3/e5m2/e2m1 with ue8m0 scales),
and a tile the instruction can cover; or drop the expectation with
`expect = []` where the fallback is intended.

## Options
None.
"""

from __future__ import annotations

from collections.abc import Iterable

from kgate.core.artifacts import Artifact
from kgate.core.findings import Severity
from kgate.core.rule import CompiledContext, Report, Rule
from kgate.facts.callgraph import INDIRECT
from kgate.facts.model import KernelFacts


def _emitted(facts: KernelFacts) -> str:
    mma = sorted(facts.entry.mma, key=lambda op: -facts.entry.mma[op])
    parts = []
    if mma:
        parts.append("PTX " + ", ".join(f"`{op}` x{facts.entry.mma[op]}" for op in mma[:3]))
    else:
        parts.append("no MMA instruction in the PTX")
    if facts.sass is not None:
        sass_mma = {op: n for op, n in facts.sass.opcodes.items()
                    if op.split(".")[0] in ("HMMA", "QMMA", "OMMA", "IMMA", "HGMMA", "QGMMA", "UTCQMMA", "UTCOMMA")}
        if sass_mma:
            parts.append("SASS " + ", ".join(f"`{op}`" for op in sorted(sass_mma)))
    opaque = facts.entry.opaque_calls
    if opaque:
        parts.append("and it calls " + ", ".join("a function pointer" if name == INDIRECT else f"`{facts.function_name(name)}`"
                                                 for name in opaque) + ", whose code is not in the PTX")
    return "; ".join(parts)


def misses_block_scale(facts: KernelFacts) -> bool:
    """Whether a kernel expected to use block-scaled MMA has none in its PTX: the kernels whose SASS this rule reads
    (to name the MMA the compiler emitted instead)."""
    return "block_scale" in facts.expect and not any("block_scale" in op for op in facts.entry.mma)


def check(facts: KernelFacts, ctx: CompiledContext) -> Iterable[Report]:
    if not misses_block_scale(facts):
        return
    emitted = _emitted(facts)
    if not ctx.profile.block_scaled_mma:
        yield Report(
            f"{facts.target} has no native block-scaled MMA; the compiler emitted {emitted} (expected there)",
            severity=Severity.NOTE,
        )
        return
    yield Report(f"expected block-scaled MMA on {facts.target}, but the compiler emitted {emitted}")


RULE = Rule(
    code="KG101",
    name="block-scale-missing",
    layer="compiled",
    severity=Severity.ERROR,
    summary="A kernel expected to use block-scaled MMA compiled without it",
    check=check,
    doc=__doc__ or "",
    reads=frozenset({Artifact.PTX, Artifact.SASS}),
    sass_when=misses_block_scale,
)
