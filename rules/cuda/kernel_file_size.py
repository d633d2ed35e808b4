"""## What it does
Flags a kernel source file (`.cu` with a `__global__` function) longer than
600 code lines. Comments and blank lines are not counted, so documenting a
kernel never pushes it over. The limit is the option `max_lines`; a file
pinned in the baseline may grow by the configuration's `size-slack` lines
before it fails again.

The rule is opt-in: it runs only when a configuration or the command line
names it (`extend-select = ["KG303"]`, `--extend-select kernel-file-size`,
or `select` naming it, its prefix or `ALL`). How long a file may grow is a
team's choice: on serving engines kgate was not tuned on, every file it
reported was judged one a reviewer would leave as it is, and a default that
reports them on every run buries the findings that matter. Pins of a rule
that does not run are kept in the baseline as they are.

## Why is this bad?
A kernel file that keeps growing ends up holding the kernel, its variants,
the host launcher, the dispatch over dtypes and every explicit
instantiation: each edit recompiles all of it, reviews cannot see what
changed in the device code, and two people touching different kernels
collide in one file. The split is cheap while the file is young.

## Example
A 900-line `attention.cu` with three kernels, their launchers and the
template instantiations for four head dimensions.

## Use instead
One file per kernel (or family), with the launcher and the explicit
instantiations in files of their own: `attention_fwd.cu`,
`attention_launch.cu`, `attention_inst_hd128.cu`.

## Options
- `max_lines` (integer, default 600): code lines allowed in one file.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kgate.collect.cpp_text import blanked
from kgate.core.artifacts import Artifact
from kgate.core.findings import Severity
from kgate.core.rule import Option, Report, Rule, SourceContext


def code_lines(code: str) -> int:
    """Lines with code on them in blanked text (comments gone; string contents stay code)."""
    return sum(1 for line in code.split("\n") if line.strip())


def check(source: Any, ctx: SourceContext) -> Iterable[Report]:
    limit = ctx.options["max_lines"]
    count = code_lines(blanked(source).code)
    if count > limit:
        yield Report(f"{count} code lines, over the limit of {limit} (comments and blank lines not counted): "
                     f"split the kernel, its launcher and its instantiations into files of their own",
                     line=1, value=count, discriminator="size")


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
