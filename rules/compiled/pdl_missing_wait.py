"""## What it does
For a kernel launched with programmatic dependent launch (Triton
`launch_pdl=True`; a CUDA kernel configured as PDL or launched through
`cudaLaunchKernelEx` with `cudaLaunchAttributeProgrammaticStreamSerialization`),
finds on the PTX control-flow graph every global memory access that some
path from the kernel's entry reaches before `griddepcontrol.wait`
(Triton's `gdc_wait()`, CUDA's `cudaGridDependencySynchronize()`).
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
function that returns waits (a recursive call counts as the waits of the
paths that return: `if (n == 0) { wait; return; } f(n - 1); o[n] = v;`
stores after a wait on every path). A wait that is predicated or under a
branch protects only the paths that pass through it. A path no value of the
function's arguments takes is not followed: nvcc unrolls `do { wait; }
while (--n > 0);` into a remainder loop and an unrolled one, each entered
under its own condition on `n`, and no `n` skips both, so the wait of a
do-while counts in order (conditions on one 32-bit argument through
constants, `add`, `sub`, `neg`, `mul` and `shl` by a constant, `min`,
`max`, a low-bit mask, signed and unsigned comparisons, with 32-bit
wrap-around, are decided exactly; any other condition keeps its paths).

What it reports depends on what the access does:

- A store, an atomic, a reduction or a copy into global memory before the
  wait is an error: it can race the kernel before this one.
- A load before the wait is a warning that names the kernel argument it
  reads (`w_ptr is loaded before the wait: is it written by the kernel
  before this one?`). Loading weights and index metadata before the wait and
  the previous kernel's output after it is what PDL is for; only the
  project knows which of its arguments the previous kernel writes. The
  argument is found by following the PTX from the parameter's `ld.param` to
  the access's address, through pointer arithmetic (`add`, `mad`, `cvta`,
  `mov`) and through the calls on the way, and named as the source names
  it: Triton's Python parameter, a CUDA kernel's parameter as its
  `__global__` declaration writes it. A load whose address comes from
  memory (a table of pointers) or from two arguments is "a global load
  whose address kgate cannot trace to an argument".
- A kernel that never waits is an error for any access it makes: nothing in
  it is ordered after the kernel before it.
- A call whose code is not in the PTX (an `.extern` function, a call
  through a function pointer read from memory or passed in) is taken to
  write global memory and not to wait, and the finding says so (the device
  runtime's `printf`, a failed `assert` and the device heap's `malloc` and
  `free` are known not to touch the program's memory). A pointer that
  holds the address of one of the module's own functions on every path
  (`(c ? wait_a : wait_b)()`) is a call of those functions: it waits where
  all of them do.
- A load of the CUDA math library's constant tables (the bits of 2/pi that
  `sinf`, `cosf` and `tl.sin` reduce large arguments with, private to the
  module, their address never written through or handed on) is not
  reported: nothing writes them. A table of the project's own is, however it
  is declared: the host may hand its address to a kernel that writes it.

The arguments a project declares safe for a kernel (`safe_arguments`) are
not reported when loaded before the wait; `strict` makes every access before
the wait an error, loads too. Where SASS was produced, a kernel that waits
in PTX and writes nothing before it must also show `ACQBULK` in SASS.

## Why is this bad?
With PDL the dependent kernel starts while the producer is still running.
Anything it writes before the wait races the producer, and anything it reads
before the wait may be the producer's output half written: a race that shows
up as a flaky determinism test, not as a crash. A registration without a
wait is the same race on every access.

## Example
```python
@triton.jit
def consumer(x, w, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs, mask=offs < n)   # x is the producer's output
    gdc_wait()
    tl.store(out + offs, v * tl.load(w + offs, mask=offs < n), mask=offs < n)
```

## Use instead
```python
@triton.jit
def consumer(x, w, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    wv = tl.load(w + offs, mask=offs < n)   # the weights: no kernel before writes them
    gdc_wait()                               # then what the producer wrote
    v = tl.load(x + offs, mask=offs < n)
    tl.store(out + offs, v * wv, mask=offs < n)
```
with `safe_arguments = { "pkg.ops:consumer" = ["w"] }`. In CUDA C++:
`cudaGridDependencySynchronize()` (or `asm("griddepcontrol.wait;")`)
outside any condition, before every store and every load of what the kernel
before writes.

## Options
- `safe_arguments` (table, default empty): kernel -> the names of the
  arguments it may load before the wait, because no kernel before it writes
  them (`{ "pkg.moe:fused_moe_kernel" = ["w_ptr", "expert_ids_ptr"] }`). A
  kernel is named as kgate names it (`module:function` for Triton, the
  demangled name for CUDA), by its function name, or by a glob of either;
  arguments by the names the source gives them.
- `strict` (boolean, default false): every global access before the wait is
  an error, a load too (the declared safe arguments are still not reported).
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable

from kgate.collect.cuda_names import name_forms
from kgate.core.artifacts import Artifact
from kgate.core.findings import Related, Severity
from kgate.core.rule import CompiledContext, Option, Report, Rule
from kgate.facts.callgraph import INDIRECT
from kgate.facts.model import KernelFacts
from kgate.facts.ptx import GlobalAccess

UNTRACED = "a global load whose address kgate cannot trace to an argument"


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
        return (f"a call of {called}{chain}, whose code is not in the PTX (taken to write global memory "
                "and not to wait)")
    if not access.via:
        return f"`{access.opcode}`"
    return f"`{access.opcode}` in `{name(access.via[-1])}`" + (
        f" (called through {', '.join(f'`{name(n)}`' for n in access.via[:-1])})"
        if len(access.via) > 1 else "")


def argument(facts: KernelFacts, access: GlobalAccess) -> str | None:
    """The kernel argument an access's address points into, as the source names it (`the kernel's parameter 4`
    where it has no name kgate can read); None where it is traced to none, or to two that a Triton signature does
    not tell apart (a pointer plus an integer argument: the pointer)."""
    indices = access.arguments
    if len(indices) > 1 and facts.signature:
        indices = tuple(i for i in indices if facts.signature.get(_name(facts, i), "").startswith("*"))
    if len(indices) != 1:
        return None
    return _name(facts, indices[0]) or f"the kernel's parameter {indices[0]}"


def _name(facts: KernelFacts, index: int) -> str:
    return facts.parameters[index] if index < len(facts.parameters) else ""


def declared_safe(facts: KernelFacts, table: dict[str, list[str]]) -> set[str]:
    """The arguments `safe_arguments` declares for this kernel: under every key that names it, or a glob of it."""
    forms = (*name_forms(facts.kernel), facts.kernel.split(":", 1)[-1])
    return {arg for pattern, args in table.items() if any(fnmatch.fnmatchcase(f, pattern) for f in forms)
            for arg in args}


def _writes(access: GlobalAccess) -> bool:
    return access.writes or access.opaque


def related(facts: KernelFacts, access: GlobalAccess) -> tuple[Related, ...]:
    """Where an access before the wait is: its source line (from the PTX's `.loc`, when it lies in the kernel's
    file) and its line in the PTX."""
    if _writes(access):
        into = argument(facts, access)
        what = f"{_what(facts, access)} writes global memory" + (f" (`{into}`)" if into else "")
    else:
        name = argument(facts, access)
        what = f"{_what(facts, access)} loads " + (f"`{name}`" if name else "from an address kgate cannot trace to "
                                                                             "an argument")
    what += " before griddepcontrol.wait"
    places = []
    line = facts.own_line(access.loc)
    if line is not None:
        places.append(Related(facts.path, line, what))
    places.append(Related("", 0, what, ptx_line=access.ptx_line))
    return tuple(places)


def _firsts(facts: KernelFacts, accesses: list[GlobalAccess]) -> list[GlobalAccess]:
    """The first access of each kind (a write, or a load of one argument, or an untraced load), in order."""
    seen: dict[tuple[bool, str | None], GlobalAccess] = {}
    for access in accesses:
        seen.setdefault((_writes(access), None if _writes(access) else argument(facts, access)), access)
    return list(seen.values())


def _loads_text(facts: KernelFacts, loads: list[GlobalAccess], ask: bool) -> str:
    """What the loads before the wait read: each argument named once, at its first load, then the untraced ones;
    `ask`: the question only the project can answer, for a warning."""
    named = [(argument(facts, a), a) for a in _firsts(facts, loads)]
    args = [(name, a) for name, a in named if name]
    untraced = [a for a in loads if argument(facts, a) is None]
    parts = []
    if args:
        listed = " and ".join(f"`{name}` by {_what(facts, a)} at {_where(a)}" for name, a in args)
        parts.append(f"{listed} {'is' if len(args) == 1 else 'are'} loaded before the wait")
    if untraced:
        more = f" and {len(untraced) - 1} more" if len(untraced) > 1 else ""
        parts.append(f"{UNTRACED}: {_what(facts, untraced[0])} at {_where(untraced[0])}{more}")
    text = "; ".join(parts)
    if not ask:
        return text
    if args:
        one = len(args) == 1
        return (f"{text}: is {'it' if one else 'any of them'} written by the kernel before this one? If not, "
                f"declare {'it' if one else 'them'} in `safe_arguments` for this kernel; if so, load "
                f"{'it' if one else 'those'} after the wait")
    return f"{text}: is what it reads written by the kernel before this one? If so, load it after the wait"


def finding(facts: KernelFacts, reported: list[GlobalAccess], strict: bool) -> Report:
    """The one report of the accesses a PDL kernel makes before its wait: an error for a write, a kernel that never
    waits or the strict policy, else a warning that asks about the arguments it loads."""
    writes = [a for a in reported if _writes(a)]
    loads = [a for a in reported if not _writes(a)]
    waits = facts.entry.has_wait
    if not waits:
        head = "PDL kernel has no griddepcontrol.wait"
    elif writes:
        head = "PDL kernel writes global memory before griddepcontrol.wait"
    else:
        head = "PDL kernel loads global memory before griddepcontrol.wait" + (" (strict)" if strict else "")
    parts = []
    if writes:
        first = writes[0]
        into = argument(facts, first)
        more = f" and {len(writes) - 1} more write(s)" if len(writes) > 1 else ""
        parts.append(f"{_what(facts, first)} at {_where(first)}" + (f" (`{into}`)" if into else "")
                     + f"{more} can race the kernel before this one")
    if loads:
        parts.append(_loads_text(facts, loads, ask=waits and not writes and not strict))
    severity = Severity.ERROR if writes or strict or not waits else Severity.WARNING
    places = tuple(place for access in _firsts(facts, reported) for place in related(facts, access))
    return Report(f"{head}: " + "; ".join(parts), severity=severity, related=places)


def reads_its_sass(facts: KernelFacts) -> bool:
    """Whether the rule reads a kernel's SASS (to confirm its wait there, `ACQBULK`): a PDL kernel that waits and
    writes nothing before the wait, on any path."""
    return facts.pdl and facts.entry.has_wait and not any(_writes(a) for a in facts.entry.unwaited_accesses)


def check(facts: KernelFacts, ctx: CompiledContext) -> Iterable[Report]:
    if not facts.pdl:
        return
    entry = facts.entry
    safe = declared_safe(facts, ctx.options["safe_arguments"])
    reported = [a for a in entry.unwaited_accesses if _writes(a) or argument(facts, a) not in safe]
    if reported:
        yield finding(facts, reported, ctx.options["strict"])
    if any(_writes(a) for a in reported) or not entry.has_wait:
        return
    if facts.sass is not None and facts.sass.count("ACQBULK") == 0:
        yield Report("griddepcontrol.wait is in the PTX but the SASS has no ACQBULK", discriminator="sass")


RULE = Rule(
    code="KG107",
    name="pdl-missing-wait",
    layer="compiled",
    severity=Severity.ERROR,
    summary="PDL kernel writes global memory before griddepcontrol.wait, or loads an argument there",
    check=check,
    doc=__doc__ or "",
    options={
        "safe_arguments": Option({}, "kernel -> arguments it may load before griddepcontrol.wait (no kernel "
                                     "before it writes them)", dict, items=str),
        "strict": Option(False, "every global access before griddepcontrol.wait is an error, a load too", bool),
    },
    reads=frozenset({Artifact.PTX, Artifact.SASS}),
    sass_when=reads_its_sass,
)
