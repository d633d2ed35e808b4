"""`kgate lint [paths]`: the source rules, without compiling and without importing the project's code.

With no paths it lints the current folder, as ruff does: the whole project from the project's top, the
files under it from a folder inside (the configuration is still found upward from there). Paths in the text
report, `--show-files`, `--diff` and the lines about fixes are shown from the current folder; the files keep
their project-relative names everywhere else: the machine formats, the baseline, the lint cache
(`kgate.report.paths`).

See `kgate.pipeline.lint` for which files are linted (each under the configuration that governs it), and
`kgate.pipeline.lint_report` (the path `kgate.api.lint()` takes too) for how the baseline judges a lint of some files.

`--fix` writes the fixes first (kgate.pipeline.fix) and then lints as
usual, so the findings left decide the exit code; `--diff` prints the
fixes as a unified diff, writes nothing, and exits 1 when there is one;
`--add-ignore` pins the findings with comments and exits 0. What was fixed
goes to stderr, so a `--format json` report stays what it is.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from kgate.commands import recording
from kgate.commands.common import config_from, emit, fail_on, selection_from, show_files, show_settings
from kgate.core.config import Config
from kgate.core.errors import ConfigError
from kgate.core.result import Result
from kgate.core.selection import Selection
from kgate.pipeline.lint_report import lint_result
from kgate.report.escape import terminal
from kgate.report.paths import from_here
from kgate.support import filestat

if TYPE_CHECKING:
    from kgate.pipeline.fix import FixRun


def run(args: argparse.Namespace) -> int:
    config = config_from(args)
    selection = selection_from(args, config)
    if args.show_settings is not None:
        if args.show_settings and not getattr(args, "config", None):  # a file: the configuration governing it
            from kgate.collect.projects import Projects

            config = Projects(config, per_file=True).governing(os.path.dirname(os.path.abspath(args.show_settings)))
            selection = selection_from(args, config)
        return show_settings(config, selection, args.show_settings)
    paths = args.paths or here(config)
    if args.show_files:
        return show_files(config, selection, paths, force_exclude=args.force_exclude, select_for=_select_for(args))
    from kgate.evaluate.source import refuse_empty_lint

    refuse_empty_lint(selection, f"{config.display()} and the command line")
    taken = recording.snapshot(args, config, [os.path.abspath(p) for p in paths], compilers=False)
    with filestat.known(taken.files if taken is not None else None, taken.entries if taken is not None else None), \
            recording.capture() as (out, err):
        code = _lint(args, config, selection, paths)
    recording.finish(args, taken, out, err, code)
    return code


def here(config: Config) -> list[str]:
    """What a lint without paths reads: the current folder. At the project's top that is the whole project,
    given as no paths: a whole-project lint, which also judges the baseline's stale pins."""
    try:
        top = os.path.samefile(os.getcwd(), config.root)
    except OSError:
        top = False
    return [] if top else ["."]


def _select_for(args: argparse.Namespace) -> Callable[[Config], Selection] | None:
    """Each file under its nearest configuration, unless `--config` names the one for every file (as ruff has it)."""
    return None if getattr(args, "config", None) else lambda other: selection_from(args, other)


def _lint(args: argparse.Namespace, config: Config, selection: Selection, paths: list[str]) -> int:
    fixing, diff, show = (getattr(args, name, False) for name in ("fix", "diff", "show_fixes"))
    if getattr(args, "add_ignore", False):
        if fixing or diff:
            raise ConfigError("--add-ignore cannot be combined with --fix or --diff")
        return _add_ignore(args, config, selection, paths)
    if not (fixing or diff or show):
        return emit(_result(args, config, selection, paths), args, config)
    # Imported only here: a plain `kgate lint` never loads the fixer (nor libcst).
    from kgate.pipeline import fix, writes

    fix.require_libcst()

    shown = from_here(config.root)
    fixed = fix.fix_lint(config, selection, paths, unsafe=args.unsafe_fixes, force_exclude=args.force_exclude,
                         use_cache=not args.no_cache, select_for=_select_for(args))
    for rel, why in fixed.rejected:
        print(f"kgate: {terminal(shown(rel), line_start=False)}: fixes not applied: {why}", file=sys.stderr)
    if diff:
        sys.stdout.write(fix.unified_diff(fixed.changes, shown))
        sys.stdout.flush()
        _fix_summary(args, fixed, "would fix", None, config)
        return 1 if fixed.changes else 0
    if fixing:
        for rel, why in writes.write(fixed.changes, shown, config.root):
            print(f"kgate: {terminal(shown(rel), line_start=False)}: fixes not written: {why}", file=sys.stderr)
            fixed.changes.pop(rel)
            fixed = fixed._replace(applied=[a for a in fixed.applied if a.path != rel])
        if not args.no_cache:
            fix.keep_linted(config, fixed)
    result = _result(args, config, selection, paths)
    code = emit(result, args, config)
    _fix_summary(args, fixed, "fixed" if fixing else "can fix", len(result.findings), config)
    return code


def _fix_summary(args: argparse.Namespace, fixed: FixRun, done: str, remaining: int | None, config: Config) -> None:
    """On stderr: the fixes (`--show-fixes`) and one line of counts."""
    if args.show_fixes and fixed.applied:
        shown = from_here(config.root)
        for item in sorted(fixed.applied):
            print(f"{done}: {terminal(shown(item.path), line_start=False)}:{item.line}: {item.code} {item.message}",
                  file=sys.stderr)
    files = len(fixed.changes)
    line = f"kgate lint: {done} {len(fixed.applied)} finding(s) in {files} file{'s' if files != 1 else ''}"
    if remaining is not None:
        line += f", {remaining} remaining"
    if fixed.unsafe_left:
        line += f" ({fixed.unsafe_left} more fixable with --unsafe-fixes)"
    print(line, file=sys.stderr)


def _add_ignore(args: argparse.Namespace, config: Config, selection: Selection, paths: list[str]) -> int:
    from kgate.pipeline import fix, pin, writes

    fix.require_libcst()
    pins = pin.pin_lint(config, selection, paths, force_exclude=args.force_exclude, use_cache=not args.no_cache,
                        select_for=_select_for(args))
    shown = from_here(config.root)
    for rel, why in writes.write(pins.changes, shown, config.root):
        print(f"kgate: {terminal(shown(rel), line_start=False)}: pins not written: {why}", file=sys.stderr)
        pins.changes.pop(rel)
        pins = pins._replace(pinned=pins.pinned - pins.per_file.get(rel, 0))
    for path, line, code, why in pins.left:
        print(f"kgate: {terminal(shown(path), line_start=False)}:{line}: {code} not pinned: {why}", file=sys.stderr)
    files = len(pins.changes)
    print(f"kgate lint: pinned {pins.pinned} finding(s) in {files} file{'s' if files != 1 else ''} with a "
          f"placeholder reason (KG003 reports each until it is written)", file=sys.stderr)
    return 0


def _result(args: argparse.Namespace, config: Config, selection: Selection, paths: list[str]) -> Result:
    return lint_result(config, selection, paths, force_exclude=args.force_exclude, use_cache=not args.no_cache,
                       baseline=not args.no_baseline, fail_on=fail_on(args, config), select_for=_select_for(args))
