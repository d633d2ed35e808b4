"""The `kgate lint` pipeline end to end: find files, run the source rules (cached), apply the configuration
and the suppression comments. Shared by `kgate lint` and anything else that needs source findings.

With no paths, the project (the configuration's folder) is walked with
`exclude` and `extend-exclude` applied. Paths named on the command line are
linted even when excluded, as ruff does, unless `force_exclude` is set (the
pre-commit hook passes `--force-exclude`, so excluded files that pre-commit
hands over stay excluded). Folders named on the command line are walked
with the exclusions applied inside them.

Every verdict is per file, so the result for a list of files is the union
of the results for any split of that list: pre-commit may run several
`kgate lint` processes on parts of the staged files.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from kgate.collect.files import Exclusions, symlink_loop, walk
from kgate.core.config import Config
from kgate.core.errors import ConfigError
from kgate.core.findings import Finding
from kgate.core.selection import Selection
from kgate.core.suppress import Outcome, apply
from kgate.evaluate import source as engine


class LintRun(NamedTuple):
    results: dict[str, engine.FileResult]  # per linted file
    findings: list[Finding]  # active findings after per-file-ignores and suppressions
    suppressed: int
    cached: int  # files answered from the cache
    complete: bool  # the whole project was walked (not a list of paths)
    codes: frozenset[str]  # the rules that ran


def run_lint(config: Config, selection: Selection, paths: list[str] | None = None, *, force_exclude: bool = False,
             use_cache: bool = True) -> LintRun:
    rules = engine.source_rules(selection)
    files, complete = discover(paths or [], config, engine.any_match(rules), force_exclude)
    cache = None
    if use_cache:
        from kgate.pipeline.lint_cache import LintCache, selection_key
        from kgate.support.cachedir import claim

        claim(config.root / config.cache_dir, config.cache_dir, config.display() if config.source else None)
        cache = LintCache(config.root / config.cache_dir, selection_key(rules))
    results, hits = engine.run_files(files, rules, cache, jobs=config.jobs)
    if cache is not None:
        cache.save(keep=set(results) if complete else None)
    outcome = active_findings(results, selection)
    codes = frozenset(sr.rule.code for sr in rules) | {"KG002", "KG003"} & selection.enabled
    return LintRun(results, outcome.findings, outcome.suppressed, hits, complete, codes)


def active_findings(results: dict[str, engine.FileResult], selection: Selection) -> Outcome:
    """The findings of per-file results with the configuration and the suppression comments applied."""
    return apply(engine.findings(results, selection),
                 {rel: r.directives for rel, r in results.items() if r.directives},
                 selection, engine.judge(results, selection))


def discover(paths: list[str], config: Config, match: Callable[[str], bool],
             force_exclude: bool) -> tuple[list[tuple[str, str]], bool]:
    """(project-relative path, path) of the files to lint, sorted; and whether this is the whole project."""
    root = config.root
    exclude = tuple(config.exclude) + tuple(config.extend_exclude)
    if not paths:
        return walk(root, match, exclude), True
    found: dict[str, str] = {}
    excluded = Exclusions(exclude)
    for given in paths:
        rel = _relative(given, root)
        if force_exclude and excluded(rel):
            continue
        if os.path.isdir(given):
            found.update(walk(given, match, exclude, prefix="" if rel == "." else rel + "/"))
        elif os.path.isfile(given) or symlink_loop(given):
            if match(rel):
                found[rel] = given
        elif os.path.exists(given):
            raise ConfigError(f"{given}: not a regular file")
        else:
            raise ConfigError(f"{given}: no such file or directory")
    return sorted(found.items()), False


def _relative(path: str, root: Path) -> str:
    """The project-relative form of a command-line path (absolute when outside the project)."""
    absolute = os.path.abspath(path)
    rel = os.path.relpath(absolute, root)
    if rel.startswith(".."):
        real = os.path.realpath(absolute)
        rel = os.path.relpath(real, root)
        if rel.startswith(".."):
            return Path(real).as_posix()
    return Path(rel).as_posix()
