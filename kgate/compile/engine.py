"""Plan, cache and run the compilation of every registered kernel variant.

Main-process side. Nothing here imports Triton or the project's modules: a
warm run (nothing changed) hashes source files, reads cached compile records
and runs no compiler. Cache misses go to worker processes (`kgate.compile.pool`).
What it hands on is each variant's artifacts (`kgate.compile.units`); the facts
stage reads facts from them (`kgate.facts.run`).
"""

from __future__ import annotations

import json
import os
import posixpath
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kgate
from kgate.collect import pyindex
from kgate.collect.captures import CapturedSpec
from kgate.collect.files import Alias, aliases, display_path, relpath
from kgate.collect.modules import closure, import_roots, kernel_source_key, module_file, setup_env
from kgate.collect.specialization import readable_name
from kgate.collect.static_kernel import static_expansion
from kgate.compile import cute_plan, expectations, import_reads, launches
from kgate.compile import records as record_shapes
from kgate.compile.autotune import Autotuned, autotuned
from kgate.compile.cache import Cache, CacheWriteError, Entry, code_digest, digest, sweep_triton
from kgate.compile.payloads import CompileRequest, ExpandRequest, SassRequest, Variant
from kgate.compile.pool import Pool
from kgate.compile.preflight import built_units, python_toolchain, tools_of
from kgate.compile.protocol import Outcome, Task
from kgate.compile.relocate import def_line, def_spans
from kgate.compile.triton_backend import MISSING_ATTRIBUTE
from kgate.compile.units import Compiled, CompileFailure, cubin_file
from kgate.core.config import Config, PythonEntry, TritonEntry
from kgate.core.cute import CuteEntry
from kgate.core.entry import KernelName
from kgate.core.findings import Related
from kgate.core.rule import CapturedKernel
from kgate.support import reads
from kgate.support.atomicio import read_input_text

Progress = Callable[[int, int, str], None]
# What the facts stage lacks of a unit to carry out the run's plan (`kgate.core.artifacts`): the symbols whose SASS
# it wants and the unit's listing does not hold ([] for none), disassembled from the unit's cubin; None where it
# cannot use the unit (a damaged artifact, a Triton variant whose lines no longer place in its file): it is
# compiled again.
Needs = Callable[[Compiled], "list[str] | None"]
# `needs` for the compile worker that compiled a unit (a picklable factory: each compile makes its own): the facts
# stage reads the unit there, right after its compile and while other units compile, and the SASS it lacks is
# disassembled there (`kgate.compile.worker_facts`). A factory's `needs` also keeps the unit's facts in the cache.
Analyse = Callable[[], Needs]

# Bumped when the same planned variant compiles to something else or the compile record changes its layout
# (5: the record holds the artifacts' hashes, no facts; 6: SASS kept wherever ptxas gave a stack frame; 7: the
# expectation implied by what the specialisation compiles, not by its source text; 8: the record names the
# parameters the kernel takes, as the PTX passes them).
# What the facts stage reads from the artifacts has its own version, computed (`kgate.facts.model.facts_schema`):
# a new fact recompiles nothing.
COMPILE_FORMAT = 8


@dataclass
class RunSummary:
    """How a compile run went, handed on unchanged from the compile stage (`Compilation`) to the facts stage
    (`kgate.facts.run.CompileRun`): the failures, the counts, the toolchain, the captures and locations."""

    failures: list[CompileFailure] = field(default_factory=list)
    compiled: int = 0
    cached: int = 0
    toolchain: dict[str, str] = field(default_factory=dict)
    compile_seconds: dict[str, float] = field(default_factory=dict)
    # The captured specialisations per kernel, for the capture rules, and where each kernel is defined.
    captured: list[CapturedKernel] = field(default_factory=list)
    locations: dict[str, tuple[str, int]] = field(default_factory=dict)
    # The autotuned kernels' configs, for the severity of a finding in some of them (`kgate.evaluate.configs`).
    autotuned: list[Autotuned] = field(default_factory=list)
    # False when an outcome came from this run's circumstances (a timeout, a worker that died): the run is
    # not recorded for replay (`kgate.pipeline.fastpath`), so the next one compiles again.
    replayable: bool = True


@dataclass
class Compilation(RunSummary):
    """What the compile stage hands on: every compiled unit (from this run or the cache) and every failure."""

    units: list[Compiled] = field(default_factory=list)


@dataclass
class _Planned(KernelName):
    """One kernel to gate: its registrations and its captured specialisations, planned together."""

    kernel: str
    entries: list[PythonEntry]
    captured: list[CapturedSpec]
    source_key: str
    sys_path: list[str]
    expansion: dict[str, Any] | None = None
    error: str | None = None
    missing: bool = False  # the error is that the kernel (or its module) does not exist
    file: Path | None = None  # the kernel's module file
    import_root: Path | None = None  # the python-path folder (resolved) it was found under
    spans: dict[str, tuple[int, int]] = field(default_factory=dict)  # its top-level defs, when planned
    transient: bool = False  # its expansion timed out or its worker died
    where: tuple[str, int] | None = None  # the project's line that raised while the kernel was imported (shown)
    # What importing its module read (`kgate.compile.import_reads`) and the key that makes: its records' key.
    reads: dict[str, Any] = field(default_factory=dict)
    import_key: str = ""

    @property
    def language(self) -> str:
        """The front end its compile worker tasks are named by: "triton" (Gluon too) or "cute"."""
        return cute_plan.language(self.entries)


def config_line(config: Config, needle: str) -> int:
    """The line of the configuration file that mentions `needle` (1 if none)."""
    if config.source is None:
        return 1
    try:
        for number, line in enumerate(read_input_text(config.source).splitlines(), 1):
            if needle in line:
                return number
    except (OSError, UnicodeDecodeError):
        pass
    return 1


def _entry_location(config: Config, entry: PythonEntry) -> tuple[str, int]:
    origin = entry.origin.split(": ")[0]
    if ":" in origin and origin.rsplit(":", 1)[1].isdigit():
        path, line = origin.rsplit(":", 1)
        return path, int(line)
    return config.display(), config_line(config, entry.kernel)


def plan_variants(entry: TritonEntry, expansion: dict[str, Any]) -> list[Variant]:
    """Every launch a registration describes, as what to bind; raises ValueError when it does not fit the kernel.

    One launch per config (autotune) or variant, times one per `args` table. Each carries the example
    arguments Triton's launcher binds in the compile worker (`bind`): the values of `args`, else ones made
    from the signature (`example_argument`).
    """
    params = expansion["params"]
    runtime = [p["name"] for p in params if not p["constexpr"]]
    constexpr_params = [p for p in params if p["constexpr"]]
    tables = list(entry.args) or [{}]
    given = set(entry.signature).union(*tables)
    # A run-time argument may also take its value from `constexprs` (an older way to say "launched as 1").
    missing = sorted({name for name in runtime for table in tables
                      if name not in table and name not in entry.signature and name not in entry.constexprs},
                     key=runtime.index)
    unknown = [name for name in entry.signature if name not in runtime]
    unknown += sorted(name for name in given - set(entry.signature) if name not in runtime)
    problems = []
    if missing:
        problems.append(f"signature lacks {', '.join(missing)}")
    if unknown:
        problems.append(f"signature names {', '.join(unknown)}, not run-time parameters of the kernel")
    if problems:
        raise ValueError("registration does not match the kernel: " + "; ".join(problems))
    bases: list[dict[str, Any]] = []
    if expansion["configs"]:
        for cfg in expansion["configs"]:
            bases.append({"constexprs": {**entry.constexprs, **cfg["kwargs"]}, "num_warps": cfg["num_warps"],
                          "num_stages": cfg["num_stages"], "maxnreg": cfg.get("maxnreg")})
    else:
        bases.append({"constexprs": dict(entry.constexprs), "num_warps": entry.num_warps,
                      "num_stages": entry.num_stages, "maxnreg": None})
    for override in entry.variants:
        extra = {k: v for k, v in override.items() if k not in ("num_warps", "num_stages")}
        bases.append({"constexprs": {**entry.constexprs, **extra},
                      "num_warps": override.get("num_warps", entry.num_warps),
                      "num_stages": override.get("num_stages", entry.num_stages), "maxnreg": None})
    request = expectations.requested(entry.expect)
    names = {p["name"] for p in params}
    computed = set(expansion["heuristics"])  # given by the kernel's heuristics when it is bound
    divisible = set(entry.divisible) if entry.divisible is not None else {
        name for name, ty in entry.signature.items() if ty.startswith("*") or ty in _INTEGERS}
    out: dict[str, Variant] = {}
    for b in bases:
        bad = [k for k in b["constexprs"] if k not in names]
        if bad:
            raise ValueError(f"constexprs name {', '.join(sorted(bad))}, not parameters of the kernel")
        unset = [p["name"] for p in constexpr_params if p["name"] not in b["constexprs"] and not p["has_default"]
                 and p["name"] not in computed]
        if unset:
            raise ValueError(f"constexpr parameter(s) without a value: {', '.join(unset)}")
        options: dict[str, Any] = {"num_warps": b["num_warps"], "num_stages": b["num_stages"]}
        if b["maxnreg"]:
            options["maxnreg"] = b["maxnreg"]
        if entry.pdl:
            options["launch_pdl"] = True
        constexprs = {k: v for k, v in b["constexprs"].items() if k not in runtime}
        for table in tables:
            args = {name: table[name] if name in table else b["constexprs"][name] if name in b["constexprs"]
                    else example_argument(name, entry.signature[name], divisible) for name in runtime}
            bind = {"args": args, "constexprs": constexprs, "options": options}
            key = json.dumps(bind, sort_keys=True)
            out[key] = {
                "kernel": entry.kernel, "name": readable_name(constexprs, options), "source": "registered",
                "pdl": entry.pdl, "kind": entry.kind, **request, "shapes": [dict(s) for s in entry.shapes],
                "bind": bind,
            }
    return [out[k] for k in sorted(out)]


# The default example values, by the signature's type, when a registration gives no `args`: a pointer
# 16-byte aligned, an integer of the type's range divisible by 16 (both unless `divisible` lists the arguments
# that are), a float. Triton's launcher turns them into the specialisation. Measured on captures of real
# launches (Liger-Kernel and unsloth ops at LLM shapes): of 286 integer arguments, 212 were specialised as
# divisible by 16, 52 as equal to 1 and 22 as neither; every pointer was 16-byte aligned.
_INTEGERS = {"i8": 16, "i16": 16, "i32": 4096, "u8": 16, "u16": 16, "u32": 4096, "i64": 2**33, "u64": 2**63}


def example_argument(name: str, ty: str, divisible: set[str]) -> Any:
    if ty.startswith("*"):
        return {"type": ty, "align": 16 if name in divisible else 8}
    if ty.startswith("tensordesc<"):  # made in the compile worker: a descriptor of the type, for the launcher
        return {"type": ty, "align": 16}
    if ty in _INTEGERS:
        return _INTEGERS[ty] + (0 if name in divisible else 1)
    if ty in ("i1", "u1"):
        return True
    if ty in ("fp16", "bf16", "fp32", "fp64"):
        return 1.5
    raise ValueError(f"signature.{name} = {ty!r}: kgate cannot make an example value of this type; give one in `args`")


def captured_variant(planned: _Planned, captured: CapturedSpec) -> Variant:
    """A captured specialisation to compile as it is; kind, expect and audit shapes from the registrations of the
    same kernel when there are some (what all of them ask, `kgate.compile.launches`)."""
    spec = captured.spec
    variant: Variant = {
        "kernel": spec.kernel, "name": spec.variant, "source": "captured", "pdl": spec.pdl, "kind": "other",
        **expectations.requested(None), "shapes": [], "spec": spec.to_record(),
    }
    asked: list[Variant] = [{**variant, "kind": e.kind, "shapes": [dict(s) for s in e.shapes],
                             **expectations.requested(e.expect)} for e in planned.entries]
    for index, request in enumerate(asked):
        variant = request if index == 0 else launches.merge_requests(variant, request)
    return variant


def worker_env(config: Config) -> dict[str, str | None]:
    return {
        **setup_env(config),
        "TRITON_INTERPRET": None,  # a compile under the interpreter compiles nothing
        "TRITON_CACHE_DIR": str(config.root / config.cache_dir / "triton"),
        "TRITON_ALWAYS_COMPILE": "1",
        # Triton looks its cache up all the same: through kgate's reader (no pipe, device or link followed).
        "TRITON_CACHE_MANAGER": "kgate.compile.triton_cache:GuardedCache",
        # Importing the project's kernel modules must not leave bytecode in its tree.
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONWARNINGS": "ignore",
    }


def compile_triton(config: Config, entries: list[PythonEntry], targets: tuple[str, ...], *, jobs: int,
                   progress: Progress | None = None, pool: Pool | None = None,
                   captured: list[CapturedSpec] | None = None, needs: Needs | None = None,
                   analyse: Analyse | None = None, toolchain: dict[str, str] | None = None) -> Compilation:
    """Compile every registered launch and every captured specialisation of the project's Triton kernels.

    A unit from the cache is used as it is when `needs` lacks nothing of it, with its SASS added from its cached
    cubin when `needs` lacks that, and compiled again when `needs` cannot use it. `analyse`: `needs` in the worker
    that compiles a unit. `toolchain`: `triton_toolchain()` as the run resolved it before its first compile
    (resolved here without it)."""
    run = Compilation()
    entries, captured, built_for = built_units(entries, captured or [], targets)
    if not entries and not captured:
        return run
    run.toolchain = dict(toolchain) if toolchain is not None else python_toolchain(entries, captured, built_for)
    cache = Cache(config.root / config.cache_dir, config.cache_dir)
    roots = import_roots(config.root, config.python_path)
    pyindex.use_cache(config.root / config.cache_dir)
    planned = _plan_kernels(config, entries, captured, roots)
    pyindex.save()
    known = path_aliases(config, planned)

    def shown(path: str) -> str:
        return display_path(Path(path), config.root, known)

    own_pool = pool is None
    pool = pool or Pool(jobs, worker_env(config))
    try:
        where = import_reads.view(str(config.root.resolve()), project_roots(config), worker_env(config),
                                  import_folder(config))
        _expand(config, planned, pool, cache, run.toolchain, where)
        for p in planned:
            if p.where is not None:
                p.where = (shown(p.where[0]), p.where[1])

        # variants x targets: cached artifacts, or compile
        jobs_todo: list[tuple[Variant, str, _Planned, str]] = []
        # Cached without the SASS the facts stage lacks, whose cubin is cached: disassembled, not compiled again.
        sass_todo: list[tuple[Variant, str, _Planned, str, Entry]] = []
        for p in planned:
            if p.expansion is not None:
                p.expansion = _current_line(p, p.expansion)
                run.locations[p.kernel] = (shown(p.expansion["path"]), p.expansion["line"])
            if p.captured and p.expansion is not None:
                tuned = frozenset(k for cfg in p.expansion["configs"] for k in cfg["kwargs"])
                run.captured.append(CapturedKernel(p.kernel, tuple(c.spec for c in p.captured), tuned))
            tuning = autotuned(p.kernel, p.expansion, p.captured, targets) if p.expansion is not None else None
            if tuning is not None:
                run.autotuned.append(tuning)
            run.replayable = run.replayable and not p.transient
            for variant, built_for in _variants(config, p, run, targets):
                for target in built_for:
                    tool_key = tools_of(p.language, run.toolchain)
                    key = digest("compiled", COMPILE_FORMAT, kgate.__version__, code_digest(), tool_key, variant, target,
                                 p.source_key, p.import_key)
                    entry = cache.entry("compiled", key, record_shapes.compiled)
                    unit = _cached_unit(cache, key, entry, variant, p) if entry is not None else None
                    lacking = None if unit is None else needs(unit) if needs is not None else []
                    if entry is not None and unit is not None and lacking == []:
                        _note_recorded(entry.meta)
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
            _stop_if_cache_unwritable(config, outcome)
            run.replayable = run.replayable and not outcome.transient
            _note_reads(outcome.reads or {}, where)
            done += 1
            if progress:
                progress(done, total, f"{variant['kernel']} [{variant['name']}] {target}")
            if outcome.ok:
                cache.put("spans", key, p.spans)  # before the record: a compile record always has its spans
                # The cubin this compile wrote, by its hash (not the file under its plain name: another compile of
                # the key, in another run, may have written that since).
                cubin = outcome.value.pop("cubin", None)
                record = Entry(outcome.value, {"cubin": cubin, "imported": _note_imported(outcome.imported)})
                kept = bool(p.import_key) and import_reads.agree(p.reads, outcome.reads or {})
                if kept:
                    cache.put("compiled", key, record.value, record.meta)
                else:  # an input changed between the kernel's expansion and its compile (or its expansion
                    run.replayable = False  # failed where its compile did not): not kept, not replayed
                unit = _unit(cache, key, outcome.value, cubin, variant, p, p.spans)
                fresh.append(_Fresh(variant, target, p, key, record if kept else None, unit))
                run.compiled += 1
                run.compile_seconds[f"{variant['kernel']}|{unit.context['variant']}|{target}"] = outcome.seconds
            else:
                path = shown(p.expansion["path"]) if p.expansion else config.display()
                line = p.expansion["line"] if p.expansion else 1
                related: tuple[Related, ...] = ()
                if outcome.where is not None:  # the project's line that raised, as its module was imported
                    related = (*_origins(config, p, variant), Related(path, line, f"{p.kernel} is defined here"))
                    path, line = shown(outcome.where[0]), outcome.where[1]
                run.failures.append(CompileFailure(variant["kernel"], variant["name"], target, path, line,
                                                   _first_line(outcome), related=related))

        if jobs_todo:
            sweep_triton(config.root / config.cache_dir / "triton")  # what killed compiles left of Triton's
            project, cwd = project_roots(config), import_folder(config)
            tasks = [Task(f"{p.language}.compile", _compile_request(
                p, variant, target, key, roots=project, cwd=cwd, artifacts=str(cache.artifacts(key)), shown=shown,
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
    run.failures.extend(_conflict(config, by_kernel[kernel], message) for kernel, message in conflicts)
    run.failures.sort(key=lambda f: (f.kernel, f.variant, f.target))
    return run


def _compile_request(p: _Planned, variant: Variant, target: str, key: str, *, roots: list[str], cwd: str,
                     artifacts: str, shown: Callable[[str], str], toolchain: dict[str, str],
                     analyse: Analyse | None) -> CompileRequest:
    """The payload of the task that compiles `variant` of kernel `p` for `target` under compile key `key`: the
    project's folders (`roots`) and the folder its modules are imported in (`cwd`), the artifacts' cache folder."""
    assert p.expansion is not None
    request: CompileRequest = {
        "variant": variant, "target": target, "sys_path": p.sys_path, "roots": roots, "cwd": cwd,
        "path": shown(p.expansion["path"]), "line": p.expansion["line"], "artifacts": artifacts, "key": key,
        "toolchain": {k: v for k, v in toolchain.items() if not k.endswith(".id")},
    }
    if analyse is not None:
        request["analyse"] = analyse
    return request


def _plan_kernels(config: Config, entries: list[PythonEntry], captured: list[CapturedSpec],
                  roots: list[Path]) -> list[_Planned]:
    """One plan per kernel, registered or captured: its module file and the hash of its source."""
    by_kernel: dict[str, _Planned] = {}
    for entry in entries:
        by_kernel.setdefault(entry.kernel, _Planned(entry.kernel, [], [], "", [])).entries.append(entry)
    for item in captured:
        by_kernel.setdefault(item.spec.kernel, _Planned(item.spec.kernel, [], [], "", [])).captured.append(item)
    closures: dict[Path, str] = {}
    planned = []
    for p in by_kernel.values():
        planned.append(p)
        blocked: list[Path] = []
        found = module_file(p.module, roots, blocked)
        if found is None:
            p.error = f"cannot find module {p.module} under python-path ({', '.join(config.python_path)})"
            p.missing = not blocked
            if blocked:
                p.error = f"cannot read {relpath(blocked[0], config.root)}: Permission denied"
            continue
        try:
            with open(found[0], "rb"):  # the index takes an unreadable file for an empty one: ask first
                pass
            p.source_key = kernel_source_key(found[0], p.function, roots, config.root, closures)
            p.expansion = static_expansion(found[0], p.function, roots)
        except OSError as exc:  # the module, or a project module it imports, cannot be read
            p.error = f"cannot read {relpath(Path(exc.filename or found[0]), config.root)}: {exc.strerror}"
            continue
        # Every python-path entry reaches the worker (a module re-exporting a kernel from another entry imports
        # it from there), the kernel module's own first so that its name resolves as it did here.
        p.sys_path = list(dict.fromkeys([str(found[1]), *(str(r) for r in python_path_order(config))]))
        p.file, p.import_root, p.spans = found[0], found[1], def_spans(found[0])
    return planned


def python_path_order(config: Config) -> list[Path]:
    """The python-path folders that exist, resolved, in the order the configuration lists them (sys.path's)."""
    out = []
    for entry in config.python_path:
        folder = (config.root / entry).resolve()
        if folder.is_dir() and folder not in out:
            out.append(folder)
    return out


def path_aliases(config: Config, planned: list[_Planned]) -> list[Alias]:
    """How the project names the places its kernel modules are in: python-path entries (outside the project
    too: "../shared") and symlinked folders on the way to each module, for paths that are the same on every
    machine."""
    written: dict[Path, str] = {}
    for entry in config.python_path:
        written.setdefault((config.root / entry).resolve(), entry)
    known = [alias for entry in config.python_path for alias in aliases(config.root, entry)]
    for p in planned:
        if p.file is not None and p.import_root in written:
            name = posixpath.join(written[p.import_root], p.file.relative_to(p.import_root).as_posix())
            known += aliases(config.root, posixpath.normpath(name))
    return known


def _expand(config: Config, planned: list[_Planned], pool: Pool, cache: Cache, toolchain: dict[str, str],
            where: import_reads.View) -> None:
    """What each kernel looks like (parameters, autotune configs, definition line) and what importing its module
    reads (the key of its records): from the cache where every input that import read holds what it held, else
    by importing it in a worker. A plain kernel's expansion is read from its source all the same."""
    pres = {id(p): digest("import", kgate.__version__, code_digest(), tools_of(p.language, toolchain), p.kernel,
                          p.source_key)
            for p in planned if p.error is None}
    found_in = import_roots(config.root, config.python_path)
    covered = {id(p): _static_names(p, found_in, where) for p in planned if p.error is None}
    todo = []
    for p in planned:
        if p.error is not None:
            continue
        found = import_reads.find(cache, pres[id(p)], where)
        hit = cache.entry("expand", found[0], record_shapes.expansion) if found is not None else None
        if found is not None and hit is not None:
            p.import_key, p.reads = found
            p.expansion = p.expansion or hit.value
            _note_recorded(hit.meta)
            _note_reads(p.reads, where)
        else:
            todo.append(p)

    def expanded(index: int, outcome: Outcome) -> None:
        p = todo[index]
        _stop_if_cache_unwritable(config, outcome)
        if outcome.transient:
            p.transient = True
        _note_reads(outcome.reads or {}, where)  # failed or not: an import that fails on a variable unset
        if outcome.ok:
            p.reads = {n: v for n, v in (outcome.reads or {}).items() if n not in covered[id(p)]}
            p.expansion = p.expansion or outcome.value
            if import_reads.keyable(p.reads):  # else no key: neither it nor its compiles are kept
                made = import_reads.key(pres[id(p)], p.reads)
                cache.put("expand", made, outcome.value, {"imported": _note_imported(outcome.imported)})
                p.import_key = import_reads.remember(cache, pres[id(p)], p.reads)
        elif p.expansion is None:
            p.error = _first_line(outcome)
            p.missing = outcome.user_error and MISSING_ATTRIBUTE in p.error
            p.where = outcome.where
        # else a plain kernel, planned from its source: its compile reports what its import does (per variant)

    if todo:
        roots, cwd = project_roots(config), import_folder(config)
        pool.run([Task(f"{p.language}.expand",
                       ExpandRequest(kernel=p.kernel, sys_path=p.sys_path, roots=roots, cwd=cwd)) for p in todo],
                 config.timeout, expanded)


def _static_names(p: _Planned, roots: list[Path], where: import_reads.View) -> frozenset[str]:
    """The reads of the kernel's module and the project modules it imports by statement: the static key holds
    their text already, the kernel module's by the parts the kernel uses (an edit of another kernel of the
    module recompiles that kernel only)."""
    if p.file is None:
        return frozenset()
    return frozenset(f"{kind}:{where.name(str(path))}" for path in closure(p.file, roots) for kind in ("file", "stat"))


def _note_reads(read: dict[str, Any], where: import_reads.View) -> None:
    """What a kernel module's import read, as inputs of this run for its replay (`kgate.support.reads`)."""
    for name in read:
        kind, _, rest = name.partition(":")
        if kind == "env":
            reads.note_env(rest)
        elif kind == "pythonpath":
            reads.note_env("PYTHONPATH")
        elif kind == import_reads.UNRECORDED:  # what it read cannot be looked at again: the run is not replayed
            reads.note_unreadable()
        elif kind in ("dir", "dists", "entries"):
            reads.note_folder(where.path(rest))
            if kind == "entries":  # what each entry is (its kind and size) as well as its name
                for name in reads.listing(where.path(rest), []) or []:
                    reads.note(os.path.join(where.path(rest), name))
        elif kind in ("file", "text", "stat", "lstat", "link"):
            reads.note(where.path(rest))


def import_folder(config: Config) -> str:
    """The folder kernel modules are imported in: where kgate runs; on a base revision's side, that folder in its
    checkout (so that a path relative to it names the base's file), or the checkout's root where it has none."""
    here = os.path.abspath(os.getcwd())
    if config.checkout_of is None:
        return here
    top, tree = config.checkout_of
    inside = os.path.relpath(os.path.realpath(here), os.path.realpath(top))
    if inside == os.pardir or inside.startswith(os.pardir + os.sep):
        return here
    folder = os.path.normpath(os.path.join(tree, inside))
    return folder if os.path.isdir(folder) else tree


def project_roots(config: Config) -> list[str]:
    """The folders a compile worker takes for the project's (`kgate.compile.frames`): its root and python-path."""
    return list(dict.fromkeys([str(config.root.resolve()), *(str(folder) for folder in python_path_order(config))]))


def _variants(config: Config, p: _Planned, run: Compilation,
              targets: tuple[str, ...]) -> list[tuple[Variant, tuple[str, ...]]]:
    """The kernel's variants to compile, each with the run's targets it is built for; what cannot be planned
    becomes a failure (a finding) instead, unless the registration is built for none of the run's targets."""
    entries = [(entry, tuple(t for t in targets if entry.builds_for(t))) for entry in p.entries]
    entries = [(entry, built_for) for entry, built_for in entries if built_for]
    # Captured launches follow the kernel's registrations when every one of them names its targets.
    captured_for = targets if not p.entries or any(e.targets is None for e in p.entries) else tuple(
        t for t in targets if any(e.builds_for(t) for e in p.entries))
    if p.error is not None or p.expansion is None:
        error = p.error or "not expanded"
        for entry, _built_for in entries:
            run.failures.append(_unloadable(p, _entry_location(config, entry), error, "registered here"))
        if p.captured and captured_for and p.missing:
            run.failures.append(_stale(config, p, p.captured, error))
        elif p.captured and captured_for:
            line = min(item.line for item in p.captured) or 1
            run.failures.append(_unloadable(p, (config.capture, line), error, "captured here"))
        return []
    variants: list[tuple[Variant, tuple[str, ...]]] = []
    for entry, built_for in entries:
        try:
            planned = cute_plan.variants(entry, p.expansion) if isinstance(entry, CuteEntry) \
                else plan_variants(entry, p.expansion)
            variants.extend((variant, built_for) for variant in planned)
        except ValueError as exc:
            path, line = _entry_location(config, entry)
            run.failures.append(CompileFailure(p.kernel, "", "", path, line, str(exc)))
    stale: dict[str, list[CapturedSpec]] = {}
    for item in p.captured if captured_for else ():
        why = item.spec.mismatch(p.expansion["params"])
        # Gated where the launch happens: on the targets its captures bound for, unless the launchers say they
        # bind alike on every device.
        item_for = captured_for if config.device_independent_launchers else \
            tuple(t for t in captured_for if item.applies_to(t))
        if why is None and item_for:
            try:
                variants.append((captured_variant(p, item), item_for))
            except launches.Conflict as exc:
                run.failures.append(_conflict(config, p, str(exc)))
        elif why is not None:
            stale.setdefault(why, []).append(item)
    for why, items in sorted(stale.items()):
        run.failures.append(_stale(config, p, items, why))
    # Two registrations of one launch are one variant asking for what both ask, whichever compiles first.
    variants, conflicts = launches.merged(variants, targets)
    run.failures.extend(_conflict(config, p, message) for message in conflicts)
    return variants


def _conflict(config: Config, p: _Planned, message: str) -> CompileFailure:
    path, line = _entry_location(config, p.entries[0])
    return CompileFailure(p.kernel, "", "", path, line, message)


def _unloadable(p: _Planned, entry: tuple[str, int], error: str, what: str) -> CompileFailure:
    """A kernel that could not be loaded, at the project's line that raised when there is one (a helper module the
    kernel's module imports), with the registration or capture as a related place; else at that entry."""
    if p.where is None or p.where == entry:
        return CompileFailure(p.kernel, "", "", entry[0], entry[1], error)
    return CompileFailure(p.kernel, "", "", p.where[0], p.where[1], error,
                          related=(Related(entry[0], entry[1], f"{p.kernel} {what}"),))


def _origins(config: Config, p: _Planned, variant: Variant) -> list[Related]:
    """Where a variant comes from: the capture file's entry of a captured one, the kernel's registrations for a
    registered one."""
    if variant["source"] == "captured":
        lines = [c.line for c in p.captured if c.spec.variant == variant["name"]] or [1]
        return [Related(config.capture, min(lines) or 1, f"{p.kernel} captured here")]
    places = dict.fromkeys(_entry_location(config, entry) for entry in p.entries)
    return [Related(path, line, f"{p.kernel} registered here") for path, line in places]


def _stale(config: Config, p: _Planned, items: list[CapturedSpec], why: str) -> CompileFailure:
    """One finding for a kernel's captured specialisations that no longer fit it; they are not compiled."""
    line = min(item.line for item in items) or 1
    count = len(items)
    return CompileFailure(p.kernel, "", "", config.capture, line,
                          f"{count} captured specialisation(s) of {p.kernel} no longer fit the kernel: {why}; "
                          f"capture again (`kgate capture --replace -- COMMAND`)", kind="stale")


def _defined_in_file(p: _Planned, expansion: dict[str, Any] | None) -> bool:
    """Whether the kernel's definition is in the file it was registered from (not imported into it)."""
    if p.file is None or not expansion:
        return False
    return os.path.realpath(expansion.get("path", "")) == os.path.realpath(p.file)


def _current_line(p: _Planned, expansion: dict[str, Any]) -> dict[str, Any]:
    """The expansion with the kernel's `def` line as the source has it now (an expansion may come from the cache)."""
    if p.file is None or not _defined_in_file(p, expansion):
        return expansion
    line = def_line(p.file, p.function)
    return {**expansion, "line": line} if line and line != expansion.get("line") else expansion


def _unit(cache: Cache, key: str, value: dict[str, Any], cubin: str | None, variant: Variant, p: _Planned,
          spans_then: dict[str, tuple[int, int]]) -> Compiled:
    """A variant's compile record as the unit the facts stage reads, with what it needs to move its lines."""
    context = value["context"]
    line = def_line(p.file, p.function) if p.file is not None and _defined_in_file(p, p.expansion) else None
    return Compiled(key=key, folder=cache.artifacts(key), language=context["language"], target=context["target"],
                    hashes=dict(value["artifacts"]), context=context, dynamic_smem=value["dynamic_smem"],
                    entry_smem=dict(value.get("entry_smem", {})),
                    cubin=cubin_file(cache.artifacts(key), cubin), spans_then=spans_then, spans_now=p.spans,
                    source_file=p.file, def_line=line,
                    origin=(variant["kernel"], variant["name"], context["path"], context["line"]))


def _cached_unit(cache: Cache, key: str, entry: Entry, variant: Variant, p: _Planned) -> Compiled | None:
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
    planned: _Planned
    key: str
    record: Entry | None
    unit: Compiled


def _take_fresh(config: Config, cache: Cache, pool: Pool, fresh: list[_Fresh], run: Compilation,
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
                        todo: list[tuple[Variant, str, _Planned, str, Entry]],
                        run: Compilation, needs: Needs | None, *,
                        cached: bool = True) -> list[tuple[Variant, str, _Planned, str]]:
    """Add SASS to units from their cubins in the cache (`kgate audit` after `kgate check`: half a second of
    cuobjdump per variant instead of a compile); what cannot be disassembled or read is returned, to compile
    (`cached`: units from the cache, counted so)."""
    again: list[tuple[Variant, str, _Planned, str]] = []

    def disassembled(index: int, outcome: Outcome) -> None:
        variant, target, p, key, entry = todo[index]
        _stop_if_cache_unwritable(config, outcome)
        unit = None
        if outcome.ok:
            value = {**entry.value, "artifacts": {**entry.value["artifacts"], "sass": outcome.value}}
            cache.put("compiled", key, value, entry.meta)
            unit = _cached_unit(cache, key, Entry(value, entry.meta), variant, p)
            _note_recorded(entry.meta)
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


def _note_imported(imported: dict[str, Any] | None) -> list[str]:
    """Note the files of the modules a compile worker imported (path -> state when imported) as inputs of
    this run (`kgate.support.reads`); their paths, to keep in the record."""
    for path, state in (imported or {}).items():
        reads.note(path, state)
    return sorted(imported or {})


def _note_recorded(meta: dict[str, Any]) -> None:
    """The same for a record from the cache: the modules its compile imported, in their state now."""
    imported = meta.get("imported")
    for path in imported if isinstance(imported, list) else []:
        if isinstance(path, str):
            reads.note(path)


def _stop_if_cache_unwritable(config: Config, outcome: Outcome) -> None:
    if outcome.cache_unwritable:
        raise CacheWriteError(str(outcome.value), config.cache_dir)


def _first_line(outcome: Outcome) -> str:
    text = str(outcome.value).strip()
    if not outcome.user_error:
        # An unexpected exception in kgate's own worker code: keep its last line, say it is a bug.
        last = text.splitlines()[-1] if text else "unknown error"
        return f"internal error in kgate's compile worker: {last}"
    return text


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)

