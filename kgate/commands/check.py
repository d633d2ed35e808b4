"""`kgate check`: compile every registered kernel for every target, run every rule, compare with the baseline."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

from kgate.api import gate as api
from kgate.commands import recording
from kgate.commands.common import ProgressBar, config_from, emit, fail_on, selection_from, show_files, show_settings
from kgate.core.config import Config
from kgate.core.result import Result
from kgate.pipeline.check import CheckOptions, CheckRun, resolve_targets
from kgate.shard.plan import inputs as shard_inputs
from kgate.shard.plan import load_timings, parse_shard, timings_path


def run(args: argparse.Namespace) -> int:
    spec = parse_shard(args.shard) if getattr(args, "shard", None) is not None else None
    config = config_from(args)
    selection = selection_from(args, config)
    if args.show_settings is not None:
        return show_settings(config, selection, args.show_settings)
    if args.show_files:  # the source files the source rules read; the kernels are `kgate check` itself
        return show_files(config, selection, [])
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
    releases = _other_releases(args, config) if getattr(args, "triton", None) else None
    with recording.capture() as (out, err):
        code = _report(args, config, checked, options, releases)
    recording.finish(args, taken, out, err, code, replayable=checked.compiled.replayable)
    return code


def _other_releases(args: argparse.Namespace, config: Config) -> list[Any]:
    """The project's Triton kernels compiled under each release `--triton` names (`kgate.compile.environments`)."""
    from kgate.compile.environments import check_with, parse_versions
    from kgate.report.matrix import Release, failing_of

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
    for version in parse_versions(args.triton):
        compiled = check_with(version, config.source, config.root, passed)
        rows = {(r["kernel"], r["variant"], r["target"]): r for r in compiled.kernels if r["language"] == "triton"}
        out.append(Release(version, rows, failing_of(compiled.findings), compiled.seconds))
    return out


def _report(args: argparse.Namespace, config: Config, checked: CheckRun, options: CheckOptions,
            releases: list[Any] | None = None) -> int:
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
    if releases is not None:
        result = _with_matrix(result, checked, releases)
    if args.verbose:
        tools = ", ".join(f"{k} {v}" for k, v in sorted(compiled.toolchain.items()) if not k.endswith(".id"))
        said = f"toolchain: {tools}; {compiled.compiled} compiled, {compiled.cached} from cache"
        result = replace(result, notices=[*result.notices, said])
    return emit(result, args, config)



def _with_matrix(result: Result, checked: CheckRun, releases: list[Any]) -> Result:
    """The report with the version matrix: its table as notices, its object for JSON, a failing line per release
    whose compile fails a rule (a release the project might move to is gated like the one it has)."""
    from kgate.ratchet.compare import Difference
    from kgate.report import matrix
    from kgate.report.json_report import kernel_record

    current = [kernel_record(f) for f in checked.compiled.facts]
    here = matrix.failing_of([f.to_json() for f in result.findings])
    table = matrix.matrix(checked.compiled.toolchain.get("triton", "?"), current, here, releases)
    failing = [Difference("TOOLCHAIN", f"triton {release.version}",
                          f"{release.failing} failing finding(s) under Triton {release.version}", True)
               for release in releases if release.failing]
    return replace(result, notices=[*result.notices, *matrix.render(table)], matrix=matrix.to_json(table),
                   ratchet=[*result.ratchet, *failing])
