"""## What it does
Reports captured specialisations (in `kgate-capture.toml`) that no longer fit
their kernel: a parameter was added, removed or renamed, a parameter became or
stopped being `tl.constexpr`, or the kernel (or its module) is gone. One
finding per kernel and reason, on the first such entry of the capture file.

## Why is this bad?
A capture records what the launcher compiled for the kernel as it was. After
the kernel's parameters change, that record describes code that can no longer
run: compiling it anyway would gate something nobody launches, and dropping it
silently would let the kernel's real launches go ungated. So these entries are
neither compiled nor dropped; they are reported until the capture is renewed.

## Example
`scale(x, n, BLOCK)` captured, then renamed to `scale(x, n_elements, BLOCK)`:
`1 captured specialisation(s) of pkg.ops:scale no longer fit the kernel: the
kernel has no parameter n any more`.

## Use instead
Capture again with the command that launches the kernel, replacing the old
entries of the kernels it sees: `kgate capture --replace -- pytest tests/`.

## Options
None.
"""

from __future__ import annotations

from collections.abc import Iterable

from kgate.core.artifacts import Artifact
from kgate.core.findings import Severity
from kgate.core.rule import Report, Rule


def check(message: str, _ctx: object) -> Iterable[Report]:
    yield Report(message)


RULE = Rule(
    code="KG005",
    name="stale-capture",
    layer="meta",
    severity=Severity.ERROR,
    summary="Captured specialisations that no longer fit their kernel",
    check=check,
    doc=__doc__ or "",
    reads=frozenset({Artifact.CAPTURE}),
)
