"""## What it does
For a kernel launched with programmatic dependent launch (Triton
`launch_pdl=True`; a CUDA kernel configured as PDL or launched through
`cudaLaunchKernelEx` with `cudaLaunchAttributeProgrammaticStreamSerialization`),
checks on the PTX control-flow graph that `griddepcontrol.wait` is executed
before every global memory access on every path from the kernel's entry.
Loads, stores, atomics, `cp.async` copies from or to global memory,
texture and surface instructions, `wmma.load`/`wmma.store`, `discard`
(which leaves the lines' values indeterminate) and tensor-map writes count
(shared, local, constant and parameter memory never do, whatever
qualifiers come before the space: `ld.volatile.shared`,
`st.async.shared::cluster`; nor do prefetches into the cache,
`prefetch` and `cp.async.bulk.prefetch`, which read nothing into the
kernel), wherever they are: in the
kernel or in any device function it calls (`@triton.jit(noinline=True)`,
`__noinline__`), however deep, each reported at the kernel's call; a wait in
a called function counts where it is called, when every path through that
function waits. A call whose code is not in the PTX (an `.extern` function,
a call through a function pointer) is taken to touch global memory and not
to wait, and the finding says so (the device runtime's `printf`, a failed
`assert` and the device heap's `malloc` and `free` are known not to touch
the program's memory). A wait that is predicated or under a
branch protects only the paths that pass through it. Where SASS was produced, a kernel that
waits in PTX must also show `ACQBULK` in SASS.

## Why is this bad?
With PDL the dependent kernel starts while the producer is still running.
Anything it reads before the wait may be the producer's output half written:
a race that shows up as a flaky determinism test, not as a crash. A
registration without a wait is the same race on every access.

## Example
```python
@triton.jit
def consumer(x, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs, mask=offs < n)   # reads before the wait
    gdc_wait()
    tl.store(out + offs, v, mask=offs < n)
```

## Use instead
```python
@triton.jit
def consumer(x, out, n, BLOCK: tl.constexpr):
    gdc_wait()                              # first, on every path
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs, mask=offs < n)
    tl.store(out + offs, v, mask=offs < n)
```
In CUDA C++: `cudaGridDependencySynchronize()` (or `asm("griddepcontrol.wait;")`)
before the first global access, outside any condition.

## Options
None.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from kgate.core.artifacts import Artifact
from kgate.core.findings import Related, Severity
from kgate.core.rule import CompiledContext, Report, Rule
from kgate.facts.callgraph import INDIRECT
from kgate.facts.model import KernelFacts
from kgate.facts.ptx import GlobalAccess


def _where(access: GlobalAccess) -> str:
    """The source line of an access where the PTX carries one, else its PTX line (for an access in a function
    the kernel calls, the line of the call)."""
    if access.loc is not None and access.loc.line:
        return f"{os.path.basename(access.loc.file)}:{access.loc.line}"
    return f"PTX line {access.ptx_line}"


def _what(facts: KernelFacts, access: GlobalAccess) -> str:
    """The access, and the calls it is made through."""
    name = facts.function_name
    if access.opaque:
        callee = access.via[-1]
        called = f"`{name(callee)}`" if callee != INDIRECT else "a function pointer"
        chain = "".join(f" in `{name(caller)}`" for caller in reversed(access.via[:-1]))
        return (f"a call of {called}{chain}, whose code is not in the PTX (taken to touch global memory "
                "and not to wait)")
    if not access.via:
        return f"`{access.opcode}`"
    return f"`{access.opcode}` in `{name(access.via[-1])}`" + (
        f" (called through {', '.join(f'`{name(n)}`' for n in access.via[:-1])})"
        if len(access.via) > 1 else "")


def related(facts: KernelFacts, access: GlobalAccess) -> tuple[Related, ...]:
    """Where the unwaited access is: its source line (from the PTX's `.loc`, when it lies in the kernel's file)
    and its line in the PTX."""
    what = f"{_what(facts, access)} touches global memory before griddepcontrol.wait"
    places = []
    line = facts.own_line(access.loc)
    if line is not None:
        places.append(Related(facts.path, line, what))
    places.append(Related("", 0, what, ptx_line=access.ptx_line))
    return tuple(places)


def waits_first(facts: KernelFacts) -> bool:
    """Whether a PDL kernel's PTX waits before every global access: the kernels whose SASS this rule reads (to
    confirm the wait there, `ACQBULK`)."""
    return facts.pdl and facts.entry.has_wait and not facts.entry.unwaited_accesses


def check(facts: KernelFacts, ctx: CompiledContext) -> Iterable[Report]:
    if not facts.pdl:
        return
    entry = facts.entry
    unwaited = entry.unwaited_accesses
    if unwaited:
        first = unwaited[0]
        where = _where(first)
        if not entry.has_wait:
            what = "has no griddepcontrol.wait"
        else:
            what = "reaches a global memory access before griddepcontrol.wait on some path"
        yield Report(
            f"PDL kernel {what}: {_what(facts, first)} at {where}"
            + (f" and {len(unwaited) - 1} more access(es)" if len(unwaited) > 1 else ""),
            related=related(facts, first),
        )
        return
    if waits_first(facts) and facts.sass is not None and facts.sass.count("ACQBULK") == 0:
        yield Report("griddepcontrol.wait is in the PTX but the SASS has no ACQBULK", discriminator="sass")


RULE = Rule(
    code="KG107",
    name="pdl-missing-wait",
    layer="compiled",
    severity=Severity.ERROR,
    summary="PDL kernel touches global memory before griddepcontrol.wait",
    check=check,
    doc=__doc__ or "",
    reads=frozenset({Artifact.PTX, Artifact.SASS}),
    sass_when=waits_first,
)
