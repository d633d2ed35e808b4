"""The resource rules (KG102-KG105, KG109), KG107 and the call graph under `kgate check`, on callees the earlier
cases do not have: static shared memory inside a `__noinline__` function, dynamic (`extern __shared__`) shared
memory used by one, a callee's stack array read through a pointer by another callee (a stack frame, no spill), a
`__forceinline__` chain, one template callee instantiated small and large for two kernels, a grid sync
(cooperative groups) in a callee, a register-hungry callee under `__launch_bounds__`, a wait in a callee's loop, a
`cudaGridDependencySynchronize()` helper called before a load in one kernel and after it in another, a lambda in a
callee, a recursive callee with a stack array, a virtual call whose override holds one. The same file is built three ways: `-O3`; `-G` (debug: every local lives on a stack the code addresses
generically, `st.u64 [%SP]`, which is the thread's own memory and no global write); `-lineinfo -maxrregcount=32`.
And `-rdc=true` with the callees in another file: kgate cannot see their code, and says so (KG107 takes such a call
to write and not to wait; KG103 notes that their spills are not counted).

In Triton (asm_triton.py): a wait carried by `tl.inline_asm_elementwise` before a load, after a load, after a
store, and named only in the asm's comment; `tl.dot_scaled` two `noinline=True` calls down, as block-scaled MMA
(MXFP8) and as a bf16 fallback (KG101).

tests/data/callgraph/resources.cu, rdc_main.cu and rdc_other.cu (nvcc), asm_triton.py (Triton). Figures are compared with what ptxas prints
for the same file and flags: never a number written here.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import DATA, Run, kgate

CALLGRAPH = DATA / "callgraph"


def _need_nvcc() -> None:
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed")
BUILDS = {"resources.cu": ["-O3"], "debug.cu": ["-G"], "bounded.cu": ["-O3", "-lineinfo", "-maxrregcount=32"]}
PROJECT = 'targets = ["sm_120a"]\n' + "".join(f'''
[[cuda]]
sources = ["{name}"]
flags = {flags!r}
pdl = ["pdl_*"]
''' for name, flags in BUILDS.items()).replace("'", '"')

# (kernel, file) -> the codes of its findings; every file has every kernel, and those not listed have none
FINDINGS = {
    ("local_frame_no_spill", "resources.cu"): {"KG109"},  # the callee's array, read in another callee's loop
    ("local_frame_no_spill", "bounded.cu"): {"KG109"},
    ("local_frame_no_spill", "debug.cu"): {"KG103"},  # the debug build spills it
    ("hungry_bounded", "resources.cu"): {"KG103"},  # the spills are the callee's
    ("hungry_bounded", "bounded.cu"): {"KG103"},  # the launch bound, not -maxrregcount, decides its registers
    ("grid_sync_in_callee", "debug.cu"): {"KG103"},
    ("pdl_helper_wait_then_load", "debug.cu"): {"KG103"},
    ("pdl_load_then_helper_wait", "debug.cu"): {"KG103", "KG107"},
    ("pdl_load_then_helper_wait", "resources.cu"): {"KG107"},  # a load before the helper's wait: a warning
    ("pdl_load_then_helper_wait", "bounded.cu"): {"KG107"},
    ("pdl_lambda_load_before_wait", "resources.cu"): {"KG107"},
    ("pdl_lambda_load_before_wait", "bounded.cu"): {"KG107"},
    ("pdl_lambda_load_before_wait", "debug.cu"): {"KG103", "KG107"},
    ("pdl_wait_in_callee_loop", "resources.cu"): {"KG107"},  # the loop may run no trip: the store is unwaited
    ("pdl_wait_in_callee_loop", "bounded.cu"): {"KG107"},
    ("pdl_wait_in_callee_loop", "debug.cu"): {"KG107"},
    # the recursive callee's own spills (its stack array around the call), in every build
    ("recursive_stack", "resources.cu"): {"KG103"},
    ("recursive_stack", "bounded.cu"): {"KG103"},
    ("recursive_stack", "debug.cu"): {"KG103"},
}
KERNELS = sorted(set(re.findall(r"__global__ void (?:__launch_bounds__\([^)]*\) )?(\w+)\(",
                                (CALLGRAPH / "resources.cu").read_text())))
# KG107 errors (writes before the wait): every other KG107 finding is a warning (a load)
WRITES = {"pdl_wait_in_callee_loop"}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    _need_nvcc()
    root = tmp_path_factory.mktemp("resources")
    for name in BUILDS:
        shutil.copy(CALLGRAPH / "resources.cu", root / name)
    (root / "kgate.toml").write_text(PROJECT)
    done = kgate("check", "--format", "json", cwd=root)
    assert done.code == 1, done.stderr
    return done


def _found(run: Run, kernel: str, path: str) -> list[dict]:
    return [f for f in run.json()["findings"] if f["kernel"] == kernel and f["path"] == path]


@pytest.mark.parametrize("path", sorted(BUILDS))
@pytest.mark.parametrize("kernel", KERNELS)
def test_findings_of_each_kernel_in_each_build(run: Run, kernel: str, path: str) -> None:
    found = _found(run, kernel, path)
    assert {f["code"] for f in found} == FINDINGS.get((kernel, path), set()), [f["message"] for f in found]
    for f in found:
        if f["code"] == "KG107":
            assert f["severity"] == ("error" if kernel in WRITES else "warning"), f["message"]


def _ptxas(tmp_path: Path, flags: list[str]) -> dict[str, dict[str, int]]:
    """Per kernel (by its name in the mangled symbol): registers, shared memory, spill stores of its block and of the
    functions ptxas prints after it, its cumulative stack; as ptxas prints them for the file with `flags`."""
    done = subprocess.run(["nvcc", "-arch=sm_120a", *flags, "-cubin", "-Xptxas", "-v",
                           str(CALLGRAPH / "resources.cu"), "-o", str(tmp_path / "r.cubin")],
                          check=True, capture_output=True, text=True)
    out = {}
    for block in re.split(r"(?=Compiling entry function )", done.stdout + done.stderr)[1:]:
        symbol = re.match(r"Compiling entry function '_Z(\d+)(\w+)'", block)
        assert symbol is not None, block
        name = symbol.group(2)[:int(symbol.group(1))]
        used = re.search(r"Used (\d+) registers", block)
        smem = re.search(r"(\d+) bytes smem", block)
        stack = re.search(r"(\d+) bytes cumulative stack size", block)
        out[name] = {"registers": int(used.group(1)) if used else 0, "smem": int(smem.group(1)) if smem else 0,
                     "spill": sum(int(s) for s in re.findall(r"(\d+) bytes spill stores", block)),
                     "stack": int(stack.group(1)) if stack else 0}
    return out


@pytest.mark.parametrize("path", sorted(BUILDS))
def test_each_kernels_figures_are_those_ptxas_printed(run: Run, tmp_path: Path, path: str) -> None:
    printed = _ptxas(tmp_path, BUILDS[path])
    assert set(printed) == set(KERNELS)
    for facts in (k for k in run.json()["kernels"] if k["path"] == path):
        want = printed[facts["kernel"]]
        assert (facts["registers"], facts["smem_bytes"]) == (want["registers"], want["smem"]), (facts["kernel"], want)
        if "-G" not in BUILDS[path]:  # a debug build prints each function once, before the kernels (not after each)
            assert facts["spill_bytes"] == want["spill"], (facts["kernel"], facts, want)
        assert facts["stack_bytes"] >= want["stack"], (facts["kernel"], facts, want)


def test_shared_memory_declared_in_a_callee_is_the_kernels(run: Run) -> None:
    """Static `__shared__` inside a `__noinline__` callee counts for the kernel (ptxas demotes it to the module);
    `extern __shared__` is the launch's, none of the cubin's."""
    by = {(k["kernel"], k["path"]): k for k in run.json()["kernels"]}
    assert by[("static_smem_in_callee", "resources.cu")]["smem_bytes"] > 0
    assert by[("dynamic_smem_in_callee", "resources.cu")]["smem_bytes"] == 0
    small, big = by[("tmpl_small", "resources.cu")], by[("tmpl_big", "resources.cu")]
    assert big["stack_bytes"] > small["stack_bytes"]  # each instantiation is its kernel's own


# kernel -> (codes, what the KG103 note names)
RDC = {
    "pdl_far_load_before_wait": ({"KG103", "KG107"}, "far_load"),
    "pdl_far_wait_then_store": ({"KG103", "KG107"}, "far_wait"),
    "far_spilling": ({"KG103"}, "far_spill"),
}


@pytest.fixture(scope="module")
def rdc(tmp_path_factory: pytest.TempPathFactory) -> Run:
    _need_nvcc()
    root = tmp_path_factory.mktemp("rdc")
    shutil.copy(CALLGRAPH / "rdc_main.cu", root / "main.cu")
    shutil.copy(CALLGRAPH / "rdc_other.cu", root / "other.cu")
    (root / "kgate.toml").write_text('targets = ["sm_120a"]\n\n[[cuda]]\nsources = ["main.cu", "other.cu"]\n'
                                     'flags = ["-O3", "-rdc=true"]\npdl = ["pdl_*"]\n')
    return kgate("check", "--format", "json", cwd=root)


@pytest.mark.parametrize("kernel", sorted(RDC))
def test_a_callee_in_another_file_is_said_to_be_unseen(rdc: Run, kernel: str) -> None:
    codes, callee = RDC[kernel]
    found = [f for f in rdc.json()["findings"] if f["kernel"] == kernel]
    assert {f["code"] for f in found} == codes, [f["message"] for f in found]
    (note,) = [f for f in found if f["code"] == "KG103"]
    assert note["severity"] == "note" and f"`{callee}`" in note["message"] and "not counted" in note["message"]
    for f in found:
        if f["code"] == "KG107":
            assert "whose code is not in the PTX" in f["message"], f["message"]


# kernel -> (code, severity) of its one finding, or None
TRITON = {
    "asm_wait_then_load": None,
    "load_then_asm_wait": ("KG107", "warning"),
    "store_then_asm_wait": ("KG107", "error"),
    "asm_without_wait": ("KG107", "error"),  # the asm's comment names the wait: the assembler reads none
    "mxfp8_two_levels_down": None,
    "scaled_two_levels_down": ("KG101", "error"),  # bf16 x e4m3 falls back to a bf16 MMA
}


@pytest.fixture(scope="module")
def triton_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    pytest.importorskip("triton")
    root = tmp_path_factory.mktemp("asm")
    shutil.copy(CALLGRAPH / "asm_triton.py", root / "asm_triton.py")
    (root / "kgate.toml").write_text('targets = ["sm_120a"]\npython-path = ["."]\nselect = ["KG101", "KG107"]\n')
    return kgate("check", "--format", "json", cwd=root)


@pytest.mark.parametrize("kernel", sorted(TRITON))
def test_triton_waits_in_inline_asm_and_scaled_dots_two_calls_down(triton_run: Run, kernel: str) -> None:
    assert {k["kernel"] for k in triton_run.json()["kernels"]} == {f"asm_triton:{k}" for k in TRITON}
    found = [(f["code"], f["severity"]) for f in triton_run.json()["findings"] if f["kernel"] == f"asm_triton:{kernel}"]
    assert found == ([] if TRITON[kernel] is None else [TRITON[kernel]]), found
