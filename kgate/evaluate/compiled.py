"""Rules stage: facts in, findings out. Pure: no compiling, no printing, no file reading."""

from __future__ import annotations

from dataclasses import replace

from kgate import rules as registry  # type: ignore[attr-defined]
from kgate.compile.engine import CompileRun
from kgate.core.findings import Finding, Severity, sort_findings
from kgate.core.rule import CaptureContext, CompiledContext, Report, Rule
from kgate.core.selection import Selection, rule_options
from kgate.facts.model import CompileFailure, KernelFacts
from kgate.hardware.profiles import primary


def compiled_identity(kernel: str, variant: str, target: str, extra: str = "") -> str:
    ident = f"{kernel}|{variant}|{target}"
    return f"{ident}|{extra}" if extra else ident


def _finding(rule: Rule, report: Report, selection: Selection, *, path: str, line: int, kernel: str,
             variant: str, target: str) -> Finding:
    # A configured severity replaces the rule's own, except for informational notes.
    configured = selection.severity.get(rule.code)
    if report.severity is Severity.NOTE:
        severity = Severity.NOTE
    elif configured is not None:
        severity = configured
    else:
        severity = report.severity or rule.severity
    return Finding(
        path=report.path or path,
        line=report.line or line,
        col=report.col or 0,
        code=rule.code,
        name=rule.name,
        severity=severity,
        message=report.message,
        kernel=kernel,
        variant=variant or None,
        target=target or None,
        identity=compiled_identity(kernel, variant, target, report.discriminator),
        end_line=report.end_line,
        end_col=report.end_col,
        value=report.value,
        related=report.related,
    )


def kernel_findings(facts: KernelFacts, selection: Selection) -> list[Finding]:
    out = []
    ctx_profile = primary(facts.target)
    for code in registry.codes("compiled"):
        if not selection.active(code):
            continue
        rule = registry.load(code)
        ctx = CompiledContext(options=rule_options(selection, code), profile=ctx_profile)
        for report in rule.check(facts, ctx):
            out.append(_finding(rule, report, selection, path=facts.path, line=facts.line, kernel=facts.kernel,
                                variant=facts.variant, target=facts.target))
    return out


def failure_findings(failure: CompileFailure, selection: Selection) -> list[Finding]:
    rule = registry.load(failure.rule)
    if not selection.active(rule.code):
        return []
    return [_finding(rule, report, selection, path=failure.path, line=failure.line, kernel=failure.kernel,
                     variant=failure.variant, target=failure.target)
            for report in rule.check(failure.message, None)]


def capture_findings(run: CompileRun, selection: Selection) -> list[Finding]:
    """The capture rules, once per kernel over all its captured specialisations."""
    out = []
    for code in registry.codes("capture"):
        if not selection.active(code):
            continue
        rule = registry.load(code)
        ctx = CaptureContext(options=rule_options(selection, code))
        for kernel in run.captured:
            path, line = run.locations.get(kernel.kernel, ("", 1))
            if not path:
                continue  # a kernel that cannot be loaded: its captures are reported as such
            for report in rule.check(kernel, ctx):
                finding = _finding(rule, report, selection, path=path, line=line, kernel=kernel.kernel, variant="",
                                   target="")
                out.append(replace(finding, identity=f"{kernel.kernel}|{report.discriminator}"))
    return out


def compiled(run: CompileRun, selection: Selection) -> list[Finding]:
    findings: list[Finding] = []
    for facts in run.facts:
        findings.extend(kernel_findings(facts, selection))
    for failure in run.failures:
        findings.extend(failure_findings(failure, selection))
    findings.extend(capture_findings(run, selection))
    return sort_findings([f for f in findings if selection.keep(f)])
