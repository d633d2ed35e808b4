"""`kgate audit`: compile like `kgate check` (with SASS for every kernel) and write the audit report.

Writes DIR/report.html (one self-contained page: no network requests, charts
as inline SVG) and DIR/report.md with the same numbers. The baseline, when
there is one, is compared as `kgate check` compares it, and each kernel's
differences are shown with it. Exit 0 when the report is written, whatever
it says: `kgate check` is the gate.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import kgate
from kgate.commands.common import ProgressBar, config_from, fail_on, selection_from
from kgate.core.config import Config
from kgate.core.errors import ConfigError
from kgate.core.result import Result
from kgate.diff.compare import Diff
from kgate.hardware.profiles import AUDIT_DEFAULT, Profile, primary, profiles
from kgate.pipeline.check import CheckOptions, resolve_targets, run_check
from kgate.ratchet import gate as ratchet
from kgate.ratchet.compare import Comparison
from kgate.report import audit_html, audit_md, audit_model, audit_tables, differences
from kgate.report.escape import terminal
from kgate.support.atomicio import atomic_write


def resolve_cards(requested: list[str] | None, targets: tuple[str, ...], explicit_targets: bool
                  ) -> tuple[tuple[str, ...], dict[str, list[Profile]]]:
    """The targets to compile and the cards to show per target: the defaults plus `--profile` cards.

    A requested card of an architecture that is not among the targets adds its
    target, unless the targets were given with --target (then it is an error).
    """
    known = profiles()
    chosen: list[Profile] = []
    for name in requested or []:
        card = known.get(name.lower())
        if card is None:
            raise ConfigError(f"--profile {name}: unknown card (known: {', '.join(sorted(known))})")
        chosen.append(card)
    for card in chosen:
        if card.arch not in targets:
            if explicit_targets:
                raise ConfigError(f"--profile {card.key} is an {card.arch} card; add --target {card.arch}")
            targets += (card.arch,)
    cards: dict[str, list[Profile]] = {}
    for target in targets:
        defaults = [known[k] for k in AUDIT_DEFAULT.get(target, ())] or [primary(target)]
        cards[target] = defaults + [c for c in chosen if c.arch == target and c not in defaults]
    return targets, cards


def baseline_view(comparison: Comparison | None) -> tuple[dict[tuple[str, str, str], list[str]], list[str]]:
    """Baseline differences per kernel variant and target, and those that belong to none."""
    per_kernel: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    general: list[str] = []
    for diff in comparison.differences if comparison else []:
        key = differences.owner(diff)
        if key is None:
            general.append(differences.describe(diff))
        else:
            per_kernel[key].append(differences.per_kernel_line(diff))
    return dict(per_kernel), general


def _check_folder(out: Path) -> None:
    try:
        blocked = out.exists() and not out.is_dir()
    except OSError:  # cannot look: writing into it will say why
        return
    if blocked:
        raise ConfigError(f"{out}: not a folder (kgate audit writes report.html and report.md into one)")


def run(args: argparse.Namespace) -> int:
    config = config_from(args)
    selection = selection_from(args, config)
    _check_folder(Path(args.output))  # before compiling anything
    targets, cards = resolve_cards(args.profile, resolve_targets(config, tuple(args.target or ())),
                                   explicit_targets=bool(args.target))
    options = CheckOptions(targets=targets, kernels=tuple(args.kernel or ()), jobs=args.jobs, sass=True,
                           fail_on=fail_on(args, config))
    progress = ProgressBar(enabled=True)
    try:
        checked = run_check(config, selection, options, progress)
    finally:
        progress.clear()
    if not checked.entries:
        print("kgate: no kernels registered (add [[tool.kgate.triton]] tables or @kgate.register)", file=sys.stderr)
    compiled = checked.compiled
    result = Result("check", checked.findings, compiled.facts, fail_on=options.fail_on)
    comparison = result.take_ratchet(ratchet.apply(checked.state, config, enabled=not args.no_baseline))
    per_kernel, general = baseline_view(comparison)
    if args.no_baseline:
        state = "not compared (--no-baseline)"
    elif comparison is None:
        state = f"no baseline file ({config.baseline})"
    else:
        state = f"compared with {config.baseline}"
    model = audit_model.build(
        compiled.facts, compiled.failures, result.findings, cards, toolchain=compiled.toolchain,
        version=kgate.__version__, baseline=per_kernel,
        baselined=comparison.baselined if comparison else (), baseline_state=state,
        baseline_compared=comparison is not None, baseline_notes=general,
        limits=audit_model.Thresholds.under(selection.options))  # the rules' options, as configured
    if getattr(args, "diff", None):
        model = replace(model, sass_diff=_sass_diff(config, options, args.diff))
    return write(model, Path(args.output))


# Side-by-side SASS for this many changed variants: enough to read what a change did, not a listing of all.
SIDE_BY_SIDE = 5


def _sass_diff(config: Config, options: CheckOptions, base: str) -> Diff:
    from kgate.diff.runs import revision_diff

    progress = ProgressBar(enabled=True)
    try:
        return revision_diff(config, replace(options, sass=False, source=False), base, progress, pairs=SIDE_BY_SIDE)
    finally:
        progress.clear()


def write(model: audit_model.AuditModel, out: Path) -> int:
    written = []
    _check_folder(out)
    for name, text in (("report.html", audit_html.render(model)), ("report.md", audit_md.render(model))):
        try:
            # A file name that is not UTF-8 reaches the text as lone surrogates: shown as their escapes.
            atomic_write(out / name, text.encode("utf-8", "backslashreplace"), follow=True)
        except OSError as exc:
            raise ConfigError(f"cannot write {out / name}: {exc.strerror}") from None
        written.append(str(out / name))
    tail = ""
    if model.ranking:
        closest = model.ranking[0]
        tail = terminal(f"; closest to a cliff: {closest.facts.kernel} [{closest.facts.variant}] @ "
                        f"{closest.facts.target}, headroom {audit_tables.headroom_text(closest.headroom.score)} "
                        f"({closest.headroom.limiter})")
    print(f"kgate audit: {len(model.kernels)} kernel variant(s), {len(model.failures)} failed to compile, "
          f"{len(model.findings)} finding(s){tail}")
    for path in written:
        print(f"wrote {terminal(path)}")
    return 0
