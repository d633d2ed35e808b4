"""The PTX call graph and the rules that read it through calls, on inputs the earlier cases do not have.

tests/data/callgraph/calls.cu (nvcc, the file built with `-maxrregcount=32`): recursion whose stack ptxas cannot
size, one callee called before the wait in one branch and after it in the other, callees that print, assert, trap,
call libdevice or release the dependents before the wait, two waits, a store through a pointer to shared memory
(in the kernel, and in a callee that other kernels call with global pointers), an atomic on a local copy, a kernel
whose launch bound overrides the file's register limit calling a callee that spills, and a call through a table in
constant memory. calls_triton.py (Triton, PDL): `tl.debug_barrier`, libdevice, a `noinline` helper returning a
tuple, one helper specialised on two constexpr values (two PTX functions), a helper that prints, one that releases
the dependents, two waits. Each project is compiled once by `kgate check`, as a user runs it.
"""

from __future__ import annotations

import re
import shutil

import pytest
from conftest import Run, kgate
from test_held_out_call_graph_paths import CALLGRAPH, _log_figures, checked, codes, pdl_triton_project, ptxas_log_of

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
FLAGS = ["-O3", "-maxrregcount=32"]
# kernel -> the codes of its findings (KG103: spills past the cliff or below it, as the spill rule reads ptxas)
CUDA = {
    "recursion_with_a_stack_array": {"KG103"},
    "pdl_same_callee_before_the_wait_in_one_branch": {"KG103", "KG107"},  # KG103: `loads` spills at 32 registers
    "pdl_same_callee_after_the_wait_in_both_branches": {"KG103"},
    "pdl_printf_in_a_callee_before_the_wait": set(),  # vprintf writes the printf buffer, no memory of the program's
    "pdl_assert_in_a_callee_before_the_wait": set(),
    "pdl_trap_in_a_callee_before_the_wait": set(),
    # sincosf's reduction of large arguments reads its table of 2/pi (the math library's constant, which nothing
    # writes: no race before the wait) and keeps digits in a stack array it walks in a loop
    "pdl_libdevice_in_a_callee_before_the_wait": {"KG109"},
    "pdl_launch_dependents_in_a_callee_then_the_wait": set(),
    "pdl_two_waits_with_a_load_between": {"KG103"},
    "pdl_printf_of_a_load_before_the_wait": {"KG107"},
    "pdl_store_through_a_shared_pointer_before_the_wait": set(),
    "pdl_shared_pointer_stored_by_a_callee_before_the_wait": set(),
    "pdl_global_pointer_stored_by_a_callee_before_the_wait": {"KG107"},
    "pdl_stack_array_stored_by_a_callee_before_the_wait": set(),
    "pdl_shared_or_global_pointer_stored_by_a_callee_before_the_wait": {"KG107"},
    "pdl_atomic_on_a_local_copy_before_the_wait": set(),
    "bounded_caller_of_a_heavy_callee": {"KG103"},
    "call_through_a_table_in_constant_memory": {"KG103"},
}


@pytest.fixture(scope="module")
def cuda(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return checked(tmp_path_factory, "calls.cu", FLAGS)


@pytest.fixture(scope="module")
def ptxas_log(tmp_path_factory: pytest.TempPathFactory) -> str:
    return ptxas_log_of(tmp_path_factory, "calls.cu", FLAGS)




@needs_nvcc
@pytest.mark.parametrize("kernel", sorted(CUDA))
def test_cuda_findings_through_calls(cuda: Run, kernel: str) -> None:
    assert cuda.code == 1, cuda.stderr
    assert {k["kernel"] for k in cuda.json()["kernels"]} == set(CUDA)
    assert codes(cuda, kernel) == CUDA[kernel], [f["message"] for f in cuda.json()["findings"] if f["kernel"] == kernel]


@needs_nvcc
@pytest.mark.parametrize("kernel", sorted(CUDA))
def test_cuda_spills_and_stack_are_the_kernels_and_its_callees(cuda: Run, ptxas_log: str, kernel: str) -> None:
    stores, loads, cumulative = _log_figures(ptxas_log)[kernel]
    (facts,) = [k for k in cuda.json()["kernels"] if k["kernel"] == kernel]
    assert (facts["spill_bytes"], facts["spill_loads"]) == (stores, loads), facts
    assert facts["stack_bytes"] >= cumulative, facts


@needs_nvcc
def test_a_launch_bound_over_the_files_register_limit_is_the_bound_ptxas_used(cuda: Run, ptxas_log: str) -> None:
    """ptxas raises the file's `-maxrregcount=32` to the bound `__launch_bounds__(1024, 1)` allows: the spill rule
    reads the registers the kernel has, and the spills of its callee compiled under that bound."""
    (facts,) = [k for k in cuda.json()["kernels"] if k["kernel"] == "bounded_caller_of_a_heavy_callee"]
    used = re.search(r"bounded_caller_of_a_heavy_callee.*?Used (\d+) registers", ptxas_log, re.DOTALL)
    assert used is not None and facts["registers"] == int(used.group(1)) > 32, facts
    (finding,) = [f for f in cuda.json()["findings"] if f["kernel"] == "bounded_caller_of_a_heavy_callee"]
    assert f"at {used.group(1)} registers" in finding["message"] and "in `heavy`" in finding["message"], finding


# kernel -> the KG107 finding's words (None: no finding)
TRITON = {
    "debug_barrier_before_the_wait": None,
    "libdevice_before_the_wait": None,
    "libdevice_of_a_load_before_the_wait": "`x` by `ld.global",
    "tuple_helper_before_the_wait": "in `_pair` at",
    "tuple_helper_after_the_wait": None,
    "loading_specialisation_after_the_wait": None,
    "loading_specialisation_before_the_wait": "in `_get` at",
    "printing_helper_before_the_wait": None,
    "helper_releases_the_dependents_then_wait": None,
    "two_waits_with_a_helper_load_between": None,
}
TRITON_PROJECT = pdl_triton_project(f"calls_triton:{kernel}" for kernel in TRITON)


@pytest.fixture(scope="module")
def triton_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    pytest.importorskip("triton")
    root = tmp_path_factory.mktemp("tri")
    shutil.copy(CALLGRAPH / "calls_triton.py", root / "calls_triton.py")
    (root / "kgate.toml").write_text(TRITON_PROJECT)
    return kgate("check", "--format", "json", cwd=root)


@pytest.mark.parametrize("kernel", sorted(TRITON))
def test_triton_callees_before_the_wait(triton_run: Run, kernel: str) -> None:
    assert triton_run.code == 0, triton_run.stderr  # loads before the wait are warnings
    assert {k["kernel"] for k in triton_run.json()["kernels"]} == {f"calls_triton:{k}" for k in TRITON}
    found = [f["message"] for f in triton_run.json()["findings"] if f["kernel"] == f"calls_triton:{kernel}"]
    expected = TRITON[kernel]
    assert (found == []) if expected is None else (len(found) == 1 and expected in found[0]), found
