"""`kgate diff [BASE]`: is the machine code of every kernel variant the same as at BASE (or under another Triton)?

"Perf-neutral" is proven by SASS, not argued: a refactor that leaves every kernel's instruction stream as it
was cannot have moved performance. Both sides are compiled through the usual pipeline with one cache, so
what did not change costs a cache read; only changed kernels compile, and only cubins that differ are
disassembled. Exit 0 whatever changed; with `--require-identical`, 1 when a selected variant's SASS is
not identical; 2 for errors.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from dataclasses import replace
from pathlib import Path

from kgate.collect import revision
from kgate.commands.common import ProgressBar, config_from
from kgate.compile.cache import Cache
from kgate.compile.listing import cubin_listing
from kgate.config import Config, load_config
from kgate.diff.compare import Diff, compare, matched, needs_listing
from kgate.diff.side import Key, Side, compile_side
from kgate.errors import ConfigError, KgateError, ToolchainError
from kgate.facts.cubin import text_sections
from kgate.facts.listing import Instruction
from kgate.pipeline import CheckOptions


def run(args: argparse.Namespace) -> int:
    config = config_from(args)
    options = CheckOptions(targets=tuple(args.target or ()), kernels=tuple(args.kernel or ()), jobs=args.jobs,
                           source=False, language="triton" if args.triton else args.language)
    progress = ProgressBar(enabled=args.format == "terminal" and not args.side_json)
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


def revision_diff(config: Config, options: CheckOptions, base_rev: str | None, progress: ProgressBar | None = None,
                  pairs: int = 0) -> Diff:
    """The working tree against `base_rev` (default: the merge base with the default branch, or HEAD~1);
    `pairs`: side-by-side SASS of that many changed variants (`kgate audit --diff`)."""
    project = config.source.parent if config.source is not None else config.root
    top = revision.repository(project)
    rev, named = (base_rev, base_rev) if base_rev else revision.default_base(top)
    commit = revision.commit_of(top, rev)
    cache_dir = str((config.root / config.cache_dir).resolve())
    with revision.checkout(top, commit) as tree:
        base_config = _base_config(config, top, tree, named, cache_dir)  # a base that cannot be read fails first
        head = compile_side(config, options, "working tree", progress)
        base = compile_side(base_config, options, f"{named} ({commit[:12]})", progress)
        _selected_something(options, base, head)
        return _compare(cache_dir, base, head, options.jobs, (str(config.root.resolve()), str(base_config.root)),
                        pairs)


def _base_config(config: Config, top: Path, tree: Path, rev: str, cache_dir: str) -> Config:
    """The base revision's own configuration, read from its checkout, with the working tree's cache."""
    try:
        if config.source is not None:
            path = tree / config.source.resolve().relative_to(top)
            base = load_config(path if path.exists() else None, start=path.parent)
        else:
            base = load_config(None, start=tree / config.root.resolve().relative_to(top))
    except ValueError:
        raise ConfigError(f"{config.display()} is outside the git repository at {top}") from None
    except KgateError as exc:
        raise ConfigError(f"the base revision {rev} cannot be configured: {exc}") from None
    return replace(base, cache_dir=cache_dir)


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
    _selected_something(options, base, head)
    cache_dir = str((config.root / config.cache_dir).resolve())
    return _compare(cache_dir, base, head, options.jobs, (str(config.root.resolve()),), 0)


def _selected_something(options: CheckOptions, base: Side, head: Side) -> None:
    if options.kernels and not (base.covered or head.covered):
        shown = " ".join(f"--kernel {g!r}" for g in options.kernels)
        raise ConfigError(f"{shown}: no registered kernel matches on either side (a glob matches a kernel's name or "
                          f"module:name)")


def _compare(cache_dir: str, base: Side, head: Side, jobs: int | None, roots: tuple[str, ...], pairs: int) -> Diff:
    code = _machine_code()
    return compare(base, head, _listings(cache_dir, base, head, jobs, code), roots=roots, pairs=pairs, code=code)


def _machine_code():  # type: ignore[no-untyped-def]
    """A variant's `.text` bytes from its cubin (when the cubin is the one its record was written with)."""
    memo: dict[str, dict[str, bytes]] = {}

    def code(side: Side, key: Key) -> bytes | None:
        cubin, facts = side.cubins.get(key), side.facts.get(key)
        if cubin is None or facts is None:
            return None
        path, recorded = cubin
        if path not in memo:
            try:
                data = Path(path).read_bytes()
            except OSError:
                data = b""
            memo[path] = text_sections(data) if recorded is None or hashlib.sha256(data).hexdigest() == recorded \
                else {}
        return memo[path].get(facts.entry.name)

    return code


def _listings(cache_dir: str, base: Side, head: Side, jobs: int | None, code):  # type: ignore[no-untyped-def]
    """The SASS of a side's variant, read on demand; the cubins the comparison will read are disassembled first,
    in parallel (nvdisasm takes about a second even for a small cubin)."""
    from concurrent.futures import ThreadPoolExecutor

    cache = Cache(Path(cache_dir))
    memo: dict[str, dict[str, tuple[Instruction, ...]] | None] = {}
    todo = sorted({side.cubins[k][0] for old, new in matched(base, head) if needs_listing(base, head, old, new, code)
                   for side, k in ((base, old), (head, new)) if k in side.cubins})
    recorded = {path: digest for side in (base, head) for path, digest in side.cubins.values()}
    with ThreadPoolExecutor(max_workers=max(1, jobs or os.cpu_count() or 1)) as pool:
        for path, functions in zip(todo, pool.map(lambda p: cubin_listing(cache, Path(p), recorded[p]), todo)):
            memo[path] = functions

    def listing(side: Side, key: Key) -> tuple[Instruction, ...] | None:
        cubin = side.cubins.get(key)
        facts = side.facts.get(key)
        if cubin is None or facts is None:
            return None
        path, recorded = cubin
        if path not in memo:
            memo[path] = cubin_listing(cache, Path(path), recorded)
        functions = memo[path]
        return None if functions is None else functions.get(facts.entry.name)

    return listing


def _report(args: argparse.Namespace, diff: Diff) -> int:
    from kgate.report import diff_report

    if args.format == "json":
        text = diff_report.render_json(diff)
    elif args.format == "markdown":
        text = diff_report.render_markdown(diff)
    else:
        text = diff_report.render_terminal(diff, quiet=args.quiet)
    if args.output:
        from kgate.atomicio import atomic_write

        try:
            atomic_write(Path(args.output), text.encode())
        except OSError as exc:
            raise ConfigError(f"cannot write {args.output}: {exc.strerror}") from None
        print(diff_report.summary(diff), file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 1 if args.require_identical and diff.not_identical() else 0
