"""Every layer turns a rule's report into a finding the same way (kgate.core.rule.to_finding): the subject's
path and line where the report names none, the configured severity in place of the rule's and the report's,
except that an informational note stays a note."""

from __future__ import annotations

import pytest

from kgate import rules as registry
from kgate.core.findings import Severity
from kgate.core.rule import Report, severity_of, to_finding
from kgate.core.selection import Selection
from kgate.core.suppress import Directive, apply
from kgate.evaluate import compiled
from kgate.evaluate import source as engine
from kgate.facts.model import CompileFailure

ALL = frozenset(code for code, _name, _module in registry.REGISTRY)


@pytest.mark.parametrize(("reported", "configured", "expected"), [
    (None, None, Severity.WARNING),  # the rule's own (KG103 is a warning)
    (Severity.ERROR, None, Severity.ERROR),  # the report's, over the rule's
    (None, Severity.ERROR, Severity.ERROR),  # the configured one, over the rule's
    (Severity.WARNING, Severity.ERROR, Severity.ERROR),  # and over the report's
    (Severity.NOTE, Severity.ERROR, Severity.NOTE),  # but a note stays a note
])
def test_the_configured_severity_replaces_all_but_a_note(reported: Severity | None, configured: Severity | None,
                                                           expected: Severity) -> None:
    rule = registry.load("KG103")
    selection = Selection(ALL, {"KG103": configured} if configured else {})
    assert severity_of(rule, Report("m", severity=reported), selection) is expected


def test_a_report_names_its_own_place_or_takes_the_subjects() -> None:
    rule, selection = registry.load("KG103"), Selection(ALL)
    own = to_finding(rule, Report("m", line=7, col=3, end_line=8, end_col=2, path="b.py", value=5), selection,
                     path="a.py", line=1, identity="k|v|t", kernel="k", variant="", target="")
    assert (own.path, own.line, own.col, own.end_line, own.end_col, own.value) == ("b.py", 7, 3, 8, 2, 5)
    assert (own.kernel, own.variant, own.target, own.identity, own.name) == ("k", None, None, "k|v|t", "spill")
    subject = to_finding(rule, Report("m"), selection, path="a.py", line=4, identity="i")
    assert (subject.path, subject.line, subject.col, subject.end_line, subject.value) == ("a.py", 4, 0, None, None)


def test_source_findings_keep_a_note_and_take_the_configured_severity() -> None:
    raws = (engine.RawFinding(3, 5, 3, 9, "KG201", "note", "a note", "f|x", None),
            engine.RawFinding(4, 1, None, None, "KG201", "", "plain", "f|y", 12))
    results = {"k.py": engine.FileResult(raws, (), ("KG201",))}
    selection = Selection(ALL, {"KG201": Severity.WARNING})
    note, plain = engine.findings(results, selection)
    assert (note.severity, note.line, note.col, note.end_line, note.end_col) == (Severity.NOTE, 3, 5, 3, 9)
    assert (plain.severity, plain.identity, plain.value, plain.path) == (Severity.WARNING, "f|y", 12, "k.py")


def test_a_compile_failure_is_found_at_the_kernel_with_its_compiled_identity() -> None:
    failure = CompileFailure(kernel="ops:k", variant="", target="sm_120a", path="ops.py", line=9, message="boom")
    (finding,) = compiled.failure_findings(failure, Selection(ALL))
    assert (finding.code, finding.path, finding.line, finding.kernel, finding.variant, finding.target) == (
        "KG001", "ops.py", 9, "ops:k", None, "sm_120a")
    assert finding.identity == compiled.compiled_identity("ops:k", "", "sm_120a") and finding.severity is Severity.ERROR


def test_a_suppression_without_a_reason_is_found_on_its_line() -> None:
    directive = Directive(line=6, col=10, file_level=False, codes=("KG201",), reason="",
                          problem="`kgate: ignore[KG201]` gives no reason: write why after the codes")
    outcome = apply([], {"k.py": [directive]}, Selection(ALL), lambda path, line, code: False)
    (finding,) = outcome.findings
    assert (finding.code, finding.path, finding.line, finding.col, finding.severity) == (
        "KG003", "k.py", 6, 10, Severity.ERROR)
    assert finding.identity == "line|KG201|" and finding.kernel is None
