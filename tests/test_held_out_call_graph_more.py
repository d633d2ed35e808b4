"""The PTX call graph, the SASS and ptxas readers and the rules that read them (KG101, KG103, KG107, KG109), on
inputs the earlier cases do not have.

tests/data/callgraph/lexical.cu (nvcc): PTX as inline asm writes it, comments (a wait commented out over several
lines, a comment before the wait, braces, `/*` and `//` inside one another), labels before a statement on its
line, several statements on a line and one over several, scopes whose labels are their own (a helper with a
label inlined twice), block-scaled MMA commented out or labelled. accesses.cu: cache maintenance, prefetches,
tensor-map writes, streaming accesses, block-scope atomics, address arithmetic, timers, a grid barrier.
more_triton.py (Triton, PDL): inline asm commenting or labelling its wait, helpers in unrolled loops, a wait in
one program only, cache-modified loads, scoped atomics. And projects `kgate check` compiles: a call through a
function pointer inside a loop (the SASS's `CALL.REL.NOINC R2 0x0`), a helper that spills under one kernel's
launch bound and not under another's (ptxas prints its figures once per kernel), a project in a folder whose
name holds `/*`, debug builds.
"""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from conftest import DATA, Run, kgate

from kgate.facts.callgraph import function_name
from kgate.facts.ptx import PtxEntry, PtxFacts, build_cfg, functions, in_cycles, parse_ptx
from kgate.facts.sass import local_in_loops

CALLGRAPH = DATA / "callgraph"
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")


def _nvcc_ptx(tmp: Path, source: Path, *flags: str) -> str:
    ptx = tmp / (source.stem + ".ptx")
    subprocess.run(["nvcc", "-arch=sm_120a", "-O3", "-std=c++17", *flags, "-ptx", str(source), "-o", str(ptx)],
                   check=True, capture_output=True)
    return ptx.read_text()


def _entry(facts: PtxFacts, kernel: str) -> PtxEntry:
    return next(e for e in facts.entries if function_name(e.name) == kernel)


def _unwaited(entry: PtxEntry) -> list[str]:
    return [a.opcode for a in entry.unwaited_accesses]


# ---- what inline asm writes into the PTX

# kernel -> (the opcodes some path reaches before a wait, whether the kernel has a wait)
LEXICAL = {
    "wait_in_a_block_comment": (["ld.global.f32", "st.global.f32"], False),
    "comment_then_wait": ([], True),
    "note_then_load_before_wait": (["ld.global.f32"], True),
    "brace_in_a_line_comment": (["ld.global.f32"], True),
    "brace_in_a_block_comment": (["ld.global.f32"], True),
    "block_start_in_a_line_comment": (["ld.global.f32"], True),
    "line_start_in_a_block_comment": ([], True),
    "label_then_load_on_one_line": (["ld.global.u32"], True),
    "label_then_wait_on_one_line": ([], True),
    "two_labels_then_wait": ([], True),
    "load_then_wait_on_one_line": (["ld.global.u32"], True),
    "wait_then_load_on_one_line": ([], True),
    "load_over_three_lines": (["ld.global.u32"], True),
    "scoped_labels_skip_the_wait": (["ld.global.f32", "st.global.f32"], True),
    "scoped_labels_each_wait": ([], True),
    "spin_on_one_line_after_wait": ([], True),
}


@pytest.fixture(scope="module")
def lexical(tmp_path_factory: pytest.TempPathFactory) -> str:
    return _nvcc_ptx(tmp_path_factory.mktemp("lexical"), CALLGRAPH / "lexical.cu")


@needs_nvcc
@pytest.mark.parametrize("kernel", sorted(LEXICAL))
def test_comments_labels_statements_and_scopes_are_read_as_the_assembler_reads_them(lexical: str, kernel: str) -> None:
    entry = _entry(parse_ptx(lexical), kernel)
    assert (_unwaited(entry), entry.has_wait) == LEXICAL[kernel], entry


@needs_nvcc
def test_a_loop_written_on_one_line_is_a_loop(lexical: str) -> None:
    spin = next(f for f in functions(lexical) if function_name(f.name) == "spin_on_one_line_after_wait")
    blocks = build_cfg(spin.items)
    looped = [i for index in in_cycles(blocks) for i in blocks[index].instrs]
    assert "ld.volatile.global.u32" in {i.opcode for i in looped}


@needs_nvcc
@pytest.mark.parametrize(("kernel", "scaled"), [("mma_block_scale_commented_out", False),
                                                 ("mma_block_scale_after_a_label", True)])
def test_block_scaled_mma_is_what_the_assembler_reads(lexical: str, kernel: str, scaled: bool) -> None:
    mma = _entry(parse_ptx(lexical), kernel).mma
    assert mma and any("block_scale" in op for op in mma) == scaled, mma


# ---- instructions that touch global memory, or do not

# kernel -> the first opcode reached before the wait, or None
ACCESSES = {
    "discard_before_wait": "discard.global.L2",  # the lines' values become indeterminate: a write
    "tensormap_replace_before_wait": "tensormap.replace.tile.global_address.global.b1024.b64",
    "bulk_prefetch_before_wait": None,  # into the L2 cache only, as `prefetch` is
    "tensor_prefetch_before_wait": None,
    "prefetch_before_wait": None,
    "tensormap_prefetch_before_wait": None,
    "priority_and_policy_before_wait": None,
    "streaming_load_before_wait": "ld.global.cs.f32",
    "streaming_store_before_wait": "st.global.cs.f32",
    "block_scope_atomic_before_wait": "atom.global.cta.add.f32",
    "address_arithmetic_before_wait": None,
    "timers_and_sleep_before_wait": None,
    "grid_barrier_before_wait": "atom.add.release.gpu.u32",
    "struct_copy_before_wait": "ld.global.v4.f32",
}


@pytest.fixture(scope="module")
def accesses(tmp_path_factory: pytest.TempPathFactory) -> PtxFacts:
    return parse_ptx(_nvcc_ptx(tmp_path_factory.mktemp("accesses"), CALLGRAPH / "accesses.cu"))


@needs_nvcc
@pytest.mark.parametrize("kernel", sorted(ACCESSES))
def test_what_touches_global_memory_before_the_wait(accesses: PtxFacts, kernel: str) -> None:
    entry = _entry(accesses, kernel)
    first = entry.unwaited_accesses[0].opcode if entry.unwaited_accesses else None
    assert first == ACCESSES[kernel] and entry.has_wait, entry


# ---- Triton

# kernel -> (reaches a global access before the wait, the functions the first one is reached through)
TRITON = {
    "asm_comment_then_wait": (False, None),
    "asm_label_then_wait": (False, None),
    "asm_wait_commented_out": (True, []),
    "helper_in_a_static_range_before_wait": (True, ["_load"]),
    "wait_in_program_zero_only": (True, []),
    "waiting_helper_under_a_constexpr_if": (False, None),
    "launch_dependents_then_wait": (False, None),
    "stores_in_a_loop_after_wait": (False, None),
    "cache_modified_load_before_wait": (True, []),
    "cta_scoped_atomic_before_wait": (True, []),
}


@pytest.fixture(scope="module")
def triton_module() -> ModuleType:
    pytest.importorskip("triton")
    sys.path.insert(0, str(CALLGRAPH))
    try:
        return importlib.import_module("more_triton")
    finally:
        sys.path.remove(str(CALLGRAPH))


@pytest.mark.parametrize("kernel", sorted(TRITON))
def test_what_a_triton_kernel_reaches_before_its_wait(triton_module: ModuleType, kernel: str) -> None:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    compiled = triton.compile(ASTSource(getattr(triton_module, kernel), {"x": "*fp32", "out": "*fp32", "n": "i32"}, {}),
                              target=GPUTarget("cuda", 120, 32), options={"launch_pdl": True})
    entry = parse_ptx(compiled.asm["ptx"]).entry()
    found = (False, None) if not entry.unwaited_accesses else \
        (True, [function_name(v, "more_triton") for v in entry.unwaited_accesses[0].via])
    assert found == TRITON[kernel], entry
    assert entry.has_wait == (kernel != "asm_wait_commented_out")


# ---- SASS listings and ptxas logs: calls through registers, figures per kernel

POINTER_LISTING = """\
\t\tFunction : k
        /*0000*/                   STL [R1], R4 ;
        /*0010*/                   LDL R5, [R1] ;
        /*0020*/              @P0 CALL.REL.NOINC R2 0x0 ;
        /*0030*/               @P1 BRA 0x20 ;
        /*0040*/                   EXIT ;
        /*0050*/                   LDL R6, [R1+0x4] ;
        /*0060*/                   RET.REL.NODEC R20 0x0 ;
        /*0070*/                   BRA 0x70;
"""


@pytest.mark.parametrize(("listing", "in_loops"), [
    # a call through a register in a loop reaches the subroutines, never the function's own start
    (POINTER_LISTING, (1, 0)),
    # the same call outside the loop: nothing runs per trip
    (POINTER_LISTING.replace("@P1 BRA 0x20", "@P1 BRA 0x30"), (0, 0)),
    # a direct call in the loop reaches its subroutine only
    (POINTER_LISTING.replace("CALL.REL.NOINC R2 0x0", "CALL.REL.NOINC 0x50"), (1, 0)),
])
def test_a_call_through_a_register_reaches_subroutines_not_the_start(listing: str, in_loops: tuple[int, int]) -> None:
    assert local_in_loops(listing)["k"].in_loops == in_loops


PRESSURE = '''\
__device__ __noinline__ float pressure(const float* x, int n) {
  float acc[40];
#pragma unroll
  for (int i = 0; i < 40; ++i) acc[i] = x[i * n];
  for (int j = 0; j < n; ++j) {
#pragma unroll
    for (int i = 0; i < 40; ++i) acc[i] = acc[i] * x[j + i] + acc[(i + 1) % 40];
  }
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 40; ++i) s += acc[i];
  return s;
}
'''
LOOSE = "__global__ void {name}(const float* x, float* out, int n) {{ out[threadIdx.x] = pressure(x, n); }}\n"
TIGHT = ("__global__ void __launch_bounds__(1024) {name}(const float* x, float* out, int n) "
         "{{ out[threadIdx.x] = pressure(x, n); }}\n")
POINTERS = '''\
typedef float (*step_fn)(float);
__device__ __noinline__ float twice(float a) { return a * 2.f; }
__device__ __noinline__ float plus_one(float a) { return a + 1.f; }
__device__ step_fn steps[2] = {twice, plus_one};
__global__ void __launch_bounds__(1024) pointer_in_a_loop_stack_outside(const float* x, float* out, int n) {
  float buf[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) buf[i] = x[i * n];
  float s = buf[n & 63];
  for (int j = 0; j < n; ++j) s = steps[j & 1](s);
  out[threadIdx.x] = s + buf[(n * 3) & 63];
}
'''
POINTERS_SPILLING = '''\
typedef float (*load_fn)(const float*, int);
__device__ __noinline__ float scaled(const float* x, int k) { return x[k] * 2.f; }
__device__ __noinline__ float shifted(const float* x, int k) { return x[k] + 1.f; }
__device__ load_fn loads[2] = {scaled, shifted};
__global__ void __launch_bounds__(1024) pointer_in_a_loop_callee_frames(const float* x, float* out, int n) {
  float s = 0.f;
  for (int j = 0; j < n; ++j) s += loads[j & 1](x, j);
  out[threadIdx.x] = s;
}
'''
ODD_PDL = '''\
#define WAIT() asm volatile("griddepcontrol.wait;" ::: "memory")
__global__ void pdl_commented_wait_first(const float* x, float* o) {
  asm volatile("/* the producer */ griddepcontrol.wait;" ::: "memory");
  o[0] = x[0];
}
__global__ void pdl_note_then_load(const float* x, float* o) {
  asm volatile("/* note */" ::: "memory");
  float v = x[0];
  WAIT();
  o[0] = v;
}
'''
DEBUG_PDL = '''\
#define WAIT() asm volatile("griddepcontrol.wait;" ::: "memory")
__device__ __noinline__ float load_one(const float* x, int i) { return x[i]; }
__global__ void pdl_debug_waits_first(const float* x, float* o) { WAIT(); o[threadIdx.x] = load_one(x, threadIdx.x); }
__global__ void pdl_debug_loads_first(const float* x, float* o) {
  float v = load_one(x, threadIdx.x);
  WAIT();
  o[threadIdx.x] = v;
}
'''
PROJECT = '''\
targets = ["sm_120a"]
select = ["KG103", "KG107", "KG109"]

[[cuda]]
sources = ["spills/*.cu", "pointers/*.cu"]
flags = ["-O3"]

[[cuda]]
sources = ["*odd/*.cu"]
flags = ["-O3"]
pdl = ["pdl_*"]

[[cuda]]
sources = ["debug/*.cu"]
flags = ["-G"]
pdl = ["pdl_*"]

# A function whose address is taken follows the calling convention, whose saved registers ptxas counts as
# spills: not what the pointer cases are about.
[per-file-ignores]
"pointers/*" = ["KG103"]
'''


def _project(root: Path) -> Path:
    files = {
        "spills/loose_first.cu": PRESSURE + LOOSE.format(name="loose_first") + TIGHT.format(name="tight_second"),
        "spills/tight_first.cu": PRESSURE + TIGHT.format(name="tight_first") + LOOSE.format(name="loose_second"),
        "pointers/stack_outside.cu": POINTERS,
        "pointers/callee_frames.cu": POINTERS_SPILLING,
        "*odd/pdl.cu": ODD_PDL,
        "debug/pdl.cu": DEBUG_PDL,
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / "kgate.toml").write_text(PROJECT)
    return root


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return kgate("check", "--format", "json", cwd=_project(tmp_path_factory.mktemp("more") / "project"))


def _found(run: Run) -> set[tuple[str, str]]:
    return {(f["code"], f["kernel"]) for f in run.json()["findings"]}


# kernel -> the findings it has
PROJECT_FINDINGS = {
    "loose_first": set(),
    # The helper spills under its bound (printed before loose_first's figures); the local memory that spill puts in
    # the loop (KG109) is told inside the spill's finding (FOLDED).
    "tight_second": {"KG103"},
    "tight_first": {"KG103"},
    "loose_second": set(),  # the helper's figures printed last are tight_first's
    "pointer_in_a_loop_stack_outside": set(),  # the stack array is filled and read outside the loop
    "pointer_in_a_loop_callee_frames": {"KG109"},  # the functions the pointer reaches save registers every trip
    "pdl_commented_wait_first": set(),
    "pdl_note_then_load": {"KG107"},
    "pdl_debug_waits_first": set(),
    "pdl_debug_loads_first": {"KG107"},
}

# kernel -> the codes folded into its one finding of their cause
FOLDED = {"tight_second": ["KG109"], "tight_first": ["KG109"]}


@needs_nvcc
@pytest.mark.parametrize("kernel", sorted(PROJECT_FINDINGS))
def test_the_findings_of_each_kernel(checked: Run, kernel: str) -> None:
    assert checked.code == 1, checked.stderr
    assert {k["kernel"] for k in checked.json()["kernels"]} == set(PROJECT_FINDINGS), checked.stderr
    assert {code for code, name in _found(checked) if name == kernel} == PROJECT_FINDINGS[kernel], \
        [f["message"] for f in checked.json()["findings"] if f["kernel"] == kernel]
    assert [part for f in checked.json()["findings"] if f["kernel"] == kernel for part in f["folded"]] == \
        FOLDED.get(kernel, [])


@needs_nvcc
def test_a_helpers_spills_are_those_ptxas_printed_for_the_kernel(checked: Run) -> None:
    kernels = {k["kernel"]: k for k in checked.json()["kernels"]}
    for tight, loose in (("tight_first", "loose_second"), ("tight_second", "loose_first")):
        assert kernels[tight]["spill_bytes"] > 0 and kernels[loose]["spill_bytes"] == 0, kernels
    message = next(f["message"] for f in checked.json()["findings"]
                   if (f["code"], f["kernel"]) == ("KG103", "tight_first"))
    assert "of the stores in `pressure`, which the kernel calls" in message, message


@needs_nvcc
@pytest.mark.parametrize("drop_compile_times", [False, True])
def test_a_log_names_each_kernels_own_figures_of_a_helper(tmp_path: Path, drop_compile_times: bool) -> None:
    """The log as ptxas writes it, and without its "Compile time" lines (as older releases write it): the figures
    after a kernel's are the kernel's own."""
    source = tmp_path / "k.cu"
    source.write_text(PRESSURE + TIGHT.format(name="tight_first") + LOOSE.format(name="loose_second"))
    log = subprocess.run(["nvcc", "-arch=sm_120a", "-O3", "-cubin", "-Xptxas", "-v", str(source), "-o",
                          str(tmp_path / "k.cubin")], check=True, capture_output=True, text=True).stderr
    if drop_compile_times:
        log = "\n".join(line for line in log.splitlines() if "Compile time" not in line)
    from kgate.facts.ptxas_log import frames_for, function_frames

    frames = function_frames(log)
    helper = {function_name(entry): next(f for n, f in frames_for(frames, entry).items() if "pressure" in n)
              for entry in ("_Z11tight_firstPKfPfi", "_Z12loose_secondPKfPfi")}
    assert helper["tight_first"].spill_stores > 0 == helper["loose_second"].spill_stores, helper


@needs_nvcc
def test_a_function_compiled_apart_is_found_for_every_kernel(tmp_path: Path) -> None:
    source = tmp_path / "k.cu"
    source.write_text(PRESSURE + TIGHT.format(name="tight_first") + LOOSE.format(name="loose_second"))
    base = ["nvcc", "-arch=sm_120a", "-O3", "-rdc=true"]
    log = subprocess.run([*base, "-cubin", "-Xptxas", "-v", str(source), "-o", str(tmp_path / "k.cubin")], check=True,
                         capture_output=True, text=True).stderr
    facts = parse_ptx(_nvcc_ptx(tmp_path, source, "-rdc=true"))
    from kgate.facts.ptxas_log import frames_for, function_frames

    frames = function_frames(log)
    for kernel in ("tight_first", "loose_second"):
        entry = _entry(facts, kernel)
        called = frames_for(frames, entry.name)
        assert entry.calls and all(name in called for name in entry.calls), (entry.calls, frames)
