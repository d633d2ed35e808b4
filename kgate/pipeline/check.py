"""The `kgate check` pipeline end to end, shared by check, baseline update and audit.

collect -> compile -> facts -> rules -> findings, plus the ratchet's view of
what the run covered. Reporting is left to the caller.
"""

from __future__ import annotations

import fnmatch
import shlex
import sys
from dataclasses import replace
from pathlib import Path

from kgate.collect.captures import CapturedSpec
from kgate.collect.cuda_sources import nested_notices
from kgate.collect.projects import configurations_below
from kgate.collect.registry import captured_specs, triton_entries, triton_kernels
from kgate.compile import preflight
from kgate.compile.cache import unusable as cache_unusable
from kgate.compile.compilation import Progress, default_jobs, worker_env
from kgate.compile.import_reads import unseen_notices
from kgate.compile.pool import Pool
from kgate.core.artifacts import ArtifactPlan
from kgate.core.config import KNOWN_TARGETS, Config, PythonEntry
from kgate.core.cute import CuteEntry
from kgate.core.errors import ConfigError
from kgate.core.findings import Finding, sort_findings
from kgate.core.result import Result
from kgate.core.selection import Selection
from kgate.core.suppress import for_compiled
from kgate.evaluate import causes
from kgate.evaluate import compiled as evaluate
from kgate.evaluate.plan import selection_plan
from kgate.facts.run import CompileRun, cuda_facts, triton_facts
from kgate.pipeline.lint import run_lint
from kgate.ratchet import gate as ratchet
from kgate.ratchet.compare import RunState, Scope
from kgate.ratchet.gate import compiled_codes, public_toolchain
from kgate.report.escape import terminal
from kgate.shard import plan as shard
from kgate.shard.run import CheckOptions, CheckRun, SourcePart
from kgate.support import scratch as made_scratch
from kgate.support.cachedir import claim


def resolve_targets(config: Config, requested: tuple[str, ...]) -> tuple[str, ...]:
    for target in requested:
        if target not in KNOWN_TARGETS:
            raise ConfigError(f"--target {target}: unknown target (known: {', '.join(KNOWN_TARGETS)})")
    return tuple(dict.fromkeys(requested)) or config.targets  # a target named twice is gated once


def selected(kernel: str, globs: tuple[str, ...]) -> bool:
    """Whether `--kernel` globs select a Triton kernel, by "module:function" or by function name."""
    function = kernel.split(":", 1)[-1]
    return not globs or any(fnmatch.fnmatchcase(kernel, g) or fnmatch.fnmatchcase(function, g) for g in globs)


def select_entries(entries: list[PythonEntry], globs: tuple[str, ...]) -> list[PythonEntry]:
    return [e for e in entries if selected(e.kernel, globs)]


def run_check(config: Config, selection: Selection, options: CheckOptions,
              progress: Progress | None = None, *, lint_only: bool = False) -> CheckRun:
    """One check. A project with no kernel to compile is a configuration error (a gate of nothing must not
    pass), and so is a selection (`--kernel`, `--language`, `--target`) that leaves none of its kernels;
    `lint_only`: a project without kernels runs the source rules alone (`kgate baseline update` pins them)."""
    registered = triton_entries(config)
    recorded = captured_specs(config)
    nothing = nothing_to_gate(config, registered, recorded)
    if nothing and not lint_only:
        raise ConfigError(nothing)
    kernels = triton_kernels(registered, recorded)
    plan = shard.plan(config, kernels, options.shard, use_timings=not options.no_cache) \
        if options.shard else None
    entries, captured = select_units(registered, recorded, options, plan.kernels if plan else None)
    artifacts = selection_plan(selection, sass_every=options.sass)
    compiled, covered = compile_kernels(config, entries, captured, options, artifacts, progress,
                                        files=plan.files if plan else None)
    if plan is None and not nothing:
        # A shard may get no unit of a project that has some; the whole run must gate one.
        unselected = selected_nothing(config, options, bool(compiled.facts or compiled.failures), covered)
        if unselected:
            raise ConfigError(unselected)
    seconds = shard.run_seconds(compiled.facts, compiled.compile_seconds)
    if not options.no_cache and plan is None:
        # A shard leaves the timings file alone, so slices run one after another in one checkout plan alike;
        # its seconds go into its JSON and `kgate merge` records every slice's.
        shard.record_timings(config, seconds, set(kernels))
    raw = evaluate.compiled(compiled, selection)
    part = None
    if options.source and not options.kernels and not options.language and (plan is None or plan.runs_source):
        lint = run_lint(config, selection, None, use_cache=not options.no_cache)
        part = SourcePart(lint.findings, lint.suppressed, len(lint.results))
    return assemble(config, selection, options, compiled, raw, part, covered=covered,
                    shard_names=plan.names if plan else None, entries=entries, plan=plan, seconds=seconds)


# No configuration file, no decorator and no capture.
NOTHING_CONFIGURED = ("nothing to gate: no kgate.toml, and no pyproject.toml with a [tool.kgate] table, here or above, "
                      "and no kernel registered or captured (add [tool.kgate] with [[tool.kgate.triton]] or "
                      "[[tool.kgate.cuda]] tables to pyproject.toml, decorate kernels with @kgate.register, or run "
                      "`kgate capture -- COMMAND`)")


def nothing_to_gate(config: Config, registered: list[PythonEntry], recorded: list[CapturedSpec]) -> str | None:
    """What a project with no kernel to compile is told: nothing registered (in the configuration or with
    `@kgate.register`), nothing captured and no CUDA sources configured; None when it has a kernel.

    Source files do not count: the source rules alone are `kgate lint`, and a check that passed them while
    compiling nothing would read as the kernels' pass.
    """
    if registered or recorded or config.cuda:
        return None
    if config.source is None:
        below = configurations_below(config.root)
        if not below:
            return NOTHING_CONFIGURED
        shown = ", ".join(terminal(path) for path in below)
        return (f"{NOTHING_CONFIGURED}; a project below here has its own: {shown} (run kgate in its folder, or name "
                f"it: `kgate check --config {terminal(shlex.quote(below[0]))}`)")
    tables = "tool.kgate." if config.source.name == "pyproject.toml" else ""
    capture = terminal(config.capture)
    captured = f"{capture} holds no specialisation" if (config.root / config.capture).exists() \
        else f"there is no {capture}"
    return (f"nothing to gate: {terminal(config.display())} registers no kernel and lists no CUDA source, no "
            f"@kgate.register decorates one, and {captured}: record what your tests launch (`kgate capture -- "
            f"python -m pytest`), register kernels ([[{tables}triton]] tables or @kgate.register), or list CUDA "
            f"files ([[{tables}cuda]] sources); `kgate lint` runs the source rules alone")


def selected_nothing(config: Config, options: CheckOptions, gated: bool, covered: frozenset[str]) -> str | None:
    """What a whole run of a project with kernels is told when it compiled none (nor failed to: not `gated`): a
    `--kernel` glob that matches no kernel (a typo), a `--language` the project has no kernel in, targets no kernel
    is built for, CUDA sources that define no kernel; None when it gated something."""
    if gated:
        return None
    if options.kernels and not covered:
        shown = " ".join(f"--kernel {g!r}" for g in options.kernels)
        return f"{shown}: no kernel of the project matches (a glob matches a kernel's name or module:name)"
    if options.language == "cuda" and not config.cuda:
        return "--language cuda: nothing to gate: the configuration lists no CUDA sources"
    if options.language == "triton" and not covered:
        return "--language triton: nothing to gate: no Triton kernel is registered or captured"
    if options.language == "cute" and not covered:
        return "--language cute: nothing to gate: no CuTe DSL kernel is registered or captured"
    targets = ", ".join(resolve_targets(config, options.targets))
    if covered:
        return (f"nothing to gate: no selected kernel is built for {targets} (a registration or a [[cuda]] table "
                f"names the targets it is built for, and a captured launch is gated on the targets its capture bound "
                f"for: capture for {targets}, or set device-independent-launchers = true where the launchers bind "
                f"alike on every device)")
    return f"nothing to gate: the configured CUDA sources define no kernel (a __global__ function) for {targets}"


def select_units(registered: list[PythonEntry], recorded: list[CapturedSpec], options: CheckOptions,
                 mine: frozenset[str] | set[str] | None = None) -> tuple[list[PythonEntry], list[CapturedSpec]]:
    """The registrations and captured specialisations a run compiles: its language, `--kernel` globs, shard."""
    if options.language not in (None, "triton", "cute"):
        return [], []
    entries = select_entries([e for e in registered if (mine is None or e.kernel in mine)
                              and options.language in (None, entry_language(e))], options.kernels)
    captured = [c for c in recorded if (mine is None or c.spec.kernel in mine) and selected(c.spec.kernel, options.kernels)
                and options.language in (None, "triton")]
    return entries, captured


def entry_language(entry: PythonEntry) -> str:
    """The language a registration's kernel is reported in: "cute" for a CuTe DSL kernel, "triton" (Gluon too)."""
    return "cute" if isinstance(entry, CuteEntry) else "triton"


def compile_kernels(config: Config, entries: list[PythonEntry], captured: list[CapturedSpec], options: CheckOptions,
                    plan: ArtifactPlan, progress: Progress | None = None, files: frozenset[str] | None = None,
                    ) -> tuple[CompileRun, frozenset[str]]:
    """Compile the selected Triton units and the configured CUDA sources (cached), with the artifacts `plan` asks
    for; the run and the kernel names it covered. `files`: only these CUDA sources (a shard's slice)."""
    targets = resolve_targets(config, options.targets)
    jobs = options.jobs or config.jobs or default_jobs()
    cuda_config = config.cuda if options.language in (None, "cuda") else ()
    # Every compiler the run needs, before the first compile: a missing one is one line now, not after the rest.
    found = preflight.resolve(config, entries, captured, targets, cuda_config)
    if not options.no_cache:  # before anything is written into it
        claim(config.root / config.cache_dir, config.cache_dir, config.display() if config.source else None)
    problem = None if options.no_cache else cache_unusable(config.root / config.cache_dir)
    if problem:  # an unusable cache costs speed, not correctness
        print(f"kgate: note: cannot use the cache folder {terminal(config.cache_dir)} ({problem}): running without "
              f"a cache",
              file=sys.stderr)
        options = replace(options, no_cache=True)
    with made_scratch.folder("kgate-nocache-") as scratch:
        cfg = replace(config, cache_dir=str(Path(scratch).resolve())) if options.no_cache else config
        # One pool of compile workers for Triton and CUDA kernels alike (without Triton where it compiles none).
        with Pool(jobs, worker_env(cfg), triton=bool(entries or captured)) as pool:
            triton = triton_facts(cfg, entries, targets, jobs=jobs, plan=plan, progress=progress, pool=pool,
                                  captured=captured, toolchain=found.triton)
            # The compile seconds earlier runs recorded (the timings file that sharding reads) start the longest
            # CUDA compile first.
            durations = {} if options.no_cache else shard.load_timings(config)
            cuda = cuda_facts(replace(cfg, cuda=cuda_config), targets, jobs=jobs, plan=plan, progress=progress,
                              kernels=list(options.kernels) or None, pool=pool, files=files, found=found.cuda,
                              durations=durations)
    covered = frozenset({e.kernel for e in entries} | {c.spec.kernel for c in captured} | {f.kernel for f in cuda.facts}
                        | {f.kernel for f in cuda.failures})
    return merge_runs(triton, cuda), covered


def assemble(config: Config, selection: Selection, options: CheckOptions, compiled: CompileRun,
             raw: list[Finding], part: SourcePart | None, *, covered: frozenset[str],
             shard_names: frozenset[str] | None, entries: list[PythonEntry] | None = None,
             plan: shard.Plan | None = None, seconds: dict[str, float] | None = None) -> CheckRun:
    """Findings after suppressions, with the source rules' part, and the ratchet's view of what was covered.

    Shared by `run_check` (with the run's `entries`, its shard `plan` and the compile `seconds` per timings key) and
    `kgate merge`, which calls it once over the union of the shards.
    """
    targets = resolve_targets(config, options.targets)
    # Suppression comments on the kernels' definition lines (a partial run judges none unused).
    lines: dict[str, set[int]] = {}
    for path, line in [(f.path, f.line) for f in compiled.facts] + [(f.path, f.line) for f in compiled.failures]:
        lines.setdefault(path, set()).add(line)
    partial = bool(options.kernels) or bool(options.language) or set(targets) != set(config.targets) \
        or shard_names is not None
    outcome = for_compiled(raw, config.root, lines, selection, complete=not partial)
    findings = causes.folded(outcome.findings)  # after the suppressions: a part suppressed alone is no part
    suppressed = outcome.suppressed
    if part is not None:
        # Both passes read the suppression comments on kernels' def lines; a malformed one is one finding.
        findings = sort_findings(list(dict.fromkeys(findings + part.findings)))
        suppressed += part.suppressed
    scope = Scope(
        compiled=True,
        kernels=covered if options.kernels or options.language else None,
        targets=frozenset(targets),
        every_target=set(targets) == set(config.targets),
        failed=frozenset(f.kernel for f in compiled.failures),
        source=part is not None,
        codes=frozenset(selection.enabled),
        compiled_codes=compiled_codes(),
        shard=shard_names,
    )
    state = RunState(kernels=compiled.facts, findings=findings, toolchain=public_toolchain(compiled.toolchain),
                     scope=scope, fail_on=options.fail_on, options=selection.options)
    return CheckRun(entries or [], compiled, findings, state, suppressed, part.files if part else 0, raw=raw,
                    source=part, plan=plan, seconds=seconds or {}, covered=covered)


def gate(checked: CheckRun, options: CheckOptions, config: Config, *, baseline: bool) -> Result:
    """The report of a check: findings and kernels, compared with the baseline (`kgate check`'s and `kgate merge`'s)."""
    compiled = checked.compiled
    return Result.judged("check", checked.findings, ratchet.apply(checked.state, config, enabled=baseline),
                         kernels=compiled.facts, fail_on=options.fail_on, suppressed=checked.suppressed,
                         files_checked=checked.files_checked,
                         notices=unseen_notices(compiled.unseen) + nested_notices(config),
                         stats={"compiled": compiled.compiled, "cached": compiled.cached})


def merge_runs(first: CompileRun, second: CompileRun) -> CompileRun:
    """Triton and CUDA kernels of one run together, sorted as each part is."""
    return CompileRun(
        facts=sorted(first.facts + second.facts, key=lambda f: f.key),
        failures=sorted(first.failures + second.failures, key=lambda f: (f.kernel, f.variant, f.target)),
        compiled=first.compiled + second.compiled,
        cached=first.cached + second.cached,
        toolchain={**first.toolchain, **second.toolchain},
        compile_seconds={**first.compile_seconds, **second.compile_seconds},
        captured=first.captured + second.captured,
        autotuned=first.autotuned + second.autotuned,
        locations={**first.locations, **second.locations},
        replayable=first.replayable and second.replayable,
        unseen={**first.unseen, **second.unseen},
        cubins={**first.cubins, **second.cubins},
    )
