"""`kgate lint [paths]`: the source rules, without compiling and without importing the project's code.

See `kgate.pipeline.lint` for which files are linted, and `kgate.api.source` (the
path `kgate.api.lint()` takes too) for how the baseline judges a lint of some files.
"""

from __future__ import annotations

import argparse
import os

from kgate.api.source import lint_result
from kgate.commands import recording
from kgate.commands.common import config_from, emit, fail_on, selection_from, show_files, show_settings
from kgate.core.config import Config
from kgate.core.selection import Selection


def run(args: argparse.Namespace) -> int:
    config = config_from(args)
    selection = selection_from(args, config)
    if args.show_settings is not None:
        if args.show_settings and not getattr(args, "config", None):  # a file: the configuration governing it
            from kgate.collect.projects import Projects

            config = Projects(config, per_file=True).governing(os.path.dirname(os.path.abspath(args.show_settings)))
            selection = selection_from(args, config)
        return show_settings(config, selection, args.show_settings)
    if args.show_files:
        return show_files(config, selection, args.paths, force_exclude=args.force_exclude)
    taken = recording.snapshot(args, config, [os.path.abspath(p) for p in args.paths], compilers=False)
    with recording.capture() as (out, err):
        code = _lint(args, config, selection)
    recording.finish(args, taken, out, err, code)
    return code


def _lint(args: argparse.Namespace, config: Config, selection: Selection) -> int:
    # Each file under its nearest configuration, unless `--config` names the one for every file (as ruff has it).
    select_for = None if getattr(args, "config", None) else lambda other: selection_from(args, other)
    result = lint_result(config, selection, args.paths, force_exclude=args.force_exclude,
                         use_cache=not args.no_cache, baseline=not args.no_baseline, fail_on=fail_on(args, config),
                         select_for=select_for)
    return emit(result, args, config)
