"""The facts of a run: the compile stage's units, each read into KernelFacts (cached), and what they add up to.

A unit's facts are cached as a `facts` record keyed by the facts schema (`kgate.facts.model.facts_schema`),
the unit's compile key and its artifacts' hashes: a warm run reads that record and parses nothing; a new fact
or a changed extractor rebuilds the records from the cached artifacts, compiling nothing. A unit whose
artifacts cannot be read back whole, or whose cached lines no longer place in its file, is handed back to the
compile stage to compile again.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from functools import partial
from typing import Any

from kgate.collect.captures import CapturedSpec
from kgate.collect.cuda_launches import LaunchSite, pdl_launched
from kgate.collect.cuda_names import base_name, matches
from kgate.compile.cache import Cache, digest
from kgate.compile.cuda_engine import IDENTITY, compile_cuda
from kgate.compile.engine import Compilation, Progress, RunSummary, compile_triton
from kgate.compile.pool import Pool
from kgate.compile.preflight import CudaCompilers
from kgate.compile.units import Artifacts, Compiled, CompileFailure
from kgate.core.config import Config, TritonEntry
from kgate.core.errors import KgateError
from kgate.facts.build import unit_facts
from kgate.facts.extract import Sources
from kgate.facts.model import KernelFacts, facts_schema
from kgate.facts.relocate import relocate

Cubins = dict[tuple[str, str, str], tuple[str, str | None]]


@dataclass
class CompileRun(RunSummary):
    """The compiled kernels of a run: their facts, the failures, and how the run went."""

    facts: list[KernelFacts] = field(default_factory=list)
    # Where each variant's cubin is in the cache and the hash it was written with (`kgate diff` reads it).
    cubins: Cubins = field(default_factory=dict)


Built = list[tuple[str, KernelFacts]]  # (PTX entry, facts) of each kernel a unit gates


class Facts:
    """Units' facts, from the facts cache or their artifacts, each unit read once a run."""

    def __init__(self, cache: Cache, model: type[KernelFacts] = KernelFacts, *, reuse: bool = False) -> None:
        self.cache = cache
        self.model = model
        self.schema = facts_schema(model)
        self.memo: dict[str, Built | str | None] = {}
        self.unsaved: set[str] = set()  # built this run, not yet written to the cache
        # `reuse`: the parsed artifacts of the last read of each unit are kept, so that the unit read again with its
        # SASS added parses only the SASS (a compile worker's reading of the one unit it compiled).
        self.parsed: dict[str, Sources] | None = {} if reuse else None

    def key(self, unit: Compiled) -> str:
        identity = {k: unit.context.get(k) for k in IDENTITY} if unit.language == "cuda" else unit.context
        return digest("facts", self.schema, unit.key, unit.hashes, unit.sass_symbols, unit.dynamic_smem,
                      unit.entry_smem, identity)

    def of(self, unit: Compiled, *, keep: bool = True) -> Built | str | None:
        """The unit's facts; a message where its artifacts do not read as facts (a failure to report); None where
        its artifacts cannot be read back (compile it again). `keep=False`: not written to the cache yet (facts
        that will be read again once the unit's SASS is added)."""
        key = self.key(unit)
        if key not in self.memo:
            self.memo[key] = self._read(key, unit)
        found = self.memo[key]
        if keep and key in self.unsaved and isinstance(found, list):
            self.unsaved.discard(key)
            self.cache.put("facts", key, {"kernels": [[symbol, facts.to_json()] for symbol, facts in found]})
        return found

    def _read(self, key: str, unit: Compiled) -> Built | str | None:
        stored = self.cache.get("facts", key, self._shape)
        if stored is not None:
            return [(symbol, self.model.from_json(data)) for symbol, data in stored["kernels"]]
        artifacts = unit.artifacts()
        if artifacts is None:
            return None
        try:
            built = unit_facts(unit, self._sources(unit, artifacts), self.model)
        except KgateError as exc:  # ParseError: output the compiler would not write; never cached
            return str(exc)
        self.unsaved.add(key)
        return built

    def _sources(self, unit: Compiled, artifacts: Artifacts) -> Sources:
        if self.parsed is None:
            return Sources(artifacts)
        before = self.parsed.get(unit.key)
        self.parsed[unit.key] = found = before.reading(artifacts) if before is not None else Sources(artifacts)
        return found

    def _shape(self, value: Any) -> None:
        check_record(value, self.model)

    def placed(self, unit: Compiled) -> Built | str | None:
        """`of`, with a Triton unit's lines moved to where its code is now; None where they no longer place."""
        found = self.of(unit)
        if not isinstance(found, list) or unit.source_file is None:
            return found
        moved = []
        for symbol, facts in found:
            now = relocate(facts, unit.source_file, unit.spans_then, unit.spans_now, unit.def_line)
            if now is None:
                return None
            moved.append((symbol, now))
        return moved

    def usable(self, unit: Compiled) -> bool:
        return self.placed(unit) is not None


@dataclass(frozen=True)
class WorkerFacts:
    """What a CUDA unit's compile worker reads of it (`kgate.compile.cuda_engine.Analyse`): the symbols whose SASS
    a rule reads and the unit lacks, the unit's facts kept in the cache once none lacks. Made in the main process,
    called in the worker: it holds only what pickles (the cache's folder and `--sass`)."""

    cache: Cache
    sass_all: bool

    def __call__(self) -> Callable[[Compiled], list[str] | None]:
        facts = Facts(self.cache, reuse=True)
        return partial(_lacking_sass, facts, sass_all=self.sass_all)


def check_record(value: Any, model: type[KernelFacts] = KernelFacts) -> None:
    """v1/facts/<key>.json: [PTX entry, KernelFacts] of each kernel of a unit; raises KeyError, TypeError or
    ValueError on any other shape (the record is then rebuilt)."""
    for symbol, data in value["kernels"]:
        if not isinstance(symbol, str):
            raise TypeError("a kernel's symbol is a string")
        model.from_record(data)


def _failure(unit: Compiled, message: str) -> CompileFailure:
    kernel, name, path, line = unit.origin
    return CompileFailure(kernel, name, unit.target, path, line, message)


def _run_of(compilation: Compilation) -> CompileRun:
    # The summary handed on as it is, its lists and tables copied so that the run's can grow on their own.
    return CompileRun(**{f.name: copy.copy(getattr(compilation, f.name)) for f in fields(RunSummary)})


def triton_facts(config: Config, entries: list[TritonEntry], targets: tuple[str, ...], *, jobs: int,
                 progress: Progress | None = None, sass_all: bool = False, pool: Pool | None = None,
                 captured: list[CapturedSpec] | None = None, toolchain: dict[str, str] | None = None) -> CompileRun:
    """The facts of every registered launch and captured specialisation of the project's Triton kernels
    (`toolchain`: Triton's, resolved before the run's first compile)."""
    facts = Facts(Cache(config.root / config.cache_dir, config.cache_dir))
    compilation = compile_triton(config, entries, targets, jobs=jobs, progress=progress, sass_all=sass_all, pool=pool,
                                 captured=captured, usable=facts.usable, toolchain=toolchain)
    run = _run_of(compilation)
    recorded = {(c.spec.kernel, c.spec.variant): c for c in captured or ()}
    for unit in compilation.units:
        found = facts.placed(unit)
        if isinstance(found, list):
            for _symbol, item in found:
                item = with_captures(item, recorded.get((item.kernel, item.variant)),
                                     config.device_independent_launchers)
                run.facts.append(item)
                run.cubins[item.key] = unit.cubin
        else:
            run.failures.append(_failure(unit, found or "the compile's artifacts could not be read back from the cache"))
    run.facts.sort(key=lambda f: f.key)
    run.failures.sort(key=lambda f: (f.kernel, f.variant, f.target))
    return run


def with_captures(item: KernelFacts, entry: CapturedSpec | None, device_independent: bool) -> KernelFacts:
    """A Triton variant's facts with the capture environments its row comes from on its target (a registration of
    the same launch on a target no capture of it applies to is the registration's alone)."""
    if entry is None or not (device_independent or entry.applies_to(item.target)):
        return item
    return replace(item, captured=entry.environments_for(item.target))


def cuda_facts(config: Config, targets: tuple[str, ...], *, jobs: int, progress: Progress | None = None,
               sass_all: bool = False, kernels: list[str] | None = None, pool: Pool | None = None,
               files: frozenset[str] | None = None, found: CudaCompilers | None = None,
               durations: dict[str, float] | None = None) -> CompileRun:
    """The facts of every kernel the configured CUDA sources define, for every target.

    `files`: only these sources (a shard's slice); `kernels`: only the kernels these globs name; `found`: the
    compilers, resolved before the run's first compile; `durations`: the seconds earlier runs took per file (the
    timings file), to start the longest compiles first. A fresh compile's facts are read in its worker."""
    facts = Facts(Cache(config.root / config.cache_dir, config.cache_dir))
    compilation = compile_cuda(config, targets, jobs=jobs, progress=progress, pool=pool, files=files, kernels=kernels,
                               needs=lambda unit: _lacking_sass(facts, unit, sass_all), found=found,
                               analyse=WorkerFacts(facts.cache, sass_all), durations=durations)
    run = _run_of(compilation)
    built: list[tuple[Compiled, str, KernelFacts]] = []
    for unit in compilation.units:
        found = facts.of(unit)
        if isinstance(found, list):
            built += [(unit, symbol, item) for symbol, item in found]
        else:
            run.failures.append(_failure(unit, found or "the compile's artifacts could not be read back from the cache"))
    run.facts = finish(built, compilation.sites or [], kernels, sass_all)
    for unit, _symbol, item in built:
        run.cubins[item.key] = unit.cubin
    run.cubins = {f.key: run.cubins[f.key] for f in run.facts}
    run.facts.sort(key=lambda f: f.key)
    run.failures.sort(key=lambda f: (f.kernel, f.variant, f.target))
    return run


def reads_sass(facts: KernelFacts, patterns: dict[str, list[str]], sass_all: bool = False) -> bool:
    """Whether a rule will read a CUDA kernel's SASS (disassembly costs about half a second per cubin).

    pdl-missing-wait confirms `ACQBULK` for a PDL kernel whose PTX waits before every write (a load before the
    wait may be one it is declared to make);
    block-scale-missing names the SASS MMA of a kernel whose PTX lacks the block-scaled one;
    local-memory-in-loop reads where the local memory of a kernel with a stack frame is used.
    """
    if sass_all or facts.resources.stack_bytes > 0:
        return True
    entry = facts.entry
    if matches(facts.kernel, patterns["pdl"]) and entry.has_wait and not any(
            a.writes or a.opaque for a in entry.unwaited_accesses):
        return True
    return matches(facts.kernel, patterns["block_scale"]) and not any("block_scale" in op for op in entry.mma)


def _lacking_sass(facts: Facts, unit: Compiled, sass_all: bool) -> list[str] | None:
    """The symbols of a CUDA unit whose SASS a rule reads and its listing lacks, with the functions each calls (a
    function ptxas lists apart, `-rdc=true`, is part of its kernel's SASS); None where it cannot be read."""
    found = facts.of(unit, keep=False)
    if found is None:
        return None
    if isinstance(found, str):
        return []  # reported as a failure; disassembly would not help
    patterns = unit.context["sass_patterns"]
    lacking = list(dict.fromkeys(name for symbol, item in found if item.sass is None
                                 and reads_sass(item, patterns, sass_all) for name in (symbol, *item.entry.calls)))
    if not lacking:
        facts.of(unit)  # these are the unit's facts: kept
    return lacking


def finish(built: list[tuple[Compiled, str, KernelFacts]], sites: list[LaunchSite], kernels: list[str] | None,
           sass_all: bool) -> list[KernelFacts]:
    """CUDA kernels' facts with what the configuration and the launch sites say: PDL, expectations, kind.

    SASS is kept only where a rule reads it (or `--sass` asked for it), so the output does not
    depend on what an earlier run happened to leave in the cache.
    """
    instantiations: dict[str, set[str]] = {}
    for _unit, _symbol, item in built:
        name = item.kernel
        if "<" in name:
            instantiations.setdefault(base_name(name), set()).add("".join(name[name.index("<"):].split()))
    out = []
    for unit, _symbol, item in built:
        if kernels and not matches(item.kernel, kernels):
            continue
        plan = unit.context
        sass = item.sass if reads_sass(item, plan["sass_patterns"], sass_all) else None
        expect = tuple(sorted({e for pattern, items in plan["expect"].items()
                               if matches(item.kernel, [pattern]) for e in items}))
        kind = next((k for pattern, k in sorted(plan["kind"].items()) if matches(item.kernel, [pattern])), "other")
        pdl = matches(item.kernel, plan["pdl"]) or pdl_launched(item.kernel, sites, instantiations) is not None
        out.append(replace(item, pdl=pdl, expect=expect, kind=kind, sass=sass))
    return out

