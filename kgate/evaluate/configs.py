"""The severity of a compiled finding in the configs of an autotuned launch, judged as the configs ship.

An autotuner compiles each of its configs for a launch, times them on the GPU and runs the fastest. kgate compiles
and gates every config (offline a capture binds them all, a registration expands into them all), so a spill in one
config of 25 that the autotuner may never pick would block a push like a spill in the only tile a kernel has. Here,
after the rules ran and before anything else reads a finding's severity (the folding of findings of one cause,
`kgate.evaluate.causes`, takes the severities settled here), a compiled rule's finding in some but not all configs
of one launch becomes a warning that names the config, how many configs the launch has and how many
have the finding, and says to prune it. It keeps the rule's severity where every config of the launch has the
finding (at that severity or worse: whichever config the autotuner picks, it ships), where a GPU capture marked the
config `picked`, or where the project asks for `strict-configs`. The finding's identity, and so its baseline key,
does not change: only its severity and its message do.

A variant's config is the autotuner's config its constexprs and options match; its launch is its specialisation
on its target less what the configs and the kernel's heuristics set (`kgate.compile.autotune.Autotuned`). A
config "has the finding" where any variant of it in the launch has it, so two launches taken as one (told apart
only by a heuristic's value) can keep a finding an error, never make one a warning that one launch fails in every
config.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace

from kgate import rules as registry  # type: ignore[attr-defined]
from kgate.compile.autotune import Autotuned
from kgate.core.findings import Finding, Severity
from kgate.facts.model import KernelFacts

Row = tuple[str, str, str]  # (kernel, variant, target)


@dataclass(frozen=True)
class Place:
    """Where a variant sits among its kernel's autotune configs."""

    tuning: Autotuned
    launch: str
    config: int


def judged(findings: list[Finding], facts: list[KernelFacts], autotuned: list[Autotuned], *,
           strict: bool) -> list[Finding]:
    """The findings with those in some configs of an autotuned launch judged as the configs ship (see above)."""
    places = _places(facts, {a.kernel: a for a in autotuned})
    if not places:
        return findings
    configs: dict[str, set[int]] = defaultdict(set)  # launch -> its configs present in the run
    for where in places.values():
        configs[where.launch].add(where.config)
    worst: dict[tuple[str, str, int], int] = {}  # (launch, code, config) -> the most severe rank of that finding
    for f in findings:
        found = places.get(_row(f))
        if found is not None:
            key = (found.launch, f.code, found.config)
            worst[key] = min(worst.get(key, f.severity.rank), f.severity.rank)
    compiled = set(registry.codes("compiled"))
    out = []
    for f in findings:
        place = places.get(_row(f))
        if place is None or len(configs[place.launch]) < 2 or f.code not in compiled or f.severity is Severity.NOTE:
            out.append(f)
            continue
        having = sum(worst.get((place.launch, f.code, i), Severity.NOTE.rank + 1) <= f.severity.rank
                     for i in configs[place.launch])
        out.append(_verdict(f, place, len(configs[place.launch]), having, strict))
    return out


def _verdict(f: Finding, place: Place, count: int, having: int, strict: bool) -> Finding:
    """One finding in config `place.config` of a launch of `count` configs, `having` of which have it."""
    label = place.tuning.configs[place.config].label
    if having == count:
        return replace(f, message=f"{f.message}; every one of the {count} configs of this autotuned launch has it "
                                  f"(this one: {label})")
    which = "the only one with this finding" if having == 1 else f"{having} of which have this finding"
    said = f"autotune config {label} is one of the {count} configs of this autotuned launch, {which}"
    if (_row(f)[1], _row(f)[2]) in place.tuning.picked:
        return replace(f, message=f"{f.message}; {said}, and the one the autotuner picked on the GPU it was "
                                  f"captured on")
    if strict:
        return replace(f, message=f"{f.message}; {said} (strict-configs: every config is gated as if it ships)")
    return replace(f, severity=Severity.WARNING if f.severity is Severity.ERROR else f.severity,
                   message=f"{f.message}; {said}: prune it from the autotuner's configs (a warning while other "
                           f"configs pass, since the autotuner may never pick it; strict-configs makes it an error)")


def _places(facts: list[KernelFacts], tuning: dict[str, Autotuned]) -> dict[Row, Place]:
    """Each variant of an autotuned kernel that is one of its configs: its launch and its config."""
    out = {}
    for k in facts:
        tuned = tuning.get(k.kernel)
        config = tuned.config_of(k.constexprs, k.num_warps, k.num_stages) if tuned is not None else None
        if tuned is None or config is None:
            continue
        launch = tuned.launch_of(k.target, k.signature, k.specialization, k.constexprs, k.pdl)
        out[k.key] = Place(tuned, f"{k.kernel}|{launch}", config)
    return out


def _row(f: Finding) -> Row:
    return (f.kernel or "", f.variant or "", f.target or "")
