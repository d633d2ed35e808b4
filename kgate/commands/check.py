"""`kgate check`: compile every registered kernel for every target, run every rule, compare with the baseline."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kgate.api import gate as api
from kgate.commands import recording
from kgate.commands.common import ProgressBar, config_from, emit, fail_on, selection_from, show_files, show_settings
from kgate.core.config import Config
from kgate.core.errors import ConfigError
from kgate.core.result import Result
from kgate.pipeline.check import CheckOptions, CheckRun, resolve_targets
from kgate.shard.plan import inputs as shard_inputs
from kgate.shard.plan import load_timings, parse_shard, timings_path

if TYPE_CHECKING:
    from kgate.compile.environments import Distribution


def run(args: argparse.Namespace) -> int:
    spec = parse_shard(args.shard) if getattr(args, "shard", None) is not None else None
    config = config_from(args)
    selection = selection_from(args, config)
    if args.show_settings is not None:
        return show_settings(config, selection, args.show_settings)
    if args.show_files:  # the source files the source rules read; the kernels are `kgate check` itself
        return show_files(config, selection, [])
    matrix = _matrix_of(args)  # refused before the run, not after it
    options = CheckOptions(targets=tuple(args.target or ()), kernels=tuple(args.kernel or ()), jobs=args.jobs,
                           sass=args.sass, no_cache=args.no_cache, fail_on=fail_on(args, config), shard=spec,
                           language=args.language)
    # A shard's slice also depends on the recorded timings.
    extra = [str(timings_path(config))] if spec is not None else []
    taken = recording.snapshot(args, config, extra, compilers=True)
    # The bar only under the terminal report; the plain lines of a log in every format (they go to stderr).
    progress = ProgressBar(enabled=not args.quiet and args.format == "text", plain=not args.quiet)
    try:
        # The run and its report are `kgate.api.gate`'s, which `kgate.api.check()` hands back as typed objects.
        checked = api.run_check(config, selection, options, progress)
    finally:
        progress.clear()
    compared = (matrix, _other_releases(args, config, matrix)) if matrix is not None else None
    with recording.capture() as (out, err):
        code = _report(args, config, checked, options, compared)
    recording.finish(args, taken, out, err, code, replayable=checked.compiled.replayable)
    return code


def _matrix_of(args: argparse.Namespace) -> Distribution | None:
    """The compiler whose other releases the run compiles the project under (`--triton`, `--cute-dsl`), if any."""
    from kgate.compile.environments import DISTRIBUTIONS

    named = [dist for dist in DISTRIBUTIONS if getattr(args, dist.option[2:].replace("-", "_"), None)]
    if len(named) > 1:
        raise ConfigError(f"{' and '.join(d.option for d in named)}: one release matrix a run (run kgate check once "
                          f"for each)")
    return named[0] if named else None


def _other_releases(args: argparse.Namespace, config: Config, dist: Distribution) -> list[Any]:
    """The project's kernels of `dist`'s language compiled under each release its option names
    (`kgate.compile.environments`)."""
    from kgate.compile.environments import check_with, parse_versions
    from kgate.report.matrix import Release, compile_errors_of, failing_of

    passed: list[str] = []
    for target in args.target or ():
        passed += ["--target", target]
    for glob in args.kernel or ():
        passed += ["--kernel", glob]
    if args.jobs:
        passed += ["--jobs", str(args.jobs)]
    if args.no_cache:
        passed.append("--no-cache")
    out = []
    for version in parse_versions(getattr(args, dist.option[2:].replace("-", "_")), dist):
        compiled = check_with(version, config.source, config.root, passed, dist)
        rows = {(r["kernel"], r["variant"], r["target"]): r for r in compiled.kernels
                if r["language"] == dist.language}
        out.append(Release(version, rows, failing_of(compiled.findings), compiled.seconds,
                           compile_errors_of(compiled.findings)))
    return out


def _report(args: argparse.Namespace, config: Config, checked: CheckRun, options: CheckOptions,
            matrix: tuple[Distribution, list[Any]] | None = None) -> int:
    compiled = checked.compiled
    result = api.report(checked, options, config, baseline=not args.no_baseline)
    if checked.plan is not None:
        from kgate.shard.result import record

        chosen = {name: getattr(args, name, None) for name in ("select", "extend_select", "ignore")}
        timings = {} if args.no_cache else load_timings(config)
        said = (f"shard {checked.plan.spec}: {len(checked.plan.mine)} of {len(checked.plan.units)} unit(s); "
                f"`kgate merge` combines the shards' JSON into the whole run's report")
        result = replace(result, shard=record(checked, options, resolve_targets(config, options.targets), chosen,
                                              timings, shard_inputs(config)), notices=[*result.notices, said])
    if matrix is not None:
        result = _with_matrix(result, checked, *matrix)
    if args.verbose:
        tools = ", ".join(f"{k} {v}" for k, v in sorted(compiled.toolchain.items()) if not k.endswith(".id"))
        said = f"toolchain: {tools}; {compiled.compiled} compiled, {compiled.cached} from cache"
        result = replace(result, notices=[*result.notices, said])
    return emit(result, args, config)


def _with_matrix(result: Result, checked: CheckRun, dist: Distribution, releases: list[Any]) -> Result:
    """The report with the version matrix: its table as notices, its object for JSON, a failing line per release
    whose compile fails a rule (a release the project might move to is gated like the one it has)."""
    from kgate.ratchet.compare import Difference
    from kgate.report import matrix
    from kgate.report.json_report import kernel_record

    current = [kernel_record(f) for f in checked.compiled.facts]
    here = matrix.failing_of([f.to_json() for f in result.findings])
    table = matrix.matrix(checked.compiled.toolchain.get(dist.toolchain, "?"), current, here, releases,
                          label=dist.label, language=dist.language)
    failing = [Difference("TOOLCHAIN", f"{dist.name} {release.version}",
                          f"{release.failing} failing finding(s) under {dist.label} {release.version}", True)
               for release in releases if release.failing]
    return replace(result, notices=[*result.notices, *matrix.render(table)], matrix=matrix.to_json(table),
                   ratchet=[*result.ratchet, *failing])
