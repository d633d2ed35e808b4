"""## What it does
Reads the kernel's SASS for global loads narrower than the kernel could
issue inside its loops: on one trip of a loop, two or more loads of fewer
than 128 bits (`LDG.E.U8`, `LDG.E.U16`, `LDG.E`, `LDG.E.64`) that read
contiguous bytes from one address register (`[R2.64]`, `[R2.64+0x1]`,
`[R2.64+0x2]`, ...). One wider load could read what they read: the message
says how many narrow loads each trip makes, of what width, and the width
that could read them where the address is aligned to it. A loop is the code
of the SASS on a cycle through a backward branch (the branch back from a
warp shuffle's fallback, placed after `EXIT`, closes none), and each load
counts for the innermost loop around it; so do the loads of a `__noinline__`
function that ptxas placed in the kernel's code, where the loop calls it
(outside the function's own loops).

A Triton kernel is reported only where its specialisation promised 16-byte
alignment of every pointer and integer argument (`tt.divisibility=16`, the
launcher's `divisible_by_16`, or equal to 1; a bool argument is no integer
the launcher promises anything of): Triton then vectorises a
contiguous access by itself, so narrow contiguous loads mean that the
kernel's own index arithmetic lost the alignment (an offset that is not a
multiple of the vector, a `+ 1`). Without that promise the element width is
all Triton may assume, and the rule stays quiet.

One narrow load per trip is not reported (a loop that reads one element
per thread per trip: the warp's accesses are coalesced, and widening them
means giving each thread more elements), nor are narrow loads from
addresses that are not contiguous (a strided or indexed gather), nor loads
on one side of an `if` inside the loop (a trip does not make all of them:
the scalar tail of a vectorised loop). The SASS is read only of the kernels
whose PTX loads values narrower than 128 bits at least twice inside loops
(and, for Triton, whose launch promised the alignment); a run that does not
select the rule disassembles nothing for it. Opt-in: whether an access can
be widened depends on an alignment only the project knows.

Measured (Triton 3.9.0, nvcc 13.0, sm_120a), each finding read against its
source. True: the bytes a trip reads are a chunk of data laid out so that
the wider aligned load can read it on every launch; false: the chunk's
alignment depends on a run-time value. vLLM `csrc` (the 7 of 14 files
tried that compile against a CPU build of torch: paged attention v1, MoE
top-k softmax and align, top-k, sampler, NVFP4 KV cache; 951 kernel
variants, 536 disassembled): 318 findings, 45 true (paged attention's K
vectors, `bf16_8_t` and `Float4_` structs without `__align__`, read as
32-bit words; a `vec_t::cast_load` named vectorised that loads element by
element; a LoRA token map walked an `int` at a time; NVFP4's bf16 inputs
read as four `bf16x2`), 273 false (one loop in 270 template instances and
one more in 3: a row of `k` routing weights or indices at `k * row`, which
is 16-byte aligned only when `k` is a multiple of 4); by source loop, 6
loops, 4 true and 2 false. bitsandbytes `csrc` (`kernels.cu` and the two
4-bit GEMM files, 197 variants, 179 disassembled): no finding (the 4-bit
GEMV's byte loads are the scalar tail of an `int4` path, on one side of an
`if`). Liger-Kernel (Triton: 16 specialisations of 14 kernels captured on
CPU tensors): no finding, no SASS read; the two variants whose PTX loads
narrow values in loops were launched with lengths that promise no alignment
(a vocabulary of 32007, group norm's strides). The bundled kernels and the
fixture projects with the rule selected: one finding, true (a broadcast
`x[step]` walked from the start of the array, two floats per trip).

## Why is this bad?
Each load instruction costs an issue slot, a load-store unit entry and
an L1 tag lookup whatever its width, so a loop that reads sixteen bytes as
sixteen `LDG.E.U8` pays sixteen times for what one `LDG.E.128` reads.
ptxas cannot merge them: a `const uint8_t*` may point anywhere, and
nothing tells it the wider access is aligned. On a decode attention kernel
whose inner loop made 20 `LDG.E.U8` per iteration, turning them into word
loads made the kernel 15.7% faster.

## Example
```cuda
__global__ void checksum_bytes(const uint8_t* data, unsigned* out, int n) {
    unsigned sum = 0;
    for (int i = threadIdx.x * 16; i < n; i += blockDim.x * 16)
        for (int j = 0; j < 16; ++j)
            sum += data[i + j];          // 16 x LDG.E.U8 per trip
    atomicAdd(out, sum);
}
```

## Use instead
```cuda
__global__ void checksum_words(const uint4* data, unsigned* out, int n) {
    unsigned sum = 0;
    for (int i = threadIdx.x; i < n / 16; i += blockDim.x) {
        uint4 v = data[i];               // one LDG.E.128 per trip
        sum += bytes_of(v.x) + bytes_of(v.y) + bytes_of(v.z) + bytes_of(v.w);
    }
    atomicAdd(out, sum);
}
```
In Triton, keep the offsets of a contiguous block a multiple of the vector
(`start = k * BLOCK`, `tl.multiple_of(offs, 16)` where the arithmetic
hides it) so that the compiler can prove what the launcher promised.

## Options
None.

## References
- A decode attention kernel whose lever was load width: 20 `LDG.E.U8` per
  iteration turned into word loads made it 15.7% faster; "byte-pointer inner
  loops: ptxas cannot merge; count `LDG.*` forms in `cuobjdump -sass` first".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kgate.core.artifacts import Artifact
from kgate.core.findings import Severity
from kgate.core.rule import CompiledContext, Report, Rule
from kgate.facts.model import KernelFacts
from kgate.facts.ptx import load_bits
from kgate.facts.sass import GlobalLoad, LoopLoads

WIDEST = 128  # bits a thread's global load reads at most (LDG.E.128)


@dataclass(frozen=True)
class Run:
    """Loads of one loop trip from one address register, each of `bits`, `step` bytes apart: contiguous in a
    thread (`step` is their size), or, in a Triton kernel, contiguous across the threads between them."""

    opcode: str
    bits: int
    count: int
    step: int

    @property
    def in_thread(self) -> bool:
        return self.step * 8 == self.bits

    @property
    def could(self) -> int:
        """The width, in bits, of the loads that could read the run where the address is aligned: within a thread,
        the widest that fits in the bytes it reads; across threads, the thread's elements as one vector (Triton's
        layouts give a thread a power of two of them)."""
        total = min(WIDEST, self.count * self.bits)
        width = self.bits
        while width * 2 <= total if self.in_thread else width < total:
            width *= 2
        return width

    @property
    def wider(self) -> int:
        """How many loads of that width would read what the run reads."""
        return -(-self.count * self.bits // self.could)


def _steps(bits: int, threads: int | None) -> set[int]:
    """The distances, in bytes, between one thread's loads that make a contiguous access: the loads' size, and in a
    Triton kernel the size times a power of two up to the CTA's threads (each thread one element of a block)."""
    size = bits // 8
    across = {size << shift for shift in range(1, threads.bit_length())} if threads else set()
    return {size} | across


def _progressions(offsets: list[int], allowed: set[int]) -> list[tuple[int, int]]:
    """The maximal runs of sorted offsets at one allowed distance from each other: (count, distance) each."""
    out = []
    first = 0
    while first < len(offsets) - 1:
        step = offsets[first + 1] - offsets[first]
        last = first + 1
        while last + 1 < len(offsets) and offsets[last + 1] - offsets[last] == step:
            last += 1
        if step in allowed:
            out.append((last - first + 1, step))
            first = last + 1
        else:
            first += 1
    return out


def runs(loads: tuple[GlobalLoad, ...], threads: int | None = None) -> list[Run]:
    """The runs of two or more narrow loads that every trip makes from one address register at a distance `_steps`
    allows (`threads`: a Triton kernel's threads per CTA; None for CUDA, whose runs are contiguous within a thread).
    Loads on one side of an `if` are left out: a trip does not make all of them, and one wider load would read
    bytes the trip does not ask for."""
    groups: dict[tuple[str, int], dict[int, str]] = {}
    for load in loads:
        if load.every_trip and load.base and load.bits < WIDEST and load.bits % 8 == 0:
            groups.setdefault((load.base, load.bits), {}).setdefault(load.offset, load.opcode)
    found = []
    for (_base, bits), at in sorted(groups.items()):
        opcode = at[min(at)]
        found += [Run(opcode, bits, count, step) for count, step in _progressions(sorted(at), _steps(bits, threads))]
    return found


def _promised_alignment(facts: KernelFacts) -> bool:
    """Whether a Triton variant's launcher promised 16-byte alignment of every pointer and integer argument (a
    bool, `i1`, is no integer the launcher could promise anything of)."""
    promised = set(facts.specialization.get("divisible_by_16", ())) | set(facts.specialization.get("equal_to_1", ()))
    return all(name in promised for name, ty in facts.signature.items() if _aligns(ty))


def _aligns(ty: str) -> bool:
    """Whether an argument of this Triton type can be promised divisible by 16: a pointer, an integer of 8 bits or
    more."""
    return ty.startswith("*") or (ty[:1] in ("i", "u") and ty[1:].isdigit() and int(ty[1:]) >= 8)


def may_widen(facts: KernelFacts) -> bool:
    """Whether the kernel's PTX loads narrower than 128 bits at least twice on a loop's trips (and, for Triton, its
    launcher promised alignment): the kernels whose SASS this rule reads."""
    narrow = sum(count for op, count in facts.entry.looped_loads.items() if (load_bits(op) or WIDEST) < WIDEST)
    return narrow >= 2 and (facts.language != "triton" or _promised_alignment(facts))


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


def _describe(loop: LoopLoads, found: list[Run]) -> str:
    """How many narrow loads one trip of the loop makes, of what width, and the width that could read them."""
    count = sum(run.count for run in found)
    bits = "/".join(str(b) for b in sorted({run.bits for run in found}))
    ops = ", ".join(sorted({run.opcode for run in found}))
    could = max(run.could for run in found)
    sizes = {run.count * run.bits // 8 for run in found}
    if any(not run.in_thread for run in found):
        step = next(run.step for run in found if not run.in_thread)
        what = (f"each thread's {step} bytes apart from one address, the threads of the CTA reading the bytes "
                "between them")
    elif len(found) == 1:
        what = f"reading {sizes.pop()} contiguous bytes from one address"
    elif len(sizes) == 1:
        what = f"reading {len(found)} runs of {sizes.pop()} contiguous bytes, each from one address"
    else:
        what = f"reading {len(found)} runs of contiguous bytes, each from one address"
    wider = f"{_plural(sum(run.wider for run in found), 'load')} of {could} bits"
    return (f"{_plural(count, f'{bits}-bit global load')} per trip of a loop ({ops}), {what}: {wider} could read "
            f"them where the address is {could // 8}-byte aligned (SASS 0x{loop.first:04x}-0x{loop.last:04x})")


def check(facts: KernelFacts, ctx: CompiledContext) -> Iterable[Report]:
    if facts.loop_loads is None:
        return
    triton = facts.language == "triton"
    if triton and not _promised_alignment(facts):
        return
    threads = facts.num_warps * 32 if triton else None
    loops = [(loop, found) for loop in facts.loop_loads if (found := runs(loop.loads, threads))]
    if not loops:
        return
    loop, found = max(loops, key=lambda item: (sum(run.count for run in item[1]), -item[0].first))
    more = f"; {_plural(len(loops) - 1, 'more loop')} alike" if len(loops) > 1 else ""
    yield Report(_describe(loop, found) + more)


RULE = Rule(
    code="KG110",
    name="load-width",
    layer="compiled",
    severity=Severity.WARNING,
    summary="Narrow global loads of contiguous bytes inside a loop of the SASS: one wider load could read them",
    check=check,
    doc=__doc__ or "",
    reads=frozenset({Artifact.PTX, Artifact.SASS}),
    sass_when=may_widen,
    # Whether a load can be widened depends on an alignment only the project knows: a team's choice to gate on.
    opt_in=True,
)
