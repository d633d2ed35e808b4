"""GitHub Actions workflow commands (`--format github`): one annotation per finding.

    ::error file=PATH,line=L,endLine=L2,col=C,endColumn=C2,title=TITLE::MESSAGE

Errors are `::error`, warnings `::warning`, notes `::notice`. A finding's
other places (the access a PDL finding is about, beside its kernel) follow
its message, a line each, as `path:line: what` or `PTX line N: what`. The message
escapes `%`, CR and LF; property values also escape `:` and `,` (GitHub's
own toolkit does the same); other control characters are written as escapes
(`kgate.report.escape`). GitHub shows at most 10 annotations of each kind
per step and drops the rest without a word, so the output starts with a
`::notice` that gives the totals and says how many were not shown, and ends
with the plain summary line for the log.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from kgate.core.findings import Finding, Severity, sort_findings
from kgate.core.result import Result
from kgate.report import differences
from kgate.report.escape import workflow_data, workflow_property
from kgate.report.sarif_report import subject
from kgate.report.terminal import summary_line

COMMANDS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.NOTE: "notice"}
# Annotations of one kind GitHub shows per step.
SHOWN_PER_KIND = 10


def command(kind: str, message: str, **properties: object) -> str:
    props = ",".join(f"{key}={workflow_property(str(value))}" for key, value in properties.items()
                     if value is not None)
    return f"::{kind} {props}::{workflow_data(message)}" if props else f"::{kind}::{workflow_data(message)}"


def annotation_text(finding: Finding) -> str:
    """The annotation's message: the finding's, then one line for each of its other places (an annotation has
    one place, and a second annotation would take one of the few GitHub shows)."""
    return finding.message + subject(finding) + "".join(f"\n{place.place}: {place.message}"
                                                         for place in finding.related)


def annotation(finding: Finding, standing: tuple[Any, ...] = ()) -> str:
    """The finding's annotation; what the baseline comparison says of it (`new`, `worse than baseline: ...`) in its
    title, as the terminal line has it, and in no annotation of its own."""
    end_line = finding.end_line if finding.end_line and finding.end_line >= finding.line else None
    said = differences.standing_text(standing)
    return command(
        COMMANDS[finding.severity],
        annotation_text(finding),
        file=finding.path,
        line=max(finding.line, 1),
        endLine=end_line,
        col=finding.col or None,
        endColumn=finding.end_col or None,
        title=f"{finding.code} {finding.name}" + (f" ({said})" if said else ""),
    )


def difference_annotation(diff: Any, result: Result) -> str:
    """A baseline difference no finding says: an error when it fails the run, else a notice; at the kernel when
    known."""
    where = differences.location(diff, result.kernels)
    return command("error" if diff.fails else "notice", f"{diff.subject}: {diff.detail}",
                   file=where[0] if where else None, line=where[1] if where else None,
                   title=f"kgate baseline {diff.kind}")


def severities(result: Result) -> Counter[Severity]:
    """Annotations per kind: findings, and the baseline differences no finding says (errors when they fail, else
    notices)."""
    counts = Counter(f.severity for f in result.findings)
    counts.update(Severity.ERROR if getattr(d, "fails", False) else Severity.NOTE for d in result.ratchet)
    return counts


def hidden_counts(result: Result) -> dict[Severity, int]:
    """Annotations per kind beyond what GitHub shows (the summary notice takes a notice slot)."""
    counts = severities(result)
    shown = {Severity.ERROR: SHOWN_PER_KIND, Severity.WARNING: SHOWN_PER_KIND, Severity.NOTE: SHOWN_PER_KIND - 1}
    return {s: max(0, counts.get(s, 0) - shown[s]) for s in COMMANDS}


def summary_notice(result: Result) -> str:
    counts = Counter(f.severity for f in result.findings)
    totals = ", ".join(f"{counts.get(s, 0)} {s.value}(s)" for s in COMMANDS)
    hidden = hidden_counts(result)
    text = f"kgate {result.command}: {totals}"
    if result.ratchet:
        failing = sum(1 for d in result.ratchet if getattr(d, "fails", False))
        text += f"; {len(result.ratchet)} baseline difference(s), {failing} failing"
    if any(hidden.values()):
        missing = ", ".join(f"{n} {s.value}(s)" for s, n in hidden.items() if n)
        text += (f"; {missing} not shown as annotations (GitHub shows {SHOWN_PER_KIND} per kind per step): "
                 f"every finding is in the step log")
    return command("notice", text, title="kgate summary")


def render(result: Result, config: object = None) -> str:
    findings = sorted(sort_findings(list(result.findings)), key=lambda f: f.severity.rank)
    lines = [summary_notice(result)]
    lines.extend(annotation(f, result.standing_of(f)) for f in findings)
    lines.extend(difference_annotation(d, result) for d in result.ratchet)
    lines.append(summary_line(result))
    return "\n".join(lines) + "\n"
