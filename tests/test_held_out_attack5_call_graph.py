"""The PTX call graph on inputs of a fifth attack (tests/data/callgraph/attack5.cu, compiled once by `kgate check`
as a user runs it): waits and accesses in template recursion, constructors, a callee written through a reference,
a CAS loop, a device memcpy, a table of function pointers in a local array (called before and after the wait), a
lambda that calls a noinline loader, and block-scaled MMA in a template callee and in a method two levels down.

A recursion whose base case waits and whose recursive case stores after its call (`if (n == 0) { wait; return; }
f(n - 1); o[n] = 1;`) was reported by KG107: whether a function waits on every path that returns was computed from
"no function waits" upwards, so the recursive call never counted as the wait it makes on every path that returns.
"""

from __future__ import annotations

import shutil

import pytest
from conftest import Run, kgate
from test_held_out_call_graph_paths import CALLGRAPH

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
PROJECT = '''targets = ["sm_120a"]
select = ["KG101", "KG103", "KG107", "KG109"]

[[cuda]]
sources = ["attack5.cu"]
flags = ["-O3"]
pdl = ["pdl_*"]
expect = { "scaled_*" = ["block_scale"] }
'''
# kernel -> the codes of its findings
EXPECTED = {
    "pdl_template_chain_waits_then_load": set(),
    "pdl_template_chain_loads_before_wait": {"KG107"},
    "pdl_constructor_waits_then_load": set(),
    "pdl_constructor_loads_before_wait": {"KG107"},
    "pdl_reference_store_in_callee_before_wait": {"KG107"},
    "pdl_cas_loop_in_callee_before_wait": {"KG107"},
    "pdl_memcpy_in_callee_before_wait": {"KG107"},
    "pdl_callee_waits_on_block_zero_then_load": {"KG107"},
    "pdl_local_table_call_before_wait": {"KG107"},
    "pdl_local_table_call_after_wait": set(),
    "pdl_wait_in_returned_value_then_store": set(),
    "pdl_lambda_calls_noinline_loader_before_wait": {"KG107"},
    "pdl_recursion_waits_at_the_base_then_stores": {"KG103"},  # ptxas spills around the recursive call
    "template_callee_spills": set(),  # the stack array's loops are unrolled: no loop walks local memory
    "scaled_in_template_callee": set(),
    "scaled_expected_but_absent": {"KG101"},
    "scaled_in_a_method_two_levels": set(),
    "local_array_loop_two_levels": {"KG109"},
}


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> Run:
    root = tmp_path_factory.mktemp("attack5")
    shutil.copy(CALLGRAPH / "attack5.cu", root / "attack5.cu")
    (root / "kgate.toml").write_text(PROJECT)
    return kgate("check", "--format", "json", cwd=root)


@needs_nvcc
@pytest.mark.parametrize("kernel", sorted(EXPECTED))
def test_findings_through_calls(checked: Run, kernel: str) -> None:
    assert checked.code == 1, checked.stderr
    assert {k["kernel"] for k in checked.json()["kernels"]} == set(EXPECTED)
    found = {f["code"] for f in checked.json()["findings"] if f["kernel"] == kernel}
    assert found == EXPECTED[kernel], [f["message"] for f in checked.json()["findings"] if f["kernel"] == kernel]
