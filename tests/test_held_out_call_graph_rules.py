"""The PTX call graph and the rules that read it, on real compiler output.

tests/data/callgraph/rules.cu (nvcc): recursion and mutual recursion entered at either end, calls in loops,
callees that wait at least once, maybe never, under their own predicate or in one thread, calls returning
pointers and structs, calls through a `__constant__` table of pure functions, a leaf shared by kernels with
different verdicts, chains twenty calls deep, and names that need escaping (`$`, an anonymous namespace, a
nested template). jump_tables.cu (nvcc `-jtd 10`) and jump_table_loop.ptx (hand-written, assembled by ptxas
here): `brx.idx` through `.branchtargets`, in the PTX and in the SASS. rules_triton.py (Triton,
`noinline=True`): helpers in loops, under run-time ifs, specialised on constexprs, returning tuples, six deep,
of one name in two modules, with `__` or letters PTX cannot hold in their names. And projects `kgate check`
compiles: `-rdc=true` (callees listed apart in the SASS and cloned as `name$1`), a helper with a stack array
called inside a loop, a file's static helpers (whose symbols carry a hash of the file's path).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from types import ModuleType

import pytest
from conftest import DATA, Run, kgate

from kgate.compile.units import Artifacts
from kgate.facts import extract
from kgate.facts.callgraph import INDIRECT, function_name
from kgate.facts.extract import Sources
from kgate.facts.ptx import PtxEntry, PtxFacts, build_cfg, functions, parse_ptx
from kgate.support import tools

CALLGRAPH = DATA / "callgraph"
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
# kernel -> (reaches a global access before the wait, the functions the first one is reached through)
CUDA = {
    "recursion_waits_first": (False, None),
    "recursion_waits_after_its_calls": (False, None),
    "recursion_after_a_callee_wait": (False, None),
    "mutual_recursion_entered_at_the_waiter": (False, None),
    "mutual_recursion_entered_at_the_loader": (True, ["mutual_loader"]),
    "loads_in_a_loop_then_waits": (True, ["load_at"]),
    "waits_first_in_every_iteration": (True, []),  # a loop of no trips stores unwaited
    "waits_on_the_last_iteration": (True, ["load_at"]),
    "wait_in_a_loop_after_a_load": (True, ["load_at"]),
    "callee_waits_at_least_once": (False, None),
    "callee_may_never_wait": (False, None),
    "callee_waits_under_its_own_predicate": (True, []),
    "callee_waits_then_returns_a_load": (False, None),
    "first_callee_waits_only_sometimes": (True, ["load_at"]),
    "one_thread_waits": (False, None),
    "only_one_thread_calls_the_wait": (True, []),
    "inlined_wait_then_noinline_load": (False, None),
    "pointer_arithmetic_before_wait": (False, None),
    "struct_of_loads_before_wait": (True, ["two_loads"]),
    "struct_of_values_before_wait": (False, None),
    "pure_pointer_call_before_wait": (True, [INDIRECT]),  # a pointer's callee is taken to touch memory
    "pure_pointer_call_after_wait": (False, None),
    "shares_the_leaf_directly_before_wait": (True, ["shared_leaf"]),
    "shares_the_leaf_through_mid_after_wait": (False, None),
    "shares_the_leaf_after_a_waiting_callee": (False, None),
    "twenty_levels_down_before_wait": (True, [f"c{n}" for n in range(1, 21)]),
    "wait_twenty_levels_down": (False, None),
    "dollar_in_the_name_before_wait": (True, ["load$dollar"]),
    "anonymous_namespace_before_wait": (True, ["anonymous_load"]),
    "nested_template_before_wait": (True, ["outer::inner::nested_load<float, 4>"]),
    "assert_before_wait": (False, None),
    "printf_before_wait": (False, None),
    "heap_before_wait": (False, None),
}


def _nvcc_ptx(tmp: Path, source: Path, *flags: str) -> str:
    ptx = tmp / (source.stem + ".ptx")
    subprocess.run(["nvcc", "-arch=sm_120a", "-O3", "-std=c++17", *flags, "-ptx", str(source), "-o", str(ptx)],
                   check=True, capture_output=True)
    return ptx.read_text()


@pytest.fixture(scope="module")
def cuda(tmp_path_factory: pytest.TempPathFactory) -> PtxFacts:
    return parse_ptx(_nvcc_ptx(tmp_path_factory.mktemp("rules"), CALLGRAPH / "rules.cu"))


def _entry(facts: PtxFacts, kernel: str) -> PtxEntry:
    return next(e for e in facts.entries if function_name(e.name) == kernel)


def _verdict(entry: PtxEntry, home: str | None = None) -> tuple[bool, list[str] | None]:
    if not entry.unwaited_accesses:
        return False, None
    return True, [function_name(v, home) if v != INDIRECT else v for v in entry.unwaited_accesses[0].via]


@needs_nvcc
def test_the_device_runtimes_functions_are_not_opaque(cuda: PtxFacts) -> None:
    for kernel in ("assert_before_wait", "printf_before_wait", "heap_before_wait"):
        assert _entry(cuda, kernel).opaque_calls == ()


@needs_nvcc
@pytest.mark.parametrize("kernel", sorted(CUDA))
def test_what_a_cuda_kernel_reaches_before_its_wait(cuda: PtxFacts, kernel: str) -> None:
    entry = _entry(cuda, kernel)
    unwaited, via = CUDA[kernel]
    assert _verdict(entry) == (unwaited, via), entry
    assert entry.has_wait


# kernel -> (unwaited, via, what it calls whose code is not in the PTX), compiled with -rdc=true
SEPARATE = {
    "weak_before_wait": (True, ["tload<1>"], ()),
    "weak_after_wait": (False, None, ()),
    "weak_wait_first": (False, None, ()),
    "extern_after_wait": (False, None, ("ext_pure",)),
    "extern_before_wait": (True, ["ext_pure"], ("ext_pure",)),
}


@pytest.fixture(scope="module")
def separate(tmp_path_factory: pytest.TempPathFactory) -> PtxFacts:
    text = _nvcc_ptx(tmp_path_factory.mktemp("weak"), CALLGRAPH / "weak.cu", "-rdc=true")
    assert ".weak .func" in text and ".extern .func" in text
    return parse_ptx(text)


@needs_nvcc
@pytest.mark.parametrize("kernel", sorted(SEPARATE))
def test_weak_and_extern_functions_under_separate_compilation(separate: PtxFacts, kernel: str) -> None:
    unwaited, via, opaque = SEPARATE[kernel]
    entry = _entry(separate, kernel)
    assert _verdict(entry) == (unwaited, via)
    assert tuple(function_name(n) for n in entry.opaque_calls) == opaque


# ---- jump tables: PTX `brx.idx`

JUMPS = {
    "case_loads_in_a_callee_before_wait": (True, ["pick"]),
    "case_loads_in_the_kernel_before_wait": (True, []),
    "switch_after_the_wait": (False, None),
}


@pytest.fixture(scope="module")
def jumps(tmp_path_factory: pytest.TempPathFactory) -> str:
    return _nvcc_ptx(tmp_path_factory.mktemp("jumps"), CALLGRAPH / "jump_tables.cu", "-jtd", "10")


@needs_nvcc
@pytest.mark.parametrize("kernel", sorted(JUMPS))
def test_every_target_of_a_jump_table_is_followed(jumps: str, kernel: str) -> None:
    assert "brx.idx" in jumps and ".branchtargets" in jumps  # what this case is about
    assert _verdict(_entry(parse_ptx(jumps), kernel)) == JUMPS[kernel]


HAND = (CALLGRAPH / "jump_table_loop.ptx").read_text()


def test_a_jump_table_written_by_hand_is_followed_in_the_ptx() -> None:
    facts = parse_ptx(HAND)
    loop = next(f for f in functions(HAND) if f.name == "table_loop")
    blocks = build_cfg(loop.items)
    jump = next(i for i, b in enumerate(blocks) if b.instrs and b.instrs[-1].opcode == "brx.idx")
    assert len(blocks[jump].succ) == 2 and min(blocks[jump].succ) < jump  # back to the loop's head, and out
    case = facts.entry("wait_in_one_case")
    assert [a.opcode for a in case.unwaited_accesses] == ["ld.global.u32", "st.global.u32"]  # the skipping case


@pytest.fixture(scope="module")
def hand_cubin(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    folder = tmp_path_factory.mktemp("hand")
    (folder / "loop.ptx").write_text(HAND)
    ptxas = tools.bundled_tool("ptxas")
    if ptxas is None:
        pytest.skip("no ptxas")
    log = subprocess.run([str(ptxas), "-arch=sm_120a", "-v", str(folder / "loop.ptx"), "-o", str(folder / "loop.cubin")],
                         check=True, capture_output=True, text=True)
    cuobjdump = tools.bundled_tool("cuobjdump")
    if cuobjdump is None:
        pytest.skip("no cuobjdump")
    sass = subprocess.run([str(cuobjdump), "-sass", str(folder / "loop.cubin")], check=True, capture_output=True,
                          text=True).stdout
    return folder / "loop.cubin", log.stdout + log.stderr, sass


def test_a_loop_whose_back_edge_is_an_indirect_branch_holds_its_local_memory(hand_cubin: tuple[Path, str, str]) -> None:
    cubin, log, sass = hand_cubin
    assert "BRX" in sass and "LDL" in sass  # ptxas kept the jump table and the stack array
    src = Sources(Artifacts(ptx=HAND, ptxas_log=log, sass=sass, cubin=(str(cubin), None)))
    assert extract.local_in_loop(src, "table_loop") == (1, 1)
    unread = Sources(Artifacts(ptx=HAND, ptxas_log=log, sass=sass, cubin=(str(cubin.parent / "none"), None)))
    assert extract.local_in_loop(unread, "table_loop") == (0, 0)  # no tables to read: no loop is made up


def test_an_indirect_branchs_offset_is_no_target() -> None:
    from kgate.facts.sass import local_in_loops

    listing = ("\t\tFunction : k\n"
               "        /*0010*/                   LDL R2, [R0] ;\n"
               "        /*0020*/                   BRX R8 -0x10 ;\n"
               "        /*0030*/                   EXIT ;\n")
    assert local_in_loops(listing)["k"].in_loops == (0, 0)
    assert local_in_loops(listing, {"k": {0x20: (0x10, 0x30)}})["k"].in_loops == (1, 0)


# ---- Triton `noinline=True`

TRITON = {
    "helper_in_a_loop_before_wait": (True, ["_load"]),
    "helper_waits_then_loads_called_first": (False, None),
    "constexpr_helper_that_does_not_wait": (True, []),
    "constexpr_helper_that_waits": (False, None),
    "both_specialisations_of_one_helper": (False, None),
    "pure_helper_before_wait": (False, None),
    "atomic_helper_before_wait": (True, ["_atomic"]),
    "helper_under_a_run_time_if_before_wait": (True, ["_load"]),
    "helper_returning_two_loads_before_wait": (True, ["_two_loads"]),
    "six_levels_down_before_wait": (True, ["_d1", "_d2", "_d3", "_d4", "_d5", "_d6"]),
    "launch_dependents_then_load_before_wait": (True, ["_launch_and_load"]),
    "same_name_waiting_module_first": (False, None),
    "same_name_loading_module_first": (True, ["tri.loads._helper"]),
    "double_underscore_in_the_name_before_wait": (True, ["_load__fast"]),
    "non_ascii_name_before_wait": (True, ["_charger_donn??es"]),
    "helper_inlined_after_wait": (False, None),
    "device_assert_before_wait": (False, None),
    "device_print_before_wait": (False, None),
}


@pytest.fixture(scope="module")
def triton_module() -> ModuleType:
    pytest.importorskip("triton")
    import importlib
    import sys

    sys.path.insert(0, str(CALLGRAPH))
    try:
        return importlib.import_module("rules_triton")
    finally:
        sys.path.remove(str(CALLGRAPH))


@pytest.mark.parametrize("kernel", sorted(TRITON))
def test_what_a_triton_kernel_reaches_before_its_wait(triton_module: ModuleType, kernel: str) -> None:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    options = {"launch_pdl": True, "debug": kernel == "device_assert_before_wait"}  # debug: the assert is kept
    compiled = triton.compile(ASTSource(getattr(triton_module, kernel), {"x": "*fp32", "out": "*fp32", "n": "i32"}, {}),
                              target=GPUTarget("cuda", 120, 32), options=options)
    entry = parse_ptx(compiled.asm["ptx"]).entry()
    assert _verdict(entry, "rules_triton") == TRITON[kernel], entry
    assert entry.has_wait
    if kernel.startswith("device_"):
        assert not entry.opaque_calls and ".extern .func" in compiled.asm["ptx"]


TRITON_PROJECT = '''\
targets = ["sm_120a"]
python-path = ["."]
select = ["KG107"]
''' + "".join(f'''
[[triton]]
kernel = "rules_triton:{kernel}"
signature = {{ x = "*fp32", out = "*fp32", n = "i32" }}
pdl = true
''' for kernel in ("same_name_loading_module_first", "double_underscore_in_the_name_before_wait"))


def test_a_triton_helper_is_named_as_its_module_holds_it(tmp_path: Path) -> None:
    pytest.importorskip("triton")
    shutil.copy(CALLGRAPH / "rules_triton.py", tmp_path / "rules_triton.py")
    shutil.copytree(CALLGRAPH / "tri", tmp_path / "tri", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "kgate.toml").write_text(TRITON_PROJECT)
    run = kgate("check", "--format", "json", cwd=tmp_path)
    messages = {f["kernel"]: f["message"] for f in run.json()["findings"]}
    assert "`ld.global.b32` in `tri.loads._helper` at" in messages["rules_triton:same_name_loading_module_first"]
    assert "in `_load__fast` at" in messages["rules_triton:double_underscore_in_the_name_before_wait"], messages


# ---- projects: -rdc=true, a helper called in a loop, a file's static helpers

SPILLS = '''\
#define WAIT() asm volatile("griddepcontrol.wait;" ::: "memory")
__device__ __noinline__ float spilling_helper(const float* x, int n) {
  float acc[96];
  for (int i = 0; i < 96; ++i) acc[i] = x[i * n];
  float s = 0.f;
  for (int j = 0; j < n; ++j) s += acc[(j * 7) % 96] * acc[(j * 13) % 96];
  return s;
}
__global__ void __launch_bounds__(1024) spills_in_callee(const float* x, float* out, int n) {
  out[threadIdx.x] = spilling_helper(x, n);
}
__device__ __noinline__ void wait_for_producer() { WAIT(); }
__global__ void pdl_wait_in_callee(float* out, float v) {
  wait_for_producer();
  out[threadIdx.x] = v;
}
'''
LOOP_CALL = '''\
__device__ __noinline__ float scratch_helper(const float* x, int k) {
  float buf[64];
  #pragma unroll
  for (int i = 0; i < 64; ++i) buf[i] = x[i];
  return buf[k & 63] * buf[(k * 7) & 63];
}
__global__ void helper_called_in_a_loop(const float* x, float* out, int n) {
  float s = 0.f;
  for (int j = 0; j < n; ++j) s += scratch_helper(x + j, j);
  out[threadIdx.x] = s;
}
__global__ void helper_called_once(const float* x, float* out, int n) {
  out[threadIdx.x] = scratch_helper(x, n);
}
'''
STATIC = '''\
#define WAIT() asm volatile("griddepcontrol.wait;" ::: "memory")
static __device__ __noinline__ float static_load(const float* x) { return x[threadIdx.x]; }
namespace { __device__ __noinline__ float anonymous_load(const float* x) { return x[threadIdx.x + 1]; } }
__global__ void pdl_static_helper(const float* x, float* o) { float v = static_load(x); WAIT(); o[0] = v; }
__global__ void pdl_anonymous_helper(const float* x, float* o) { float v = anonymous_load(x); WAIT(); o[0] = v; }
'''
PROJECT = '''\
targets = ["sm_120a"]
select = ["KG103", "KG107", "KG109"]

[[cuda]]
sources = ["rdc/*.cu"]
flags = ["-rdc=true", "-O3"]
pdl = ["pdl_*"]

[[cuda]]
sources = ["plain/*.cu"]
flags = ["-O3"]
pdl = ["pdl_*"]

[[cuda]]
sources = ["jumps/*.cu"]
flags = ["-O3", "-jtd", "10"]
pdl = ["case_*", "switch_*"]
'''


def _project(root: Path) -> Path:
    for folder, name, text in (("rdc", "spills.cu", SPILLS), ("plain", "loop_call.cu", LOOP_CALL),
                               ("plain", "static.cu", STATIC)):
        (root / folder).mkdir(parents=True, exist_ok=True)
        (root / folder / name).write_text(text)
    (root / "jumps").mkdir()
    shutil.copy(CALLGRAPH / "jump_tables.cu", root / "jumps" / "jump_tables.cu")
    (root / "kgate.toml").write_text(PROJECT)
    return root


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> tuple[Run, Run]:
    """The project checked in two folders of different names (nvcc's file-scope names hash the path)."""
    return tuple(kgate("check", "--format", "json", cwd=_project(tmp_path_factory.mktemp(name) / "project"))
                 for name in ("one", "other-place"))  # type: ignore[return-value]


def _findings(run: Run) -> dict[tuple[str, str], str]:
    return {(f["code"], f["kernel"]): f["message"] for f in run.json()["findings"]}


@needs_nvcc
def test_the_findings_of_the_projects(checked: tuple[Run, Run]) -> None:
    run = checked[0]
    assert run.code == 1, run.stderr
    assert set(_findings(run)) == {
        ("KG103", "spills_in_callee"), ("KG109", "helper_called_in_a_loop"),
        ("KG107", "pdl_static_helper"), ("KG107", "pdl_anonymous_helper"),
        ("KG107", "case_loads_in_a_callee_before_wait"), ("KG107", "case_loads_in_the_kernel_before_wait"),
    }, _findings(run)


@needs_nvcc
def test_a_callee_listed_apart_under_rdc_is_part_of_its_kernel(checked: tuple[Run, Run]) -> None:
    found = _findings(checked[0])
    assert "in `spilling_helper`, which the kernel calls" in found[("KG103", "spills_in_callee")]
    # Its local memory inside the loop is that spill, told inside the spill's finding (one cause, one finding).
    (spill,) = [f for f in checked[0].json()["findings"] if f["kernel"] == "spills_in_callee"]
    assert spill["folded"] == ["KG109"]
    assert any(r["message"].startswith("KG109 ") and "inside a loop of the SASS" in r["message"]
               for r in spill["related"])
    assert ("KG107", "pdl_wait_in_callee") not in found  # the callee's ACQBULK is the kernel's


@needs_nvcc
def test_local_memory_of_a_helper_called_inside_a_loop_is_in_the_loop(checked: tuple[Run, Run]) -> None:
    found = _findings(checked[0])
    assert ("KG109", "helper_called_in_a_loop") in found and ("KG109", "helper_called_once") not in found


@needs_nvcc
def test_a_files_internal_helper_is_named_the_same_wherever_the_project_is(checked: tuple[Run, Run]) -> None:
    one, other = (_findings(run) for run in checked)
    for kernel, helper in (("pdl_static_helper", "static_load"), ("pdl_anonymous_helper", "anonymous_load")):
        assert f"in `{helper}` at" in one[("KG107", kernel)], one[("KG107", kernel)]
        assert one[("KG107", kernel)] == other[("KG107", kernel)]
