"""kgate.api: lint and check as functions with typed results equal to the CLI's JSON, and the `kgate_compile`
pytest fixture that compiles a kernel through kgate's own compile path and cache."""

from __future__ import annotations

import dataclasses
import json
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import REPO, Run, copy_compiled, kgate

from kgate import api

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

pytest_plugins = ["pytester"]

# A test module that sets the interpreter (KG203 interpret-in-tests) and an autotuned kernel keyed on an argument
# no launch passes (KG201): two planted findings, one of them suppressed on a second copy of the line.
TEST_MODULE = textwrap.dedent("""\
    import os

    os.environ["TRITON_INTERPRET"] = "1"
    os.environ["TRITON_INTERPRET"] = "1"  # kgate: ignore[KG203] -- the reference run, on purpose
""")
KERNELS = textwrap.dedent("""\
    import triton
    import triton.language as tl


    @triton.autotune(configs=[], key=["n_tokens"])
    @triton.jit
    def k(x, n_tokens, BLOCK: tl.constexpr):
        pass
""")


def _lint_project(root: Path) -> Path:
    (root / "kgate.toml").write_text("")
    (root / "pkg").mkdir()
    (root / "pkg" / "kernels.py").write_text(KERNELS)
    (root / "tests").mkdir()
    (root / "tests" / "test_k.py").write_text(TEST_MODULE)
    return root


def test_lint_returns_the_findings_the_cli_reports(tmp_path: Path) -> None:
    root = _lint_project(tmp_path)
    cli = kgate("lint", "--format", "json", "--no-cache", cwd=root)
    assert cli.code == 1, cli.stderr
    result = api.lint(project=root, cache=False)
    assert isinstance(result, api.LintResult) and dataclasses.is_dataclass(result)
    assert [f.to_json() for f in result.findings] == cli.json()["findings"]
    summary = cli.json()["summary"]
    assert (result.exit_code, result.suppressed, result.baselined, len(result.failing())) == (
        summary["exit_code"], summary["suppressed"], summary["baselined"], summary["failing"])
    assert not result.passed and result.suppressed == 1
    # The typed fields say what the JSON says, under their Python names.
    interpret = next(f for f in result.findings if f.code == "KG203")
    assert (interpret.rule, interpret.path, interpret.line, interpret.severity) == (
        "interpret-in-tests", "tests/test_k.py", 3, api.Severity.ERROR)
    assert interpret.column >= 1 and interpret.fails
    with pytest.raises(dataclasses.FrozenInstanceError):
        interpret.line = 4  # type: ignore[misc]


def test_lint_of_named_paths_and_selection(tmp_path: Path) -> None:
    root = _lint_project(tmp_path)
    cli = kgate("lint", "--format", "json", "--no-cache", "--select", "KG201", "pkg", cwd=root)
    result = api.lint(["pkg"], project=root, select=["KG201"], cache=False)
    assert [f.to_json() for f in result.findings] == cli.json()["findings"]
    assert [f.code for f in result.findings] == ["KG201"] and result.files == 1


def test_a_users_mistake_is_a_kgate_error(tmp_path: Path) -> None:
    root = _lint_project(tmp_path)
    with pytest.raises(api.KgateError, match="no-such-rule"):
        api.lint(project=root, select=["no-such-rule"])
    with pytest.raises(api.KgateError, match="no such file"):
        api.lint(["missing.py"], project=root)


def test_check_returns_the_facts_and_findings_the_cli_reports(compiled_cold: tuple[Path, Run],
                                                             tmp_path: Path) -> None:
    # The session's cold compile of fixtures/compiled; this check reads its cache and compiles nothing.
    project = copy_compiled(compiled_cold, tmp_path)
    cold = compiled_cold[1].json()
    result = api.check(project=project)
    assert result.compiled == 0 and result.cached == len(result.kernels) > 0
    assert [k.to_json() for k in result.kernels] == cold["kernels"]
    assert [f.to_json() for f in result.findings] == cold["findings"]
    assert result.exit_code == cold["summary"]["exit_code"]
    # The fixtures state on each `def` line which variants lack the block-scaled MMA (KG101).
    (good,) = result.kernel("mxfp8_tile", target="sm_120a")
    (bad,) = result.kernel("mixed_tile", target="sm_120a")
    assert good.has_block_scale and good.has_mma and not bad.has_block_scale
    assert good.registers == cold_record(cold, good.key)["registers"] and good.spills >= 0
    # A PDL finding points at the access that breaks the rule: its related places are typed too.
    pdl = next(f for f in result.findings if f.code == "KG107")
    assert pdl.related and all(isinstance(p, api.Place) for p in pdl.related)
    assert pdl.kernel is not None and pdl.target in ("sm_120a", "sm_90a")


def cold_record(report: dict, key: tuple[str, str, str]) -> dict:
    (record,) = [k for k in report["kernels"] if (k["kernel"], k["variant"], k["target"]) == key]
    return record


KERNEL_MODULE = textwrap.dedent("""\
    import triton
    import triton.language as tl

    import kgate


    @kgate.register(signature={"x": "*fp32", "y": "*fp32", "n": "i32"}, constexprs={"BLOCK": 256})
    @triton.jit
    def scale(x, y, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y + offs, tl.load(x + offs, mask=offs < n) * 2.0, mask=offs < n)
""")
FIXTURE_TEST = textwrap.dedent("""\
    import json
    import pathlib

    from kern import scale


    def test_scale(kgate_compile):
        facts = kgate_compile(scale, signature={"x": "*fp32", "y": "*fp32", "n": "i32"}, constexprs={"BLOCK": 256},
                              target="sm_120a")
        assert facts.kernel == "kern:scale" and facts.target == "sm_120a"
        assert facts.registers > 0 and facts.spills == 0 and not facts.has_block_scale and not facts.has_mma
        # A second call is answered from kgate's cache: the same facts, nothing compiled again.
        assert kgate_compile(scale, signature={"x": "*fp32", "y": "*fp32", "n": "i32"}, constexprs={"BLOCK": 256},
                             target="sm_120a") == facts
        pathlib.Path("facts.json").write_text(json.dumps(facts.to_json()))
""")


def test_the_pytest_fixture_compiles_through_kgates_path_and_cache(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", kgate='targets = ["sm_120a"]\npython-path = ["."]\n')
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(kern=KERNEL_MODULE, test_kern=FIXTURE_TEST)
    # A process of its own: the test module imports Triton, which this process keeps out.
    outcome = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    outcome.assert_outcomes(passed=1)
    facts = json.loads((pytester.path / "facts.json").read_text())
    # `kgate check` finds the registration the fixture compiled in the cache the fixture filled: it compiles
    # nothing, and its record of the variant is the one the fixture returned.
    checked = api.check(project=pytester.path)
    assert (checked.compiled, checked.cached) == (0, 1)
    cli = kgate("check", "--format", "json", cwd=pytester.path)
    (record,) = cli.json()["kernels"]
    assert record == facts and record["registers"] == facts["registers"] == checked.kernels[0].registers


def test_the_package_ships_its_type_information() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "py.typed" in config["tool"]["setuptools"]["package-data"]["kgate"]
    assert (REPO / "kgate" / "py.typed").is_file()
    assert "kgate.api" in config["tool"]["setuptools"]["packages"]
