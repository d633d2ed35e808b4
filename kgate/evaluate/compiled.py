"""Rules stage: facts in, findings out. Pure: no compiling, no printing, no file reading."""

from __future__ import annotations

from dataclasses import replace

from kgate import rules as registry  # type: ignore[attr-defined]
from kgate.core.findings import Finding, sort_findings
from kgate.core.rule import CaptureContext, CompiledContext, to_finding
from kgate.core.selection import Selection, rule_options
from kgate.evaluate import configs
from kgate.facts.model import CompileFailure, KernelFacts
from kgate.facts.run import CompileRun
from kgate.hardware.profiles import primary


def compiled_identity(kernel: str, variant: str, target: str, extra: str = "") -> str:
    ident = f"{kernel}|{variant}|{target}"
    return f"{ident}|{extra}" if extra else ident


def kernel_findings(facts: KernelFacts, selection: Selection) -> list[Finding]:
    out = []
    ctx_profile = primary(facts.target)
    for code in registry.codes("compiled"):
        if not selection.active(code):
            continue
        rule = registry.load(code)
        ctx = CompiledContext(options=rule_options(selection, code), profile=ctx_profile)
        for report in rule.check(facts, ctx):
            out.append(to_finding(rule, report, selection, path=facts.path, line=facts.line,
                                  identity=compiled_identity(facts.kernel, facts.variant, facts.target,
                                                             report.discriminator),
                                  kernel=facts.kernel, variant=facts.variant, target=facts.target))
    return out


# The rule each kind of compile failure (`kgate.compile.units.CompileFailure.kind`) is reported under.
FAILURE_RULES = {"compile": "KG001", "stale": "KG005"}


def failure_findings(failure: CompileFailure, selection: Selection) -> list[Finding]:
    rule = registry.load(FAILURE_RULES[failure.kind])
    if not selection.active(rule.code):
        return []
    return [replace(to_finding(rule, report, selection, path=failure.path, line=failure.line,
                               identity=compiled_identity(failure.kernel, failure.variant, failure.target,
                                                          report.discriminator),
                               kernel=failure.kernel, variant=failure.variant, target=failure.target),
                    related=report.related + failure.related)
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
                out.append(to_finding(rule, report, selection, path=path, line=line,
                                      identity=f"{kernel.kernel}|{report.discriminator}", kernel=kernel.kernel))
    return out


def compiled(run: CompileRun, selection: Selection) -> list[Finding]:
    findings: list[Finding] = []
    for facts in run.facts:
        findings.extend(kernel_findings(facts, selection))
    # Where severities are settled: a finding in some configs of an autotuned launch, after every rule ran.
    findings = configs.judged(findings, run.facts, run.autotuned, strict=selection.strict_configs)
    for failure in run.failures:
        findings.extend(failure_findings(failure, selection))
    findings.extend(capture_findings(run, selection))
    return sort_findings([f for f in findings if selection.keep(f)])
