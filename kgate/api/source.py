"""`kgate lint` as a function: the source rules over a project or some of its files, then the baseline.

The report is `kgate.pipeline.lint_report.lint_result`'s, the one path from a configuration to a lint's report
(`kgate lint` renders what it returns); here it is handed back as typed objects. Nothing here compiles or imports
the project's code.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace

from kgate.api.arguments import validated
from kgate.api.results import LintResult
from kgate.api.setup import PathLike, project_config, selection_of
from kgate.core.findings import Severity
from kgate.evaluate.source import refuse_empty_lint
from kgate.pipeline.lint_report import lint_result

__all__ = ["lint", "lint_result"]


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
    refuse_empty_lint(chosen, f"{cfg.display()} and the arguments")
    base = os.fspath(project) if project is not None else None
    named = [os.path.join(base, os.fspath(p)) if base is not None else os.fspath(p) for p in paths or ()]
    # Each file under its nearest configuration, unless `config` names the one for every file (as `kgate lint`).
    select_for = None if config is not None else lambda other: selection_of(other, select, extend_select, ignore)
    result = lint_result(cfg, chosen, named, force_exclude=force_exclude, use_cache=cache, baseline=baseline,
                         fail_on=Severity(fail_on or cfg.fail_on), select_for=select_for)
    result = replace(result, notices=[*cfg.notices, *result.notices])
    return LintResult.of(result)
