"""Held-out inputs of `kgate capture`: launches of every tensor dtype Triton takes (fp8 variants, bool, int64,
unsigned), zero-size and non-contiguous tensors, an offset pointer, a grid computed from META, `num_ctas`, `maxnreg`,
integer arguments equal to 1 or beyond 32 bits, a launch under `torch.compiler.disable`, `JITFunction.run`; a
kernel of a module the command wrote and removed; two `--replace` captures at once; spec records whose
specialisation fields no recorder writes. Each launch is recorded as Triton's launcher bound it and compiled by
`kgate check`, or named as not recorded; nothing is recorded that `kgate check` can never compile."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import kgate

from kgate.collect import captures

pytest.importorskip("torch", reason="the captured launchers take torch tensors (pip install torch, or kgate's extra ulp: kernel-gate[ulp])")

OPS = '''\
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs, mask=offs < n)
    tl.store(y + offs, v, mask=offs < n)


@triton.jit
def strided_kernel(x, y, n, stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs * stride, mask=offs < n)
    tl.store(y + offs, v, mask=offs < n)
'''

# The pointer type each dtype's launch is bound with (BLOCK tells the launches apart).
DTYPES = {"float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5", "float8_e4m3fnuz": "fp8e4b8",
          "float8_e5m2fnuz": "fp8e5b16", "bool": "u1", "int64": "i64", "uint8": "u8", "int8": "i8", "int16": "i16",
          "uint16": "u16", "uint32": "u32", "uint64": "u64", "float64": "fp64", "bfloat16": "bf16"}
# Those Triton refuses for an NVIDIA target: `kgate check` reports the compiler's refusal, never a pass.
REFUSED = {"fp8e4b8", "fp8e5b16"}

SHAPES = '''\
import torch, triton, ops
dtypes = {dtypes!r}
for number, name in enumerate(dtypes):
    dt = getattr(torch, name)
    ops.copy_kernel[(1,)](torch.zeros(256, dtype=dt), torch.zeros(256, dtype=dt), 256, BLOCK=2 ** (number + 1))
ops.strided_kernel[(1,)](torch.zeros(0), torch.zeros(0), 0, 1, BLOCK=1)            # zero-size tensors, n == 0
view = torch.zeros(64, 64).t()[1]                                                    # non-contiguous, offset storage
ops.strided_kernel[(1,)](view, torch.zeros(64), 64, view.stride(0), BLOCK=2)
ops.strided_kernel[lambda META: (triton.cdiv(64, META["BLOCK"]),)](
    torch.zeros(64), torch.zeros(64), 64, 3, BLOCK=4)                                # a grid from META
ops.strided_kernel[(1,)](torch.zeros(64), torch.zeros(64), 64, 3, BLOCK=8, num_ctas=2)
ops.strided_kernel[(1,)](torch.zeros(64), torch.zeros(64), 64, 3, BLOCK=16, maxnreg=64)
ops.strided_kernel[(1,)](torch.zeros(64)[1:], torch.zeros(64), 63, 3, BLOCK=32)     # a pointer off 16 bytes
ops.strided_kernel[(1,)](torch.zeros(64), torch.zeros(64), 1, 3, BLOCK=64)          # n == 1
ops.strided_kernel[(1,)](torch.zeros(64), torch.zeros(64), 2 ** 40, 3, BLOCK=128)   # n beyond 32 bits


@torch.compiler.disable
def eager():
    ops.strided_kernel[(1,)](torch.zeros(64), torch.zeros(64), 64, 3, BLOCK=256)


eager()
ops.strided_kernel.run(torch.zeros(64), torch.zeros(64), 64, 3, BLOCK=512, grid=(1,), warmup=False)
'''


def make_project(root: Path) -> Path:
    (root / "ops.py").write_text(OPS)
    (root / "kgate.toml").write_text('targets = ["sm_120a"]\npython-path = ["."]\n')
    return root


def entries(project: Path) -> dict[tuple[str, int], captures.CapturedSpec]:
    found = captures.load(project / "kgate-capture.toml", "kgate-capture.toml").entries
    return {(e.spec.kernel.split(":")[1], int(e.spec.constexprs["BLOCK"])): e for e in found}


def test_launches_of_every_dtype_and_shape_are_recorded_as_bound_and_compiled(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    (project / "shapes.py").write_text(SHAPES.format(dtypes=list(DTYPES)))
    run = kgate("capture", "--device", "cpu", "--", sys.executable, "shapes.py", cwd=project, timeout=300)
    assert run.code == 0 and "Traceback" not in run.stderr, run.stderr
    found = entries(project)
    for number, pointer in enumerate(DTYPES.values()):
        spec = found["copy_kernel", 2 ** (number + 1)].spec
        assert spec.signature == {"n": "i32", "x": f"*{pointer}", "y": f"*{pointer}"}, spec
    strided = {block: found["strided_kernel", block].spec for block in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)}
    assert "n" in strided[1].divisible and "x" in strided[1].divisible  # empty tensors: a null pointer, n == 0
    assert "x" not in strided[2].divisible and "stride" in strided[2].divisible  # offset by one float, stride 64
    assert strided[4].signature == strided[256].signature == strided[512].signature  # as any plain launch
    assert strided[8].options["num_ctas"] == 2 and strided[16].options["maxnreg"] == 64
    assert "x" not in strided[32].divisible and "y" in strided[32].divisible
    assert "n" in strided[64].equal_to_1 and "n" not in strided[64].signature
    assert strided[128].signature["n"] == "i64"
    check = kgate("check", "-j", "2", "--format", "json", cwd=project, timeout=900)
    assert "Traceback" not in check.stderr, check.stderr
    report = json.loads(check.stdout)
    refused = {f["variant"].split(",")[-1].split("#")[0] for f in report["findings"] if f["code"] == "KG001"}
    assert refused == REFUSED, report["findings"]
    assert not [f for f in report["findings"] if f["code"] != "KG001"], report["findings"]
    assert len(report["kernels"]) == len(found) - len(REFUSED)


def test_a_kernel_of_a_module_the_command_removed_is_named_not_recorded(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    (project / "gen.py").write_text(textwrap.dedent('''\
        import importlib, os, pathlib, torch
        pathlib.Path("gen_ops.py").write_text(pathlib.Path("ops.py").read_text())
        importlib.import_module("gen_ops").copy_kernel[(1,)](torch.zeros(64), torch.zeros(64), 64, BLOCK=64)
        os.remove("gen_ops.py")
        import ops
        ops.copy_kernel[(1,)](torch.zeros(64), torch.zeros(64), 64, BLOCK=128)
    '''))
    run = kgate("capture", "--device", "cpu", "--", sys.executable, "gen.py", cwd=project, timeout=300)
    assert "gen_ops:copy_kernel: not recorded: its file gen_ops.py no longer exists" in run.stderr, run.stderr
    assert set(entries(project)) == {("copy_kernel", 128)}  # never an entry `kgate check` calls stale forever


def test_two_replacing_captures_at_once_each_replace_only_their_own_kernels(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    launch = "import ops, torch, time\nops.{kernel}[(1,)](torch.zeros(64), torch.zeros(64), {args}BLOCK={block})\n"
    (project / "first.py").write_text(launch.format(kernel="copy_kernel", args="64, ", block=128))
    (project / "a.py").write_text(launch.format(kernel="copy_kernel", args="64, ", block=64) + "time.sleep(1)\n")
    (project / "b.py").write_text(launch.format(kernel="strided_kernel", args="64, 3, ", block=32) + "time.sleep(1)\n")
    assert kgate("capture", "--device", "cpu", "--", sys.executable, "first.py", cwd=project, timeout=300).code == 0
    command = [sys.executable, "-m", "kgate", "capture", "--replace", "--device", "cpu", "--", sys.executable]
    both = [subprocess.Popen([*command, name], cwd=project, stderr=subprocess.PIPE, text=True)
            for name in ("a.py", "b.py")]
    assert all(p.wait(timeout=300) == 0 for p in both), [p.stderr.read() for p in both if p.stderr]
    assert set(entries(project)) == {("copy_kernel", 64), ("strided_kernel", 32)}


ENV = {"type": "env", "where": "cpu sm_120a", "triton": "3.9.0", "capability": "12.0"}


def _spec(project: Path, **fields: object) -> dict:
    spec = {"type": "spec", "version": 1, "id": "id64", "kernel": "ops:copy_kernel", "file": str(project / "ops.py"),
            "signature": {"n": "i32", "x": "*fp32", "y": "*fp32"}, "constexprs": {"BLOCK": 64},
            "divisible": ["n", "x", "y"], "equal_to_1": [], "none": [], "options": {"num_stages": 3, "num_warps": 4}}
    return {**spec, **fields}


# name -> (the spec's fields that differ, the words of the line that says it is not recorded; None: recorded)
FORGED = {
    "divisible-names-no-argument": ({"divisible": ["zz"]}, "divisible: 'zz' is not a run-time argument"),
    "an-argument-twice": ({"constexprs": {"BLOCK": 64, "n": 3}}, "'n' is in both signature and constexprs"),
    "an-argument-missing": ({"signature": {"x": "*fp32", "y": "*fp32"}}, "divisible: 'n' is not a run-time argument"),
    "options-a-string": ({"options": "fast"}, "options: must be a table"),
    "options-null": ({"options": None}, "options: must be a table"),
    "signature-a-list": ({"signature": ["n", "x"]}, "signature: must be a table"),
    "a-file-the-command-removed": ({"file": "gone.py"}, "its file gone.py no longer exists"),
    # The project's own module, launched from a copy elsewhere: recorded under the project's module.
    "a-file-outside-naming-a-project-module": ({"file": "/nonexistent/site-packages/ops.py"}, None),
}


@pytest.mark.parametrize("name", sorted(FORGED))
def test_spec_records_no_recorder_writes_are_named_not_recorded(tmp_path: Path, name: str) -> None:
    fields, words = FORGED[name]
    project = make_project(tmp_path)
    spec = _spec(project, **fields)
    if name == "a-file-the-command-removed":
        spec["file"] = str(project / "gone.py")
    (project / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in (ENV, spec)))
    body = ("import os, pathlib, shutil\nfolder = pathlib.Path(os.environ['KGATE_CAPTURE_DIR'])\n"
            "folder.mkdir(parents=True, exist_ok=True)\n"
            f"shutil.copy({str(project / 'records.jsonl')!r}, folder / 'records-1.jsonl')\n")
    run = kgate("capture", "--device", "cpu", "--", sys.executable, "-c", body, cwd=project, timeout=120)
    assert "Traceback" not in run.stderr, run.stderr
    if words is None:
        assert run.code == 0 and set(entries(project)) == {("copy_kernel", 64)}, run.stderr
        return
    assert "not recorded" in run.stderr and words in run.stderr, run.stderr
    assert run.code == 2 and not (project / "kgate-capture.toml").exists()


SPECIALISED = '''\
import triton
import triton.language as tl


@triton.jit(do_not_specialize=["n"])
def nospec_kernel(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + offs, tl.load(x + offs, mask=offs < n), mask=offs < n)


@triton.jit(do_not_specialize_on_alignment=["x"])
def noalign_kernel(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + offs, tl.load(x + offs, mask=offs < n), mask=offs < n)


@triton.jit
def scalars_kernel(y, scale, flag, maybe, BLOCK: tl.constexpr, DT: tl.constexpr, NAME: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    v = tl.full([BLOCK], scale, DT)
    if flag:
        v = v * 2
    if maybe is not None:
        v = v + tl.load(maybe + offs)
    tl.store(y + offs, v)


@triton.jit
def tuple_kernel(ptrs, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(ptrs[1] + offs, tl.load(ptrs[0] + offs, mask=offs < n), mask=offs < n)
'''

LAUNCHES = '''\
import torch, triton.language as tl, ops
x, y = torch.zeros(64), torch.zeros(64)
ops.nospec_kernel[(1,)](x, y, 64, BLOCK=64)
ops.noalign_kernel[(1,)](x, y, 64, BLOCK=64)
ops.scalars_kernel[(1,)](y, 1.5, True, None, BLOCK=64, DT=tl.float32, NAME="abc")
ops.scalars_kernel[(1,)](y, 2.0, False, x, BLOCK=32, DT=tl.float32, NAME="xyz")
ops.tuple_kernel[(1,)]((x, y), 64, BLOCK=64)
'''


def test_what_triton_does_not_specialise_stays_unspecialised_and_a_tuple_is_named(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    (project / "ops.py").write_text(SPECIALISED)
    (project / "launches.py").write_text(LAUNCHES)
    run = kgate("capture", "--device", "cpu", "--", sys.executable, "launches.py", cwd=project, timeout=300)
    assert run.code == 0, run.stderr
    assert "ops:tuple_kernel: not recorded: argument 'ptrs' is a tuple" in run.stderr, run.stderr
    found = {(e.spec.kernel, int(e.spec.constexprs["BLOCK"])): e.spec for e in
             captures.load(project / "kgate-capture.toml", "kgate-capture.toml").entries}
    assert "n" not in found["ops:nospec_kernel", 64].divisible  # do_not_specialize
    assert "x" not in found["ops:noalign_kernel", 64].divisible  # do_not_specialize_on_alignment
    plain = found["ops:scalars_kernel", 64]
    assert plain.signature == {"flag": "u1", "scale": "fp32", "y": "*fp32"} and "maybe" in plain.none
    assert plain.constexprs["NAME"] == "abc" and plain.constexprs["DT"] == "tl.float32"
    assert found["ops:scalars_kernel", 32].signature["maybe"] == "*fp32"
    check = kgate("check", "-j", "2", cwd=project, timeout=900)
    assert check.code == 0 and "passed: 4 kernel variant(s)" in check.stdout, check.stdout + check.stderr
