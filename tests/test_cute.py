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


ARCH_CLASS = '''
import cutlass
from cutlass import cute
from cutlass.base_dsl import BaseDSL


@cute.kernel
def _fill(out: cute.Tensor, value: cutlass.Constexpr):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    out[bidx * 128 + tidx] = value


class PerArch:
    """Built for the GPU it runs on, as FlashAttention's forward classes are: the constructor asks the DSL."""

    def __init__(self, value):
        self.value = value
        self.arch = BaseDSL._get_dsl().get_arch_enum()
        assert self.arch.major in (9, 12), f"no kernel for {self.arch}"

    @cute.jit
    def __call__(self, out: cute.Tensor):
        _fill(out, self.value * self.arch.major).launch(grid=(cute.size(out) // 128, 1, 1), block=(128, 1, 1))
'''


def test_a_class_kernel_built_for_the_arch_the_dsl_reports_is_built_for_the_target_gated(tmp_path) -> None:
    """FlashAttention's forward classes read the DSL's architecture in their constructors (`get_arch_enum()`), and
    the SM90 one asserts it is 9.x. kgate built the object before the compile that names the target, so the
    constructor saw the compile worker's default (no GPU) and the SM90 forward was a compile error for sm_90a
    ("Only SM 9.x is supported"). The object is now built with the DSL set to the target, for each target."""
    (tmp_path / "kgate.toml").write_text(
        'targets = ["sm_120a", "sm_90a"]\n\n[[cute]]\nkernel = "per_arch:PerArch"\ninit = { value = 1.0 }\n'
        'args = { out = { dtype = "cutlass.Float32", shape = [4096] } }\n', encoding="utf-8")
    (tmp_path / "per_arch.py").write_text(ARCH_CLASS, encoding="utf-8")
    run = kgate("check", "--format", "json", "--no-cache", "-j", "1", cwd=tmp_path)
    report = run.json()
    assert not report["findings"], report["findings"]
    assert sorted(k["target"] for k in report["kernels"]) == ["sm_120a", "sm_90a"]
