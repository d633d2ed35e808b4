"""RMSNorm, forward and backward: y = x * rstd * w, rstd = 1 / sqrt(mean(x^2) + eps), per row.

One program holds a whole row (N <= BLOCK_N) and reduces it in fp32. The
backward kernel walks rows with a grid stride, writes dx, and accumulates
its share of dw in fp32 registers; the launcher sums those partial rows in
fp32.
"""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

import kgate

# (BLOCK_N, num_warps) per direction: a narrow configuration for rows up to 1024 and a wide one
# up to 4096. The backward holds four row-sized fp32 vectors (w, x, dy and the dw accumulator),
# so it spreads a row over more warps to stay under 64 registers (8 warps per sub-core).
FWD_NARROW = {"BLOCK_N": 1024, "num_warps": 4}
FWD_WIDE = {"BLOCK_N": 4096, "num_warps": 8}
BWD_NARROW = {"BLOCK_N": 1024, "num_warps": 8}
BWD_WIDE = {"BLOCK_N": 4096, "num_warps": 32}
BWD_PROGRAMS = 256  # at least one CTA per SM on the cards kgate knows; few dw partial rows to sum


@kgate.register(signature={"x": "*bf16", "w": "*bf16", "y": "*bf16", "rstd": "*fp32", "stride_x": "i32",
                           "stride_y": "i32", "N": "i32", "eps": "fp32"},
                constexprs={"BLOCK_N": 4096}, num_warps=8, kind="reduction", variants=[FWD_NARROW])
@triton.jit
def rmsnorm_fwd_kernel(x, w, y, rstd, stride_x, stride_y, N, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    v = tl.load(x + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    r = 1.0 / tl.sqrt(tl.sum(v * v, axis=0) / N + eps)
    g = tl.load(w + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y + row * stride_y + cols, (v * r * g).to(y.dtype.element_ty), mask=mask)
    tl.store(rstd + row, r)


@kgate.register(signature={"x": "*bf16", "w": "*bf16", "dy": "*bf16", "rstd": "*fp32", "dx": "*bf16",
                           "dw_partial": "*fp32", "stride": "i32", "M": "i32", "N": "i32"},
                constexprs={"BLOCK_N": 4096}, num_warps=32, kind="reduction", variants=[BWD_NARROW])
@triton.jit
def rmsnorm_bwd_kernel(x, w, dy, rstd, dx, dw_partial, stride, M, N, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    g = tl.load(w + cols, mask=mask, other=0.0).to(tl.float32)
    dw = tl.zeros((BLOCK_N,), dtype=tl.float32)
    base = pid.to(tl.int64) * stride  # 64-bit offsets: M * N may pass 2^31
    step = tl.num_programs(0).to(tl.int64) * stride
    for row in range(pid, M, tl.num_programs(0)):
        v = tl.load(x + base + cols, mask=mask, other=0.0).to(tl.float32)
        d = tl.load(dy + base + cols, mask=mask, other=0.0).to(tl.float32)
        r = tl.load(rstd + row)
        dg = d * g
        # dx = r * dy * w - x * r^3 * mean(dy * w * x)
        c = tl.sum(dg * v, axis=0) / N
        tl.store(dx + base + cols, (r * dg - v * (r * r * r * c)).to(dx.dtype.element_ty), mask=mask)
        dw += d * v * r
        base += step
    tl.store(dw_partial + pid.to(tl.int64) * N + cols, dw, mask=mask)


def rmsnorm_forward(x: Any, w: Any, eps: float = 1e-6) -> dict[str, Any]:
    """(y, rstd) for a 2-D contiguous x [M, N] and weight w [N], N <= 4096; rstd is fp32."""
    import torch

    M, N = _check(x, w)
    y = torch.empty_like(x)
    rstd = torch.empty(M, dtype=torch.float32, device=x.device)
    config = FWD_NARROW if N <= FWD_NARROW["BLOCK_N"] else FWD_WIDE
    rmsnorm_fwd_kernel[(M,)](x, w, y, rstd, x.stride(0), y.stride(0), N, eps, **config)
    return {"y": y, "rstd": rstd}


def rmsnorm_backward(x: Any, w: Any, dy: Any, rstd: Any) -> dict[str, Any]:
    """(dx, dw) given the forward's input, weight, rstd and the output gradient."""
    import torch

    M, N = _check(x, w)
    if dy.shape != x.shape or dy.dtype != x.dtype or not dy.is_contiguous():
        raise ValueError("dy must be contiguous with x's shape and dtype")
    programs = min(M, BWD_PROGRAMS)
    dx = torch.empty_like(x)
    partial = torch.empty((programs, N), dtype=torch.float32, device=x.device)
    config = BWD_NARROW if N <= BWD_NARROW["BLOCK_N"] else BWD_WIDE
    rmsnorm_bwd_kernel[(programs,)](x, w, dy, rstd, dx, partial, x.stride(0), M, N, **config)
    return {"dx": dx, "dw": partial.sum(dim=0).to(w.dtype)}  # summed in fp32, rounded once


def _check(x: Any, w: Any) -> tuple[int, int]:
    if x.dim() != 2 or not x.is_contiguous() or w.shape != (x.shape[1],) or w.dtype != x.dtype:
        raise ValueError(f"expected contiguous x [M, N] and w [N] of one dtype, got {tuple(x.shape)} {x.dtype} "
                         f"and {tuple(w.shape)} {w.dtype}")
    if x.shape[1] > FWD_WIDE["BLOCK_N"]:
        raise ValueError(f"rows of {x.shape[1]} elements: at most {FWD_WIDE['BLOCK_N']}")
    return int(x.shape[0]), int(x.shape[1])


