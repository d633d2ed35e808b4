"""The facts of a run: the compile stage's units, each read into KernelFacts (cached), and what they add up to.

A unit's facts are cached as a `facts` record keyed by the facts schema (`kgate.facts.model.facts_schema`),
the unit's compile key and its artifacts' hashes: a warm run reads that record and parses nothing; a new fact
or a changed extractor rebuilds the records from the cached artifacts, compiling nothing. A unit whose
artifacts cannot be read back whole, or whose cached lines no longer place in its file, is handed back to the
compile stage to compile again.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from functools import partial
from pathlib import Path
from typing import Any

from kgate.collect.captures import CapturedSpec
from kgate.collect.cuda_launches import LaunchSite, SmemSite, largest_smem, pdl_launched, unsettled_smem
from kgate.collect.cuda_names import matches
from kgate.compile.cache import Cache, digest, file_hash
from kgate.compile.compilation import Compilation, Needs, Progress, RunSummary
from kgate.compile.cuda_engine import IDENTITY, compile_cuda
from kgate.compile.engine import compile_triton
from kgate.compile.pool import Pool
from kgate.compile.preflight import CudaCompilers
from kgate.compile.units import Artifacts, Compiled, CompileFailure
from kgate.core.artifacts import Artifact, ArtifactPlan
from kgate.core.config import Config, PythonEntry
from kgate.core.errors import KgateError
from kgate.facts.build import pdl_candidates, pdl_scope, unit_facts
from kgate.facts.extract import Sources
from kgate.facts.model import KernelFacts, facts_schema
from kgate.facts.relocate import relocate
from kgate.facts.smem_probe import Evaluated, instantiated, probed_smem

Cubins = dict[tuple[str, str, str], tuple[str, str | None]]


@dataclass(frozen=True)
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
        if unit.language == "cuda":  # and which of its kernels may be PDL: only those are traced
            identity = {**{k: unit.context.get(k) for k in IDENTITY}, "pdl": pdl_scope(unit.context)}
        else:
            identity = unit.context
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
        traced = pdl_candidates(unit.context) if unit.language == "cuda" else None
        if self.parsed is None:
            return Sources(artifacts, traced)
        before = self.parsed.get(unit.key)
        self.parsed[unit.key] = found = before.reading(artifacts) if before is not None else Sources(artifacts, traced)
        return found

    def _shape(self, value: Any) -> None:
        check_record(value, self.model)

    def placed(self, unit: Compiled, *, keep: bool = True) -> Built | str | None:
        """`of`, with a Triton unit's lines moved to where its code is now; None where they no longer place."""
        found = self.of(unit, keep=keep)
        if not isinstance(found, list) or unit.source_file is None:
            return found
        moved = []
        for symbol, facts in found:
            now = relocate(facts, unit.source_file, unit.spans_then, unit.spans_now, unit.def_line)
            if now is None:
                return None
            moved.append((symbol, now))
        return moved


@dataclass(frozen=True)
class WorkerFacts:
    """What a unit's compile worker reads of it (`kgate.compile.compilation.Analyse`): the symbols whose SASS the run's
    plan wants and the unit lacks, the unit's facts kept in the cache once none lacks. Made in the main process,
    called in the worker: it holds only what pickles (the cache's folder and the plan)."""

    cache: Cache
    plan: ArtifactPlan

    def __call__(self) -> Needs:
        return partial(lacking_sass, Facts(self.cache, reuse=True), self.plan)


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


def _run_of(compilation: Compilation, facts: list[KernelFacts], failures: list[CompileFailure],
            cubins: Cubins) -> CompileRun:
    """The compile run's summary handed on as it is, with the facts read of its units and the failures of those that
    read as none (sorted, after the compile stage's own)."""
    summary = {f.name: getattr(compilation, f.name) for f in fields(RunSummary)}
    summary["failures"] = sorted([*compilation.failures, *failures], key=lambda f: (f.kernel, f.variant, f.target))
    return CompileRun(**summary, facts=sorted(facts, key=lambda f: f.key), cubins=cubins)


def triton_facts(config: Config, entries: list[PythonEntry], targets: tuple[str, ...], *, jobs: int, plan: ArtifactPlan,
                 progress: Progress | None = None, pool: Pool | None = None, captured: list[CapturedSpec] | None = None,
                 toolchain: dict[str, str] | None = None) -> CompileRun:
    """The facts of every registered launch and captured specialisation of the project's Triton kernels, with the
    SASS `plan` wants (`toolchain`: Triton's, resolved before the run's first compile)."""
    facts = Facts(Cache(config.root / config.cache_dir, config.cache_dir))
    compilation = compile_triton(config, entries, targets, jobs=jobs, progress=progress, pool=pool, captured=captured,
                                 needs=partial(lacking_sass, facts, plan), analyse=WorkerFacts(facts.cache, plan),
                                 toolchain=toolchain)
    recorded = {(c.spec.kernel, c.spec.variant): c for c in captured or ()}
    read: list[KernelFacts] = []
    failures: list[CompileFailure] = []
    cubins: Cubins = {}
    for unit in compilation.units:
        found = facts.placed(unit)
        if isinstance(found, list):
            for _symbol, item in found:
                item = with_captures(item, recorded.get((item.kernel, item.variant)),
                                     config.device_independent_launchers)
                read.append(as_planned(item, plan))
                cubins[item.key] = unit.cubin
        else:
            failures.append(_failure(unit, found or "the compile's artifacts could not be read back from the cache"))
    return _run_of(compilation, read, failures, cubins)


def with_captures(item: KernelFacts, entry: CapturedSpec | None, device_independent: bool) -> KernelFacts:
    """A Triton variant's facts with the capture environments its row comes from on its target (a registration of
    the same launch on a target no capture of it applies to is the registration's alone)."""
    if entry is None or not (device_independent or entry.applies_to(item.target)):
        return item
    return replace(item, captured=entry.environments_for(item.target))


def cuda_facts(config: Config, targets: tuple[str, ...], *, jobs: int, plan: ArtifactPlan,
               progress: Progress | None = None, kernels: list[str] | None = None, pool: Pool | None = None,
               files: frozenset[str] | None = None, found: CudaCompilers | None = None,
               durations: dict[str, float] | None = None) -> CompileRun:
    """The facts of every kernel the configured CUDA sources define, for every target, with the SASS `plan` wants.

    `files`: only these sources (a shard's slice); `kernels`: only the kernels these globs name; `found`: the
    compilers, resolved before the run's first compile; `durations`: the seconds earlier runs took per file (the
    timings file), to start the longest compiles first. A fresh compile's facts are read in its worker."""
    facts = Facts(Cache(config.root / config.cache_dir, config.cache_dir))
    compilation = compile_cuda(config, targets, jobs=jobs, progress=progress, pool=pool, files=files, kernels=kernels,
                               needs=partial(lacking_sass, facts, plan), found=found,
                               analyse=WorkerFacts(facts.cache, plan), durations=durations)
    built: list[tuple[Compiled, str, KernelFacts]] = []
    failures: list[CompileFailure] = []
    for unit in compilation.units:
        read = facts.of(unit)
        if isinstance(read, list):
            built += [(unit, symbol, item) for symbol, item in read]
        else:
            failures.append(_failure(unit, read or "the compile's artifacts could not be read back from the cache"))
    evaluated, probed = probed_smem(config, built, compilation, jobs=jobs, pool=pool)
    finished = finish(built, compilation.sites or [], kernels, plan, compilation.smem or [], evaluated)
    compilation = replace(compilation, replayable=compilation.replayable and probed.replayable)
    of_unit = {item.key: unit.cubin for unit, _symbol, item in built}
    return _run_of(compilation, finished, failures, {f.key: of_unit[f.key] for f in finished})


def as_planned(item: KernelFacts, plan: ArtifactPlan) -> KernelFacts:
    """A kernel's facts as the run's plan asks for them: without the facts read from SASS where no selected rule
    reads the kernel's SASS, so that a report does not depend on what an earlier run left in the cache."""
    return item if plan.wants(Artifact.SASS, item) else item.without(Artifact.SASS)


def lacking_sass(facts: Facts, plan: ArtifactPlan, unit: Compiled) -> list[str] | None:
    """The symbols of a unit whose SASS the plan wants and its listing lacks, with the functions each calls (a
    function ptxas lists apart, `-rdc=true`, is part of its kernel's SASS); None where the unit cannot be read (a
    damaged artifact, a Triton variant whose lines no longer place in its file): it is compiled again.

    A CUDA kernel is judged with what the configuration and the launch sites say of it (PDL, expectations, kind),
    the kernels of the unit's own file taken for all of a template's instantiations (`configured`). Where the plan
    reads the cubin itself, a unit whose cubin is no longer as it was written cannot be read either."""
    if Artifact.CUBIN in plan.reads and not _cubin_intact(unit):
        return None
    found = facts.placed(unit, keep=False)
    if found is None:
        return None
    if isinstance(found, str):
        return []  # reported as a failure; disassembly would not help
    items = [item for _symbol, item in found]
    if unit.language == "cuda":
        items = configured([(unit, item) for item in items], unit.launch_sites)
    lacking = list(dict.fromkeys(name for (symbol, built), item in zip(found, items)
                                 if not built.has(Artifact.SASS) and plan.wants(Artifact.SASS, item)
                                 for name in (symbol, *built.entry.calls)))
    if not lacking:
        facts.of(unit)  # these are the unit's facts: kept
    return lacking


def _cubin_intact(unit: Compiled) -> bool:
    """Whether a unit's cubin is still the file its record names, with the content it was written with."""
    path, digest = unit.cubin
    return digest is None or (bool(path) and file_hash(Path(path)) == digest)


def configured(built: list[tuple[Compiled, KernelFacts]], sites: tuple[LaunchSite, ...] | list[LaunchSite],
               smem: list[SmemSite] | None = None, evaluated: Evaluated | None = None) -> list[KernelFacts]:
    """CUDA kernels' facts with what the configuration and the launch sites say: PDL, expectations, kind, and the
    dynamic shared memory the source launches them with (the most any site gives, added to ptxas's static figure,
    as Triton's launcher's is; `smem_set_at` names the site, `smem_unsettled_at` one whose size the run computes). A
    site that names a template's arguments applies to that instantiation (of those `built` holds). `evaluated`: by
    kernel variant, the sites whose size the compiler evaluated for it (`kgate.facts.smem_probe`); a site the
    compiler was to size and did not is one whose size the run computes."""
    instantiations = instantiated([item for _unit, item in built])
    out = []
    for unit, item in built:
        plan = unit.context
        expect = tuple(sorted({e for pattern, items in plan["expect"].items()
                               if matches(item.kernel, [pattern]) for e in items}))
        kind = next((k for pattern, k in sorted(plan["kind"].items()) if matches(item.kernel, [pattern])), "other")
        pdl = matches(item.kernel, plan["pdl"]) or pdl_launched(item.kernel, list(sites), instantiations) is not None
        item = replace(item, pdl=pdl, expect=expect, kind=kind)
        own = (evaluated or {}).get(item.key, [])
        done = {(site.path, site.line) for site in own}
        mine = [site if site.compiler is None else replace(site, bytes=None) for site in smem or ()
                if site.compiler is None or (site.path, site.line) not in done]
        given = largest_smem(item.kernel, [*mine, *own], instantiations)
        if given is not None and given.bytes:
            item = replace(item, resources=replace(item.resources, smem_dynamic=given.bytes),
                           smem_set_at=f"{given.path}:{given.line}")
        unsettled = unsettled_smem(item.kernel, [*mine, *own], instantiations) if mine else None
        if unsettled is not None:
            item = replace(item, smem_unsettled_at=f"{unsettled.path}:{unsettled.line}")
        out.append(item)
    return out


def finish(built: list[tuple[Compiled, str, KernelFacts]], sites: list[LaunchSite], kernels: list[str] | None,
           plan: ArtifactPlan, smem: list[SmemSite] | None = None, evaluated: Evaluated | None = None
           ) -> list[KernelFacts]:
    """CUDA kernels' facts as the run reports them: configured (`configured`), those the `--kernel` globs name, each
    with its SASS where the plan wants it (`as_planned`)."""
    every = configured([(unit, item) for unit, _symbol, item in built], sites, smem, evaluated)
    return [as_planned(item, plan) for item in every if not kernels or matches(item.kernel, kernels)]
