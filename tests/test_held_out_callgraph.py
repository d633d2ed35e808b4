"""Held-out cases for the PTX call graph and the block-scale expectation of a Triton kernel's helpers.

tests/data/callgraph/held_out.cu is compiled by nvcc here (PTX): state spaces named after other qualifiers
(`ld.volatile.shared`, `st.shared::cta`, `st.async.shared::cluster`), `cp.async` bookkeeping, shared-to-shared
bulk copies, `__constant__` and local memory touch no global memory; textures, surfaces, `wmma.load`, relaxed
and acquire loads, TMA copies, templates, lambdas and virtual calls do; waits through
`cudaGridDependencySynchronize()` and inline asm blocks in callees count where they are called.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kgate.facts.callgraph import INDIRECT, function_name
from kgate.facts.ptx import PtxEntry, PtxFacts, is_global_access, parse_ptx

DATA = Path(__file__).parent / "data" / "callgraph"
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")

# kernel -> (reaches a global access before the wait, the functions the first one is reached through or None)
PDL = {
    "volatile_shared_before_wait": (False, None),
    "shared_cta_before_wait": (False, None),
    "shared_atomic_before_wait": (False, None),
    "cp_bookkeeping_before_wait": (False, None),
    "dsmem_store_before_wait": (False, None),
    "smem_to_dsmem_before_wait": (False, None),
    "constant_before_wait": (False, None),
    "local_before_wait": (False, None),
    "params_before_wait": (False, None),
    "param_pointer_deref_before_wait": (True, []),
    "texture_before_wait": (True, ["tex_read"]),
    "texture_after_wait": (False, None),
    "surface_before_wait": (True, ["surf_read"]),
    "wmma_before_wait": (True, ["wmma_load"]),
    "relaxed_global_before_wait": (True, ["relaxed_global"]),
    "acquire_generic_before_wait": (True, ["acquire_generic"]),
    "asm_block_load_before_wait": (True, ["asm_block_load"]),
    "tma_before_wait": (True, ["tma_load"]),
    "tma_after_wait": (False, None),
    "template_before_wait": (True, ["tget<float>"]),
    "lambda_before_wait": (True, None),
    "lambda_after_wait": (False, None),
    "forceinline_calls_noinline_before_wait": (True, None),
    "gds_in_callee": (False, None),
    "load_then_gds_in_callee": (True, None),
    "inlined_wait_in_noinline": (False, None),
    "asm_block_wait_in_callee": (False, None),
    "wait_after_syncthreads_loop": (False, None),
    "load_in_loop_before_wait": (True, []),
    "wait_first_in_loop": (False, None),
    "virtual_before_wait": (True, ["Base::get"]),  # devirtualised by nvcc: a `selp` of the two methods
    "virtual_after_wait": (False, None),
}


@pytest.fixture(scope="module")
def cuda(tmp_path_factory: pytest.TempPathFactory) -> PtxFacts:
    ptx = tmp_path_factory.mktemp("held_out") / "held_out.ptx"
    subprocess.run(["nvcc", "-arch=sm_120a", "-O3", "-std=c++17", "-ptx", str(DATA / "held_out.cu"), "-o", str(ptx)],
                   check=True, capture_output=True)
    return parse_ptx(ptx.read_text())


def _entry(facts: PtxFacts, kernel: str) -> PtxEntry:
    return next(e for e in facts.entries if function_name(e.name) == kernel)


@needs_nvcc
@pytest.mark.parametrize("kernel", sorted(PDL))
def test_what_a_kernel_touches_before_its_wait(cuda: PtxFacts, kernel: str) -> None:
    entry = _entry(cuda, kernel)
    unwaited, via = PDL[kernel]
    assert bool(entry.unwaited_accesses) == unwaited, entry
    if unwaited and via is not None:
        assert [function_name(v) if v != INDIRECT else v for v in entry.unwaited_accesses[0].via] == via
    assert entry.has_wait


@pytest.mark.parametrize(("opcode", "touches"), [
    ("ld.volatile.shared.f32", False), ("st.volatile.shared.u32", False), ("ld.shared::cta.u32", False),
    ("st.shared::cluster.u32", False), ("atom.relaxed.cta.shared::cta.add.u32", False),
    ("st.async.shared::cluster.mbarrier::complete_tx::bytes.u32", False), ("ld.param::entry.u64", False),
    ("cp.async.wait_group", False), ("cp.async.bulk.commit_group", False), ("cp.async.mbarrier.arrive.b64", False),
    ("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes", False),
    ("ld.relaxed.gpu.global.u32", True), ("ld.acquire.gpu.u32", True), ("ld.volatile.global.u32", True),
    ("ld.global.nc.L1::no_allocate.v4.u32", True), ("cp.async.cg.shared.global", True),
    ("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group", True),
    ("tex.2d.v4.f32.f32", True), ("suld.b.1d.b32.trap", True), ("sust.b.1d.b32.trap", True),
    ("wmma.load.a.sync.aligned.row.m16n16k16.f16", True), ("wmma.store.d.sync.aligned.row.m16n16k16.global.f32", True),
    ("wmma.load.b.sync.aligned.col.m16n16k16.shared.f16", False), ("ldmatrix.sync.aligned.m8n8.x4.shared.b16", False),
])
def test_the_state_space_is_read_wherever_it_stands_in_the_opcode(opcode: str, touches: bool) -> None:
    assert is_global_access(opcode) == touches


E2E = '''\
import triton
import triton.language as tl

import kgate
import helpers as h

MIXED = dict(a="*bf16", b="*fp8e4nv", b_scale="*u8", c="*fp32")


@kgate.register(signature=MIXED, constexprs={"BM": 128, "BN": 128, "BK": 128}, kind="gemm", num_warps=8)
@triton.jit
def plain_through_a_module_alias(a, b, b_scale, c, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    h.mixed_tile_elsewhere(a, b, b_scale, c, BM, BN, BK)


@kgate.register(signature=MIXED, kind="gemm")
@triton.autotune(configs=[triton.Config({"BM": 128, "BN": 128, "BK": 128}, num_warps=8)], key=[])
@triton.jit
def autotuned_through_a_module_alias(a, b, b_scale, c, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    h.mixed_tile_elsewhere(a, b, b_scale, c, BM, BN, BK)
'''


def test_a_helper_reached_through_a_module_alias_gives_the_compiled_kernel_its_expectation(tmp_path: Path) -> None:
    pytest.importorskip("triton")
    from conftest import REPO, kgate

    shutil.copy(REPO / "fixtures" / "callgraph" / "helpers.py", tmp_path / "helpers.py")
    (tmp_path / "kernels.py").write_text(E2E)
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\npython-path = ["."]\nselect = ["KG101"]\n')
    run = kgate("check", "--format", "json", cwd=tmp_path)
    kernels = {k["kernel"]: k for k in run.json()["kernels"]}
    assert set(kernels) == {"kernels:plain_through_a_module_alias", "kernels:autotuned_through_a_module_alias"}, \
        run.stderr
    assert all(k["expect"] == ["block_scale"] for k in kernels.values())
    # The bf16 x e4m3 product of the helper is compiled as the compiler makes it: the finding follows the PTX.
    scaled = {name for name, k in kernels.items() if any("block_scale" in op for op in k["instructions"])}
    found = {f["kernel"] for f in run.json()["findings"] if f["code"] == "KG101"}
    assert found == set(kernels) - scaled
