"""GEMM in bf16 or fp16 with fp32 accumulation through `tl.dot`, forward and backward.

C = A @ B for strided A [M, K] and B [K, N]; the backward of C = A @ B is
the same kernel on transposed views: dA = dC @ B^T and dB = A^T @ dC.
Programs are grouped along M so that neighbouring programs share B tiles in
L2.
"""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

import kgate

from .common import cdiv, interpreted
from .tiles import grouped_tile

TILE = {"BM": 128, "BN": 128, "BK": 64, "GROUP_M": 8}
NUM_WARPS = 8
NUM_STAGES = 3  # (128 + 128) * 64 * 2 bytes * 3 stages = 96 KB: fits the 99 KB of an sm_120 CTA


# The inner strides are 1, specialised as Triton's launcher does for contiguous operands.
@kgate.register(signature={"a": "*bf16", "b": "*bf16", "c": "*bf16", "M": "i32", "N": "i32", "K": "i32",
                           "stride_am": "i32", "stride_ak": "constexpr", "stride_bk": "i32", "stride_bn": "constexpr",
                           "stride_cm": "i32", "stride_cn": "constexpr"},
                constexprs={**TILE, "stride_ak": 1, "stride_bn": 1, "stride_cn": 1, "UPCAST": False},
                num_warps=NUM_WARPS, num_stages=NUM_STAGES, kind="gemm",
                divisible=["a", "b", "c", "M", "N", "K", "stride_am", "stride_bk", "stride_cm"],
                shapes=[{"M": 8192, "N": 4096, "K": 4096}])
@triton.jit
def matmul_kernel(a, b, c, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                  UPCAST: tl.constexpr):
    pid_m, pid_n = grouped_tile(M, N, BM, BN, GROUP_M)
    # Rows and columns past the edge wrap around instead of being masked: the loads stay
    # unpredicated (what lets them pipeline), and the store below drops those lanes.
    rm = (pid_m * BM + tl.arange(0, BM)) % M
    rn = (pid_n * BN + tl.arange(0, BN)) % N
    rk = tl.arange(0, BK)
    a_ptrs = a + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        x = tl.load(a_ptrs, mask=rk[None, :] < K - k0, other=0.0)
        y = tl.load(b_ptrs, mask=rk[:, None] < K - k0, other=0.0)
        if UPCAST:
            # Only under Triton's CPU interpreter, which holds bf16 as raw 16-bit integers
            # and multiplies those in tl.dot; the GPU multiplies bf16 operands natively.
            x = x.to(tl.float32)
            y = y.to(tl.float32)
        acc = tl.dot(x, y, acc)
        a_ptrs += BK * stride_ak
        b_ptrs += BK * stride_bk
    cm = pid_m * BM + tl.arange(0, BM)
    cn = pid_n * BN + tl.arange(0, BN)
    c_ptrs = c + cm[:, None] * stride_cm + cn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c.dtype.element_ty), mask=(cm[:, None] < M) & (cn[None, :] < N))


def matmul(a: Any, b: Any) -> Any:
    """A @ B for 2-D fp16/bf16 tensors of one dtype (any strides); the result is contiguous."""
    import torch

    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0] or a.dtype != b.dtype:
        raise ValueError(f"cannot multiply {tuple(a.shape)} {a.dtype} by {tuple(b.shape)} {b.dtype}")
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    grid = (cdiv(M, TILE["BM"]) * cdiv(N, TILE["BN"]),)
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                        c.stride(1), **TILE, UPCAST=interpreted(matmul_kernel) and a.dtype == torch.bfloat16,
                        num_warps=NUM_WARPS, num_stages=NUM_STAGES)
    return c


def matmul_forward(a: Any, b: Any) -> dict[str, Any]:
    return {"c": matmul(a, b)}


def matmul_backward(a: Any, b: Any, dc: Any) -> dict[str, Any]:
    """(dA, dB) of C = A @ B: dA = dC @ B^T, dB = A^T @ dC, through transposed views (no copies)."""
    return {"da": matmul(dc, b.t()), "db": matmul(a.t(), dc)}
