"""The facts read from a unit's artifacts, one function each, and how each is read back from JSON.

Every derived field of KernelFacts names one extractor here (`kgate.facts.model.fact`): a function of the
unit's artifacts, parsed once (`Sources`), and the PTX entry the facts are about. A field's loader turns its
JSON back into the value and raises (KeyError, TypeError, ValueError) on anything of another shape, so a
cached record is trusted only in its whole shape.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Mapping
from dataclasses import replace
from functools import cached_property
from typing import Any, TypeVar

from kgate.compile.units import Artifacts
from kgate.core.errors import ParseError
from kgate.facts.cubin import indirect_branches
from kgate.facts.ptx import EntryHeader, GlobalAccess, PtxEntry, PtxFacts, SourceLoc, entry_headers, parse_ptx
from kgate.facts.ptxas_log import (
    EntryResources,
    Frame,
    Resources,
    frames_for,
    function_frames,
    parse_ptxas_log,
    resources,
)
from kgate.facts.sass import (
    INDIRECT,
    GlobalLoad,
    LocalUse,
    LoopLoads,
    SassFunction,
    SassSummary,
    local_in_loops,
    loop_loads,
    parse_sass,
)
from kgate.facts.ttgir import Pipeline, parse_pipeline

_T = TypeVar("_T")


class Sources:
    """A unit's artifacts with each parsed on first use, once for all of its entries."""

    def __init__(self, artifacts: Artifacts, traced: Callable[[list[str]], Collection[str]] | None = None) -> None:
        self.artifacts = artifacts
        self.traced = traced  # of the PTX's entries, those whose accesses before a wait are read (None: all)

    @cached_property
    def ptx(self) -> PtxFacts:
        return parse_ptx(self.artifacts.ptx, self.traced)

    @cached_property
    def headers(self) -> dict[str, EntryHeader]:
        return entry_headers(self.artifacts.ptx)

    @cached_property
    def ptxas(self) -> dict[str, EntryResources]:
        return parse_ptxas_log(self.artifacts.ptxas_log)

    @cached_property
    def frames(self) -> dict[str | None, dict[str, Frame]]:
        return function_frames(self.artifacts.ptxas_log)

    @cached_property
    def sass(self) -> dict[str, SassFunction] | None:
        return None if self.artifacts.sass is None else parse_sass(self.artifacts.sass)

    @cached_property
    def local_in_loops(self) -> dict[str, LocalUse] | None:
        sass = self.artifacts.sass
        if sass is None:
            return None
        return local_in_loops(sass, self.indirect_branches if any(op in sass for op in INDIRECT) else None)

    @cached_property
    def loop_loads(self) -> dict[str, tuple[LoopLoads, ...]] | None:
        sass = self.artifacts.sass
        if sass is None:
            return None
        return loop_loads(sass, self.indirect_branches if any(op in sass for op in INDIRECT) else None)

    @cached_property
    def indirect_branches(self) -> dict[str, dict[int, tuple[int, ...]]]:
        """The targets of each function's indirect branches, from the cubin (empty where it cannot be read)."""
        data = self.artifacts.cubin_data()
        return {} if data is None else indirect_branches(data)

    @cached_property
    def pipeline(self) -> Pipeline | None:
        return parse_pipeline(self.artifacts.ttgir)

    def reading(self, artifacts: Artifacts) -> Sources:
        """The sources of `artifacts`, with what this one has parsed already where they hold the same texts (a unit
        read again once its SASS is added parses only the SASS)."""
        found = Sources(artifacts, self.traced)
        before = self.artifacts
        if (artifacts.ptx, artifacts.ptxas_log, artifacts.ttgir) == (before.ptx, before.ptxas_log, before.ttgir):
            for name in _NOT_SASS:
                if name in self.__dict__:
                    found.__dict__[name] = self.__dict__[name]
        return found

    def entry_names(self) -> list[str]:
        return [entry.name for entry in self.ptx.entries]


# What Sources parses from the PTX, the ptxas log and the TTGIR (cached per instance, by `cached_property`).
_NOT_SASS = ("ptx", "headers", "ptxas", "frames", "pipeline")


# --------------------------------------------------------------------------- extractors: (sources, entry) -> value


def ptx_target(src: Sources, entry: str) -> str:
    """The `.target` the PTX was written for."""
    return src.ptx.target


def ptx_entry(src: Sources, entry: str) -> PtxEntry:
    """The entry's MMA opcodes, its grid-dependency control and its global accesses (the PDL analysis)."""
    return src.ptx.entry(entry)


def entry_resources(src: Sources, entry: str) -> Resources:
    """Registers, spills, stack, barriers and shared memory: ptxas's figures and the launch's dynamic part."""
    found = src.ptxas.get(entry)
    if found is None:
        raise ParseError(f"the ptxas log has no figures for {entry!r}")
    frames = frames_for(src.frames, entry)
    called = tuple((name, frames[name]) for name in src.ptx.entry(entry).calls if name in frames)
    return resources(found, src.artifacts.smem_of(entry), called)


def sass_summary(src: Sources, entry: str) -> SassSummary | None:
    """Opcode counts of the entry's SASS and of the functions it calls that ptxas listed apart (`-rdc=true`);
    None where the cubin was not disassembled for them."""
    functions = src.sass
    if functions is None:
        return None
    asked = src.artifacts.sass_symbols
    if asked is not None and not all(name in asked for name in (entry, *_called(src, entry))):
        return None
    found: SassSummary | None = functions.get(entry)
    if found is None and asked is None:
        found = next(iter(functions.values()), None)  # the one function of a Triton cubin, whatever its name
    counts = Counter(found.opcodes if found else {})
    for name in _called(src, entry):
        if name in functions and name != entry:
            counts.update(functions[name].opcodes)
    return SassSummary(dict(sorted(counts.items())))


def local_in_loop(src: Sources, entry: str) -> tuple[int, int] | None:
    """Local-memory loads and stores inside a loop of the entry's SASS, a loop of a function it calls, or a
    function it calls from inside a loop; None where the cubin was not disassembled for them."""
    functions = src.local_in_loops
    if functions is None or sass_summary(src, entry) is None:
        return None
    own = _own(functions, src, entry)
    loads, stores = own.in_loops if own else (0, 0)
    looped = set(src.ptx.entry(entry).looped_calls)
    for name in _called(src, entry):
        use = functions.get(name)
        if use is not None and name != entry:
            more = use.total if name in looped else use.in_loops
            loads, stores = loads + more[0], stores + more[1]
    return loads, stores


def global_loads_in_loops(src: Sources, entry: str) -> tuple[LoopLoads, ...] | None:
    """The global loads each trip of each loop of the entry's SASS makes (its own listing: a function ptxas lists
    apart is not followed); None where the cubin was not disassembled for it."""
    functions = src.loop_loads
    if functions is None or sass_summary(src, entry) is None:
        return None
    return _own(functions, src, entry) or ()


def _own(functions: Mapping[str, _T], src: Sources, entry: str) -> _T | None:
    """What the SASS holds of the entry's own function: by its name, or the one function of a Triton cubin,
    whatever its name."""
    own = functions.get(entry)
    if own is None and src.artifacts.sass_symbols is None and len(functions) == 1:
        own = next(iter(functions.values()))
    return own


def _called(src: Sources, entry: str) -> tuple[str, ...]:
    """The functions an entry calls (the PTX call graph): for CUDA, each is asked of the disassembler with it."""
    try:
        return src.ptx.entry(entry).calls
    except ParseError:
        return ()


def smem_buffers(src: Sources, entry: str) -> int | None:
    """Triton's software pipeline: how many copies of each staged tile shared memory holds."""
    return src.pipeline.buffers if src.pipeline else None


def smem_per_buffer(src: Sources, entry: str) -> int | None:
    """Triton's software pipeline: shared memory of one stage of all staged operands."""
    return src.pipeline.bytes_per_buffer if src.pipeline else None


# --------------------------------------------------------------------------- loaders: JSON -> value, checked


def _require(condition: bool, what: str) -> None:
    if not condition:
        raise ValueError(f"a KernelFacts record with the wrong types: {what}")


def is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def load_text(value: Any) -> str:
    _require(isinstance(value, str), "names")
    return str(value)


def load_optional_count(value: Any) -> int | None:
    _require(value is None or is_count(value), "counts")
    return None if value is None else int(value)


def load_entry(value: Any) -> PtxEntry:
    data = dict(value)
    data["unwaited_accesses"] = tuple(
        GlobalAccess(a["opcode"], a["ptx_line"], SourceLoc(**a["loc"]) if a["loc"] else None,
                     tuple(a.get("via", ())), a.get("opaque", False), a.get("writes", True),
                     tuple(a.get("arguments", ())))
        for a in data["unwaited_accesses"])
    # What the call graph adds has defaults, as in PtxEntry: a record written by hand may leave it out.
    data["calls"] = tuple(data.get("calls", ()))
    data["opaque_calls"] = tuple(data.get("opaque_calls", ()))
    data["looped_calls"] = tuple(data.get("looped_calls", ()))
    data["looped_loads"] = dict(data.get("looped_loads", {}))
    data["traced"] = data.get("traced", True)
    data["dynamic_shared"] = data.get("dynamic_shared", False)
    entry = PtxEntry(**data)
    _require(isinstance(entry.name, str), "names")
    _require(is_count(entry.global_accesses) and all(is_count(v) for v in entry.mma.values()), "counts")
    _require(all(isinstance(k, str) for k in entry.mma), "expect and mma")
    _require(isinstance(entry.has_wait, bool) and isinstance(entry.has_launch_dependents, bool)
             and isinstance(entry.traced, bool) and isinstance(entry.dynamic_shared, bool), "flags")
    _require(all(isinstance(a.opcode, str) and is_count(a.ptx_line) and isinstance(a.opaque, bool)
                 and isinstance(a.writes, bool) and all(is_count(v) for v in a.arguments)
                 and all(isinstance(v, str) for v in a.via) for a in entry.unwaited_accesses), "unwaited accesses")
    _require(all(isinstance(v, str) for v in entry.calls + entry.opaque_calls + entry.looped_calls), "calls")
    _require(all(isinstance(k, str) and is_count(v) for k, v in entry.looped_loads.items()), "looped loads")
    return entry


def load_optional_pair(value: Any) -> tuple[int, int] | None:
    if value is None:
        return None
    _require(isinstance(value, (list, tuple)) and len(value) == 2 and all(is_count(v) for v in value), "counts")
    return (value[0], value[1])


def load_resources(value: Any) -> Resources:
    data = dict(value)
    callees = data.get("callees", ())
    _require(isinstance(callees, (list, tuple)) and all(isinstance(c, (list, tuple)) and len(c) == 4
                                                        for c in callees), "callees")
    data["callees"] = tuple(tuple(c) for c in callees)
    found = Resources(**data)
    _require(all(is_count(v) for k, v in vars(found).items() if k != "callees"), "counts")
    _require(all(isinstance(c[0], str) and all(is_count(v) for v in c[1:]) for c in found.callees), "callees")
    return found


def load_loop_loads(value: Any) -> tuple[LoopLoads, ...] | None:
    if value is None:
        return None
    _require(isinstance(value, (list, tuple)), "loop loads")
    loops = tuple(LoopLoads(loop["first"], loop["last"], tuple(GlobalLoad(**load) for load in loop["loads"]))
                  for loop in value)
    _require(all(is_count(loop.first) and is_count(loop.last) for loop in loops), "loop loads")
    _require(all(isinstance(load.opcode, str) and isinstance(load.base, str) and is_count(load.bits)
                 and isinstance(load.offset, int) and not isinstance(load.offset, bool)
                 and isinstance(load.every_trip, bool) for loop in loops for load in loop.loads), "loop loads")
    return loops


def load_sass(value: Any) -> SassSummary | None:
    if value is None:
        return None
    found = SassSummary(**value)
    _require(isinstance(found.opcodes, dict) and all(isinstance(k, str) for k in found.opcodes), "names")
    _require(all(is_count(v) for v in found.opcodes.values()), "counts")
    return found


# --------------------------------------------------------------------------- movers: source lines that follow the code

Move = Callable[[SourceLoc], SourceLoc]


def move_entry(entry: PtxEntry, move: Move) -> PtxEntry:
    """The entry with the source location of every unwaited access moved."""
    accesses = tuple(replace(a, loc=move(a.loc)) if a.loc is not None else a for a in entry.unwaited_accesses)
    return replace(entry, unwaited_accesses=accesses)
