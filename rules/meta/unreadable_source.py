"""## What it does
Reports a source file that `kgate lint` needed to read and could not (or
a folder of the project it could not list: none of its files was checked): it
cannot be read (no permission, a symlink loop), is not valid UTF-8 (or the
encoding a Python file declares), is not valid Python (a syntax error, a
null byte, nesting too deep for Python's parser), or is a Python file over
4 MB (kgate does not parse generated files that large: Python's syntax tree
of one would take gigabytes). One finding per file, at the line of the
error; every other file is still checked.

kgate parses a file only when one of its rules needs to (the rules' byte
pre-filters found something to look at), and then only the definitions
that mention what the pre-filters found (a kernel's launcher or an autograd
wrapper is not parsed). A syntax error that no rule reads is therefore not
reported: kgate is not a syntax checker, and ruff's `E9` or the interpreter
itself already is one.

## Why is this bad?
The source rules cannot see into a file they cannot parse, so a file that
is broken would otherwise pass the gate silently, and so would every
kernel in it.

## Example
```python
@triton.autotune(configs=CONFIGS, key=["D"])
@triton.jit
def add(x, y, n BLOCK: tl.constexpr):   # missing comma
    ...
```

## Use instead
Fix the file. A file that is broken on purpose (a test input for a
parser) belongs in `exclude`, or carries
`# kgate: ignore-file[KG004] reason` where the file can still hold it.

## Options
None.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from kgate.core.artifacts import Artifact
from kgate.core.findings import Severity
from kgate.core.rule import Report, Rule

if TYPE_CHECKING:
    from kgate.collect.source import UnreadableSource


def check(error: UnreadableSource, _ctx: object) -> Iterable[Report]:
    """The lint engine hands over what stopped a rule from reading a file."""
    yield Report(error.message, line=error.line, col=error.col or None)


RULE = Rule(
    code="KG004",
    name="unreadable-source",
    layer="meta",
    severity=Severity.ERROR,
    summary="A source file that cannot be read, decoded or parsed",
    check=check,
    doc=__doc__ or "",
    reads=frozenset({Artifact.SOURCE}),
)
