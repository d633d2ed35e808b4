"""`kgate check`: compile every registered kernel for every target and run every rule."""

from __future__ import annotations

import argparse
import fnmatch
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from kgate import evaluate
from kgate.collect.registry import triton_entries
from kgate.commands.common import ProgressBar, config_from, emit, fail_on, selection_from
from kgate.compile.cuda_engine import compile_cuda
from kgate.compile.engine import CompileRun, compile_triton, default_jobs, worker_env
from kgate.compile.pool import Pool
from kgate.config import KNOWN_TARGETS
from kgate.errors import ConfigError
from kgate.report.result import Result


def run(args: argparse.Namespace) -> int:
    config = config_from(args)
    selection = selection_from(args, config)
    targets = tuple(args.target) if args.target else config.targets
    for target in targets:
        if target not in KNOWN_TARGETS:
            raise ConfigError(f"--target {target}: unknown target (known: {', '.join(KNOWN_TARGETS)})")
    entries = triton_entries(config)
    if args.kernel:
        entries = [e for e in entries if any(fnmatch.fnmatchcase(e.kernel, g) or fnmatch.fnmatchcase(e.function, g)
                                             for g in args.kernel)]
    if not entries and not config.cuda:
        print("kgate: no kernels registered (add [[tool.kgate.triton]] or [[tool.kgate.cuda]] tables, "
              "or @kgate.register)", file=sys.stderr)
    jobs = args.jobs or config.jobs or default_jobs()
    with tempfile.TemporaryDirectory(prefix="kgate-nocache-") as scratch:
        if args.no_cache:
            config = replace(config, cache_dir=str(Path(scratch).resolve()))
        progress = ProgressBar(enabled=not args.quiet and args.format == "terminal")
        pool = Pool(jobs, worker_env(config.root / config.cache_dir))
        try:
            compiled = compile_triton(config, entries, targets, jobs=jobs, progress=progress, sass_all=args.sass,
                                      pool=pool)
            cuda = compile_cuda(config, targets, jobs=jobs, progress=progress, sass_all=args.sass,
                                kernels=args.kernel, pool=pool)
        finally:
            pool.close()
            progress.clear()
        compiled = merge_runs(compiled, cuda)
    findings = evaluate.compiled(compiled, selection)
    result = Result("check", findings, compiled.facts, fail_on=fail_on(args, config))
    result.stats = {"compiled": compiled.compiled, "cached": compiled.cached}
    if args.verbose:
        tools = ", ".join(f"{k} {v}" for k, v in sorted(compiled.toolchain.items()) if not k.endswith(".id"))
        result.notices.append(f"toolchain: {tools}; {compiled.compiled} compiled, {compiled.cached} from cache")
    return emit(result, args, config)


def merge_runs(first: CompileRun, second: CompileRun) -> CompileRun:
    """One run of Triton and CUDA kernels together, sorted as each is."""
    merged = CompileRun(
        facts=sorted(first.facts + second.facts, key=lambda f: f.key),
        failures=sorted(first.failures + second.failures, key=lambda f: (f.kernel, f.variant, f.target)),
        compiled=first.compiled + second.compiled,
        cached=first.cached + second.cached,
        toolchain={**first.toolchain, **second.toolchain},
        compile_seconds={**first.compile_seconds, **second.compile_seconds},
    )
    return merged
