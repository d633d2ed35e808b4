"""`kgate baseline update`: re-pin the ratchet; `kgate baseline show`: summarise the pinned state."""

from __future__ import annotations

import argparse
import sys

from kgate.collect.registry import captured_specs, triton_entries
from kgate.commands.common import ProgressBar, config_from, fail_on, selection_from
from kgate.pipeline.check import CheckOptions, nothing_to_gate, run_check
from kgate.ratchet.baseline import Baseline, locked, render, save, toolchain_bound
from kgate.ratchet.gate import baseline_path, load_baseline
from kgate.ratchet.migrate import migrate, without_comments
from kgate.ratchet.update import repin
from kgate.report.escape import terminal
from kgate.shard.plan import parse_shard
from kgate.support.atomicio import read_input


def run(args: argparse.Namespace) -> int:
    spec = parse_shard(args.shard) if getattr(args, "shard", None) is not None else None
    config = config_from(args)
    path = baseline_path(config)
    if args.action == "show":
        return _show(load_baseline(config), str(path))
    selection = selection_from(args, config)
    options = CheckOptions(targets=tuple(args.target or ()), kernels=tuple(args.kernel or ()), jobs=args.jobs,
                           sass=args.sass, fail_on=fail_on(args, config), shard=spec)
    if nothing_to_gate(config, triton_entries(config), captured_specs(config)):
        # Not a verdict: a project kgate only lints pins its source findings here, for `kgate lint`.
        print("kgate: note: no kernel to compile (none registered, captured or in CUDA sources): pinning the source "
              "rules' findings only", file=sys.stderr)
    progress = ProgressBar(enabled=True)
    try:
        checked = run_check(config, selection, options, progress, lint_only=True)
    finally:
        progress.clear()
    rel = config.baseline
    # Read, re-pin and write under the lock: an update that ran at the same time wrote first, and its pins are
    # in what is read here (the compile above needs no lock: it does not read the baseline).
    with locked(path):
        old, renamed = migrate(load_baseline(config) or Baseline(), {k.key for k in checked.state.kernels})
        old, uncommented = without_comments(old, {f.baseline_key for f in checked.state.findings})
        outcome = repin(old, checked.state, accept_new=args.accept_new, slack=config.size_slack)
        if renamed:
            print(f"renamed   {renamed} entr(y/ies) to the variant names that say their specialisation")
        if uncommented:
            print(f"renamed   {uncommented} source finding pin(s) to their line's code without its comment")
        for line in outcome.changes:
            print(terminal(line))
        try:
            current = read_input(path)
        except OSError:
            current = None
        renamed += uncommented
        if outcome.changed or renamed or current != render(outcome.baseline).encode():
            save(outcome.baseline, path, rel)
            upgraded = "" if outcome.changed or renamed or current is None else ", rewritten in the current format"
            print(f"kgate: wrote {rel} ({len(outcome.changes)} change(s){upgraded})")
        else:
            print(f"kgate: {rel} is up to date")
    for line in outcome.failing:
        print(terminal(line), file=sys.stderr)
    if outcome.refused:
        for line in outcome.refused:
            print(terminal(line), file=sys.stderr)
        print(f"kgate: {len(outcome.refused)} new debt(s) left out; review them, then re-run with --accept-new "
              f"to pin them", file=sys.stderr)
    if outcome.failing:
        print(f"kgate: {len(outcome.failing)} compile failure(s) left out: a kernel that does not compile is not "
              f"gated until it does", file=sys.stderr)
    return 1 if outcome.refused or outcome.failing else 0


def _show(baseline: Baseline | None, path: str) -> int:
    if baseline is None:
        print(f"kgate: no baseline at {path}")
        return 0
    shared = [k for k in baseline.findings if not toolchain_bound(k)]
    sections = baseline.sections()
    print(f"{path}: {len(shared)} accepted finding key(s) of source rules; pins for {len(sections)} toolchain(s)")
    for section in sections:
        tools = ", ".join(f"{k} {v}" for k, v in sorted(section.versions.items())) or "none recorded"
        print(f"  {tools}: {len(section.kernels)} pinned kernel variant(s), {len(section.findings)} accepted "
              f"finding key(s)")
    return 0
