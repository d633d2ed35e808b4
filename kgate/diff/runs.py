"""The two sides of a revision diff compiled and compared: the base checked out into a temporary worktree and
the working tree, each with its own configuration and one cache; only cubins whose code differs are
disassembled (`kgate diff` and `kgate audit --diff` both run it)."""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from kgate.collect import revision
from kgate.collect.cuda_sources import moved_text
from kgate.collect.registry import captured_specs, triton_entries
from kgate.compile.cache import Cache
from kgate.compile.compilation import Progress
from kgate.compile.sides import DIFF_RUN
from kgate.core.config import Config, load_config
from kgate.core.errors import ConfigError, KgateError
from kgate.diff.compare import Diff, compare, matched, needs_listing
from kgate.diff.listing import cubin_listing
from kgate.diff.model import Key, Side
from kgate.diff.side import compile_side
from kgate.facts.cubin import text_sections
from kgate.facts.listing import Instruction
from kgate.pipeline.check import CheckOptions, nothing_to_gate, selected_nothing


def revision_diff(config: Config, options: CheckOptions, base_rev: str | None, progress: Progress | None = None,
                  pairs: int = 0) -> Diff:
    """The working tree against `base_rev` (default: the merge base with the default branch, or HEAD~1);
    `pairs`: side-by-side SASS of that many changed variants (`kgate audit --diff`)."""
    project = config.source.parent if config.source is not None else config.root
    nothing = nothing_to_gate(config, triton_entries(config), captured_specs(config))
    try:
        top = revision.repository(project)
    except ConfigError:
        if nothing:  # no kernel here, and no revision to have one: what the working tree lacks is said
            raise ConfigError(nothing) from None
        raise
    rev, named = (base_rev, base_rev) if base_rev else revision.default_base(top)
    commit = revision.commit_of(top, rev)
    cache_dir = str((config.root / config.cache_dir).resolve())
    with revision.checkout(top, commit) as tree, diff_run():
        base_config = _base_config(config, top, tree, named, cache_dir)  # a base that cannot be read fails first
        with _of_the_base(f"{named} ({commit[:12]})"):
            base_empty = bool(nothing) and bool(nothing_to_gate(base_config, triton_entries(base_config),
                                                                captured_specs(base_config)))
        if nothing and base_empty:
            raise ConfigError(nothing)  # neither side has a kernel: what the working tree lacks is said
        head = compile_side(config, options, "working tree", progress)
        with _of_the_base(f"{named} ({commit[:12]})"):
            base = compile_side(base_config, options, f"{named} ({commit[:12]})", progress)
        require_selection(config, options, base, head)
        return compare_sides(cache_dir, base, head, options.jobs, (str(config.root.resolve()), str(base_config.root)),
                        pairs)


@contextmanager
def _of_the_base(label: str) -> Iterator[None]:
    """An error of the base revision's own files (its capture file, a glob of its CUDA table that matches none of its
    files) says that it is the base's: the working tree's file of that name may be fine, or gone."""
    try:
        yield
    except KgateError as exc:
        raise type(exc)(f"the base revision {label}: {exc}") from None


@contextmanager
def diff_run() -> Iterator[None]:
    """The length of one diff, named by a token of its own (`kgate.compile.sides.DIFF_RUN`)."""
    was = os.environ.get(DIFF_RUN)
    os.environ[DIFF_RUN] = secrets.token_hex(8)
    try:
        yield
    finally:
        if was is None:
            os.environ.pop(DIFF_RUN, None)
        else:
            os.environ[DIFF_RUN] = was


def _base_config(config: Config, top: Path, tree: Path, rev: str, cache_dir: str) -> Config:
    """The base revision's own configuration, read from its checkout, with the working tree's cache."""
    try:
        if config.source is not None:
            # The folder resolved, not the file: a kgate.toml linked to a shared one is the base's link too.
            path = tree / (config.source.parent.resolve() / config.source.name).relative_to(top)
            base = load_config(path if path.exists() else None, start=path.parent)
        else:
            base = load_config(None, start=tree / config.root.resolve().relative_to(top))
    except ValueError:
        raise ConfigError(f"{config.display()} is outside the git repository at {top}") from None
    except KgateError as exc:
        raise ConfigError(f"the base revision {rev} cannot be configured: {exc}") from None
    return _outside_moved(replace(base, cache_dir=cache_dir, checkout_of=(str(top), str(tree))), top, tree)


def _within(path: str, folder: str | Path) -> bool:
    inside = os.path.relpath(path, folder)
    return inside != os.pardir and not inside.startswith(os.pardir + os.sep)


def _outside_moved(base: Config, top: Path, tree: Path) -> Config:
    """The base's configured paths (python-path folders, a set-up hook, the capture file, nvcc) as the base's own
    project names them: one that leads out of the repository (`../shared`) names that folder beside the working
    tree, not one beside the temporary checkout; one that names the working tree by absolute path names the
    checkout's copy, as a committed compile_commands.json does."""
    def moved(entry: str) -> str:
        path = os.path.expanduser(entry)
        where = os.path.normpath(os.path.join(base.root, path))
        if _within(where, tree):
            return entry
        if not os.path.isabs(path):  # out of the checkout: where it leads from the working tree
            where = os.path.normpath(os.path.join(top, os.path.relpath(where, tree)))
        real = os.path.realpath(where)
        return os.path.join(tree, os.path.relpath(real, top)) if _within(real, top) else where

    setup = base.setup if base.setup is None or not base.setup.endswith(".py") else moved(base.setup)
    nvcc = base.nvcc if base.nvcc is None or os.sep not in base.nvcc else moved(base.nvcc)
    # A CUDA table's flags that name the working tree by absolute path (`-I/work/repo/include`, `-include ...`)
    # name the checkout's files, as a compile_commands.json's do: the base compiles its own headers.
    checkout = (str(top), str(tree))
    cuda = tuple(replace(entry, flags=tuple(moved_text(flag, checkout) for flag in entry.flags))
                 for entry in base.cuda)
    return replace(base, python_path=tuple(moved(p) for p in base.python_path), setup=setup,
                   capture=moved(base.capture), nvcc=nvcc, cuda=cuda)


def require_selection(config: Config, options: CheckOptions, base: Side, head: Side) -> None:
    """A diff that compared nothing proves nothing: what its selection (`--kernel`, `--language`, `--target`) left
    of the project on both sides is an error, as a check's is."""
    if options.kernels and not (base.covered or head.covered):
        shown = " ".join(f"--kernel {g!r}" for g in options.kernels)
        raise ConfigError(f"{shown}: no kernel of the project matches on either side (a glob matches a kernel's name or "
                          f"module:name)")
    gated = bool(base.facts or base.failures or head.facts or head.failures)
    unselected = selected_nothing(config, options, gated, base.covered | head.covered)
    if unselected:
        raise ConfigError(unselected)


def compare_sides(cache_dir: str, base: Side, head: Side, jobs: int | None, roots: tuple[str, ...], pairs: int) -> Diff:
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
