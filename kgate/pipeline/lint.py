"""The `kgate lint` pipeline end to end: find files, run the source rules (cached), apply the configuration
and the suppression comments. Shared by `kgate lint` and anything else that needs source findings.

With no paths, the project (the configuration's folder) is walked with
`exclude` and `extend-exclude` applied. Paths named on the command line are
linted even when excluded, as ruff does, unless `force_exclude` is set (the
pre-commit hook passes `--force-exclude`, so excluded files that pre-commit
hands over stay excluded). Folders named on the command line are walked
with the exclusions applied inside them.

Each file is linted under the configuration that governs it (`kgate.collect.projects`): the nearest one
above it, so a walk that meets a folder with its own configuration lints that folder under it, and a file
named from another folder gets its own project's `per-file-ignores`, `select` and rule options. Files are
grouped by that configuration; each group has its own selection and its own record in the lint cache.
`kgate check`, and a run given `--config`, use one configuration for every file.

What the ignore files ignore (`kgate.collect.ignores`) is not walked, unless `respect-gitignore` is
false or `--no-respect-gitignore` is given; files named on the command line are linted even so.

Every verdict is per file, so the result for a list of files is the union
of the results for any split of that list: pre-commit may run several
`kgate lint` processes on parts of the staged files.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import NamedTuple

from kgate.collect import ignores, pyimports
from kgate.collect.files import Exclusions, Nested, symlink_loop, walk
from kgate.collect.projects import Projects, named
from kgate.collect.pynames import use_import_roots
from kgate.core.config import Config
from kgate.core.errors import ConfigError
from kgate.core.findings import Finding, sort_findings
from kgate.core.selection import Selection
from kgate.core.suppress import Suppressed, apply
from kgate.evaluate import source as engine


class LintRun(NamedTuple):
    results: dict[str, engine.FileResult]  # per linted file
    findings: list[Finding]  # active findings after per-file-ignores and suppressions
    suppressed: int
    cached: int  # files answered from the cache
    complete: bool  # the whole project was walked (not a list of paths)
    codes: frozenset[str]  # the rules that ran


@dataclass
class Group:
    """The files one configuration governs, and what it selects for them."""

    config: Config
    selection: Selection
    rules: list[engine.SourceRule]
    match: Callable[[str], bool]
    files: dict[str, str] = field(default_factory=dict)  # path as the run names it -> path to read

    @property
    def exclusions(self) -> Exclusions:
        return Exclusions(tuple(self.config.exclude) + tuple(self.config.extend_exclude))


def run_lint(config: Config, selection: Selection, paths: list[str] | None = None, *, force_exclude: bool = False,
             use_cache: bool = True, select_for: Callable[[Config], Selection] | None = None) -> LintRun:
    """Lint the project, or `paths`. `select_for`: the selection of another configuration a file is governed by
    (given: each file under its nearest configuration; None: `config` for every file)."""
    cache_dir = config.root / config.cache_dir
    finder = _Finder(config, selection, select_for, cache_dir / "v1" / "ignore.json" if use_cache else None)
    complete = not paths
    finder.discover(paths or [], force_exclude)
    pyimports.use_cache(cache_dir if use_cache else None)
    if use_cache:
        from kgate.support.cachedir import claim

        claim(cache_dir, config.cache_dir, config.display() if config.source else None)
        finder.verdicts.save(complete)
    results: dict[str, engine.FileResult] = {}
    findings: list[Finding] = []
    suppressed = hits = 0
    codes: set[str] = set()
    for group in finder.groups():
        cache = None
        if use_cache:
            from kgate.pipeline.lint_cache import LintCache

            cache = LintCache(cache_dir, cache_key(config, group))
        files = sorted(group.files.items())
        # The project's imports are followed through its python-path folders, as `kgate check` imports them.
        use_import_roots(str(group.config.root), tuple(group.config.python_path))
        found, cached = engine.run_files(files, group.rules, cache, jobs=config.jobs)
        if cache is not None:
            cache.save(keep=set(found) if complete else None)
        outcome = active_findings(found, group.selection)
        results.update(found)
        findings.extend(outcome.findings)
        suppressed += outcome.suppressed
        hits += cached
        codes |= {sr.rule.code for sr in group.rules} | {"KG002", "KG003"} & group.selection.enabled
    pyimports.save()
    return LintRun(dict(sorted(results.items())), sort_findings(findings), suppressed, hits, complete,
                   frozenset(codes))


def cache_key(config: Config, group: Group) -> str:
    """The lint cache's record of a group's files: its rules, the configuration that governs them where it is not
    the run's own (`config`), and the python-path folders their imports are followed through where they are not the
    default."""
    from kgate.pipeline.lint_cache import selection_key

    governing = group.config.source or group.config.root
    scope = f"{governing} as {group.selection.base}" if group.config is not config else ""
    if tuple(group.config.python_path) != Config.python_path:
        scope += f" importing from {list(group.config.python_path)}"
    return selection_key(group.rules, scope)


def active_findings(results: dict[str, engine.FileResult], selection: Selection) -> Suppressed:
    """The findings of per-file results with the configuration and the suppression comments applied."""
    return apply(engine.findings(results, selection),
                 {rel: r.directives for rel, r in results.items() if r.directives},
                 selection, engine.judge(results, selection))


def discover(config: Config, selection: Selection, paths: list[str] | None = None, *, force_exclude: bool = False,
             select_for: Callable[[Config], Selection] | None = None) -> list[Group]:
    """The files a lint of `paths` (none: the project) reads, grouped by the configuration that governs them,
    as `run_lint` groups them (the fixer and `--show-files` read the same files)."""
    finder = _Finder(config, selection, select_for)
    finder.discover(paths or [], force_exclude)
    return finder.groups()


class _Finder:
    """The files of a run, grouped by the configuration that governs each."""

    def __init__(self, config: Config, selection: Selection, select_for: Callable[[Config], Selection] | None,
                 verdicts: Path | None = None) -> None:
        self.config = config
        self.projects = Projects(config, per_file=select_for is not None)
        self.select_for = select_for
        self.respect_gitignore = config.respect_gitignore  # the run's, as ruff reads it: it decides the walk
        self.verdicts = ignores.Verdicts(verdicts)  # pathspec's answers, remembered in the cache
        rules = engine.source_rules(selection)
        self._groups: dict[int, Group] = {id(config): Group(config, selection, rules, engine.any_match(rules))}

    def groups(self) -> list[Group]:
        """The run's own group first (always, so that a whole-project run prunes its cache), then the others
        that have files."""
        own, *others = self._groups.values()
        return [own, *(g for g in others if g.files)]

    def group(self, config: Config) -> Group:
        found = self._groups.get(id(config))
        if found is None:
            assert self.select_for is not None
            try:
                selection = self.select_for(config)
            except ConfigError as exc:
                raise named(exc, config.display(), self.projects.shown(config.source or config.root)) from None
            selection = replace(selection, base=self.projects.base(config))
            rules = engine.source_rules(selection)
            found = self._groups[id(config)] = Group(config, selection, rules, engine.any_match(rules))
        return found

    def discover(self, paths: list[str], force_exclude: bool) -> None:
        if not paths:
            self._walk(self.config.root, self._groups[id(self.config)], "")
            return
        for given in paths:
            if os.path.isdir(given):
                group = self.group(self.projects.governing(given))
                rel = _relative(given, group.config.root)
                if force_exclude and group.exclusions(rel):
                    continue
                walked = set(group.files)
                self._walk(Path(given), group, "" if rel == "." else rel + "/")
                if os.path.isabs(rel):  # a folder above the project (`--config sub/kgate.toml` from the top)
                    _name_from_the_root(group, set(group.files) - walked)
            elif os.path.isfile(given) or symlink_loop(given):
                group = self.group(self.projects.governing(os.path.dirname(os.path.abspath(given))))
                rel = _relative(given, group.config.root)
                if force_exclude and group.exclusions(rel):
                    continue
                if group.match(rel):
                    group.files[group.selection.base + rel] = given
            elif os.path.exists(given):
                raise ConfigError(f"{given}: not a regular file")
            else:
                raise ConfigError(f"{given}: no such file or directory")

    def _walk(self, start: Path, group: Group, prefix: str) -> None:
        """Walk a folder of `group`'s project, then each project nested in it under its own configuration."""
        state = ignores.above(str(start), self.verdicts) if self.respect_gitignore else None
        todo: list[tuple[str, Group, str, ignores.Ignores | None]] = [(str(start), group, prefix, state)]
        boundary = self.projects.boundary if self.projects.per_file else None
        seen: set[tuple[int, int]] = set()
        while todo:
            folder, group, prefix, state = todo.pop()
            nested: list[Nested] = []
            config = group.config
            found = walk(folder, group.match, tuple(config.exclude) + tuple(config.extend_exclude), prefix,
                         ignores=state, boundary=boundary, nested=nested, seen=seen)
            base = group.selection.base
            group.files.update((base + rel, path) for rel, path in found)
            for inner, _rel, above in reversed(nested):
                todo.append((inner, self.group(self.projects.governing(inner)), "", above))


def _name_from_the_root(group: Group, walked: set[str]) -> None:
    """The files of a walk of a folder that holds the project's root, named as the project names them: those under
    the root by their project-relative path (the project's per-file-ignores and exclusions apply to them), the others
    by their absolute one."""
    tops = {Path(os.path.abspath(group.config.root)).as_posix(), Path(os.path.realpath(group.config.root)).as_posix()}
    for name in sorted(walked):
        top = next((t for t in tops if name.startswith(t.rstrip("/") + "/")), None)
        if top is None:
            continue
        path = group.files.pop(name)
        rel = name[len(top.rstrip("/")) + 1:]
        if not group.exclusions(rel):
            group.files[group.selection.base + rel] = path


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
