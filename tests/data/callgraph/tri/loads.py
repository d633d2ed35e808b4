"""A module whose `_helper` loads: kernels reach it and its namesake in tri/waits.py."""

import triton
import triton.language as tl


@triton.jit(noinline=True)
def _helper(x, i):
    return tl.load(x + i)
