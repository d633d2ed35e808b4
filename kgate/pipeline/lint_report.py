"""A lint's report: the source rules' findings after suppressions, judged against the baseline.

`lint_result` is the one path from a configuration to a lint's report: `kgate lint` renders what it returns,
and `kgate.api.lint` hands it back as typed objects. Nothing here compiles, imports the project's code, or
loads the compile side or the Python API (the pre-commit hook pays for every import).

The baseline, when the project has one, accepts pinned source findings; when only some files are linted
(pre-commit's batches), pins of other files are not judged and pins that no longer match are shown but do not
fail: stale pins are a whole-project verdict, for a lint without paths or `kgate check`.
"""

from __future__ import annotations

import stat
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from kgate.core.config import Config
from kgate.core.errors import BaselineError
from kgate.core.findings import Severity
from kgate.core.result import Result
from kgate.core.selection import Selection
from kgate.pipeline.lint import LintRun, run_lint

if TYPE_CHECKING:  # the ratchet's modules are imported only where there is a baseline
    from kgate.ratchet.gate import Verdict


def lint_result(config: Config, selection: Selection, paths: list[str], *, force_exclude: bool = False,
                use_cache: bool = True, baseline: bool = True, fail_on: Severity = Severity.ERROR,
                select_for: Callable[[Config], Selection] | None = None) -> Result:
    """The report of a lint: the source rules' findings after suppressions, judged against the baseline.

    `select_for`: the selection under another configuration, for files a nested project's configuration
    governs (`kgate.pipeline.lint`); None: `config` governs every file."""
    lint = run_lint(config, selection, paths, force_exclude=force_exclude, use_cache=use_cache,
                    select_for=select_for)
    verdict = _verdict(lint, config, fail_on) if baseline and _has_baseline(config) else None
    return Result.judged("lint", lint.findings, verdict, fail_on=fail_on, suppressed=lint.suppressed,
                         files_checked=len(lint.results),
                         stats={"files": len(lint.results), "cached": lint.cached,
                                "scope": "project" if lint.complete else "files"})


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


def _verdict(lint: LintRun, config: Config, fail_on: Severity) -> Verdict | None:
    # Imported only when there is a baseline: the ratchet's modules cost a pre-commit run time.
    from kgate.ratchet.compare import RunState, Scope
    from kgate.ratchet.gate import apply, compiled_codes

    scope = Scope(source=True, paths=None if lint.complete else frozenset(lint.results), codes=lint.codes,
                  compiled_codes=compiled_codes())
    state = RunState(kernels=[], findings=lint.findings, toolchain={}, scope=scope, fail_on=fail_on)
    # A partial run cannot tell a fixed finding from one in a file it did not read: never fail on stale pins.
    return apply(state, config if lint.complete else replace(config, ratchet="tighten"))
