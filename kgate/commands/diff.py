"""`kgate diff [BASE]`: is the machine code of every kernel variant the same as at BASE (or under another Triton)?

"Perf-neutral" is proven by SASS, not argued: a refactor that leaves every kernel's instruction stream as it
was cannot have moved performance. Both sides are compiled through the usual pipeline with one cache, so
what did not change costs a cache read; only changed kernels compile, and only cubins that differ are
disassembled. Exit 0 whatever changed; with `--require-identical`, 1 when a selected variant's SASS is
not identical; 2 for errors.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kgate.collect.registry import captured_specs, triton_entries
from kgate.commands.common import ProgressBar, config_from
from kgate.core.config import Config
from kgate.core.errors import ConfigError, ToolchainError
from kgate.diff.compare import Diff
from kgate.diff.model import Side
from kgate.diff.runs import compare_sides, require_selection, revision_diff
from kgate.diff.side import compile_side
from kgate.pipeline.check import CheckOptions, nothing_to_gate


def run(args: argparse.Namespace) -> int:
    config = config_from(args)
    options = CheckOptions(targets=tuple(args.target or ()), kernels=tuple(args.kernel or ()), jobs=args.jobs,
                           source=False, language="triton" if args.triton else args.language)
    # The working tree's, for a toolchain diff; a revision diff needs kernels on one side (a base from before kgate
    # was adopted has none, a working tree that deleted the last kernel neither): `revision_diff` asks both.
    nothing = nothing_to_gate(config, triton_entries(config), captured_specs(config)) if args.triton else None
    if nothing:
        raise ConfigError(nothing)
    progress = ProgressBar(enabled=args.format == "text" and not args.side_json, plain=not args.side_json)
    try:
        if args.side_json:  # one side for a diff run in another environment (`--triton`)
            sys.stdout.write(json.dumps(compile_side(config, options, "", progress).to_json()))
            return 0
        if args.triton:
            if args.base is not None:
                raise ConfigError("give a BASE revision or --triton VERSION, not both")
            diff = _toolchain_diff(args, config, options, progress)
        else:
            diff = revision_diff(config, options, args.base, progress)
    finally:
        progress.clear()
    return _report(args, diff)


def _toolchain_diff(args: argparse.Namespace, config: Config, options: CheckOptions, progress: ProgressBar) -> Diff:
    from kgate.compile.environments import parse_versions, run_with

    versions = parse_versions(args.triton)
    if len(versions) != 1:
        raise ToolchainError("--triton: `kgate diff` compares with one release at a time")
    passed = ["diff", "--side-json", "--language", "triton", *[a for t in args.target or () for a in ("--target", t)],
              *[a for g in args.kernel or () for a in ("--kernel", g)], *(["--jobs", str(args.jobs)] if args.jobs else [])]
    head = compile_side(config, options, "this environment", progress)
    done, seconds = run_with(versions[0], config.source, config.root, passed)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ToolchainError(f"the compile under Triton {versions[0]} failed: {last}")
    try:
        base = Side.from_json(json.loads(done.stdout))
    except (ValueError, KeyError, TypeError):
        raise ToolchainError(f"the compile under Triton {versions[0]} wrote no usable result") from None
    base.label, base.seconds = f"Triton {versions[0]}", seconds
    head.label = f"Triton {head.toolchain.get('triton', '?')}"
    require_selection(config, options, base, head)
    cache_dir = str((config.root / config.cache_dir).resolve())
    return compare_sides(cache_dir, base, head, options.jobs, (str(config.root.resolve()),), 0)


def _report(args: argparse.Namespace, diff: Diff) -> int:
    from kgate.compile.import_reads import unseen_notices
    from kgate.report import diff_report

    for notice in unseen_notices({**diff.base.unseen, **diff.head.unseen}, diff=True):
        print(notice, file=sys.stderr)  # stderr: stdout is the report, in every format
    if args.format == "json":
        text = diff_report.render_json(diff)
    elif args.format == "markdown":
        text = diff_report.render_markdown(diff)
    else:
        text = diff_report.render_terminal(diff, quiet=args.quiet)
    if args.output:
        from kgate.support.atomicio import atomic_write

        try:
            atomic_write(Path(args.output), text.encode())
        except OSError as exc:
            raise ConfigError(f"cannot write {args.output}: {exc.strerror}") from None
        print(diff_report.summary(diff), file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 1 if args.require_identical and diff.not_identical() else 0
