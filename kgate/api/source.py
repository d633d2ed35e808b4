"""`kgate lint` as a function: the source rules over a project or some of its files, then the baseline.

`lint_result` is the one path from a configuration to a lint's report: `kgate lint` renders what it returns,
and `kgate.api.lint` hands it back as typed objects. Nothing here compiles, imports the project's code, or
loads the compile side (the pre-commit hook pays for every import).

The baseline, when the project has one, accepts pinned source findings; when only some files are linted
(pre-commit's batches), pins of other files are not judged and pins that no longer match are shown but do not
fail: stale pins are a whole-project verdict, for a lint without paths or `kgate check`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import replace

from kgate.api.arguments import validated
from kgate.api.results import LintResult
from kgate.api.setup import PathLike, project_config, selection_of
from kgate.core.config import Config
from kgate.core.errors import BaselineError
from kgate.core.findings import Severity
from kgate.core.result import Result
from kgate.core.selection import Selection
from kgate.pipeline.lint import LintRun, run_lint


@validated
def lint(paths: Sequence[PathLike] | None = (), *, project: PathLike | None = None, config: PathLike | None = None,
         select: Sequence[str] | None = None, extend_select: Sequence[str] | None = None,
         ignore: Sequence[str] | None = None, fail_on: str | Severity | None = None, baseline: bool = True,
         cache: bool = True, force_exclude: bool = False) -> LintResult:
    """Run the source rules, as `kgate lint [paths]` does, and return what they found.

    `project`: the folder the configuration is found from (default: the current folder); `config`: a
    pyproject.toml or kgate.toml to use instead. `paths`: files or folders to lint (relative ones are taken
    from `project` when it is given, else from the current folder); none: the whole project. `select`,
    `extend_select`, `ignore`: codes, prefixes or rule names, as the command line's flags. `baseline=False`:
    ignore the baseline file; `cache=False`: neither read nor write the lint cache. Raises
    `kgate.api.KgateError` where `kgate lint` exits 2 (a configuration or usage mistake).
    """
    cfg = project_config(project, config)
    chosen = selection_of(cfg, select, extend_select, ignore)
    base = os.fspath(project) if project is not None else None
    named = [os.path.join(base, os.fspath(p)) if base is not None else os.fspath(p) for p in paths or ()]
    # Each file under its nearest configuration, unless `config` names the one for every file (as `kgate lint`).
    select_for = None if config is not None else lambda other: selection_of(other, select, extend_select, ignore)
    result = lint_result(cfg, chosen, named, force_exclude=force_exclude, use_cache=cache, baseline=baseline,
                         fail_on=Severity(fail_on or cfg.fail_on), select_for=select_for)
    result.notices[:0] = cfg.notices
    return LintResult.of(result)


def lint_result(config: Config, selection: Selection, paths: list[str], *, force_exclude: bool = False,
                use_cache: bool = True, baseline: bool = True, fail_on: Severity = Severity.ERROR,
                select_for: Callable[[Config], Selection] | None = None) -> Result:
    """The report of a lint: the source rules' findings after suppressions, judged against the baseline.

    `select_for`: the selection under another configuration, for files a nested project's configuration
    governs (`kgate.pipeline.lint`); None: `config` governs every file."""
    lint = run_lint(config, selection, paths, force_exclude=force_exclude, use_cache=use_cache,
                    select_for=select_for)
    result = Result("lint", lint.findings, fail_on=fail_on)
    result.suppressed = lint.suppressed
    result.files_checked = len(lint.results)
    result.stats = {"files": len(lint.results), "cached": lint.cached,
                    "scope": "project" if lint.complete else "files"}
    if baseline and _has_baseline(config):
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
