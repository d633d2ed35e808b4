"""Tiles the kernels of kernels.py reach in every way a module can name a function: a 64x64x64 e4m3 product,
block-scaled or not."""
import triton
import triton.language as tl


@triton.jit
def scaled_tile(a, a_scale, b, b_scale, c):
    rm = tl.arange(0, 64)
    rk = tl.arange(0, 64)
    rs = tl.arange(0, 2)
    x = tl.load(a + rm[:, None] * 64 + rk[None, :])
    y = tl.load(b + rk[:, None] * 64 + rm[None, :])
    sx = tl.load(a_scale + rm[:, None] * 2 + rs[None, :])
    sy = tl.load(b_scale + rm[:, None] * 2 + rs[None, :])
    tl.store(c + rm[:, None] * 64 + rm[None, :], tl.dot_scaled(x, sx, "e4m3", y, sy, "e4m3"))


@triton.jit
def plain_tile(a, a_scale, b, b_scale, c):
    rm = tl.arange(0, 64)
    rk = tl.arange(0, 64)
    x = tl.load(a + rm[:, None] * 64 + rk[None, :])
    y = tl.load(b + rk[:, None] * 64 + rm[None, :])
    tl.store(c + rm[:, None] * 64 + rm[None, :], tl.dot(x, y))


@triton.jit
def either_tile(a, a_scale, b, b_scale, c, SCALED: tl.constexpr):
    if SCALED:
        scaled_tile(a, a_scale, b, b_scale, c)
    else:
        plain_tile(a, a_scale, b, b_scale, c)


scaled_alias = scaled_tile


if True:
    @triton.jit
    def scaled_under_if(a, a_scale, b, b_scale, c):
        scaled_tile(a, a_scale, b, b_scale, c)
