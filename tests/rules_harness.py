"""One harness for every rule: fixtures/rules/<CODE>/ holds a rule's bad cases and good twins, each line stating
its findings inline (`# expect: CODE@target`, see conftest.expectations).

The folder of a compiled or capture rule, or of a finding that says a kernel was not compiled (KG001, KG005),
is judged as `kgate check` judges a project: the facts the real compiler gave for its kernels (its facts.json,
recorded by `python -m pytest tests/test_rules.py --record-facts`) go through kgate's own evaluation and
suppression code, in-process, without compiling; where the rule also reads source files (`Rule.source_check`,
the launch-site half of KG108), the folder is linted as well. Any other folder is linted in-process by the real
lint engine, as `kgate lint` lints a project. Each folder's `kgate.toml` selects the rules it is about.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from conftest import FIXTURES, expectations

from kgate.collect.specialization import Specialization
from kgate.core.config import Config, load_config
from kgate.core.findings import Finding
from kgate.core.rule import CapturedKernel
from kgate.core.selection import UNCOMPILED, Selection, build_selection
from kgate.facts.model import CompileFailure, KernelFacts, facts_schema
from kgate.facts.run import CompileRun
from kgate.ratchet.gate import public_toolchain

RULES = FIXTURES / "rules"
FACTS = "facts.json"
# Files whose comments state expectations (facts.json is the compiler's, not a case).
SUFFIXES = (".py", ".toml", ".cu", ".cuh", ".txt", ".sh", ".ini", ".cfg", "Makefile")


def folders() -> list[Path]:
    return sorted(path for path in RULES.iterdir() if path.is_dir())


def is_checked(folder: Path) -> bool:
    """Whether the folder's rule judges compiled kernels (its cases are compiled, and their facts recorded)."""
    from kgate import rules as registry

    code = folder.name
    return code in UNCOMPILED or (code in registry.codes() and registry.load(code).layer in ("compiled", "capture"))


def project(folder: Path) -> tuple[Config, Selection]:
    config = load_config(folder / "kgate.toml")
    return config, build_selection(config)


def expected(folder: Path, *, optional: bool = False) -> set[tuple[str, int, str, str]]:
    return expectations(folder, SUFFIXES, optional=optional)


# --- recorded facts: the one place that turns a compile into JSON and back -------------------------------------

def facts_document(run: CompileRun) -> dict[str, Any]:
    """What a compile gave, as the JSON kept in a rule's folder: kgate's own KernelFacts records (their compile
    time zeroed, so that recording again changes bytes only where the compiler's output changed), the
    variants that failed, and the captured specialisations the capture rules read."""
    return {
        "facts_schema": facts_schema(),
        "toolchain": dict(sorted(public_toolchain(run.toolchain).items())),
        "kernels": [replace(f, compile_seconds=0.0).to_json() for f in sorted(run.facts, key=lambda f: f.key)],
        "failures": [f.to_json() for f in sorted(run.failures, key=lambda f: (f.kernel, f.variant, f.target))],
        "captured": [{"kernel": k.kernel, "specs": [s.to_record() for s in k.specs], "tuned": sorted(k.tuned),
                      "keys": sorted(k.keys)}
                     for k in sorted(run.captured, key=lambda k: k.kernel)],
        "locations": {kernel: list(where) for kernel, where in sorted(run.locations.items())},
    }


def compile_run(document: dict[str, Any]) -> CompileRun:
    """The CompileRun a recorded facts document stands for (the inverse of `facts_document`)."""
    return CompileRun(
        facts=[KernelFacts.from_record(record) for record in document["kernels"]],
        failures=[CompileFailure.from_json(record) for record in document["failures"]],
        toolchain=dict(document["toolchain"]),
        captured=[CapturedKernel(k["kernel"], tuple(Specialization.from_record(s) for s in k["specs"]),
                                 frozenset(k["tuned"]), frozenset(k.get("keys", ()))) for k in document["captured"]],
        locations={kernel: (where[0], where[1]) for kernel, where in document["locations"].items()},
    )


def read_facts(folder: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / FACTS).read_text(encoding="utf-8"))
    return data


def record_facts(folder: Path) -> None:
    """Compile a rule's folder with the real compiler (no cache) and write its facts.json."""
    from kgate.collect.registry import captured_specs, triton_entries
    from kgate.evaluate.plan import selection_plan
    from kgate.pipeline.check import compile_kernels
    from kgate.shard.run import CheckOptions

    config, selection = project(folder)
    run, _covered = compile_kernels(config, triton_entries(config), captured_specs(config), CheckOptions(no_cache=True),
                                    selection_plan(selection))
    text = json.dumps(facts_document(run), indent=1, sort_keys=True) + "\n"
    # Source locations the compiler wrote name the folder where it compiled: kept relative to the folder.
    text = text.replace(json.dumps(str(folder.resolve()) + "/")[1:-1], "")
    (folder / FACTS).write_text(text, encoding="utf-8")


# --- evaluation: kgate's own code, in-process ---------------------------------------------------------------

def checked(folder: Path) -> list[Finding]:
    """The findings `kgate check` gives for the folder's recorded facts: the compiled, capture and failure
    rules (kgate.evaluate.compiled), then the suppression comments, as the check pipeline assembles them."""
    from kgate.evaluate import compiled as evaluate
    from kgate.pipeline.check import assemble
    from kgate.shard.run import CheckOptions

    config, selection = project(folder)
    run = compile_run(read_facts(folder))
    covered = frozenset({f.kernel for f in run.facts} | {f.kernel for f in run.failures})
    raw = evaluate.compiled(run, selection)
    return assemble(config, selection, CheckOptions(source=False), run, raw, None, covered=covered,
                    shard_names=None).findings


def linted(folder: Path, options: dict[str, dict[str, Any]] | None = None) -> tuple[list[Finding], int]:
    """The findings and the number of suppressed ones `kgate lint` gives for the folder, through the lint
    engine (kgate.evaluate.source) and the suppression comments; `options` ({rule name: {option: value}}) is
    configured on top of the folder's kgate.toml."""
    from kgate.pipeline.lint import run_lint

    config = load_config(folder / "kgate.toml")
    if options:
        config = replace(config, options={**config.options, **options})
    run = run_lint(config, build_selection(config), None, use_cache=False)
    return run.findings, run.suppressed


def has_source_half(folder: Path) -> bool:
    """Whether the folder's rule, of a checked layer, also reads source files (`Rule.source_check`)."""
    from kgate import rules as registry

    return folder.name in registry.codes() and registry.load(folder.name).source_check is not None


def findings_of(folder: Path) -> list[Finding]:
    """What `kgate check` reports for a checked folder, and what `kgate lint` reports for a source folder or for
    the source half of a checked folder's rule."""
    if not is_checked(folder):
        return linted(folder)[0]
    return checked(folder) + (linted(folder)[0] if has_source_half(folder) else [])


def as_expectation(finding: Finding, *, compiled: bool) -> tuple[str, int, str, str]:
    """A finding in the form of an inline expectation: a compile target after the `@` for what `kgate check`
    reports, a 1-based column for what `kgate lint` reports (a finding of a checked folder's lint half, known by
    its column: `kgate check` findings have none)."""
    target = (finding.target or "") if compiled and not finding.col else str(finding.col)
    return (finding.path, finding.line, finding.code, target)
