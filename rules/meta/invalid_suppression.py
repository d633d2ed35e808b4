"""## What it does
Reports a `# kgate: ignore` comment without a reason, without codes, or
naming a code that does not exist. The well-formed codes of a comment
without a reason still silence their findings; this error makes the run
fail until the reason is written. A comment whose reason is still the
placeholder `kgate lint --add-ignore` writes (`TODO: give the reason`)
counts as one without a reason.

Also reports a `kgate: ignore-file` written after code on its line (in
every language kgate reads directives from). A file directive stands on a
line of its own; after code it silences nothing, not even its own line
(as ruff ignores `# ruff: noqa` after code), and is not judged unused.

Also reports text at the start of a comment that is meant as a directive
but is not read as one (`# KGATE: ignore[KG201] ...`, `// kgate
ignore[KG302] ...`, `# kgate: ignore_file[KG203] ...`): it silences
nothing, and without this report nobody would learn why.

## Why is this bad?
A suppression without a reason cannot be reviewed: six months later
nobody knows whether the register spill was measured and accepted or just
in the way of a merge. A misspelled code silences nothing while looking as
if it did.

## Example
```python
@triton.autotune(configs=CONFIGS, key=["M"])  # kgate: ignore[KG201]
@triton.autotune(configs=CONFIGS, key=["M"])  # kgate: ignore[runtime-autotune] M is bucketed
```

A file directive after code:

```python
os.environ["TRITON_INTERPRET"] = "1"  # kgate: ignore-file[KG203] the CPU job needs it
```

## Use instead
Name each code and say why, after the codes:

```python
@triton.autotune(configs=CONFIGS, key=["M"])  # kgate: ignore[KG201] M is rounded to a power of two by the caller
```

and write a file directive on a line of its own, or a line directive where
only that line is meant:

```python
# kgate: ignore-file[KG203] the CPU job needs the interpreter in every test here
```

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
    from kgate.core.suppress import Directive


def check(subject: tuple[Directive, dict[str, str]], _ctx: object) -> Iterable[Report]:
    """subject: the directive, and rule name -> code of the registry (for hints)."""
    directive, names = subject
    problems = [directive.problem] if directive.problem else []
    codes = set(names.values())
    for code in directive.codes:
        if code in codes:
            continue
        if code in names:
            hint = f" (write the code: {names[code]})"
        elif code.upper() in codes:
            hint = f" (codes are upper case: {code.upper()})"
        else:
            hint = " (see `kgate rules`)"
        problems.append(f"unknown code {code!r}{hint}")
    if problems:
        yield Report("; ".join(problems), line=directive.line, col=directive.col)


RULE = Rule(
    code="KG003",
    name="invalid-suppression",
    layer="meta",
    severity=Severity.ERROR,
    summary="A kgate: ignore comment without a reason, naming an unknown code, or not read as a directive",
    check=check,
    doc=__doc__ or "",
    reads=frozenset({Artifact.SOURCE}),
)
