"""Gluon kernels (`@gluon.jit`, explicit layouts) gated like Triton kernels, compiled by the real compiler.

fixtures/gluon/rules holds a planted bad case and a good twin in Gluon for each compiled rule that applies to a Gluon
kernel, registered with `@kgate.register`; fixtures/gluon/capture holds Gluon kernels a project launches (plain and
autotuned, on CPU tensors under `kgate capture`) and registers (in kgate.toml and with `@kgate.register`).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, Run, copy_project, expectations, kgate

from kgate.capture.session import Recorded
from kgate.collect import captures
from kgate.commands.capture import _captured_facts
from kgate.core.config import load_config
from kgate.pipeline.capture_verify import verify

RULES = FIXTURES / "gluon" / "rules"


def found(run: Run) -> set[tuple[str, int, str, str]]:
    return {(f["path"], f["line"], f["code"], f["target"] or "") for f in run.json()["findings"]}


@pytest.fixture(scope="module")
def rules_checked(tmp_path_factory: pytest.TempPathFactory) -> Run:
    project = copy_project("gluon/rules", tmp_path_factory.mktemp("gluon-rules"))
    return kgate("check", "--format", "json", "--no-cache", cwd=project)


def test_each_compiled_rule_reports_exactly_the_planted_gluon_cases(rules_checked: Run) -> None:
    """Every Gluon variant compiles (through Gluon's own source class: as Triton source each one was a compile
    error), for both targets, and the findings are the inline expectations, good twins clean."""
    assert rules_checked.code == 1, rules_checked.stderr
    report = rules_checked.json()
    assert not [f for f in report["findings"] if f["code"] == "KG001"], report["findings"]
    kernels = {(k["kernel"], k["target"]) for k in report["kernels"]}
    assert len(kernels) == 18 and {target for _kernel, target in kernels} == {"sm_120a", "sm_90a"}
    assert found(rules_checked) == expectations(RULES)
    # The tile past the cap is one finding: its spill and the local memory in its loop are told inside it.
    ceiling = [f["folded"] for f in report["findings"] if f["kernel"].endswith(":gemm_128x256")]
    assert ceiling == [["KG103", "KG109"]] * 2, ceiling


def test_a_gluon_kernel_over_the_shared_memory_budget_is_not_told_about_pipeline_stages(rules_checked: Run) -> None:
    """A Gluon kernel allocates its shared memory itself; `num_stages` drives no pipeline in its compile. The budget
    message said "4 pipeline buffers of 32768 bytes at num_stages=3; 3 fit (num_stages=2)", an option that would
    change nothing."""
    smem = [f["message"] for f in rules_checked.json()["findings"] if f["code"] == "KG104"]
    assert smem and all("num_stages" not in message and "stages" not in message for message in smem), smem


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Run]:
    pytest.importorskip("torch", reason="the captured launchers take torch tensors (pip install torch, or kgate's "
                                        "extra ulp: kernel-gate[ulp])")
    project = copy_project("gluon/capture", tmp_path_factory.mktemp("gluon-capture"))
    run = kgate("capture", "--device", "cpu", "--", sys.executable, "launch.py", cwd=project)
    assert run.code == 0, run.stderr
    return project, run


def test_gluon_launches_are_captured_like_triton_launches(captured: tuple[Path, Run]) -> None:
    project, run = captured
    entries = captures.load(project / "kgate-capture.toml", "kgate-capture.toml").entries
    assert "6 specialisation(s) of 3 kernel(s) launched offline for sm_120a" in run.stderr
    assert sorted({e.spec.kernel for e in entries}) == ["ops:copy_in_layout", "ops:copy_kernel", "ops:tuned_add"]
    # Offline, the autotuner over a Gluon kernel binds every config, as over a Triton kernel.
    assert sorted(e.spec.constexprs["BLOCK"] for e in entries if e.spec.kernel == "ops:tuned_add") == [512, 2048]


def test_a_layout_passed_as_a_constexpr_is_captured_as_the_call_that_makes_it(captured: tuple[Path, Run]) -> None:
    """Triton's launcher turns a launch into JSON for the hook kgate records with, and raised TypeError ("Object of
    type BlockedLayout is not JSON serializable") on a layout constexpr: the captured command failed where it
    works without kgate. Now it runs, and the layout is kept in a form kgate compiles it from again."""
    project, _run = captured
    layouts = sorted(e.spec.constexprs["layout"] for e in captures.load(project / "kgate-capture.toml",
                                                                         "kgate-capture.toml").entries
                     if e.spec.kernel == "ops:copy_in_layout")
    assert layouts == [f"gl.BlockedLayout(size_per_thread=[{n}], threads_per_warp=[32], warps_per_cta=[4], order=[0], "
                       f"cga_layout=[])" for n in (4, 8)]


def test_captured_and_registered_gluon_kernels_compile_and_pass(captured: tuple[Path, Run]) -> None:
    project, _run = captured
    run = kgate("check", "--format", "json", cwd=project)
    assert run.code == 0, run.stdout + run.stderr
    rows = {(k["kernel"], k["target"], k["source"]) for k in run.json()["kernels"]}
    # Captured offline for sm_120a: gated there; registered (kgate.toml, @kgate.register): on both targets.
    assert {(kernel, target) for kernel, target, source in rows if source == "captured"} == {
        ("ops:copy_in_layout", "sm_120a"), ("ops:copy_kernel", "sm_120a"), ("ops:tuned_add", "sm_120a")}
    assert {(kernel, target) for kernel, target, source in rows if source == "registered"} == {
        (kernel, target) for kernel in ("ops:scale_rows", "ops:cast_kernel", "ops:copy_in_layout")
        for target in ("sm_120a", "sm_90a")}
    cast = next(k for k in run.json()["kernels"] if k["kernel"] == "ops:cast_kernel")
    assert cast["constexprs"]["OUT"] == "tl.bfloat16"  # gl.bfloat16 in @kgate.register is Triton's dtype


def test_a_triton_without_gluon_is_named_instead_of_a_failed_import(tmp_path: Path) -> None:
    """A Triton before 3.4 has no `triton.experimental.gluon`: the kernel's module cannot import it, and kgate says
    which Triton lacks Gluon rather than passing on Python's "No module named" (the set-up hook takes Gluon away, as
    such a Triton would)."""
    project = copy_project("gluon/rules", tmp_path)
    (project / "no_gluon.py").write_text('import sys\n\nsys.modules["triton.experimental"] = None\n')
    (project / "kgate.toml").write_text((project / "kgate.toml").read_text() + 'setup = "no_gluon.py"\n')
    run = kgate("check", "--format", "json", "--no-cache", "--target", "sm_120a", cwd=project)
    assert run.code == 1, run.stderr
    errors = {f["message"] for f in run.json()["findings"] if f["code"] == "KG001"}
    assert errors and all("which Triton" in m and "does not have (Gluon came with Triton 3.4)" in m
                          for m in errors), errors


def test_a_gluon_layout_is_read_back_equal_and_nothing_else_is_called() -> None:
    """The capture file and the configuration are inputs: a layout is read back by calling Gluon's own dataclasses
    with literal fields, never by evaluating the text."""
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.blackwell import TensorMemoryLayout

    from kgate.compile.gluon import NotGluon, gluon_object
    from kgate.core.constexpr import encode_constant

    mma = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[4, 1], instr_shape=[16, 8])
    for layout in (gl.DotOperandLayout(operand_index=0, parent=mma, k_width=2), gl.SliceLayout(0, mma),
                   gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2),
                   TensorMemoryLayout(block=(128, 128), col_stride=1)):
        assert gluon_object(encode_constant(layout)) == layout
    for text in ("gl.BlockedLayout(__import__('os').getcwd())", "os.getcwd()", "gl.load(x=1)",
                 "triton.experimental.gluon.language._layouts.DistributedLayout()",
                 "gl.BlockedLayout(size_per_thread=[open('f')])"):
        with pytest.raises(NotGluon):
            gluon_object(text)


def test_capture_verify_compares_a_gluon_specialisation_with_the_kernel_a_gpu_loaded(
        captured: tuple[Path, Run], capsys: pytest.CaptureFixture[str]) -> None:
    """`kgate capture --verify` compiles each captured Gluon specialisation offline for the GPU's architecture (sm_90a
    for an H100 or H200) and compares it with what the driver reported: equal figures pass, one off fails. (Before
    Gluon's source class, every Gluon row was "not compiled offline".) The driver's figures are planted here."""
    project, _run = captured
    config = load_config(start=project)
    entry = next(e for e in captures.load(project / "kgate-capture.toml", "kgate-capture.toml").entries
                 if e.spec.kernel == "ops:copy_in_layout")
    compiled = _captured_facts(config, [entry], "sm_90a", 1)
    assert not compiled.failures and len(compiled.facts) == 1
    res = compiled.facts[0].resources
    same = {"arch": 90, "n_regs": res.registers, "shared": res.smem_bytes, "local": res.stack_bytes}

    def recorded(live: dict) -> Recorded:
        made = Recorded(file=captures.CaptureFile(entries=[entry]))
        made.live[f"{entry.spec.kernel}|{entry.spec.variant}"] = live
        return made

    assert verify(config, recorded(same), jobs=1, compile_facts=_captured_facts) is False
    assert "1 specialisation(s): 1 equal to the live kernel, 0 different" in capsys.readouterr().out
    assert verify(config, recorded({**same, "n_regs": same["n_regs"] + 8}), jobs=1,
                  compile_facts=_captured_facts) is True
    assert "DIFFERENT: registers" in capsys.readouterr().out


@pytest.mark.gpu
def test_on_a_gpu_every_captured_gluon_specialisation_equals_the_live_kernel(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch", reason="the launchers take torch tensors")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    project = copy_project("gluon/capture", tmp_path)
    run = kgate("capture", "--verify", "--", sys.executable, "launch.py", "--device", "cuda", cwd=project,
                process=True)
    assert run.code == 0, run.stdout + run.stderr
    assert " 0 different, 0 not compiled offline" in run.stdout.rstrip().splitlines()[-1], run.stdout
    rows = [line for line in run.stdout.splitlines()[1:] if line.startswith("ops:")]
    assert len(rows) == 6 and all(line.rstrip().endswith("equal") for line in rows), run.stdout


HOPPER_MMA = '''
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import warpgroup_mma


@gluon.jit
def wgmma_tile(out):
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                         instr_shape=[16, 64, 16])
    tile: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)
    a = gl.allocate_shared_memory(gl.float16, [64, 64], tile)
    b = gl.allocate_shared_memory(gl.float16, [64, 64], tile)
    acc = warpgroup_mma(a, b, gl.zeros((64, 64), gl.float32, acc_layout))
    rows = gl.arange(0, 64, gl.SliceLayout(1, acc_layout))
    cols = gl.arange(0, 64, gl.SliceLayout(0, acc_layout))
    gl.store(out + rows[:, None] * 64 + cols[None, :], acc)
'''


def test_a_kernel_the_compiler_aborts_on_for_a_target_says_what_the_compiler_said(tmp_path: Path) -> None:
    """Hopper's warpgroup MMA has no sm_120a instruction: Triton's LLVM backend aborts the process ("LLVM ERROR:
    Cannot select: intrinsic %llvm.nvvm.wgmma..."). The finding said only that the compile worker died (exit status
    -6), the compiler's reason left on the terminal; it now quotes it. The kernel compiles for sm_90a."""
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a", "sm_90a"]\n\n[[triton]]\n'
                                         'kernel = "hopper_mma:wgmma_tile"\nsignature = { out = "*fp32" }\n')
    (tmp_path / "hopper_mma.py").write_text(HOPPER_MMA)
    run = kgate("check", "--format", "json", "--no-cache", cwd=tmp_path)
    report = run.json()
    assert [k["target"] for k in report["kernels"]] == ["sm_90a"], report["kernels"]
    (finding,) = report["findings"]
    assert (finding["code"], finding["target"]) == ("KG001", "sm_120a")
    assert "LLVM ERROR: Cannot select: intrinsic %llvm.nvvm.wgmma" in finding["message"], finding["message"]


TENSOR_MEMORY = '''
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.blackwell import TensorMemoryLayout, allocate_tensor_memory


@gluon.jit
def tmem_round_trip(src, dst, M: gl.constexpr, N: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [1, 4], [1, 0])
    offs = gl.arange(0, M, gl.SliceLayout(1, layout))[:, None] * N + gl.arange(0, N, gl.SliceLayout(0, layout))[None, :]
    tmem = allocate_tensor_memory(gl.float32, [M, N], TensorMemoryLayout(block=(64, 64), col_stride=1))
    tmem.store(gl.convert_layout(gl.load(src + offs), tmem.get_reg_layout()))
    gl.store(dst + offs, gl.convert_layout(tmem.load(), layout))
'''


def test_a_kernel_the_target_lacks_the_instructions_of_names_them_at_its_line(tmp_path: Path) -> None:
    """Tensor memory is Blackwell's (sm_100a): for sm_120a and sm_90a Triton's verifier prints "file:line:col: error:
    'ttng.tmem_alloc' op requires tcgen05 support" and raises "error encountered during parsing". The finding said
    only the latter, at the kernel's definition; it now says what the compiler said, at the line it said it of."""
    from importlib.metadata import version

    release = tuple(int(part) for part in version("triton").split(".")[:2])
    if release < (3, 7):
        pytest.skip("the kernel is written in the Gluon of Triton 3.7 and later (tensor memory's get_reg_layout)")
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a", "sm_90a"]\n\n[[triton]]\n'
                                         'kernel = "tmem:tmem_round_trip"\n'
                                         'signature = { src = "*fp32", dst = "*fp32" }\nconstexprs = { M = 64, N = 64 }\n')
    (tmp_path / "tmem.py").write_text(TENSOR_MEMORY)
    for _run in range(2):  # compiled, then read back from the cache
        findings = kgate("check", "--format", "json", cwd=tmp_path).json()["findings"]
        assert sorted(f["target"] for f in findings) == ["sm_120a", "sm_90a"], findings
        for finding in findings:
            verified = "'ttng.tmem_alloc' op requires tcgen05 support" in finding["message"]
            if release >= (3, 9) or verified:  # the verifier names the line of the allocation
                assert finding["code"] == "KG001" and finding["line"] == 11 and verified, finding
            else:  # earlier verifiers let it through and LLVM aborts, naming no line: the kernel's definition
                assert finding["code"] == "KG001" and finding["line"] == 8 and "tcgen05" in finding["message"], finding


FRONT_END_ERROR = '''
from triton.experimental import gluon
from triton.experimental.gluon import language as gl


@gluon.jit
def carried(src, n):
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    total = 0
    for start in range(0, n, 128):
        total = total + gl.load(src + start + gl.arange(0, 128, layout))
    gl.store(src + gl.arange(0, 128, layout), total)
'''


def test_a_front_end_error_is_reported_at_the_line_it_is_of(tmp_path: Path) -> None:
    """Triton's front end says where in the kernel it failed counted from the `def` ("at 4:4: Loop carried variable
    total changed type"); the finding was put at the `def`. It is now at the line, the count gone from the message."""
    (tmp_path / "kgate.toml").write_text('[[triton]]\nkernel = "loop:carried"\n'
                                         'signature = { src = "*fp32", n = "i32" }\n')
    (tmp_path / "loop.py").write_text(FRONT_END_ERROR)
    (finding,) = kgate("check", "--format", "json", "--no-cache", cwd=tmp_path).json()["findings"]
    assert (finding["code"], finding["line"]) == ("KG001", 10), finding
    assert "total" in finding["message"] and not finding["message"].startswith("at "), finding["message"]


DESCRIPTORS = '''
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma

# Gluon's names for the copies since Triton 3.7, and before it
tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared
tma_store = getattr(tma, "async_store", None) or tma.async_copy_shared_to_global


@gluon.jit
def tma_copy(src_desc, dst_desc):
    smem = gl.allocate_shared_memory(src_desc.dtype, src_desc.block_type.shape, src_desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    mbarrier.expect(bar, src_desc.block_type.nbytes)
    tma_load(src_desc, [0, 0], bar, smem)
    mbarrier.wait(bar, phase=0)
    mbarrier.invalidate(bar)
    fence_async_shared()
    tma_store(dst_desc, [0, 0], smem)
    tma.store_wait(pendings=0)


@triton.jit
def desc_copy(src_desc, dst_desc):
    dst_desc.store([0, 0], src_desc.load([0, 0]))
'''

DESCRIPTOR_LAUNCHES = '''
import torch
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor as GluonDescriptor
from triton.tools.tensor_descriptor import TensorDescriptor

import descs

a = torch.empty(64, 64, dtype=torch.float16)
shared = gl.NVMMASharedLayout.get_default_for([64, 64], gl.float16)
descs.tma_copy[(1,)](GluonDescriptor(a, a.shape, a.stride(), [64, 64], shared),
                     GluonDescriptor(a, a.shape, a.stride(), [64, 64], shared))
b = torch.empty(32, 64, dtype=torch.bfloat16)
descs.desc_copy[(1,)](TensorDescriptor.from_tensor(b, [32, 64]), TensorDescriptor.from_tensor(b, [32, 64]))
'''

GLUON_DESCRIPTOR = ("tensordesc<fp16[64, 64],NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2, "
                    "transposed=False, fp4_padded=False, cga_layout=[])>")


def test_a_kernel_taking_tensor_descriptors_is_registered_as_its_launch_is_captured(tmp_path: Path) -> None:
    """Gluon's TMA kernels take `TensorDescriptor`s (Triton's tutorials 04 to 08): a capture records their type,
    `tensordesc<fp16[64, 64],NVMMASharedLayout(...)>`, but a registration with that type in its `signature` was a
    compile error ("kgate cannot make an example value of this type; give one in `args`"), and `args` has no form for
    a descriptor. kgate now makes a descriptor of the type for the launcher, Gluon's or Triton's, and the
    registration is the launch the capture recorded: the same specialisation, compiled for both targets."""
    pytest.importorskip("torch", reason="the captured launches take torch tensors")
    (tmp_path / "descs.py").write_text(DESCRIPTORS)
    (tmp_path / "launch.py").write_text(DESCRIPTOR_LAUNCHES)
    (tmp_path / "kgate.toml").write_text(
        'targets = ["sm_120a", "sm_90a"]\ncapture = "captured.toml"\n\n'
        f'[[triton]]\nkernel = "descs:tma_copy"\nsignature = {{ src_desc = "{GLUON_DESCRIPTOR}", '
        f'dst_desc = "{GLUON_DESCRIPTOR}" }}\n\n'
        '[[triton]]\nkernel = "descs:desc_copy"\n'
        'signature = { src_desc = "tensordesc<bf16[32, 64]>", dst_desc = "tensordesc<bf16[32, 64]>" }\n')
    checked = kgate("check", "--format", "json", "--no-cache", cwd=tmp_path)
    report = checked.json()
    assert not report["findings"], report["findings"]
    registered = {(k["kernel"], k["target"]): k["variant"] for k in report["kernels"]}
    assert sorted(registered) == [("descs:desc_copy", "sm_120a"), ("descs:desc_copy", "sm_90a"),
                                  ("descs:tma_copy", "sm_120a"), ("descs:tma_copy", "sm_90a")]
    run = kgate("capture", "--device", "cpu", "-o", "captured.toml", "--", sys.executable, "launch.py", cwd=tmp_path,
                process=True)
    assert run.code == 0, run.stderr
    entries = captures.load(tmp_path / "captured.toml", "captured.toml").entries
    assert {(e.spec.kernel, e.spec.variant) for e in entries} == {
        (kernel, variant) for (kernel, target), variant in registered.items() if target == "sm_120a"}


WARP_SPECIALIZED = '''
from triton.experimental import gluon
from triton.experimental.gluon import language as gl


@gluon.jit
def _fill(out, layout: gl.constexpr):
    offs = gl.arange(0, 128, layout)
    gl.store(out + offs, offs.to(gl.float32))


@gluon.jit
def _idle(out):
    pass


@gluon.jit
def specialized(out, num_warps: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [num_warps], [0])
    gl.warp_specialize([(_fill, (out, layout)), (_idle, (out, ))], [2], [24])
'''


def test_a_warp_specialised_kernel_counts_the_warps_of_its_worker_partitions(tmp_path: Path) -> None:
    """Gluon's warp-specialised kernels (tutorial 08) launch the default partition's `num_warps` and their worker
    partitions' warps besides, rounded to warpgroups, as their PTX's `.reqntid` says; the row said the launch's
    `num_warps`, and the occupancy was figured for those warps only."""
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a", "sm_90a"]\n\n[[triton]]\nkernel = "ws:specialized"\n'
                                         'signature = { out = "*fp32" }\nconstexprs = { num_warps = 4 }\n'
                                         'num_warps = 4\n')
    (tmp_path / "ws.py").write_text(WARP_SPECIALIZED)
    rows = kgate("check", "--format", "json", "--no-cache", cwd=tmp_path).json()["kernels"]
    assert sorted(k["target"] for k in rows) == ["sm_120a", "sm_90a"], rows
    assert all(k["num_warps"] >= 4 + 2 for k in rows), [(k["target"], k["num_warps"]) for k in rows]
