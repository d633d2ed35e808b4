"""JUnit XML for CI dashboards (`--format junit`).

Ruff's mapping: one `testsuite` per file, one failing `testcase` per finding
named by its rule code (with the kernel variant or the line, so that two
findings of one rule in one file stay two rows), `classname` the path, the
full message in the `failure` body. For `kgate check` every kernel variant
and target without findings is a passing testcase in its file's suite; a run
without findings or kernels has one passing testcase. Built with
ElementTree; the same inputs give the same bytes.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import defaultdict
from typing import Any

from kgate.core.findings import Finding, sort_findings
from kgate.core.result import Result
from kgate.facts.model import KernelFacts
from kgate.report import differences
from kgate.report.escape import xml as xml_text


def case_name(finding: Finding) -> str:
    if finding.kernel:
        variant = f" {finding.variant}" if finding.variant else ""
        target = f" @ {finding.target}" if finding.target else ""
        return f"{finding.code} {finding.name}: {finding.kernel}{variant}{target}"
    col = f":{finding.col}" if finding.col else ""
    return f"{finding.code} {finding.name}: line {finding.line}{col}"


def failure_body(finding: Finding, standing: tuple[Any, ...] = ()) -> str:
    col = f":{finding.col}" if finding.col else ""
    lines = [f"{finding.path}:{finding.line}{col}: {finding.code} {finding.severity.value} {finding.name}",
             finding.message]
    if finding.kernel:
        lines.append(f"kernel {finding.kernel}" + (f", variant {finding.variant}" if finding.variant else "")
                     + (f", target {finding.target}" if finding.target else ""))
    if standing:
        lines.append(f"ratchet: {differences.standing_text(standing)}")
    lines.extend(f"{place.place}: {place.message}" for place in finding.related)
    return "\n".join(lines)


def _failing_case(suite: ET.Element, finding: Finding, standing: tuple[Any, ...]) -> None:
    """A finding's failing case; what the baseline comparison says of it is in its failure, not a case of the
    baseline suite."""
    case = ET.SubElement(suite, "testcase", name=xml_text(case_name(finding)), classname=xml_text(finding.path),
                         file=xml_text(finding.path), line=str(finding.line))
    said = differences.standing_text(standing)
    failure = ET.SubElement(case, "failure", message=xml_text(finding.message + (f" ({said})" if said else "")),
                            type=f"{finding.severity.value} {finding.code}")
    failure.text = xml_text(failure_body(finding, standing))


def _passing_case(suite: ET.Element, facts: KernelFacts) -> None:
    ET.SubElement(suite, "testcase", name=xml_text(f"{facts.kernel} {facts.variant} @ {facts.target}"),
                  classname=xml_text(facts.path), file=xml_text(facts.path), line=str(facts.line))


def _clean_variants(result: Result) -> dict[str, list[KernelFacts]]:
    flagged = {(f.kernel, f.variant, f.target) for f in result.findings if f.kernel}
    out: dict[str, list[KernelFacts]] = defaultdict(list)
    for facts in sorted(result.kernels, key=lambda k: k.key):
        if facts.key not in flagged:
            out[facts.path].append(facts)
    return out


def _baseline_suite(root: ET.Element, result: Result, name: str) -> tuple[int, int]:
    """A suite of the baseline differences no finding says: failing ones fail, accepted ones pass."""
    suite = ET.SubElement(root, "testsuite", name=xml_text(name))
    failures = 0
    for diff in result.ratchet:
        case = ET.SubElement(suite, "testcase", name=xml_text(f"{diff.kind} {diff.subject}"),
                             classname=xml_text(name))
        if getattr(diff, "fails", False):
            failure = ET.SubElement(case, "failure", message=xml_text(diff.detail), type=f"baseline {diff.kind}")
            failure.text = xml_text(differences.describe(diff))
            failures += 1
    tests = len(result.ratchet)
    for key, value in (("tests", tests), ("failures", failures), ("errors", 0), ("skipped", 0)):
        suite.set(key, str(value))
    return tests, failures


def to_element(result: Result, baseline_name: str = "baseline") -> ET.Element:
    by_file: dict[str, list[Finding]] = defaultdict(list)
    for finding in sort_findings(list(result.findings)):
        by_file[finding.path].append(finding)
    clean = _clean_variants(result)
    root = ET.Element("testsuites", name=f"kgate {result.command}")
    total_tests = total_failures = 0
    for path in sorted(set(by_file) | set(clean)):
        suite = ET.SubElement(root, "testsuite", name=xml_text(path))
        for finding in by_file.get(path, []):
            _failing_case(suite, finding, result.standing_of(finding))
        for facts in clean.get(path, []):
            _passing_case(suite, facts)
        tests, failures = len(by_file.get(path, [])) + len(clean.get(path, [])), len(by_file.get(path, []))
        suite.set("tests", str(tests))
        suite.set("failures", str(failures))
        suite.set("errors", "0")
        suite.set("skipped", "0")
        total_tests += tests
        total_failures += failures
    if result.ratchet:
        tests, failures = _baseline_suite(root, result, baseline_name)
        total_tests += tests
        total_failures += failures
    if total_tests == 0:
        suite = ET.SubElement(root, "testsuite", name="kgate", tests="1", failures="0", errors="0", skipped="0")
        ET.SubElement(suite, "testcase", name="no findings", classname="kgate")
        total_tests = 1
    root.set("tests", str(total_tests))
    root.set("failures", str(total_failures))
    root.set("errors", "0")
    return root


def render(result: Result, config: object = None) -> str:
    root = to_element(result, str(getattr(config, "baseline", None) or "baseline"))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=False).join(
        ('<?xml version="1.0" encoding="UTF-8"?>\n', "\n"))
