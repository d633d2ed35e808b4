"""Registrations of one launch merged into one variant to compile, whatever order they come in.

A kernel may be registered more than once (two `[[triton]]` tables, a table and a `kgate.register`) with the
same launch: the same bound arguments, constexprs and options, so the same specialisation and the same
variant name. Compiled twice, the two results shared a name and the one whose compile finished last was
gated, so a registration's `expect` was lost or kept depending on `-j`. Here every registration's request
is kept instead: the expectations of both, the audit shapes of both, the kind one of them names (two
different kinds for one launch are a mistake in the registrations, said as one).

Some launches are the same only once Triton's launcher has bound them, in the compile worker: a registration
and a capture of one specialisation, or two registrations whose example arguments specialise alike. Their
compiles share a name (kernel, specialisation, target), and are merged the same way into one row that names
every origin (`registered+captured`), whichever compile finished first.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from kgate.compile import expectations
from kgate.compile.payloads import Variant
from kgate.compile.units import Compiled

DEFAULT_KIND = "other"
# Where a launch comes from, in the order a row that has both names them.
ORIGINS = ("registered", "captured")


class Conflict(ValueError):
    """Two registrations of one launch ask for what cannot both hold (two kinds)."""


def launch_key(variant: Variant) -> str:
    """What is compiled for the variant (a Triton launch bound or captured, a CuTe DSL call), as text."""
    return json.dumps([variant["kernel"], variant["source"],
                       variant.get("bind", variant.get("spec", variant.get("call")))],
                      sort_keys=True)


def merged(variants: list[tuple[Variant, tuple[str, ...]]],
           targets: tuple[str, ...]) -> tuple[list[tuple[Variant, tuple[str, ...]]], list[str]]:
    """The variants with every launch once per target, its registrations' requests merged, each with the
    targets it is built for (in the run's order); and the conflicts found, one message each."""
    by_launch: dict[tuple[str, str], Variant] = {}
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
    grouped: dict[str, tuple[Variant, list[str]]] = {}
    for (_launch, target), variant in by_launch.items():
        grouped.setdefault(json.dumps(variant, sort_keys=True), (variant, []))[1].append(target)
    return [(variant, tuple(t for t in targets if t in built)) for variant, built in grouped.values()], conflicts


def merge_requests(one: Variant, other: Variant) -> Variant:
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


def one_per_launch(units: list[Compiled]) -> tuple[list[Compiled], list[tuple[str, str]]]:
    """The units sorted by (kernel, specialisation, target), those of one launch merged into one; and the conflicts
    found, (kernel, message) each. Of one launch's units, the one with the most artifacts (the SASS a request asked
    for) and then the smallest compile key is kept, with a context asking for what all of them ask."""
    by_launch: dict[tuple[str, str, str], list[Compiled]] = {}
    for unit in units:
        by_launch.setdefault((unit.context["kernel"], unit.context["variant"], unit.target), []).append(unit)
    kept: list[Compiled] = []
    conflicts: list[tuple[str, str]] = []
    for launch in sorted(by_launch):
        first, *others = sorted(by_launch[launch], key=lambda unit: (-len(unit.hashes), unit.key))
        context = first.context
        for other in others:
            try:
                context = merged_context(context, other.context)
            except Conflict as exc:
                if (launch[0], str(exc)) not in conflicts:
                    conflicts.append((launch[0], str(exc)))
        kept.append(first if context is first.context else replace(first, context=context))
    return kept, conflicts


def merged_context(one: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """One compiled launch's context asking for what both ask: every origin, the expectations and shapes of both,
    the kind that is named; Conflict where both name a different kind."""
    return {**one, "source": origins(one["source"], other["source"]),
            "expect": sorted(set(one["expect"]) | set(other["expect"])),
            "shapes": _union(one["shapes"], other["shapes"]),
            "kind": merged_kind(one["kernel"], one["variant"], [one["kind"], other["kind"]])}


def origins(*sources: str) -> str:
    """The origins these sources name together, as a row names them: `registered`, `captured`,
    `registered+captured`."""
    named = {part for source in sources for part in source.split("+")}
    return "+".join(origin for origin in ORIGINS if origin in named)


def _union(one: list[dict[str, Any]], other: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen = {json.dumps(s, sort_keys=True): s for s in one}
    for shape in other:
        seen.setdefault(json.dumps(shape, sort_keys=True), shape)
    return [seen[k] for k in sorted(seen)]
