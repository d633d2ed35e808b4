"""The artifacts a run produces, planned once from the rules it selects (`kgate.core.artifacts`).

The rules stage knows the rules; the compile and facts stages before it carry out the plan made here and know
none of them: a rule that starts reading SASS says so in its own module (`Rule.reads`, `Rule.sass_when`), and the
run disassembles what the plan asks for.
"""

from __future__ import annotations

from collections.abc import Iterable

from kgate import rules as registry  # type: ignore[attr-defined]
from kgate.core.artifacts import Artifact, ArtifactPlan, Need
from kgate.core.selection import Selection


def artifact_plan(codes: Iterable[str], *, sass_every: bool = False, cubin_every: bool = False) -> ArtifactPlan:
    """What the rules `codes` read, each artifact once per condition; `sass_every`: every kernel's SASS as well
    (`--sass`, the audit); `cubin_every`: every kernel's cubin as it was written (`kgate diff`, which compares the
    machine code of the cubins)."""
    needs: list[Need] = []
    for code in sorted(set(codes)):
        rule = registry.load(code)
        for artifact in sorted(rule.reads, key=lambda a: a.value):
            needs.append(Need(artifact, rule.sass_when if artifact is Artifact.SASS else None))
    if sass_every:
        needs.append(Need(Artifact.SASS))
    if cubin_every:
        needs.append(Need(Artifact.CUBIN))
    return ArtifactPlan(tuple(dict.fromkeys(needs)))


def selection_plan(selection: Selection, *, sass_every: bool = False) -> ArtifactPlan:
    """The plan of the rules a selection runs."""
    return artifact_plan((code for code, _name, _module in registry.REGISTRY if selection.active(code)),
                         sass_every=sass_every)
