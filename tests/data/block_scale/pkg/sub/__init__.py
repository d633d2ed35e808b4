import triton

from .. import tiles


@triton.jit
def deep(a, a_scale, b, b_scale, c):
    tiles.scaled_tile(a, a_scale, b, b_scale, c)
