"""`kgate check` as a function: compile every kernel the project registers or captured, run every rule, and
judge the findings against the baseline.

`run_check` and `report` are the one path from a configuration to a check's report: `kgate check` renders
what they return (with its shard, version-matrix and toolchain extras), and `kgate.api.check` hands it back
as typed objects. The compile side is imported only when a check runs: importing `kgate.api` stays cheap.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from kgate.api.arguments import validated
from kgate.api.results import CheckResult
from kgate.api.setup import PathLike, project_config, selection_of
from kgate.core.config import Config
from kgate.core.findings import Severity
from kgate.core.result import Result
from kgate.core.selection import Selection

if TYPE_CHECKING:
    from kgate.shard.run import CheckOptions, CheckRun

Progress = Callable[[int, int, str], None]


@validated
def check(project: PathLike | None = None, *, config: PathLike | None = None, select: Sequence[str] | None = None,
          extend_select: Sequence[str] | None = None, ignore: Sequence[str] | None = None,
          targets: Sequence[str] | None = (), kernels: Sequence[str] | None = (), language: str | None = None,
          jobs: int | None = None, sass: bool = False, cache: bool = True, baseline: bool = True,
          fail_on: str | Severity | None = None, progress: Progress | None = None) -> CheckResult:
    """Run the gate, as `kgate check` does, and return its findings and every kernel variant's facts.

    `project`: the folder the configuration is found from (default: the current folder); `config`: a
    pyproject.toml or kgate.toml to use instead. `targets` (e.g. `["sm_120a"]`), `kernels` (globs on
    `module:function` or the function's name) and `language` (`"triton"` or `"cuda"`) narrow the run as
    `--target`, `--kernel` and `--language` do; `jobs`: compile workers; `sass=True`: disassemble every
    variant; `cache=False`: compile everything again and keep nothing. `progress(done, total, label)` is
    called as variants compile. Raises `kgate.api.KgateError` where `kgate check` exits 2.
    """
    from kgate.shard.run import CheckOptions

    cfg = project_config(project, config)
    chosen = selection_of(cfg, select, extend_select, ignore)
    options = CheckOptions(targets=tuple(dict.fromkeys(targets or ())), kernels=tuple(kernels or ()), jobs=jobs,
                           sass=sass, no_cache=not cache, fail_on=Severity(fail_on or cfg.fail_on), language=language)
    checked = run_check(cfg, chosen, options, progress)
    result = report(checked, options, cfg, baseline=baseline)
    result = replace(result, notices=[*cfg.notices, *result.notices])
    return CheckResult.of(result)


def run_check(config: Config, selection: Selection, options: CheckOptions,
              progress: Progress | None = None) -> CheckRun:
    """Collect, compile and evaluate: the run's kernels and findings before the baseline."""
    from kgate.pipeline import check as pipeline

    return pipeline.run_check(config, selection, options, progress)


def report(checked: CheckRun, options: CheckOptions, config: Config, *, baseline: bool) -> Result:
    """The run's report: findings and kernels, compared with the baseline unless `baseline` is False."""
    from kgate.pipeline.check import gate

    return gate(checked, options, config, baseline=baseline)
