"""`kgate explain CODE`: a rule's documentation (its module docstring), like `ruff rule CODE`."""

from __future__ import annotations

import argparse
import json
import sys

from kgate import rules as registry  # type: ignore[attr-defined]
from kgate.core.errors import ConfigError
from kgate.core.rule import Rule


def find_rule(token: str) -> Rule:
    """A rule by code (any case) or by name."""
    for code, name, _module in registry.REGISTRY:
        if token.upper() == code or token == name:
            return registry.load(code)
    from kgate.core.selection import unknown_rule_hint

    raise ConfigError(f"unknown rule {token!r}{unknown_rule_hint(token)}")


def render_text(rule: Rule) -> str:
    lines = [f"# {rule.code} {rule.name}", "", f"{rule.summary}.", "",
             f"Layer: {rule.layer}. Default severity: {rule.severity.value}.{rule.selection_note()}"]
    if rule.files:
        lines.append(f"Reads: {', '.join(rule.files)}.")
    lines += ["", rule.doc.strip()]
    if rule.options:
        lines += ["", "Defaults:"]
        lines += [f"  {name} = {json.dumps(opt.default)}" for name, opt in sorted(rule.options.items())]
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    rule = find_rule(args.code)
    if args.format == "json":
        sys.stdout.write(json.dumps(rule.record(), indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write(render_text(rule))
    return 0
