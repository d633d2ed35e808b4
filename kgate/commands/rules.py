"""`kgate rules`: every rule of the registry, one line each (or JSON records with their documentation)."""

from __future__ import annotations

import argparse
import json
import sys

from kgate import rules as registry  # type: ignore[attr-defined]


def run(args: argparse.Namespace) -> int:
    rules = registry.all_rules()
    if args.format == "json":
        sys.stdout.write(json.dumps([r.record() for r in rules], indent=2, sort_keys=True) + "\n")
        return 0
    rows = [("code", "name", "layer", "severity", "summary")]
    rows += [(r.code, r.name, r.layer, r.severity.value + (" (opt-in)" if r.opt_in else ""), r.summary) for r in rules]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        sys.stdout.write("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[4] + "\n")
    sys.stdout.write(f"\n{len(rules)} rules; `kgate explain CODE` prints one rule's documentation. An opt-in rule "
                     f"runs only when selected (`extend-select`).\n")
    return 0
