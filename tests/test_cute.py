"""CuTe DSL kernels (`@cute.jit`, nvidia-cutlass-dsl) gated as their own front end, compiled by the real DSL.

fixtures/cute/rules holds a planted bad case and a good twin in the CuTe DSL for each compiled rule that applies
to a CuTe DSL kernel, registered in `[[cute]]` tables with the arguments of their `cute.compile` calls; kgate makes
fake tensors of them and compiles offline for sm_120a and sm_90a.
"""

from __future__ import annotations

import pytest
from conftest import FIXTURES, Run, copy_project, expectations, kgate

pytest.importorskip("cutlass.cute", reason="the CuTe DSL is not installed (pip install 'kernel-gate[cute]', or "
                                           "nvidia-cutlass-dsl)")

RULES = FIXTURES / "cute" / "rules"


def found(run: Run) -> set[tuple[str, int, str, str]]:
    return {(f["path"], f["line"], f["code"], f["target"] or "") for f in run.json()["findings"]}


@pytest.fixture(scope="module")
def rules_checked(tmp_path_factory: pytest.TempPathFactory) -> Run:
    project = copy_project("cute/rules", tmp_path_factory.mktemp("cute-rules"))
    return kgate("check", "--format", "json", "--no-cache", cwd=project)


def test_each_compiled_rule_reports_exactly_the_planted_cute_cases(rules_checked: Run) -> None:
    """Every call compiles for both targets, its rows name the CuTe DSL, and the findings are the inline
    expectations (a spill at the register cap may come or not, as ptxas decides), good twins clean."""
    assert rules_checked.code == 1, rules_checked.stderr
    report = rules_checked.json()
    assert not [f for f in report["findings"] if f["code"] == "KG001"], report["findings"]
    kernels = {(k["kernel"], k["target"]) for k in report["kernels"]}
    assert len(kernels) == 14 and {target for _kernel, target in kernels} == {"sm_120a", "sm_90a"}
    assert {k["language"] for k in report["kernels"]} == {"cute"}
    got = found(rules_checked)
    assert got - expectations(RULES, optional=True) == expectations(RULES)
    # the local memory the spill puts inside the loop (KG109) is told inside the spill's finding, its cause
    spills = [f["folded"] for f in report["findings"] if f["kernel"].endswith(":accumulate_512")]
    assert spills and all("KG109" in folded for folded in spills), spills


def test_shared_memory_a_cute_allocator_asks_for_is_the_kernels(rules_checked: Run) -> None:
    """The DSL launches with what its shared-memory allocator asked for (dynamic: the PTX declares none): the rows
    carry it, as the DSL's host code launches it."""
    rows = {(k["kernel"], k["target"]): k for k in rules_checked.json()["kernels"]}
    assert rows[("memory:staged_four", "sm_90a")]["smem_bytes"] == 2 * rows[("memory:staged_two", "sm_90a")]["smem_bytes"]
    assert rows[("memory:staged_two", "sm_120a")]["smem_bytes"] == 2 * 8192 * 4


def test_kgate_register_on_a_cute_jit_function_is_a_cute_registration(tmp_path) -> None:
    """`@kgate.register(args=...)` on a `@cute.jit` function, dtypes written as the DSL's own objects: read from the
    source for the plan, and accepted as a CuTe DSL registration when the module is imported (it was validated as a
    Triton registration there: `args.a.dtype: unknown key`, a compile error)."""
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\npython-path = ["."]\n', encoding="utf-8")
    (tmp_path / "ops.py").write_text((RULES.parent / "register_ops.txt").read_text(encoding="utf-8"), encoding="utf-8")
    run = kgate("check", "--format", "json", "--no-cache", cwd=tmp_path)
    assert run.code == 0, run.stdout + run.stderr
    rows = run.json()["kernels"]
    assert [(k["kernel"], k["language"], k["kind"]) for k in rows] == [("ops:double", "cute", "elementwise")]
