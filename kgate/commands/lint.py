"""`kgate lint [paths]`: the source rules, without compiling and without importing the project's code.

See `kgate.pipeline.lint` for which files are linted. The baseline, when
the project has one, accepts pinned source findings; when only some files
are linted (pre-commit's batches), pins of other files are not judged and
pins that no longer match are shown but do not fail: stale pins are a
whole-project verdict, for `kgate lint` without paths or `kgate check`.

`--fix` writes the fixes first (kgate.pipeline.fix) and then lints as
usual, so the findings left decide the exit code; `--diff` prints the
fixes as a unified diff, writes nothing, and exits 1 when there is one;
`--add-ignore` pins the findings with comments and exits 0. What was fixed
goes to stderr, so a `--format json` report stays what it is.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
from dataclasses import replace
from typing import TYPE_CHECKING

from kgate.commands import recording
from kgate.commands.common import config_from, emit, fail_on, selection_from
from kgate.core.config import Config
from kgate.core.errors import BaselineError, ConfigError
from kgate.core.result import Result
from kgate.core.selection import Selection
from kgate.pipeline.lint import LintRun, run_lint

if TYPE_CHECKING:
    from kgate.pipeline.fix import FixRun


def run(args: argparse.Namespace) -> int:
    config = config_from(args)
    selection = selection_from(args, config)
    taken = recording.snapshot(args, config, [os.path.abspath(p) for p in args.paths], compilers=False)
    with recording.capture() as (out, err):
        code = _lint(args, config, selection)
    recording.finish(args, taken, out, err, code)
    return code


def _lint(args: argparse.Namespace, config: Config, selection: Selection) -> int:
    fixing, diff, show = (getattr(args, name, False) for name in ("fix", "diff", "show_fixes"))
    if getattr(args, "add_ignore", False):
        if fixing or diff:
            raise ConfigError("--add-ignore cannot be combined with --fix or --diff")
        return _add_ignore(args, config, selection)
    if not (fixing or diff or show):
        return emit(_result(args, config, selection), args, config)
    # Imported only here: a plain `kgate lint` never loads the fixer (nor libcst).
    from kgate.pipeline import fix

    fix.require_libcst()

    fixed = fix.fix_lint(config, selection, args.paths, unsafe=args.unsafe_fixes, force_exclude=args.force_exclude,
                         use_cache=not args.no_cache)
    for rel, why in fixed.rejected:
        print(f"kgate: {rel}: fixes not applied: {why}", file=sys.stderr)
    if diff:
        sys.stdout.write(fix.unified_diff(fixed.changes))
        sys.stdout.flush()
        _fix_summary(args, fixed, "would fix", None)
        return 1 if fixed.changes else 0
    if fixing:
        fix.write(fixed.changes)
    result = _result(args, config, selection)
    code = emit(result, args, config)
    _fix_summary(args, fixed, "fixed" if fixing else "can fix", len(result.findings))
    return code


def _fix_summary(args: argparse.Namespace, fixed: FixRun, done: str, remaining: int | None) -> None:
    """On stderr: the fixes (`--show-fixes`) and one line of counts."""
    if args.show_fixes and fixed.applied:
        for item in sorted(fixed.applied):
            print(f"{done}: {item.path}:{item.line}: {item.code} {item.message}", file=sys.stderr)
    files = len(fixed.changes)
    line = f"kgate lint: {done} {len(fixed.applied)} finding(s) in {files} file{'s' if files != 1 else ''}"
    if remaining is not None:
        line += f", {remaining} remaining"
    if fixed.unsafe_left:
        line += f" ({fixed.unsafe_left} more fixable with --unsafe-fixes)"
    print(line, file=sys.stderr)


def _add_ignore(args: argparse.Namespace, config: Config, selection: Selection) -> int:
    from kgate.pipeline import fix, pin

    fix.require_libcst()
    lint = run_lint(config, selection, args.paths, force_exclude=args.force_exclude, use_cache=not args.no_cache)
    where = pin.relative_files(config, selection, args.paths, args.force_exclude)
    pins = pin.add_ignores(lint.findings, where)
    fix.write(pins.changes)
    for path, line, code, why in pins.left:
        print(f"kgate: {path}:{line}: {code} not pinned: {why}", file=sys.stderr)
    files = len(pins.changes)
    print(f"kgate lint: pinned {pins.pinned} finding(s) in {files} file{'s' if files != 1 else ''} with a "
          f"placeholder reason (KG003 reports each until it is written)", file=sys.stderr)
    return 0


def _result(args: argparse.Namespace, config: Config, selection: Selection) -> Result:
    lint = run_lint(config, selection, args.paths, force_exclude=args.force_exclude, use_cache=not args.no_cache)
    result = Result("lint", lint.findings, fail_on=fail_on(args, config))
    result.suppressed = lint.suppressed
    result.files_checked = len(lint.results)
    result.stats = {"files": len(lint.results), "cached": lint.cached,
                    "scope": "project" if lint.complete else "files"}
    if not args.no_baseline and _has_baseline(config):
        _ratchet(result, lint, config)
    return result


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
