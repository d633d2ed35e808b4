"""## What it does
Reports a registered kernel variant that did not compile for a target, with
the compiler's own message (Triton's front end, ptxas, nvcc or NVRTC).

## Why is this bad?
A kernel that does not build for the target cannot be gated at all: none of
its registers, spills, shared memory or instructions can be checked. The
other kernels are still compiled and checked. So the baseline never accepts
this finding (not even `kgate baseline update --accept-new`), and the
kernel's pins are kept as they are while it fails: a timeout or a full disk
says nothing about its numbers.

## Example
A `tl.dot` whose tile is smaller than the MMA instruction's minimum, or a
signature in the registration that does not match the kernel's parameters:

```toml
[[tool.kgate.triton]]
kernel = "pkg.ops:add"
signature = { x = "*fp16" }   # the kernel also takes y and n
```

## Use instead
Fix the kernel or its registration so that it compiles; the message carries
the compiler's error and, for tool failures, a command line to reproduce it.
A kernel whose module raises as it is imported (itself, or a module of the
project it imports) is reported at the line that raised: the last frame of
the traceback in a file of the project, not one in the standard library or
an installed package; its registration or capture entry, and its definition
where it is known, are related places.
A kernel built for some targets only says so in its registration
(`targets = ["sm_90a"]`) and is not compiled for the others. This finding is
reported whatever `select`, `ignore` or `severity` say: a kernel that did not
compile was not gated at all. Only a suppression comment with a reason
silences it.

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
    code="KG001",
    name="compile-error",
    layer="meta",
    severity=Severity.ERROR,
    summary="A registered or captured kernel variant failed to compile",
    check=check,
    doc=__doc__ or "",
    reads=frozenset({Artifact.SOURCE}),
)
