"""`kgate check`: compile every registered kernel for every target, run every rule, compare with the baseline."""

from __future__ import annotations

import argparse
import sys

from kgate.commands.common import ProgressBar, config_from, emit, fail_on, selection_from
from kgate.pipeline import CheckOptions, run_check
from kgate.ratchet import gate as ratchet
from kgate.report.result import Result


def run(args: argparse.Namespace) -> int:
    config = config_from(args)
    selection = selection_from(args, config)
    options = CheckOptions(targets=tuple(args.target or ()), kernels=tuple(args.kernel or ()), jobs=args.jobs,
                           sass=args.sass, no_cache=args.no_cache, fail_on=fail_on(args, config))
    progress = ProgressBar(enabled=not args.quiet and args.format == "terminal")
    try:
        checked = run_check(config, selection, options, progress)
    finally:
        progress.clear()
    if not checked.entries and not config.cuda:
        print("kgate: no kernels registered (add [[tool.kgate.triton]] or [[tool.kgate.cuda]] tables, "
              "or @kgate.register)", file=sys.stderr)
    compiled = checked.compiled
    result = Result("check", checked.findings, compiled.facts, fail_on=options.fail_on)
    result.stats = {"compiled": compiled.compiled, "cached": compiled.cached}
    ratchet.apply(result, checked.state, config, enabled=not args.no_baseline)
    if args.verbose:
        tools = ", ".join(f"{k} {v}" for k, v in sorted(compiled.toolchain.items()) if not k.endswith(".id"))
        result.notices.append(f"toolchain: {tools}; {compiled.compiled} compiled, {compiled.cached} from cache")
    return emit(result, args, config)
