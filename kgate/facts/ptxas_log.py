"""The `ptxas -v` log: registers, spills, stack and static shared memory per entry.

The log names every function it compiles. For an entry it prints

    ptxas info    : Compiling entry function 'NAME' for 'sm_120a'
    ptxas info    : Function properties for NAME
        S bytes stack frame, T bytes spill stores, L bytes spill loads
    ptxas info    : Used R registers, used B barriers, M bytes smem, ...

(the tool may call itself `ptxas-blackwell`). A device function it does not
inline gets a "Function properties" block of its own, outside any entry's:
its stack frame and spills are not in the entry's figures, so an entry's
resources add those of every function its PTX reaches (`function_frames`,
and the call graph of `kgate.facts.callgraph`). In a whole-program compile
that block follows each entry that calls the function, and is that entry's:
the entry's register bound is the function's, so it may spill under one
entry and not under another. Lines kgate does not know
are ignored; an entry without a "Used ... registers" line is an error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kgate.core.errors import ParseError
from kgate.facts.numbers import count

_COMPILING = re.compile(r"Compiling entry function '([^']+)' for '([^']+)'")
_PROPERTIES = re.compile(r"Function properties for (\S+)")
# A number is matched from its first digit only (`(?<!\d)`): the same matches, but a long run of digits costs one
# attempt instead of one per digit (each of which would scan the rest of the run: quadratic).
_FRAME = re.compile(r"(?<!\d)(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_BARRIERS = re.compile(r"used (\d+) barriers")
_SMEM = re.compile(r"(?<!\d)(\d+) bytes smem")
_CUMULATIVE = re.compile(r"(?<!\d)(\d+) bytes cumulative stack size")
_COMPILE_TIME = re.compile(r"Compile time = ")


@dataclass(frozen=True)
class EntryResources:
    name: str
    arch: str
    registers: int
    spill_stores: int
    spill_loads: int
    stack_frame: int
    barriers: int
    smem_static: int


@dataclass(frozen=True)
class Frame:
    """One function's "Function properties" figures."""

    stack_frame: int
    spill_stores: int
    spill_loads: int


@dataclass(frozen=True)
class Resources:
    """What one entry uses of the SM, as KernelFacts holds it: the log's figures and the launch's dynamic shared
    memory."""

    registers: int
    spill_stores: int
    spill_loads: int
    stack_bytes: int
    smem_static: int
    smem_dynamic: int
    barriers: int = 0
    # (function, stack frame, spill stores, spill loads) of each called function whose figures are not all 0;
    # its spills are counted in spill_stores and spill_loads above.
    callees: tuple[tuple[str, int, int, int], ...] = ()

    @property
    def smem_bytes(self) -> int:
        return self.smem_static + self.smem_dynamic

    @property
    def spill_bytes(self) -> int:
        return self.spill_stores


def resources(entry: EntryResources, dynamic_smem: int = 0,
              callees: tuple[tuple[str, Frame], ...] = ()) -> Resources:
    """An entry's resources from its figures in the log, with the dynamic shared memory its launch adds and the
    stack and spills of the functions it calls (`callees`: each reached function once, with its figures)."""
    spilling = tuple((name, f.stack_frame, f.spill_stores, f.spill_loads) for name, f in callees
                     if f.stack_frame or f.spill_stores or f.spill_loads)
    return Resources(registers=entry.registers,
                     spill_stores=entry.spill_stores + sum(f.spill_stores for _n, f in callees),
                     spill_loads=entry.spill_loads + sum(f.spill_loads for _n, f in callees),
                     stack_bytes=max([entry.stack_frame, *(f.stack_frame for _n, f in callees)]),
                     smem_static=entry.smem_static, smem_dynamic=int(dynamic_smem),
                     barriers=entry.barriers, callees=spilling)


def function_frames(text: str) -> dict[str | None, dict[str, Frame]]:
    """The "Function properties" figures of every function the log names, by the entry they were compiled with.

    A whole-program compile prints a device function's figures after each entry that calls it, and each is that
    entry's own: the function is compiled into the entry under the entry's register bound, and spills under one
    bound and not under another. A function compiled apart (`-rdc=true`: its own "Compile time" line follows its
    figures) is under None, as is one printed before any entry."""
    out: dict[str | None, dict[str, Frame]] = {}
    entry: str | None = None
    properties_for: str | None = None
    block: tuple[str, Frame] | None = None  # figures read, not yet known to be an entry's or apart

    def place(context: str | None) -> None:
        nonlocal block
        if block is not None:
            out.setdefault(context, {})[block[0]] = block[1]
            block = None

    for line in text.splitlines():
        compiling = _COMPILING.search(line)
        props = _PROPERTIES.search(line)
        if compiling or props:
            place(entry)
            entry = compiling.group(1) if compiling else entry
            properties_for = props.group(1) if props else None
            continue
        frame = _FRAME.search(line)
        if frame and properties_for is not None:
            block, properties_for = (properties_for, Frame(*(count(g) for g in frame.groups()))), None
        elif _USED.search(line):
            place(entry)  # the entry's own figures
        elif _COMPILE_TIME.search(line):
            place(None)  # a function compiled on its own
    place(entry)
    return out


def frames_for(frames: dict[str | None, dict[str, Frame]], entry: str) -> dict[str, Frame]:
    """The figures of the functions `entry` calls: those compiled with it, else those compiled apart, else (a log
    that does not say) any printed."""
    out: dict[str, Frame] = {}
    for context, found in frames.items():
        if context not in (None, entry):
            out.update(found)
    return {**out, **frames.get(None, {}), **frames.get(entry, {})}


def parse_ptxas_log(text: str) -> dict[str, EntryResources]:
    """Resources per entry function name."""
    frames: dict[str, tuple[int, int, int]] = {}
    used: dict[str, tuple[int, int, int, int | None]] = {}
    arch_of: dict[str, str] = {}
    order: list[str] = []
    current_entry: str | None = None
    properties_for: str | None = None
    for line in text.splitlines():
        compiling = _COMPILING.search(line)
        if compiling:
            current_entry = compiling.group(1)
            arch_of[current_entry] = compiling.group(2)
            if current_entry not in order:
                order.append(current_entry)
            continue
        props = _PROPERTIES.search(line)
        if props:
            properties_for = props.group(1)
            continue
        frame = _FRAME.search(line)
        if frame and properties_for is not None:
            frames[properties_for] = (count(frame.group(1)), count(frame.group(2)), count(frame.group(3)))
            continue
        regs = _USED.search(line)
        if regs and current_entry is not None:
            barrier_match = _BARRIERS.search(line)
            smem_match = _SMEM.search(line)
            cumulative_match = _CUMULATIVE.search(line)
            used[current_entry] = (
                count(regs.group(1)),
                count(barrier_match.group(1)) if barrier_match else 0,
                count(smem_match.group(1)) if smem_match else 0,
                count(cumulative_match.group(1)) if cumulative_match else None,
            )
    out: dict[str, EntryResources] = {}
    for name in order:
        if name not in used:
            raise ParseError(f"ptxas log has no register count for entry {name!r}")
        registers, barriers, smem, cumulative = used[name]
        stack, stores, loads = frames.get(name, (0, 0, 0))
        out[name] = EntryResources(
            name=name,
            arch=arch_of[name],
            registers=registers,
            spill_stores=stores,
            spill_loads=loads,
            stack_frame=max(stack, cumulative or 0),
            barriers=barriers,
            smem_static=smem,
        )
    return out
