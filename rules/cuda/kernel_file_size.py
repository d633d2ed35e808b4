"""## What it does
Flags a kernel source file (`.cu` with a `__global__` function) longer than
600 code lines that holds independent parts: kernels that share no code of
the file. Comments and blank lines are not counted, so documenting a kernel
never pushes it over. The limit is the option `max_lines`; a file pinned in
the baseline may grow by the configuration's `size-slack` lines before it
fails again.

Kernels are one part when a function or a macro of the file names both (a
launcher or a dispatcher that picks between them, a macro that launches
them) or when they reach a common helper of the file (device functions, one
templated launcher); a helper of five lines or fewer that calls nothing of
the file (a load intrinsic, a conversion) joins nothing, nor does a macro
whose text names no function. A
long file that is one operation (one kernel with its launcher and
instantiations, or variants sharing their helpers and launcher) is not
reported: splitting it would only move the shared code into a header.

The rule is opt-in: it runs only when a configuration or the command line
names it (`extend-select = ["KG303"]`, `--extend-select kernel-file-size`,
or `select` naming it, its prefix or `ALL`). How long a file may grow is a
team's choice: on serving engines kgate was not tuned on, every file it
reported was judged one a reviewer would leave as it is, and a default that
reports them on every run buries the findings that matter. Pins of a rule
that does not run are kept in the baseline as they are.

## Why is this bad?
A kernel file that keeps growing ends up holding operations that have
nothing to do with each other, each with its kernels, launcher and
instantiations: an edit to one recompiles all of them, reviews cannot see
which operation changed, and two people touching different operations
collide in one file. The split costs nothing, since the parts share no
code.

## Example
A 900-line `cache_kernels.cu` with a block-copy kernel, a reshape-and-cache
kernel and an fp8 conversion kernel, each with its own entry point and
none calling the others' helpers.

## Use instead
One file per operation, each with its launcher and explicit
instantiations: `copy_blocks.cu`, `reshape_and_cache.cu`,
`convert_fp8.cu`.

## Options
- `max_lines` (integer, default 600): code lines allowed in one file.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kgate.collect.cpp_text import blanked
from kgate.collect.cuda_parts import parts
from kgate.core.artifacts import Artifact
from kgate.core.findings import Severity
from kgate.core.rule import Option, Report, Rule, SourceContext

_NAMED = 4  # parts named in a finding's message


def code_lines(code: str) -> int:
    """Lines with code on them in blanked text (comments gone; string contents stay code)."""
    return sum(1 for line in code.split("\n") if line.strip())


def check(source: Any, ctx: SourceContext) -> Iterable[Report]:
    limit = ctx.options["max_lines"]
    code = blanked(source).code
    count = code_lines(code)
    if count <= limit:
        return
    found = parts(code)
    if len(found) < 2:
        return  # one operation's kernels, helpers and launcher: the length is that operation's
    named = ", ".join(f"`{kernels[0]}`" + (f" (+{len(kernels) - 1})" if len(kernels) > 1 else "")
                      for kernels in found[:_NAMED])
    more = f" and {len(found) - _NAMED} more" if len(found) > _NAMED else ""
    yield Report(f"{count} code lines, over the limit of {limit} (comments and blank lines not counted), holding "
                 f"{len(found)} parts that share no code: {named}{more}; move each part, with its launcher and "
                 f"instantiations, into a file of its own", line=1, value=count, discriminator="size")


RULE = Rule(
    code="KG303",
    name="kernel-file-size",
    layer="cuda",
    severity=Severity.ERROR,
    summary="A kernel .cu file over 600 code lines",
    check=check,
    doc=__doc__ or "",
    options={"max_lines": Option(600, "code lines allowed in one kernel file", int, minimum=1)},
    files=("*.cu",),
    prefilter=(b"__global__",),
    opt_in=True,
    reads=frozenset({Artifact.SOURCE}),
)
