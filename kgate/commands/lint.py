"""`kgate lint [paths]`: the source rules, without compiling and without importing the project's code.

See `kgate.pipeline.lint` for which files are linted. The baseline, when
the project has one, accepts pinned source findings; when only some files
are linted (pre-commit's batches), pins of other files are not judged and
pins that no longer match are shown but do not fail: stale pins are a
whole-project verdict, for `kgate lint` without paths or `kgate check`.
"""

from __future__ import annotations

import argparse
import os
import stat
from dataclasses import replace

from kgate.commands import recording
from kgate.commands.common import config_from, emit, fail_on, selection_from
from kgate.core.config import Config
from kgate.core.errors import BaselineError
from kgate.core.result import Result
from kgate.core.selection import Selection
from kgate.pipeline.lint import LintRun, run_lint


def run(args: argparse.Namespace) -> int:
    config = config_from(args)
    selection = selection_from(args, config)
    taken = recording.snapshot(args, config, [os.path.abspath(p) for p in args.paths], compilers=False)
    with recording.capture() as (out, err):
        code = _lint(args, config, selection)
    recording.finish(args, taken, out, err, code)
    return code


def _lint(args: argparse.Namespace, config: Config, selection: Selection) -> int:
    # Each file under its nearest configuration, unless `--config` names the one for every file (as ruff has it).
    select_for = None if getattr(args, "config", None) else lambda other: selection_from(args, other)
    lint = run_lint(config, selection, args.paths, force_exclude=args.force_exclude, use_cache=not args.no_cache,
                    select_for=select_for)
    result = Result("lint", lint.findings, fail_on=fail_on(args, config))
    result.suppressed = lint.suppressed
    result.files_checked = len(lint.results)
    result.stats = {"files": len(lint.results), "cached": lint.cached,
                    "scope": "project" if lint.complete else "files"}
    if not args.no_baseline and _has_baseline(config):
        _ratchet(result, lint, config)
    return emit(result, args, config)


def _has_baseline(config: Config) -> bool:
    """Whether there is a baseline to judge against: a folder or a pipe in its place is an error, as for
    `kgate check`, not "no baseline"."""
    try:
        mode = (config.root / config.baseline).stat().st_mode
    except FileNotFoundError:
        return False
    except OSError:  # cannot even look (a folder without permission): loading it says why
        return True
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):  # never opened: a named pipe would block the hook
        raise BaselineError("cannot read the baseline: not a regular file", path=config.baseline)
    return True


def _ratchet(result: Result, lint: LintRun, config: Config) -> None:
    # Imported only when there is a baseline: the ratchet's modules cost a pre-commit run time.
    from kgate.ratchet.compare import RunState, Scope
    from kgate.ratchet.gate import apply, compiled_codes

    scope = Scope(source=True, paths=None if lint.complete else frozenset(lint.results), codes=lint.codes,
                  compiled_codes=compiled_codes())
    state = RunState(kernels=[], findings=result.findings, toolchain={}, scope=scope, fail_on=result.fail_on)
    # A partial run cannot tell a fixed finding from one in a file it did not read: never fail on stale pins.
    result.take_ratchet(apply(state, config if lint.complete else replace(config, ratchet="tighten")))
