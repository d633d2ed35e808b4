"""Tile scheduling shared by the bundled GEMMs (a Triton helper, inlined into each kernel)."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def grouped_tile(M, N, BM: tl.constexpr, BN: tl.constexpr, GROUP_M: tl.constexpr):
    """(pid_m, pid_n) of this program, ordered in groups of GROUP_M row tiles.

    Neighbouring programs take the row tiles of one group column after column,
    so the B tiles they read are still in L2 for the next row of the group.
    """
    pid = tl.program_id(0)
    grid_m = tl.cdiv(M, BM)
    grid_n = tl.cdiv(N, BN)
    group = pid // (GROUP_M * grid_n)
    first_m = group * GROUP_M
    rows = tl.minimum(grid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % (GROUP_M * grid_n)) % rows
    pid_n = (pid % (GROUP_M * grid_n)) // rows
    return pid_m, pid_n
