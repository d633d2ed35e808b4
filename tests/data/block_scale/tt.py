"""A project module named `tt` with a function named `dot_scaled` that is no scaled dot."""
import triton
import triton.language as tl


@triton.jit(noinline=True)
def dot_scaled(a, a_scale, b, b_scale, c):
    rm = tl.arange(0, 64)
    rk = tl.arange(0, 64)
    x = tl.load(a + rm[:, None] * 64 + rk[None, :])
    y = tl.load(b + rk[:, None] * 64 + rm[None, :])
    tl.store(c + rm[:, None] * 64 + rm[None, :], tl.dot(x, y))
