"""The PTX call graph on real compiler output: tests/data/callgraph/attack.cu (compiled by nvcc here, PTX and
ptxas log) and attack_triton.py (compiled by Triton here, with PDL) plant one edge case per kernel: recursion,
mutual recursion, a callee called twice, waits in one branch, calls through function pointers, inline against
noinline, cp.async, bulk copies, atomics, stores and generic loads in callees, a callee defined after its use,
`.extern` and `.weak` functions, kernels sharing helpers, spills and MMA of called functions.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kgate.facts.callgraph import INDIRECT, function_name
from kgate.facts.ptx import PtxEntry, PtxFacts, parse_ptx
from kgate.facts.ptxas_log import frames_for, function_frames, parse_ptxas_log, resources

DATA = Path(__file__).parent / "data" / "callgraph"
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")

# kernel -> (reaches an access before the wait, the functions the first such access is reached through)
PDL = {
    "recursion_before_wait": (True, ["rec"]),
    "recursion_after_wait": (False, None),
    "mutual_before_wait": (True, ["mut_a", "mut_b"]),
    "mutual_after_wait": (False, None),
    "twice_after_wait": (False, None),
    "twice_first_before": (True, ["load"]),
    "callee_waits_in_one_branch": (True, []),
    "callee_waits_in_both_branches": (False, None),
    "callee_returns_early_unwaited": (True, []),
    "wait_call_in_one_branch": (True, []),
    "pointer_before_wait": (True, ["load"]),  # `c ? load : nullptr`: the pointer is `load` or calls nothing
    "pointer_after_wait": (False, None),
    "pointer_to_waiting_function": (True, []),  # the table's load comes first; the pointer may not wait
    "inlined_before_wait": (True, []),
    "cp_async_before_wait": (True, ["async_copy"]),
    "bulk_copy_before_wait": (True, ["bulk_copy"]),
    "store_before_wait": (True, ["store"]),
    "red_before_wait": (True, ["red_add"]),
    "red_after_wait": (False, None),
    "ldg_before_wait": (True, ["ldg"]),
    "generic_before_wait": (True, ["generic"]),
    "shared_only_before_wait": (False, None),
    "defined_after_use": (True, ["defined_after"]),
    "callee_waits_then_loads": (False, None),
    "callee_loads_then_waits": (True, []),
    "five_levels_down": (True, ["d4", "d3", "d2", "d1", "load"]),
    "shared_helper_waits_first": (False, None),
    "shared_helper_loads_first": (True, ["d2", "d1", "load"]),
    "launch_in_callee": (False, None),
    "only_wait_in_callee": (False, None),
}


def _compile(tmp: Path, source: Path, *flags: str) -> tuple[str, str]:
    ptx, cubin = tmp / (source.stem + ".ptx"), tmp / (source.stem + ".cubin")
    base = ["nvcc", "-arch=sm_120a", "-O3", "-std=c++17", *flags]
    subprocess.run([*base, "-ptx", str(source), "-o", str(ptx)], check=True, capture_output=True)
    log = subprocess.run([*base, "-cubin", "-Xptxas", "-v", str(source), "-o", str(cubin)], check=True,
                         capture_output=True, text=True)
    return ptx.read_text(), log.stdout + log.stderr


@pytest.fixture(scope="module")
def cuda(tmp_path_factory: pytest.TempPathFactory) -> tuple[PtxFacts, str]:
    text, log = _compile(tmp_path_factory.mktemp("attack"), DATA / "attack.cu")
    return parse_ptx(text), log


def _entry(facts: PtxFacts, kernel: str) -> PtxEntry:
    return next(e for e in facts.entries if function_name(e.name) == kernel)


@needs_nvcc
@pytest.mark.parametrize("kernel", sorted(PDL))
def test_accesses_and_waits_count_where_they_are_called(cuda: tuple[PtxFacts, str], kernel: str) -> None:
    entry = _entry(cuda[0], kernel)
    unwaited, via = PDL[kernel]
    assert bool(entry.unwaited_accesses) == unwaited, entry
    if unwaited:
        assert [function_name(v) if v != INDIRECT else v for v in entry.unwaited_accesses[0].via] == via
    assert entry.has_wait or kernel == "pointer_to_waiting_function"


@needs_nvcc
def test_a_call_through_a_pointer_is_opaque_and_reaches_every_function_whose_address_is_taken(
        cuda: tuple[PtxFacts, str]) -> None:
    entry = _entry(cuda[0], "pointer_to_waiting_function")  # a pointer read from a table the kernel is passed
    assert entry.opaque_calls == (INDIRECT,) and any(a.opaque for a in entry.unwaited_accesses)
    assert {"load", "scaled_tile"} <= {function_name(c) for c in entry.calls}
    # A pointer the dataflow holds to the module's own functions is a call of them, not of a function pointer.
    resolved = _entry(cuda[0], "pointer_before_wait")
    assert resolved.opaque_calls == () and "load" in {function_name(c) for c in resolved.calls}
    assert not any(a.opaque for a in resolved.unwaited_accesses)


@needs_nvcc
def test_launch_dependents_in_a_callee_is_the_kernels(cuda: tuple[PtxFacts, str]) -> None:
    assert _entry(cuda[0], "launch_in_callee").has_launch_dependents


def _resources(cuda: tuple[PtxFacts, str], kernel: str):
    facts, log = cuda
    entry = _entry(facts, kernel)
    frames = frames_for(function_frames(log), entry.name)
    return resources(parse_ptxas_log(log)[entry.name], 0, tuple((c, frames[c]) for c in entry.calls if c in frames))


@needs_nvcc
def test_spills_of_called_functions_count_once_each_and_only_where_reached(cuda: tuple[PtxFacts, str]) -> None:
    twice_name = _entry(cuda[0], "spill_called_twice").name
    frames = frames_for(function_frames(cuda[1]), twice_name)
    helper = next(f for name, f in frames.items() if function_name(name) == "spill")
    assert helper.spill_stores > 0
    twice, deep = _resources(cuda, "spill_called_twice"), _resources(cuda, "spill_two_levels")
    own = parse_ptxas_log(cuda[1])[twice_name].spill_stores
    assert twice.spill_stores == own + helper.spill_stores  # once, though it is called twice
    assert deep.spill_stores >= helper.spill_stores and any(function_name(c[0]) == "spill" for c in deep.callees)
    assert not any(function_name(c[0]) == "spill" for c in _resources(cuda, "spill_not_called").callees)
    assert _resources(cuda, "recursion_stack").stack_bytes > 0


@needs_nvcc
@pytest.mark.parametrize(("kernel", "scaled"), [("mma_two_levels", True), ("mma_through_pointer", True),
                                                 ("mma_not_called", False)])
def test_block_scaled_mma_of_called_functions(cuda: tuple[PtxFacts, str], kernel: str, scaled: bool) -> None:
    entry = _entry(cuda[0], kernel)
    assert any("block_scale" in op for op in entry.mma) == scaled
    assert bool(entry.opaque_calls) == (kernel == "mma_through_pointer")


@needs_nvcc
def test_extern_and_weak_functions(tmp_path: Path) -> None:
    source = tmp_path / "rdc.cu"
    source.write_text(
        "extern __device__ float ext_load(const float* x);\n"
        "template <int N> __device__ __noinline__ float tload(const float* x) { return x[N]; }\n"
        "__global__ void extern_before_wait(const float* x, float* o) {\n"
        "  float v = ext_load(x); asm volatile(\"griddepcontrol.wait;\" ::: \"memory\"); o[0] = v; }\n"
        "__global__ void weak_before_wait(const float* x, float* o) {\n"
        "  float v = tload<3>(x); asm volatile(\"griddepcontrol.wait;\" ::: \"memory\"); o[0] = v; }\n")
    ptx = tmp_path / "rdc.ptx"
    subprocess.run(["nvcc", "-arch=sm_120a", "-rdc=true", "-ptx", str(source), "-o", str(ptx)], check=True)
    text = ptx.read_text()
    assert ".extern .func" in text and ".weak .func" in text
    facts = parse_ptx(text)
    extern = _entry(facts, "extern_before_wait")
    assert [function_name(n) for n in extern.opaque_calls] == ["ext_load"] and extern.unwaited_accesses[0].opaque
    weak = _entry(facts, "weak_before_wait")
    assert not weak.opaque_calls and [function_name(v) for v in weak.unwaited_accesses[0].via] == ["tload<3>"]


TRITON = {
    "called_twice_first_before": (True, ["_load"]),
    "called_twice_after_wait": (False, None),
    "store_in_helper_before_wait": (True, ["_store"]),
    "atomic_in_helper_after_wait": (False, None),
    "wait_under_if_in_helper": (True, []),
    "wait_and_launch_in_helpers": (False, None),
    "shared_helper_before_wait": (True, ["_via", "_load"]),
    "inlined_load_before_wait": (True, []),
}


@pytest.mark.parametrize("kernel", sorted(TRITON))
def test_triton_noinline_functions(kernel: str) -> None:
    pytest.importorskip("triton")
    import importlib.util

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    spec = importlib.util.spec_from_file_location("attack_triton", DATA / "attack_triton.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = getattr(module, kernel)
    compiled = triton.compile(ASTSource(fn, {"x": "*fp32", "out": "*fp32"}, {}),
                              target=GPUTarget("cuda", 120, 32), options={"launch_pdl": True})
    entry = parse_ptx(compiled.asm["ptx"]).entry()
    unwaited, via = TRITON[kernel]
    assert bool(entry.unwaited_accesses) == unwaited, entry
    if unwaited:
        assert [function_name(v, "attack_triton") for v in entry.unwaited_accesses[0].via] == via
    assert entry.has_wait
    assert entry.has_launch_dependents == (kernel == "wait_and_launch_in_helpers")


def test_a_deep_chain_written_caller_first_is_read_in_linear_passes() -> None:
    # Summaries are computed callees first, so a chain settles in one pass whatever order the text has.
    import time

    depth = 1500
    parts = [".version 8.7\n.target sm_120a\n.address_size 64\n"]
    for i in range(depth):
        body = f"call.uni f{i + 1}, ();" if i < depth - 1 else "ld.global.u32 %r1, [%rd1];"
        parts.append(f".func f{i}()\n{{\n.reg .b32 %r<2>;\n.reg .b64 %rd<2>;\n{body}\nret;\n}}\n")
    parts.append(".visible .entry k()\n{\ncall.uni f0, ();\ngriddepcontrol.wait;\nret;\n}\n")
    started = time.perf_counter()
    entry = parse_ptx("".join(parts)).entry()
    assert time.perf_counter() - started < 20
    assert len(entry.calls) == depth and entry.unwaited_accesses[0].via[-1] == f"f{depth - 1}"
