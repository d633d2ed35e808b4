import triton
import triton.language as tl

import kgate

SIG = {"x": "*i32", "out": "*i32"}


@triton.jit
def _asm_wait(v):
    return tl.inline_asm_elementwise("griddepcontrol.wait;\n mov.b32 $0, $1;", "=r,r", [v], dtype=tl.int32,
                                     is_pure=False, pack=1)


@kgate.register(signature=SIG, pdl=True, kind="elementwise")
@triton.jit
def asm_wait_then_load(x, out):
    i = tl.arange(0, 128)
    z = _asm_wait(i)
    tl.store(out + i, tl.load(x + i) + z)


@kgate.register(signature=SIG, pdl=True, kind="elementwise")
@triton.jit
def load_then_asm_wait(x, out):
    i = tl.arange(0, 128)
    v = tl.load(x + i)
    tl.store(out + i, _asm_wait(v))


@kgate.register(signature=SIG, pdl=True, kind="elementwise")
@triton.jit
def store_then_asm_wait(x, out):
    i = tl.arange(0, 128)
    tl.store(out + i, i)
    z = _asm_wait(i)
    tl.store(out + 128 + i, tl.load(x + i) + z)


@kgate.register(signature=SIG, pdl=True, kind="elementwise")
@triton.jit
def asm_without_wait(x, out):
    i = tl.arange(0, 128)
    z = tl.inline_asm_elementwise("mov.b32 $0, $1; // griddepcontrol.wait", "=r,r", [i], dtype=tl.int32,
                                  is_pure=False, pack=1)
    tl.store(out + i, tl.load(x + i) + z)


@triton.jit(noinline=True)
def _leaf(a, b, b_scale, c, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    rs = tl.arange(0, BK // 32)
    x = tl.load(a + rm[:, None] * BK + rk[None, :])
    y = tl.load(b + rk[:, None] * BN + rn[None, :])
    sy = tl.load(b_scale + rn[:, None] * (BK // 32) + rs[None, :])
    acc = tl.dot_scaled(x, None, "bf16", y, sy, "e4m3")
    tl.store(c + rm[:, None] * BN + rn[None, :], acc)


@triton.jit(noinline=True)
def _mid(a, b, b_scale, c, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    _leaf(a, b, b_scale, c, BM, BN, BK)


MIXED = {"a": "*bf16", "b": "*fp8e4nv", "b_scale": "*u8", "c": "*fp32"}


@kgate.register(signature=MIXED, constexprs={"BM": 128, "BN": 128, "BK": 128}, kind="gemm", num_warps=8)
@triton.jit
def scaled_two_levels_down(a, b, b_scale, c, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    _mid(a, b, b_scale, c, BM, BN, BK)


@triton.jit(noinline=True)
def _leaf8(a, a_scale, b, b_scale, c, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    rs = tl.arange(0, BK // 32)
    x = tl.load(a + rm[:, None] * BK + rk[None, :])
    sx = tl.load(a_scale + rm[:, None] * (BK // 32) + rs[None, :])
    y = tl.load(b + rk[:, None] * BN + rn[None, :])
    sy = tl.load(b_scale + rn[:, None] * (BK // 32) + rs[None, :])
    acc = tl.dot_scaled(x, sx, "e4m3", y, sy, "e4m3")
    tl.store(c + rm[:, None] * BN + rn[None, :], acc)


@triton.jit(noinline=True)
def _mid8(a, a_scale, b, b_scale, c, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    _leaf8(a, a_scale, b, b_scale, c, BM, BN, BK)


MXFP8 = {"a": "*fp8e4nv", "a_scale": "*u8", "b": "*fp8e4nv", "b_scale": "*u8", "c": "*fp32"}


@kgate.register(signature=MXFP8, constexprs={"BM": 128, "BN": 128, "BK": 128}, kind="gemm", num_warps=8)
@triton.jit
def mxfp8_two_levels_down(a, a_scale, b, b_scale, c, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    _mid8(a, a_scale, b, b_scale, c, BM, BN, BK)
