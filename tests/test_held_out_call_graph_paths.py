"""The PTX call graph under `kgate check`, on call paths the earlier cases do not take: spills reached through a
function-pointer table, a weak callee, a chain five calls deep, a leaf shared by a kernel that spills and one that
does not, a kernel that spills beside a callee that does not, a spilling callee called once and twice; callees
that never return (`[[noreturn]]`, `trap`) or leave the thread (`exit`) before or after the wait, a callee that
waits in one branch only, a pointer table whose targets are call chains, a callee that loads in a loop, a callee
that lets dependents launch; under `-rdc=true`, a call written in inline asm, a function pointer passed as a
parameter, a wait reached through an alias. In Triton (`noinline=True`) a kernel that calls another kernel's body
and a helper that loads in a loop; in Gluon, helpers that load and wait.

tests/data/callgraph/paths.cu and paths_rdc.cu (nvcc), paths_triton.py and paths_gluon.py. A kernel's spills and stack are checked
against the figures ptxas prints for the same file with the same flags: never a number written here.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterable

import pytest
from conftest import DATA, Run, kgate

from kgate.facts.callgraph import INDIRECT, function_name
from kgate.facts.ptx import parse_ptx

CALLGRAPH = DATA / "callgraph"
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
FLAGS = ["-O3"]


def cuda_project(source: str, flags: list[str]) -> str:
    """A project that checks `source` (its `pdl_*` kernels PDL kernels) for the spill, PDL and loop-memory rules."""
    return f'''\
targets = ["sm_120a"]
select = ["KG103", "KG107", "KG109"]

[[cuda]]
sources = ["{source}"]
flags = {flags!r}
pdl = ["pdl_*"]
'''.replace("'", '"')


def checked(tmp_path_factory: pytest.TempPathFactory, source: str, flags: list[str]) -> Run:
    """`kgate check --format json` of a project holding tests/data/callgraph/`source` alone."""
    root = tmp_path_factory.mktemp(source.partition(".")[0])
    shutil.copy(CALLGRAPH / source, root / source)
    (root / "kgate.toml").write_text(cuda_project(source, flags))
    return kgate("check", "--format", "json", cwd=root)


def ptxas_log_of(tmp_path_factory: pytest.TempPathFactory, source: str, flags: list[str]) -> str:
    """What `nvcc -Xptxas -v` prints compiling tests/data/callgraph/`source` with `flags` for sm_120a."""
    root = tmp_path_factory.mktemp("log")
    done = subprocess.run(["nvcc", "-arch=sm_120a", *flags, "-cubin", "-Xptxas", "-v", str(CALLGRAPH / source),
                           "-o", str(root / "out.cubin")], check=True, capture_output=True, text=True)
    return done.stdout + done.stderr


def codes(run: Run, kernel: str) -> set[str]:
    return {f["code"] for f in run.json()["findings"] if f["kernel"] == kernel}

# kernel -> the codes of its findings
CUDA = {
    "spill_via_pointer": {"KG103"},  # the table holds a function that spills (and ptxas says every target spills)
    "spill_five_deep": {"KG109"},  # the leaf's stack array, read inside its loop
    "spill_weak_callee": {"KG109"},
    "caller_spills_callee_not": {"KG109"},
    "clean_helper_twice": set(),
    "spill_helper_once": {"KG109"},
    "spill_helper_twice": {"KG103"},  # the kernel's own spill around the second call
    "shares_a_leaf_and_spills": {"KG109"},
    "shares_a_leaf_without_spills": set(),
    "pdl_noreturn_callee_before_wait": {"KG107"},
    "pdl_noreturn_callee_after_wait": set(),
    "pdl_exit_helper_then_wait": set(),
    "pdl_store_then_exit_in_callee": {"KG107"},
    "pdl_callee_waits_in_one_branch_kernel_waits_again": set(),
    "pdl_callee_waits_in_one_branch_then_store": {"KG107"},
    "pdl_pointer_to_a_chain_before_wait": {"KG103", "KG107"},  # KG103: the table's targets are compiled with it
    "pdl_pointer_to_a_chain_after_wait": {"KG103"},
    "pdl_wait_after_a_loop_that_loads_in_a_callee": {"KG107"},
    "pdl_launch_dependents_in_a_callee_before_the_store": set(),
}
# kernel -> (KG107 finding, where it is reached)
TRITON = {
    "paths_triton:producer": None,
    "paths_triton:consumer_calls_the_producer_body": None,  # the body it calls waits first
    "paths_triton:consumer_loads_then_calls_the_producer_body": "`ld.global.b32` at",
    "paths_triton:waits_after_a_loop_in_a_helper": "in `_sum` at",
    "paths_triton:waits_before_a_loop_in_a_helper": None,
    "paths_gluon:gluon_helper_loads_before_wait": "in `_gload` at",
    "paths_gluon:gluon_helper_waits_first": None,
}
def pdl_triton_project(kernels: Iterable[str]) -> str:
    """A kgate.toml gating KG107 alone on PDL Triton kernels (`module:kernel`), each taking `x`, `out` and `n`."""
    return 'targets = ["sm_120a"]\npython-path = ["."]\nselect = ["KG107"]\n' + "".join(f'''
[[triton]]
kernel = "{kernel}"
signature = {{ x = "*fp32", out = "*fp32", n = "i32" }}
pdl = true
''' for kernel in kernels)


TRITON_PROJECT = pdl_triton_project(TRITON)


@pytest.fixture(scope="module")
def cuda(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return checked(tmp_path_factory, "paths.cu", FLAGS)


@pytest.fixture(scope="module")
def ptxas_log(tmp_path_factory: pytest.TempPathFactory) -> str:
    return ptxas_log_of(tmp_path_factory, "paths.cu", FLAGS)


@needs_nvcc
@pytest.mark.parametrize("kernel", sorted(CUDA))
def test_cuda_findings_through_the_call_graph(cuda: Run, kernel: str) -> None:
    assert cuda.code == 1, cuda.stderr
    assert codes(cuda, kernel) == CUDA[kernel], [f["message"] for f in cuda.json()["findings"] if f["kernel"] == kernel]


def _log_figures(log: str) -> dict[str, tuple[int, int, int]]:
    """Per entry (by the name in its mangled symbol): the spill stores and loads of its own figures and of every
    function ptxas prints after it (those compiled with it), and its cumulative stack."""
    out: dict[str, tuple[int, int, int]] = {}
    for block in re.split(r"(?=Compiling entry function )", log)[1:]:
        symbol = re.match(r"Compiling entry function '([^']+)'", block).group(1)  # type: ignore[union-attr]
        length = re.match(r"_Z(\d+)", symbol)
        assert length is not None, symbol
        name = symbol[length.end():length.end() + int(length.group(1))]
        spills = [tuple(map(int, m)) for m in re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", block)]
        stack = re.search(r"(\d+) bytes cumulative stack size", block)
        out[name] = (sum(s for s, _ in spills), sum(lo for _, lo in spills), int(stack.group(1)) if stack else 0)
    return out


@needs_nvcc
@pytest.mark.parametrize("kernel", sorted(CUDA))
def test_cuda_spills_and_stack_are_the_kernels_and_its_callees(cuda: Run, ptxas_log: str, kernel: str) -> None:
    stores, loads, cumulative = _log_figures(ptxas_log)[kernel]
    (facts,) = [k for k in cuda.json()["kernels"] if k["kernel"] == kernel]
    assert (facts["spill_bytes"], facts["spill_loads"]) == (stores, loads), facts
    assert facts["stack_bytes"] >= cumulative, facts


@pytest.fixture(scope="module")
def triton_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    pytest.importorskip("triton")
    root = tmp_path_factory.mktemp("tri")
    for name in ("paths_triton.py", "paths_gluon.py"):
        shutil.copy(CALLGRAPH / name, root / name)
    (root / "kgate.toml").write_text(TRITON_PROJECT)
    return kgate("check", "--format", "json", cwd=root)


@pytest.mark.parametrize("kernel", sorted(TRITON))
def test_triton_and_gluon_callees_before_the_wait(triton_run: Run, kernel: str) -> None:
    assert triton_run.code == 0, triton_run.stderr  # loads before the wait are warnings
    assert {k["kernel"] for k in triton_run.json()["kernels"]} == set(TRITON)
    found = [f["message"] for f in triton_run.json()["findings"] if f["kernel"] == kernel]
    expected = TRITON[kernel]
    assert (found == []) if expected is None else (len(found) == 1 and expected in found[0]), found


# kernel -> (the opcodes reached before the wait, what it calls whose code the PTX lacks)
RDC = {
    "pdl_call_written_in_inline_asm": ([], ()),  # the assembler reads the asm's call as any other
    "pdl_function_pointer_parameter": (["call"], (INDIRECT,)),  # no function's address is taken: it may do anything
    # nvcc writes the alias as an extern name, resolved by the linker: a call kgate cannot see into, taken to write
    # global memory and not to wait (an error on correct code, which the finding says it cannot see through)
    "pdl_waits_through_an_alias": (["call.uni", "ld.global.f32", "st.global.f32"], ("wait_alias",)),
}


@pytest.fixture(scope="module")
def rdc_entries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    ptx = tmp_path_factory.mktemp("rdc") / "paths_rdc.ptx"
    subprocess.run(["nvcc", "-arch=sm_120a", "-O3", "-rdc=true", "-ptx", str(CALLGRAPH / "paths_rdc.cu"), "-o",
                    str(ptx)], check=True, capture_output=True)
    return {function_name(e.name): e for e in parse_ptx(ptx.read_text()).entries}


@needs_nvcc
@pytest.mark.parametrize("kernel", sorted(RDC))
def test_calls_the_ptx_spells_otherwise(rdc_entries: dict[str, object], kernel: str) -> None:
    entry = rdc_entries[kernel]
    assert ([a.opcode for a in entry.unwaited_accesses], entry.opaque_calls) == RDC[kernel], entry  # type: ignore[attr-defined]
