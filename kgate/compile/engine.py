"""Plan, cache and run the compilation of every registered kernel variant.

Main-process side. Nothing here imports Triton or the project's modules: a
warm run (nothing changed) hashes source files, reads cached compile records
and runs no compiler. Cache misses go to worker processes (`kgate.compile.pool`).
What it hands on is each variant's artifacts (`kgate.compile.units`); the facts
stage reads facts from them (`kgate.facts.run`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kgate
from kgate.collect import pyindex
from kgate.collect.captures import CapturedSpec
from kgate.collect.files import display_path
from kgate.collect.modules import import_roots
from kgate.compile import import_reads, launches
from kgate.compile import records as record_shapes
from kgate.compile.autotune import autotuned
from kgate.compile.cache import Cache, Entry, code_digest, digest, sweep_triton
from kgate.compile.compilation import (
    Analyse,
    Compilation,
    Needs,
    Progress,
    Tally,
    first_line,
    note_imported,
    note_recorded,
    stop_if_cache_unwritable,
    worker_env,
)
from kgate.compile.payloads import CompileReply, CompileRequest, SassRequest, Variant
from kgate.compile.pool import Pool
from kgate.compile.preflight import built_units, python_toolchain, tools_of
from kgate.compile.protocol import Outcome, Task
from kgate.compile.relocate import def_line
from kgate.compile.triton_expand import expand_kernels, import_folder, note_reads, project_roots
from kgate.compile.triton_plan import (
    Planned,
    conflict,
    current_line,
    defined_in_file,
    origins,
    path_aliases,
    plan_kernels,
    variants_of,
)
from kgate.compile.units import Compiled, CompileFailure, cubin_file
from kgate.core.config import Config, PythonEntry
from kgate.core.findings import Related
from kgate.core.rule import CapturedKernel

# Bumped when the same planned variant compiles to something else or the compile record changes its layout
# (5: the record holds the artifacts' hashes, no facts; 6: SASS kept wherever ptxas gave a stack frame; 7: the
# expectation implied by what the specialisation compiles, not by its source text; 8: the record names the
# parameters the kernel takes, as the PTX passes them; 9: each kernel of a CuTe DSL call with the dynamic shared memory
# its own launch asks for; 10: the record keeps what binding a registration read, its heuristics' files and variables).
# What the facts stage reads from the artifacts has its own version, computed (`kgate.facts.model.facts_schema`):
# a new fact recompiles nothing.
COMPILE_FORMAT = 10


def compile_triton(config: Config, entries: list[PythonEntry], targets: tuple[str, ...], *, jobs: int,
                   progress: Progress | None = None, pool: Pool | None = None,
                   captured: list[CapturedSpec] | None = None, needs: Needs | None = None,
                   analyse: Analyse | None = None, toolchain: dict[str, str] | None = None) -> Compilation:
    """Compile every registered launch and every captured specialisation of the project's Triton kernels.

    A unit from the cache is used as it is when `needs` lacks nothing of it, with its SASS added from its cached
    cubin when `needs` lacks that, and compiled again when `needs` cannot use it. `analyse`: `needs` in the worker
    that compiles a unit. `toolchain`: `triton_toolchain()` as the run resolved it before its first compile
    (resolved here without it)."""
    run = Tally()
    entries, captured, built_for = built_units(entries, captured or [], targets)
    if not entries and not captured:
        return run.made(Compilation)
    run.toolchain = dict(toolchain) if toolchain is not None else python_toolchain(entries, captured, built_for)
    cache = Cache(config.root / config.cache_dir, config.cache_dir)
    roots = import_roots(config.root, config.python_path)
    pyindex.use_cache(config.root / config.cache_dir)
    planned = plan_kernels(config, entries, captured, roots)
    pyindex.save()
    known = path_aliases(config, planned)

    def shown(path: str) -> str:
        return display_path(Path(path), config.root, known)

    own_pool = pool is None
    pool = pool or Pool(jobs, worker_env(config))
    try:
        where = import_reads.view(str(config.root.resolve()), project_roots(config), worker_env(config),
                                  import_folder(config), config.checkout_of)
        expand_kernels(config, planned, pool, cache, run.toolchain, where)
        for p in planned:
            crossed = import_reads.working_tree_reads(p.reads or {})
            if crossed and p.error is None:  # a base revision's import read the working tree's copy of a file
                p.expansion = None
                p.error = (f"importing {p.kernel.partition(':')[0]} on the base revision's side read {crossed[0]}, a "
                           f"file of the working tree named by absolute path, in place of the base's own copy: what "
                           f"it would build is not the base's, so it is not compared (name the file relative to the "
                           f"module, e.g. from __file__)")
        run.unseen = unseen_programs(planned)
        for p in planned:
            if p.where is not None:
                p.where = (shown(p.where[0]), p.where[1])

        # variants x targets: cached artifacts, or compile
        jobs_todo: list[tuple[Variant, str, Planned, str]] = []
        # Cached without the SASS the facts stage lacks, whose cubin is cached: disassembled, not compiled again.
        sass_todo: list[tuple[Variant, str, Planned, str, Entry]] = []
        for p in planned:
            if p.expansion is not None:
                p.expansion = current_line(p, p.expansion)
                run.locations[p.kernel] = (shown(p.expansion["path"]), p.expansion["line"])
            if p.captured and p.expansion is not None:
                tuned = frozenset(k for cfg in p.expansion["configs"] for k in cfg["kwargs"])
                run.captured.append(CapturedKernel(p.kernel, tuple(c.spec for c in p.captured), tuned,
                                                   frozenset(p.expansion.get("keys", ()))))
            tuning = autotuned(p.kernel, p.expansion, p.captured, targets) if p.expansion is not None else None
            if tuning is not None:
                run.autotuned.append(tuning)
            run.replayable = run.replayable and not p.transient
            for variant, built_for in variants_of(config, p, run, targets):
                for target in built_for:
                    tool_key = tools_of(p.language, run.toolchain)
                    key = digest("compiled", COMPILE_FORMAT, kgate.__version__, code_digest(), tool_key, variant, target,
                                 p.source_key, p.import_key)
                    entry = cache.entry("compiled", key, record_shapes.compiled)
                    if entry is not None and not import_reads.still_held(entry.meta.get("bound"), where):
                        entry = None  # what binding its registration read (a heuristic's file) has changed
                    unit = _cached_unit(cache, key, entry, variant, p) if entry is not None else None
                    lacking = None if unit is None else needs(unit) if needs is not None else []
                    if entry is not None and unit is not None and lacking == []:
                        note_recorded(entry.meta)
                        note_reads(entry.meta.get("bound") or {}, where)
                        run.units.append(unit)
                        run.cached += 1
                    elif entry is not None and lacking and cache.cubin(key, entry.meta) is not None:
                        sass_todo.append((variant, target, p, key, entry))
                    else:
                        jobs_todo.append((variant, target, p, key))
        jobs_todo += _disassemble_cached(config, cache, pool, sass_todo, run, needs)

        total = len(jobs_todo)
        done = 0
        fresh: list[_Fresh] = []

        def compiled(index: int, outcome: Outcome) -> None:
            nonlocal done
            variant, target, p, key = jobs_todo[index]
            stop_if_cache_unwritable(config, outcome)
            run.replayable = run.replayable and not outcome.transient
            note_reads(outcome.reads or {}, where)
            done += 1
            if progress:
                progress(done, total, f"{variant['kernel']} [{variant['name']}] {target}")
            if outcome.ok:
                cache.put("spans", key, p.spans)  # before the record: a compile record always has its spans
                # The cubin this compile wrote, by its hash (not the file under its plain name: another compile of
                # the key, in another run, may have written that since).
                reply = outcome.answer(CompileReply)
                cubin = reply["cubin"]
                value: dict[str, Any] = {k: v for k, v in reply.items() if k not in ("cubin", "bound")}
                record = Entry(value, {"cubin": cubin, "imported": note_imported(outcome.imported),
                                       "bound": reply.get("bound", {})})
                kept = bool(p.import_key) and import_reads.agree(p.reads, outcome.reads or {})
                if kept:
                    cache.put("compiled", key, record.value, record.meta)
                else:  # an input changed between the kernel's expansion and its compile (or its expansion
                    run.replayable = False  # failed where its compile did not): not kept, not replayed
                unit = _unit(cache, key, value, cubin, variant, p, p.spans)
                fresh.append(_Fresh(variant, target, p, key, record if kept else None, unit))
                run.compiled += 1
                run.compile_seconds[f"{variant['kernel']}|{unit.context['variant']}|{target}"] = outcome.seconds
            else:
                path = shown(p.expansion["path"]) if p.expansion else config.display()
                line = p.expansion["line"] if p.expansion else 1
                related: tuple[Related, ...] = ()
                if outcome.where is not None:  # the project's line that raised, as its module was imported
                    related = (*origins(config, p, variant), Related(path, line, f"{p.kernel} is defined here"))
                    path, line = shown(outcome.where[0]), outcome.where[1]
                run.failures.append(CompileFailure(variant["kernel"], variant["name"], target, path, line,
                                                   first_line(outcome), related=related))

        if jobs_todo:
            sweep_triton(config.root / config.cache_dir / "triton")  # what killed compiles left of Triton's
            project, cwd = project_roots(config), import_folder(config)
            tasks = [Task(f"{p.language}.compile", _compile_request(
                p, variant, target, key, roots=project, cwd=cwd, checkout=list(config.checkout_of or ()),
                artifacts=str(cache.artifacts(key)), shown=shown,
                toolchain=tools_of(p.language, run.toolchain), analyse=analyse))
                for variant, target, p, key in jobs_todo]
            if progress:
                progress(0, total, "")
            pool.run(tasks, config.timeout, compiled)
            _take_fresh(config, cache, pool, fresh, run, needs)
    finally:
        if own_pool:
            pool.close()
    # Two registrations (or a registration and a capture) that bind to the same specialisation are one row.
    run.units, conflicts = launches.one_per_launch(run.units)
    by_kernel = {p.kernel: p for p in planned}
    run.failures.extend(conflict(config, by_kernel[kernel], message) for kernel, message in conflicts)
    run.failures.sort(key=lambda f: (f.kernel, f.variant, f.target))
    return run.made(Compilation)


def _compile_request(p: Planned, variant: Variant, target: str, key: str, *, roots: list[str], cwd: str,
                     checkout: list[str], artifacts: str, shown: Callable[[str], str], toolchain: dict[str, str],
                     analyse: Analyse | None) -> CompileRequest:
    """The payload of the task that compiles `variant` of kernel `p` for `target` under compile key `key`: the
    project's folders (`roots`) and the folder its modules are imported in (`cwd`), the artifacts' cache folder."""
    assert p.expansion is not None
    request: CompileRequest = {
        "variant": variant, "target": target, "sys_path": p.sys_path, "roots": roots, "cwd": cwd, "checkout": checkout,
        "path": shown(p.expansion["path"]), "line": p.expansion["line"], "artifacts": artifacts, "key": key,
        "toolchain": {k: v for k, v in toolchain.items() if not k.endswith(".id")},
    }
    if analyse is not None:
        request["analyse"] = analyse
    return request


def _unit(cache: Cache, key: str, value: dict[str, Any], cubin: str | None, variant: Variant, p: Planned,
          spans_then: dict[str, tuple[int, int]]) -> Compiled:
    """A variant's compile record as the unit the facts stage reads, with what it needs to move its lines."""
    context = value["context"]
    line = def_line(p.file, p.function) if p.file is not None and defined_in_file(p, p.expansion) else None
    return Compiled(key=key, folder=cache.artifacts(key), language=context["language"], target=context["target"],
                    hashes=dict(value["artifacts"]), context=context, dynamic_smem=value["dynamic_smem"],
                    entry_smem=dict(value.get("entry_smem", {})),
                    cubin=cubin_file(cache.artifacts(key), cubin), spans_then=spans_then, spans_now=p.spans,
                    source_file=p.file, def_line=line,
                    origin=(variant["kernel"], variant["name"], context["path"], context["line"]))


def unseen_programs(planned: list[Planned]) -> dict[str, list[str]]:
    """Per kernel module, the programs its import ran whose own reads kgate does not see (`import_reads.UNSEEN`)."""
    out: dict[str, list[str]] = {}
    for p in planned:
        programs = import_reads.unseen_programs(p.reads or {})
        if programs:
            module = p.kernel.partition(":")[0]
            out[module] = sorted({*out.get(module, []), *programs})
    return out


def _cached_unit(cache: Cache, key: str, entry: Entry, variant: Variant, p: Planned) -> Compiled | None:
    """A cached compile record as a unit; None when the spans it was compiled with are not cached (compile again).
    It holds whatever SASS earlier runs kept: the facts stage reports the SASS its plan wants, whatever ran before
    it on the same cache."""
    then = cache.get("spans", key, record_shapes.spans) if p.file is not None else {}
    if then is None:
        return None
    return _unit(cache, key, entry.value, entry.meta.get("cubin"), variant, p,
                 {k: (v[0], v[1]) for k, v in then.items()})


@dataclass(frozen=True)
class _Fresh:
    """A variant this run compiled: its unit, and its compile record where the cache kept it."""

    variant: Variant
    target: str
    planned: Planned
    key: str
    record: Entry | None
    unit: Compiled


def _take_fresh(config: Config, cache: Cache, pool: Pool, fresh: list[_Fresh], run: Tally,
                needs: Needs | None) -> None:
    """This run's compiles as units, each with the SASS the facts stage lacks: its worker disassembled it, or, where
    the worker could not, it is disassembled now from the cubin just kept; what cannot be is a failure."""
    todo = []
    failed: list[tuple[_Fresh, str]] = []
    for item in fresh:
        lacking = needs(item.unit) if needs is not None else []
        if lacking == []:
            run.units.append(item.unit)
        elif lacking is not None and item.record is not None:
            todo.append((item.variant, item.target, item.planned, item.key, item.record))
        else:
            why = "its artifacts could not be read back" if lacking is None else "its SASS could not be disassembled"
            failed.append((item, f"the compile finished, but {why}"))
    by_key = {item.key: item for item in fresh}
    failed += [(by_key[key], "cuobjdump could not disassemble the cubin just compiled")
               for _variant, _target, _p, key in _disassemble_cached(config, cache, pool, todo, run, needs, cached=False)]
    for item, message in failed:
        kernel, name, path, line = item.unit.origin
        run.failures.append(CompileFailure(kernel, name, item.target, path, line, message))


def _disassemble_cached(config: Config, cache: Cache, pool: Pool,
                        todo: list[tuple[Variant, str, Planned, str, Entry]],
                        run: Tally, needs: Needs | None, *,
                        cached: bool = True) -> list[tuple[Variant, str, Planned, str]]:
    """Add SASS to units from their cubins in the cache (`kgate audit` after `kgate check`: half a second of
    cuobjdump per variant instead of a compile); what cannot be disassembled or read is returned, to compile
    (`cached`: units from the cache, counted so)."""
    again: list[tuple[Variant, str, Planned, str]] = []

    def disassembled(index: int, outcome: Outcome) -> None:
        variant, target, p, key, entry = todo[index]
        stop_if_cache_unwritable(config, outcome)
        unit = None
        if outcome.ok:
            value = {**entry.value, "artifacts": {**entry.value["artifacts"], "sass": outcome.answer(str)}}
            cache.put("compiled", key, value, entry.meta)
            unit = _cached_unit(cache, key, Entry(value, entry.meta), variant, p)
            note_recorded(entry.meta)
        if unit is None or (needs is not None and needs(unit) is None):
            again.append((variant, target, p, key))
        else:
            run.units.append(unit)
            run.cached += int(cached)

    if todo:
        pool.run([Task("sass", SassRequest(cubin=cubin_file(cache.artifacts(key), entry.meta.get("cubin"))[0]))
                  for _variant, _target, _p, key, entry in todo],
                 config.timeout, disassembled)
    return again
