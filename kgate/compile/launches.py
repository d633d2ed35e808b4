"""Registrations of one launch merged into one variant to compile, whatever order they come in.

A kernel may be registered more than once (two `[[triton]]` tables, a table and a `kgate.register`) with the
same launch: the same bound arguments, constexprs and options, so the same specialisation and the same
variant name. Compiled twice, the two results shared a name and the one whose compile finished last was
gated, so a registration's `expect` was lost or kept depending on `-j`. Here every registration's request
is kept instead: the expectations of both, the audit shapes of both, the kind one of them names (two
different kinds for one launch are a mistake in the registrations, said as one).
"""

from __future__ import annotations

import json
from typing import Any

from kgate.compile import expectations

DEFAULT_KIND = "other"


class Conflict(ValueError):
    """Two registrations of one launch ask for what cannot both hold (two kinds)."""


def launch_key(variant: dict[str, Any]) -> str:
    """What Triton compiles for the variant (its bound launch, or a captured specialisation), as text."""
    return json.dumps([variant["kernel"], variant["source"], variant.get("bind", variant.get("spec"))],
                      sort_keys=True)


def merged(variants: list[tuple[dict[str, Any], tuple[str, ...]]],
           targets: tuple[str, ...]) -> tuple[list[tuple[dict[str, Any], tuple[str, ...]]], list[str]]:
    """The variants with every launch once per target, its registrations' requests merged, each with the
    targets it is built for (in the run's order); and the conflicts found, one message each."""
    by_launch: dict[tuple[str, str], dict[str, Any]] = {}
    conflicts: list[str] = []
    for variant, built_for in variants:
        for target in built_for:
            key = (launch_key(variant), target)
            before = by_launch.get(key)
            if before is None:
                by_launch[key] = variant
                continue
            try:
                by_launch[key] = merge_requests(before, variant)
            except Conflict as exc:
                if str(exc) not in conflicts:
                    conflicts.append(str(exc))
    grouped: dict[str, tuple[dict[str, Any], list[str]]] = {}
    for (_launch, target), variant in by_launch.items():
        grouped.setdefault(json.dumps(variant, sort_keys=True), (variant, []))[1].append(target)
    return [(variant, tuple(t for t in targets if t in built)) for variant, built in grouped.values()], conflicts


def merge_requests(one: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """One launch's variant asking for what both registrations ask: expectations and shapes of both, the kind
    that is named (not the default); Conflict where both name a different kind."""
    return {**one, **expectations.merged(one, other),
            "shapes": _union(one["shapes"], other["shapes"]), "kind": merged_kind(one["kernel"], one["name"],
                                                                                  [one["kind"], other["kind"]])}


def merged_kind(kernel: str, name: str, kinds: list[str]) -> str:
    named = sorted({kind for kind in kinds if kind != DEFAULT_KIND})
    if len(named) > 1:
        raise Conflict(f"{kernel} [{name}]: registered as {' and as '.join(named)}: one launch has one kind "
                       f"(give the same `kind` in every registration of it)")
    return named[0] if named else DEFAULT_KIND


def _union(one: list[dict[str, Any]], other: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen = {json.dumps(s, sort_keys=True): s for s in one}
    for shape in other:
        seen.setdefault(json.dumps(shape, sort_keys=True), shape)
    return [seen[k] for k in sorted(seen)]
