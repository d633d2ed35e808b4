"""`kgate check`: compile every registered kernel for every target, run every rule, compare with the baseline."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from io import StringIO
from pathlib import Path
from typing import TextIO

from kgate import fastpath
from kgate.commands.common import ProgressBar, config_from, emit, fail_on, selection_from
from kgate.config import Config
from kgate.pipeline import CheckOptions, CheckRun, run_check
from kgate.ratchet import gate as ratchet
from kgate.report.result import Result


def run(args: argparse.Namespace) -> int:
    config = config_from(args)
    selection = selection_from(args, config)
    options = CheckOptions(targets=tuple(args.target or ()), kernels=tuple(args.kernel or ()), jobs=args.jobs,
                           sass=args.sass, no_cache=args.no_cache, fail_on=fail_on(args, config))
    snapshot = _snapshot(args, config)
    progress = ProgressBar(enabled=not args.quiet and args.format == "terminal")
    try:
        checked = run_check(config, selection, options, progress)
    finally:
        progress.clear()
    with capture() as (out, err):
        code = _report(args, config, checked, options)
    if snapshot is not None:
        outputs = {}
        if args.output:
            try:
                outputs[os.path.abspath(args.output)] = Path(args.output).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                return code
        fastpath.record(args.argv, snapshot, out.getvalue(), err.getvalue(), code, outputs)
    return code


def _snapshot(args: argparse.Namespace, config: Config) -> fastpath.Snapshot | None:
    """The inputs of this run, for the run record that lets an unchanged re-run replay its output."""
    if args.no_cache or args.verbose or getattr(args, "argv", None) is None:
        return None
    skip = [str(config.root / config.cache_dir), str(config.root / ".git")]
    if args.output:
        skip.append(os.path.abspath(args.output))
    extra = [str(config.source)] if config.source else []
    extra.append(str(config.root / config.baseline))
    extra.extend(fastpath.toolchain_files())
    return fastpath.Snapshot.take(str(config.root), tuple(config.exclude) + tuple(config.extend_exclude),
                                  tuple(skip), extra)


def _report(args: argparse.Namespace, config: Config, checked: CheckRun, options: CheckOptions) -> int:
    if not checked.entries and not config.cuda:
        print("kgate: no kernels registered (add [[tool.kgate.triton]] or [[tool.kgate.cuda]] tables, "
              "or @kgate.register)", file=sys.stderr)
    compiled = checked.compiled
    result = Result("check", checked.findings, compiled.facts, fail_on=options.fail_on)
    result.stats = {"compiled": compiled.compiled, "cached": compiled.cached}
    result.suppressed = checked.suppressed
    result.files_checked = checked.files_checked
    ratchet.apply(result, checked.state, config, enabled=not args.no_baseline)
    if args.verbose:
        tools = ", ".join(f"{k} {v}" for k, v in sorted(compiled.toolchain.items()) if not k.endswith(".id"))
        result.notices.append(f"toolchain: {tools}; {compiled.compiled} compiled, {compiled.cached} from cache")
    return emit(result, args, config)


class _Tee:
    """Writes to the real stream and keeps a copy."""

    def __init__(self, stream: TextIO, copy: StringIO) -> None:
        self.stream = stream
        self.copy = copy

    def write(self, text: str) -> int:
        self.copy.write(text)
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def __getattr__(self, name: str) -> object:
        return getattr(self.stream, name)


@contextmanager
def capture() -> Iterator[tuple[StringIO, StringIO]]:
    out, err = StringIO(), StringIO()
    real_out, real_err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Tee(real_out, out), _Tee(real_err, err)
    try:
        yield out, err
    finally:
        sys.stdout, sys.stderr = real_out, real_err
