"""SARIF 2.1.0 for GitHub code scanning (`--format sarif`).

One run, tool `kgate`, every registered rule as a reportingDescriptor (its
summary, the "What it does" section and the documentation as help, each cut
to the 1024 characters code scanning keeps). Results are the active findings
only: GitHub ignores SARIF suppressions, so suppressed and baselined findings
are left out instead of marked. Locations are repo-relative URIs under
`%SRCROOT%`; compiled findings point at the kernel's definition line. A
finding's other places are `relatedLocations`: a line of a project file, or
a line of the kernel's PTX (a logical location, the kernel, with the line in
the message and in the `ptxLine` property).

`partialFingerprints.primaryLocationLineHash` is a hash of the rule, the path
and the finding's identity (kernel, variant and target, or the enclosing
scope and snippet for source findings), never of the line: moving code does
not turn one alert into a closed one and a new one. Duplicates of one
identity are numbered (`hash:1`, `hash:2`), as GitHub's own fingerprints are.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from typing import Any

import kgate
from kgate import rules as registry  # type: ignore[attr-defined]
from kgate.core.findings import Finding, Related, Severity, sort_findings
from kgate.core.result import Result
from kgate.core.rule import Rule
from kgate.report import differences
from kgate.report.escape import as_bytes, json_text, uri

SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
# Code scanning's limits: results per run, characters per description.
MAX_RESULTS = 25_000
MAX_TEXT = 1024
LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.NOTE: "note"}


def clip(text: str, limit: int = MAX_TEXT, more: str = "") -> str:
    """`text` cut at a word boundary to at most `limit` characters, ending in `more` when cut."""
    text = text.strip()
    if len(text) <= limit:
        return text
    tail = f"... {more}".rstrip()
    cut = text[: limit - len(tail)]
    if " " in cut:
        cut = cut.rsplit(" ", 1)[0]
    return cut.rstrip() + tail


def doc_section(doc: str, heading: str) -> str:
    """The text of one `## heading` section of a rule's documentation, joined into paragraphs."""
    match = re.search(rf"^## {re.escape(heading)}\s*$(.*?)(?=^## |\Z)", doc, re.MULTILINE | re.DOTALL)
    if not match:
        return ""
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", match.group(1).strip())]
    return "\n\n".join(p for p in paragraphs if p)


def rule_descriptor(rule: Rule) -> dict[str, Any]:
    more = f"(kgate explain {rule.code})"
    what = doc_section(rule.doc, "What it does") or rule.summary
    why = doc_section(rule.doc, "Why is this bad?")
    fix = doc_section(rule.doc, "Use instead")
    help_text = "\n\n".join(p for p in (what, why and f"Why: {why}", fix and f"Instead: {fix}") if p)
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": clip(rule.summary, more=more)},
        "fullDescription": {"text": clip(what, more=more)},
        "help": {"text": clip(help_text, more=more), "markdown": rule.doc.strip() or rule.summary},
        "defaultConfiguration": {"level": LEVELS[rule.severity]},
        "properties": {"tags": ["kgate", rule.layer]},
    }


def fingerprint(finding: Finding) -> str:
    """A stable hash of what the finding is about: rule, path, identity (never the line)."""
    subject = finding.identity or finding.message
    return hashlib.sha256(as_bytes(f"{finding.code}\0{finding.path}\0{subject}")).hexdigest()[:32]


def subject(finding: Finding) -> str:
    if finding.kernel and finding.target:
        variant = f" {finding.variant}" if finding.variant else ""
        return f" [{finding.kernel}{variant} @ {finding.target}]"
    if finding.kernel:
        return f" [{finding.kernel}]"
    return ""


def region(finding: Finding) -> dict[str, int]:
    out = {"startLine": max(finding.line, 1)}
    if finding.col > 0:
        out["startColumn"] = finding.col
    if finding.end_line and finding.end_line >= out["startLine"]:
        out["endLine"] = finding.end_line
    if finding.end_col and finding.end_col > 0:
        out["endColumn"] = finding.end_col
    return out


def related_location(place: Related, number: int, finding: Finding) -> dict[str, Any]:
    """One of a finding's other places: a region of a project file, or a line of the kernel's PTX (not a file
    of the project: named by the kernel as a logical location, the line in the message and `ptxLine`)."""
    if place.path:
        return {"id": number, "message": {"text": place.message}, "physicalLocation": {
            "artifactLocation": {"uri": uri(place.path), "uriBaseId": "%SRCROOT%"},
            "region": {"startLine": max(place.line, 1)}}}
    out: dict[str, Any] = {"id": number, "message": {"text": f"{place.place}: {place.message}"},
                           "properties": {"ptxLine": place.ptx_line}}
    if finding.kernel:
        out["logicalLocations"] = [{"fullyQualifiedName": finding.kernel, "kind": "function"}]
    return out


def sarif_result(finding: Finding, rule_index: int, occurrence: int, standing: tuple[Any, ...] = (),
                 captured: tuple[str, ...] = ()) -> dict[str, Any]:
    """One finding as a SARIF result; `captured`: the capture environments its kernel variant's row came from."""
    properties: dict[str, Any] = {"severity": finding.severity.value, "name": finding.name}
    for key in ("kernel", "variant", "target"):
        value = getattr(finding, key)
        if value:
            properties[key] = value
    if captured:
        properties["captured"] = list(captured)
    if finding.folded:  # the rules of the findings it carries as their cause, each also a related location
        properties["folded"] = list(finding.folded)
    if standing:  # what the baseline comparison says of it, here and nowhere else in the log
        properties["ratchet"] = differences.standing_text(standing)
    out = {
        "ruleId": finding.code,
        "ruleIndex": rule_index,
        "level": LEVELS[finding.severity],
        "message": {"text": finding.message + subject(finding)},
        "locations": [{
            "physicalLocation": {
                "artifactLocation": {"uri": uri(finding.path), "uriBaseId": "%SRCROOT%"},
                "region": region(finding),
            },
        }],
        "partialFingerprints": {"primaryLocationLineHash": f"{fingerprint(finding)}:{occurrence}"},
        "properties": properties,
    }
    if finding.related:
        out["relatedLocations"] = [related_location(place, n, finding) for n, place in enumerate(finding.related, 1)]
    if standing:
        out["baselineState"] = "new" if any(d.kind == "NEW" for d in standing) else "updated"
    return out


def notifications(result: Result, dropped: int) -> list[dict[str, Any]]:
    out = []
    if dropped:
        out.append({"level": "warning", "message": {
            "text": f"{dropped} finding(s) left out: code scanning keeps at most {MAX_RESULTS} results per run"}})
    # Baseline differences that no finding says fail the run without being findings: code scanning shows them as
    # notifications (those a finding says are its `baselineState`).
    for diff in result.ratchet:
        out.append({"level": "error" if getattr(diff, "fails", False) else "note",
                    "message": {"text": f"baseline: {differences.describe(diff)}"}})
    for notice in result.notices:
        out.append({"level": "note", "message": {"text": notice}})
    return out


def to_dict(result: Result) -> dict[str, Any]:
    rules = [registry.load(code) for code in sorted(registry.codes())]
    index = {rule.code: n for n, rule in enumerate(rules)}
    # Errors first, so that truncation drops notes before errors.
    findings = sorted(sort_findings(list(result.findings)), key=lambda f: f.severity.rank)
    kept, dropped = findings[:MAX_RESULTS], max(0, len(findings) - MAX_RESULTS)
    seen: Counter[str] = Counter()
    results = []
    captured = {k.key: k.captured for k in result.kernels}
    for finding in sort_findings(kept):
        seen[fingerprint(finding)] += 1
        row = (finding.kernel or "", finding.variant or "", finding.target or "")
        results.append(sarif_result(finding, index[finding.code], seen[fingerprint(finding)],
                                    result.standing_of(finding), captured.get(row, ())))
    return {
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "kgate",
                "version": kgate.__version__,
                "semanticVersion": kgate.__version__,
                "rules": [rule_descriptor(rule) for rule in rules],
            }},
            "automationDetails": {"id": f"kgate/{result.command}/"},
            "columnKind": "unicodeCodePoints",
            "invocations": [{
                "executionSuccessful": True,
                "toolExecutionNotifications": notifications(result, dropped),
            }],
            "results": results,
            # What was left out on purpose, so that a reader can tell a clean run from a quiet one.
            "properties": {"baselined": result.baselined, "suppressed": result.suppressed},
        }],
    }


def render(result: Result, config: object = None) -> str:
    return json_text(to_dict(result)) + "\n"
