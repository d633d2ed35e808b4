"""The ratchet inside `kgate check` and `kgate lint`: compare a run with the committed baseline."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

from kgate import rules as registry  # type: ignore[attr-defined]
from kgate.core.config import Config
from kgate.core.errors import BaselineError
from kgate.ratchet.baseline import Baseline, load
from kgate.ratchet.compare import Comparison, RunState, compare
from kgate.ratchet.migrate import migrate, without_comments


def baseline_path(config: Config) -> Path:
    return config.root / config.baseline


def compiled_codes() -> frozenset[str]:
    return frozenset(registry.codes("compiled")) | {"KG001", "KG005"}


def public_toolchain(toolchain: dict[str, str]) -> dict[str, str]:
    """Tool versions as the baseline records them (without the binaries' file identities)."""
    return {k: v for k, v in toolchain.items() if not k.endswith(".id")}


def on_ci() -> bool:
    """Whether this run is a CI job: CI systems (GitHub Actions, GitLab, Buildkite, CircleCI, ...) set `CI`."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def toolchain_policy(config: Config) -> str:
    """`toolchain-change` as it applies to this run: "auto" is strict on CI, lenient on a contributor's machine."""
    if config.toolchain_change != "auto":
        return config.toolchain_change
    return "fail" if on_ci() else "warn"


def load_baseline(config: Config) -> Baseline | None:
    path = baseline_path(config)
    try:
        path.stat()
    except FileNotFoundError:
        return None
    except OSError as exc:  # a folder on the way that cannot be searched (Path.exists() raises that as is)
        raise BaselineError(f"cannot read the baseline: {exc.strerror}", path=config.baseline) from None
    return load(path, config.baseline)


class Verdict(NamedTuple):
    """The baseline's verdict on a run; the report is built with it (`Result.judged`), the ratchet never edits a
    report."""

    comparison: Comparison
    notices: list[str]


def apply(state: RunState, config: Config, *, enabled: bool = True) -> Verdict | None:
    """Compare a run with the committed baseline; None without a baseline (or when not `enabled`)."""
    if not enabled:
        return None
    baseline = load_baseline(config)
    if baseline is None:
        return None
    notices: list[str] = []
    baseline, renamed = migrate(baseline, {k.key for k in state.kernels})
    if renamed:
        notices.append(f"note: {renamed} entr(y/ies) of {config.baseline} name variants as kgate did "
                       f"before variants named their specialisation; `kgate baseline update` renames them")
    baseline, uncommented = without_comments(baseline, {f.baseline_key for f in state.findings})
    if uncommented:
        notices.append(f"note: {uncommented} source finding pin(s) of {config.baseline} name their line with its "
                       f"comment, as kgate did before; `kgate baseline update` renames them")
    comparison = compare(baseline, state, mode=config.ratchet, toolchain_policy=toolchain_policy(config),
                         slack=config.size_slack)
    return Verdict(comparison, notices)
