"""## What it does
Reports a `# kgate: ignore[CODE] reason` (or `ignore-file[CODE]`) comment
that silenced nothing: the rule ran on that line (or file) and did not
report there.

## Why is this bad?
A stale suppression is a hole waiting for the next bug: the kernel was
fixed or moved, the comment stayed, and when the problem comes back on
that line nobody hears about it. Reporting unused suppressions keeps every
silenced finding a decision someone made about code that still exists.

## Example
```python
@triton.autotune(configs=CONFIGS, key=["D"])  # kgate: ignore[KG201] n_tokens is bucketed by the caller
```
(the key no longer names a run-time shape, so the comment silences nothing)

## Use instead
Delete the comment. A suppression is only judged where its rule really
ran: codes that were not selected, are ignored for the file, belong to the
other command (`kgate check` codes under `kgate lint` and the reverse), or
point at kernels outside a partial `kgate check --kernel/--target/--shard`
are never reported as unused.

The comment rules' own codes are judged too, by `kgate lint`, which reads
every directive of every file it lints: `ignore[KG002]` or `ignore[KG003]`
where no unused or invalid code of a comment was reported is unused (it
would silence the next stale or broken comment on its line). Such a finding
is never silenced by the comment it is about; another comment naming KG002
(an `ignore-file[KG002]`) may silence it.

## Fix
Safe: `kgate lint --fix` removes the unused code from the comment, or the
whole `kgate: ignore` comment when it named nothing else (another comment
on the same line, a linter's or a type checker's, stays). The file must
then read the same outside its comments, as its language reads them: text
that looks like a directive inside a C++ raw string or a CMake bracket
argument is no directive, and is never removed.

## Options
None.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from kgate.core.artifacts import Artifact
from kgate.core.findings import Severity
from kgate.core.fix import Applicability, Edit, Fix
from kgate.core.rule import Report, Rule

if TYPE_CHECKING:
    from kgate.core.suppress import Directive


def check(subject: tuple[Directive, str], _ctx: object) -> Iterable[Report]:
    directive, code = subject
    form = "ignore-file" if directive.file_level else "ignore"
    where = "in this file" if directive.file_level else "on this line"
    alone = len(directive.codes) == 1
    fix = Fix(f"remove the unused `kgate: {form}` comment" if alone else f"remove {code} from the `kgate: {form}` "
              f"comment", Applicability.SAFE,
              (Edit(directive.line, directive.col - 1, directive.line, directive.col - 1, code, "drop-suppression"),))
    yield Report(f"unused `kgate: {form}[{code}]`: nothing reports {code} {where}", line=directive.line,
                 col=directive.col, discriminator=code, fix=fix)


RULE = Rule(
    code="KG002",
    name="unused-suppression",
    layer="meta",
    severity=Severity.WARNING,
    summary="A kgate: ignore comment that silences nothing",
    check=check,
    doc=__doc__ or "",
    reads=frozenset({Artifact.SOURCE}),
    fixes=True,
)
