"""Every rule on its own planted cases: fixtures/rules/<CODE>/, one folder per registered code.

Each folder holds bad cases next to good twins, every line stating its findings inline
(`# expect: CODE@target`; conftest.expectations). The harness (tests/rules_harness.py) judges a
folder in-process with kgate's own code: the compiled, capture and failure rules on the facts the real
compiler gave (the folder's facts.json), the source rules through the lint engine. Each folder is
compared with its own expectations only, so a new rule or fixture changes no other folder's test.

`python -m pytest tests/test_rules.py --record-facts` compiles every folder that keeps a facts.json and
writes it again. The recorded numbers belong to the toolchain that wrote them, so the freshness test
checks what a toolchain does not decide: the facts schema, the record shape and which kernels were
compiled for which targets. A few end-to-end runs (`kgate check` compiling with Triton and nvcc,
`kgate lint`) show that the CLI reports what the harness does.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import rules_harness as harness
from conftest import Run, copy_project, kgate

from kgate import rules as registry
from kgate.collect.registry import captured_specs, triton_entries
from kgate.core.selection import UNCOMPILED
from kgate.facts.model import KernelFacts, facts_schema

FOLDERS = harness.folders()
RECORDED = [folder for folder in FOLDERS if harness.is_checked(folder)]
RECORD_HINT = "record the facts again: python -m pytest tests/test_rules.py --record-facts"


def ids(folders: list[Path]) -> list[str]:
    return [folder.name for folder in folders]


@pytest.fixture(scope="session")
def recording(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--record-facts"))


def test_every_registered_code_has_a_fixture_folder_and_every_folder_a_code() -> None:
    assert ids(FOLDERS) == registry.codes()


def test_the_registry_and_the_rule_modules_agree_on_the_opt_in_rules() -> None:
    """The registry knows the opt-in rules without importing every rule module (a lint never loads the compiled
    rules); each module says so as well."""
    assert registry.OPT_IN == {code for code in registry.codes() if registry.load(code).opt_in}
    assert set(registry.default_codes()) == set(registry.codes()) - registry.OPT_IN


def test_compiled_capture_and_uncompiled_rules_keep_recorded_facts() -> None:
    needs = {code for code in registry.codes() if registry.load(code).layer in ("compiled", "capture")} | UNCOMPILED
    assert set(ids(RECORDED)) == needs
    assert {folder.name for folder in FOLDERS if (folder / harness.FACTS).exists()} == needs, RECORD_HINT


@pytest.mark.parametrize("folder", FOLDERS, ids=ids(FOLDERS))
def test_findings_are_exactly_the_inline_expectations(folder: Path, recording: bool) -> None:
    if recording and folder in RECORDED:
        harness.record_facts(folder)
    compiled = folder in RECORDED
    found = {harness.as_expectation(f, compiled=compiled) for f in harness.findings_of(folder)}
    expected = harness.expected(folder)
    # Findings after `may:` are ones a compiler version decides either way (a spill at the edge).
    assert expected <= found <= expected | harness.expected(folder, optional=True)
    # The folder plants its own rule: at least one case it must report.
    assert folder.name in {code for _path, _line, code, _target in expected}


@pytest.mark.parametrize("folder", RECORDED, ids=ids(RECORDED))
def test_a_compiled_folder_has_a_good_twin(folder: Path) -> None:
    """At least one kernel variant the compiler built is reported by nothing: the twin that shows the rule
    does not simply fire on everything."""
    built = {(r["kernel"], r["variant"], r["target"]) for r in harness.read_facts(folder)["kernels"]}
    reported = {(f.kernel, f.variant or "", f.target or "") for f in harness.checked(folder)}
    assert built - reported, folder.name


@pytest.mark.parametrize("folder", RECORDED, ids=ids(RECORDED))
def test_recorded_facts_fit_todays_facts_model(folder: Path) -> None:
    """The recorded facts read back with today's KernelFacts unchanged, and cover the kernels and targets the
    folder configures. Register counts and instructions are the recording toolchain's and are not compared."""
    document = harness.read_facts(folder)
    assert document["facts_schema"] == facts_schema(), RECORD_HINT
    for record in document["kernels"]:
        assert as_json(KernelFacts.from_record(record).to_json()) == record, RECORD_HINT
    assert as_json(harness.facts_document(harness.compile_run(document))) == document, RECORD_HINT
    config, _selection = harness.project(folder)
    built = [*document["kernels"], *document["failures"]]
    assert {record["target"] for record in built if record["target"]} == set(config.targets), RECORD_HINT
    triton = {e.kernel for e in triton_entries(config)} | {c.spec.kernel for c in captured_specs(config)}
    assert triton == {record["kernel"] for record in built if ":" in record["kernel"]}, RECORD_HINT


def as_json(value: object) -> object:
    """`value` as JSON reads it back (tuples become lists)."""
    return json.loads(json.dumps(value))


def found_in(run: Run, *, compiled: bool) -> set[tuple[str, int, str, str]]:
    return {(f["path"], f["line"], f["code"], (f["target"] or "") if compiled else str(f["col"]))
            for f in run.json()["findings"]}


def test_kgate_check_compiles_a_triton_rule_folder_and_reports_its_expectations(tmp_path: Path) -> None:
    """End to end for the compiled layer: a real Triton compile (one target, to keep it short)."""
    project = copy_project("rules/KG107", tmp_path)
    run = kgate("check", "--format", "json", "--target", "sm_120a", "--no-cache", cwd=project)
    assert run.code == 1, run.stderr
    expected = {e for e in harness.expected(project) if e[3] == "sm_120a"}
    assert found_in(run, compiled=True) == expected
    recorded = {(r["kernel"], r["variant"]) for r in harness.read_facts(project)["kernels"] if r["target"] == "sm_120a"}
    assert {(k["kernel"], k["variant"]) for k in run.json()["kernels"]} == recorded, RECORD_HINT


def test_kgate_check_compiles_a_cuda_rule_folder_with_nvcc(tmp_path: Path) -> None:
    """End to end for CUDA sources: nvcc builds the folder as its kgate.toml says."""
    project = copy_project("rules/KG106", tmp_path)
    run = kgate("check", "--format", "json", "--no-cache", cwd=project)
    assert run.code == 1, run.stderr
    assert found_in(run, compiled=True) == harness.expected(project)
    recorded = {(r["kernel"], r["target"]) for r in harness.read_facts(project)["kernels"]}
    assert {(k["kernel"], k["target"]) for k in run.json()["kernels"]} == recorded, RECORD_HINT


def test_kgate_lint_reports_a_source_rule_folder_as_the_harness_does(tmp_path: Path) -> None:
    """End to end for the source layers: the `kgate lint` command line on one folder."""
    project = copy_project("rules/KG201", tmp_path)
    run = kgate("lint", "--format", "json", "--no-cache", cwd=project)
    assert run.code == 1, run.stderr
    assert found_in(run, compiled=False) == harness.expected(project)
