"""`kgate audit`: compile like `kgate check` (with SASS for every kernel) and write the audit report.

Writes DIR/report.html (one self-contained page: no network requests, charts
as inline SVG) and DIR/report.md with the same numbers. Exit 0 when the
report is written, whatever it says: `kgate check` is the gate.
"""

from __future__ import annotations

import argparse
import fnmatch
import sys
from pathlib import Path

import kgate
from kgate import evaluate
from kgate.collect.registry import triton_entries
from kgate.commands.common import ProgressBar, config_from, selection_from
from kgate.compile.cache import atomic_write
from kgate.compile.engine import compile_triton, default_jobs
from kgate.config import KNOWN_TARGETS
from kgate.errors import ConfigError
from kgate.profiles import AUDIT_DEFAULT, Profile, primary, profiles
from kgate.report import audit_html, audit_md, audit_model, audit_tables


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
    targets = tuple(targets)
    for card in chosen:
        if card.arch not in targets:
            if explicit_targets:
                raise ConfigError(f"--profile {card.key} is an {card.arch} card; add --target {card.arch}")
            targets += (card.arch,)
    cards: dict[str, list[Profile]] = {}
    for target in targets:
        defaults = [known[k] for k in AUDIT_DEFAULT.get(target, ())] or [primary(target)]
        extra = [c for c in chosen if c.arch == target and c not in defaults]
        cards[target] = defaults + extra
    return targets, cards


def run(args: argparse.Namespace) -> int:
    config = config_from(args)
    selection = selection_from(args, config)
    targets = tuple(args.target) if args.target else config.targets
    for target in targets:
        if target not in KNOWN_TARGETS:
            raise ConfigError(f"--target {target}: unknown target (known: {', '.join(KNOWN_TARGETS)})")
    targets, cards = resolve_cards(args.profile, targets, explicit_targets=bool(args.target))
    entries = triton_entries(config)
    if args.kernel:
        entries = [e for e in entries if any(fnmatch.fnmatchcase(e.kernel, g) or fnmatch.fnmatchcase(e.function, g)
                                             for g in args.kernel)]
    if not entries:
        print("kgate: no kernels registered (add [[tool.kgate.triton]] tables or @kgate.register)", file=sys.stderr)
    progress = ProgressBar(enabled=True)
    try:
        compiled = compile_triton(config, entries, targets, jobs=args.jobs or config.jobs or default_jobs(),
                                  progress=progress, sass_all=True)
    finally:
        progress.clear()
    findings = evaluate.compiled(compiled, selection)
    model = audit_model.build(compiled.facts, compiled.failures, findings, cards, toolchain=compiled.toolchain,
                              version=kgate.__version__)
    out = Path(args.output)
    written = []
    for name, text in (("report.html", audit_html.render(model)), ("report.md", audit_md.render(model))):
        try:
            atomic_write(out / name, text.encode())
        except OSError as exc:
            raise ConfigError(f"cannot write {out / name}: {exc.strerror}") from None
        written.append(str(out / name))
    closest = model.ranking[0] if model.ranking else None
    tail = ""
    if closest is not None:
        tail = (f"; closest to a cliff: {closest.facts.kernel} [{closest.facts.variant}] @ {closest.facts.target}, "
                f"headroom {audit_tables.headroom_text(closest.headroom.score)} ({closest.headroom.limiter})")
    print(f"kgate audit: {len(model.kernels)} kernel variant(s), {len(model.failures)} failed to compile, "
          f"{len(findings)} finding(s){tail}")
    for path in written:
        print(f"wrote {path}")
    return 0
