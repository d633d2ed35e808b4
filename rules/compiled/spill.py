"""## What it does
Reports register spills as ptxas counts them (`bytes spill stores` in the
`-v` log): a warning for any spill, an error past the cliff. The cliff is
spill bytes above a fraction (default one quarter) of the register bytes per
thread (registers x 4). A kernel's spills are its own and those of every
device function it calls, directly or not (`__noinline__`,
`@triton.jit(noinline=True)`): ptxas reports a called function's spills in
a block of its own, and the finding names the functions they are in. A
function whose code is not in the kernel's compile (defined in another
file and linked, `-rdc=true`) has figures ptxas prints where it compiles
that file: the kernel gets a note naming it, never a silent zero.

A spill at the register ceiling is the ceiling's (KG102): where both are
reported on one variant, the spill is told inside the register-ceiling
finding, and so is the local memory it puts inside a loop (KG109); below the
ceiling the spill is the finding that carries that local memory.

## Why is this bad?
A spill goes to local memory: DRAM behind the L1. Spilling is a gradient,
not a switch: 16 spill bytes can be the price of a second CTA per SM and
cost under 0.5% (measured on a Stream-K bf16 GEMM on an RTX 5090: 128
registers and 16 spills ran at 253.9 TFLOP/s against 250.4 with none), while
84 spills at 84 registers ran at 52.6. Past about a quarter of the registers
the kernel falls off the cliff.

## Example
`5688 bytes stack frame, 12468 bytes spill stores` for a 256x256 tile with
8 warps on sm_120a.

## Use instead
A smaller tile or more warps, fewer stages, or splitting the kernel. A spill
below the cliff that buys occupancy can be accepted: pin it in the baseline.

## Options
- `warn` (boolean, default true): report any spill below the cliff as a warning.
- `cliff_fraction` (number, default 0.25): error when spill bytes exceed this
  fraction of the register bytes per thread.
"""

from __future__ import annotations

from collections.abc import Iterable

from kgate.core.artifacts import Artifact
from kgate.core.findings import Severity
from kgate.core.rule import CompiledContext, Option, Report, Rule
from kgate.facts.callgraph import INDIRECT
from kgate.facts.model import KernelFacts, Resources
from kgate.hardware.budgets import spill_cliff_bytes


def _in_callees(facts: KernelFacts, res: Resources) -> str:
    """Where the spills of called functions are, when there are any."""
    spilling = [(name, stores) for name, _frame, stores, loads in res.callees if stores or loads]
    if not spilling:
        return ""
    return " (" + ", ".join(f"{stores} bytes of the stores in `{facts.function_name(name)}`" for name, stores in spilling) + \
        ", which the kernel calls)"


def _unseen(facts: KernelFacts) -> list[str]:
    """The functions the kernel calls whose code is not in its compile (defined in another file under `-rdc=true`):
    their spills are not in the figures ptxas printed for it."""
    return [facts.function_name(name) for name in facts.entry.opaque_calls if name != INDIRECT]


def check(facts: KernelFacts, ctx: CompiledContext) -> Iterable[Report]:
    unseen = _unseen(facts)
    if unseen:
        yield Report("calls " + ", ".join(f"`{name}`" for name in unseen) + ", whose code is not in this compile "
                     "(compiled apart and linked, as under -rdc=true): its spills and stack frame are not counted here; "
                     "the build that compiles its file reports them", severity=Severity.NOTE)
    res = facts.resources
    if res.spill_stores == 0 and res.spill_loads == 0:
        return
    register_bytes = res.registers * 4
    cliff = spill_cliff_bytes(res.registers, ctx.options["cliff_fraction"])
    detail = (f"{res.spill_stores} bytes spill stores, {res.spill_loads} bytes spill loads "
              f"at {res.registers} registers{_in_callees(facts, res)}")
    if res.spill_stores > cliff:
        yield Report(f"{detail}: past the cliff ({cliff:g} bytes = {ctx.options['cliff_fraction']:g} "
                     f"of {register_bytes} register bytes)", severity=Severity.ERROR)
    elif ctx.options["warn"]:
        yield Report(f"{detail} (below the cliff of {cliff:g} bytes)")


RULE = Rule(
    code="KG103",
    name="spill",
    layer="compiled",
    severity=Severity.WARNING,
    summary="Register spills: a warning for any, an error past the cliff",
    check=check,
    doc=__doc__ or "",
    options={
        "warn": Option(True, "report any spill below the cliff as a warning", bool),
        "cliff_fraction": Option(0.25, "error above this fraction of the register bytes", (int, float), minimum=0),
    },
    measures=("spill_bytes", "stack_bytes"),  # spills live in the stack frame: both grow together
    caused_by=("KG102",),  # a spill at the register ceiling is the ceiling's
    reads=frozenset({Artifact.PTXAS_LOG, Artifact.PTX}),
)
