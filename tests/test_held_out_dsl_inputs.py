"""Held-out CuTe DSL and Gluon inputs beyond the first list: registration values of the wrong kind (args as a string or
a number, an alignment as a string, a dimension beyond 64 bits, options as a list, a target nobody configured), a
kernel module that exits or raises SystemExit at import, a tensor of the wrong rank or dtype for what the kernel
does, a `cute.jit` function that launches no kernel, Gluon layouts that cannot describe the tensor (the wrong
rank, threads that are not a warp, warps other than launched, a slice of a layout). Each is a refusal that names
the problem (exit 2), a KG001 that says why (exit 1), or a gated kernel; never a silent pass nor a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import kgate
from test_held_out_dsl import FLOAT, HEAD, PLAIN, cute, tensor  # skips this module where the CuTe DSL is not installed

NO_LAUNCH = PLAIN.replace("    _add_kernel(a, c).launch(grid=(cute.size(a) // 128, 1, 1), block=(128, 1, 1))\n",
                          "    pass\n")
TWO_D = PLAIN.replace("c[bidx * 128 + tidx] = a[bidx * 128 + tidx] * 2.0", "c[bidx, tidx] = a[bidx, tidx] * 2.0")

CUTE = [
    ("args-a-string", cute('"a, c"'), PLAIN, 2, "args"),
    ("args-a-number", cute("4"), PLAIN, 2, "args"),
    ("align-a-string", cute(tensor(dtype=FLOAT, shape="[4096]", align='"16"')), PLAIN, 2, "args.a.align"),
    ("dimension-beyond-64-bits", cute(tensor(dtype=FLOAT, shape="[99999999999999999999]")), PLAIN, 2, None),
    ("options-a-list", cute(extra='options = ["--opt-level", "3"]\n'), PLAIN, 2, "options"),
    ("targets-unconfigured", cute(extra='targets = ["sm_999"]\n'), PLAIN, 2, "targets: must name some of"),
    ("expect-unknown", cute(extra='expect = ["warp_speed"]\n'), PLAIN, 2, "expect: must be a list of"),
    ("module-exits-at-import", cute(), PLAIN + "\nimport sys\nsys.exit(3)\n", 1, "SystemExit: 3"),
    ("module-raises-system-exit-with-words", cute(), PLAIN + "\nraise SystemExit('leaving at import')\n", 1,
     "leaving at import"),
    # A tensor of another rank than the kernel indexes: the DSL's refusal, as KG001.
    ("two-dimensional-index-of-a-vector", cute(), TWO_D, 1, None),
    # CuTe takes a linear index into a tensor of any rank, and converts a product to the element type it stores.
    ("a-linear-index-into-a-matrix", cute(f"{{ a = {{ dtype = {FLOAT}, shape = [32, 128] }}, "
                                          f"c = {{ dtype = {FLOAT}, shape = [32, 128] }} }}"), PLAIN, 0, None),
    ("an-integer-tensor-multiplied-by-a-float", cute(tensor(dtype='"cutlass.Int8"', shape="[4096]")), PLAIN, 0, None),
    # A jit function that launches nothing has no kernel to gate: said, never a pass over nothing.
    ("jit-without-a-kernel", cute(), NO_LAUNCH, 1, "does it launch a @cute.kernel?"),
]

GOPS = '''import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl


@gluon.jit
def copy_layout(src, dst, n, BLOCK: gl.constexpr, layout: gl.constexpr):
    offsets = gl.program_id(0) * BLOCK + gl.arange(0, BLOCK, layout=layout)
    mask = offsets < n
    gl.store(dst + offsets, gl.load(src + offsets, mask=mask), mask=mask)
'''


def gluon(layout: str, block: int = 512, warps: str = "") -> str:
    constexprs = f"{{ BLOCK = {block}, layout = {layout!r} }}"
    return (HEAD + '\n[[triton]]\nkernel = "gops:copy_layout"\nsignature = { src = "*fp32", dst = "*fp32", '
            f'n = "i32" }}\nconstexprs = {constexprs}\n{warps}')


def blocked(size: str = "[4]", threads: str = "[32]", warps: str = "[4]", order: str = "[0]") -> str:
    return (f"gl.BlockedLayout(size_per_thread={size}, threads_per_warp={threads}, warps_per_cta={warps}, "
            f"order={order}, cga_layout=[])")


GLUON = [
    ("layout-of-rank-two", gluon(blocked("[1, 4]", "[1, 32]", "[1, 4]", "[1, 0]")), GOPS, 1, None),
    ("threads-not-a-warp", gluon(blocked(threads="[16]")), GOPS, 1, None),
    ("order-out-of-range", gluon(blocked(order="[1]")), GOPS, 1, None),
    ("size-per-thread-zero", gluon(blocked(size="[0]")), GOPS, 1, None),
    ("a-slice-of-a-one-dimensional-layout", gluon(f"gl.SliceLayout(0, {blocked()})"), GOPS, 1, None),
    ("a-layout-of-another-kind", gluon("gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=32, rank=1)"),
     GOPS, 1, None),
    ("block-smaller-than-the-layout-covers", gluon(blocked(), block=64), GOPS, 0, None),
]


@pytest.mark.parametrize("toml,ops,code,says", [case[1:] for case in CUTE + GLUON],
                         ids=[case[0] for case in CUTE + GLUON])
def test_a_dsl_input_is_gated_or_refused_with_its_reason(tmp_path: Path, toml: str, ops: str, code: int,
                                                         says: str | None) -> None:
    (tmp_path / "kgate.toml").write_text(toml, encoding="utf-8")
    (tmp_path / ("gops.py" if "gops:" in toml else "ops.py")).write_text(ops, encoding="utf-8")
    run = kgate("check", "--format", "json", "--no-cache", cwd=tmp_path)
    assert run.code == code, run.stdout[-3000:] + run.stderr[-3000:]
    assert "Traceback" not in run.stderr, run.stderr
    if code == 2:
        assert says is None or says in run.stderr, run.stderr
        return
    report = run.json()
    if code == 0:
        assert report["kernels"] and not report["findings"], report["findings"]
        return
    failures = [f["message"] for f in report["findings"] if f["code"] == "KG001"]
    assert failures, report["findings"]
    if says is not None:
        assert any(says in message for message in failures), failures
