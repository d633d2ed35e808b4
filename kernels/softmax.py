"""Softmax over rows, forward and backward, reduced in fp32.

Forward: y = exp(x - max(x)) / sum(exp(x - max(x))). Backward from the saved
output: dx = y * (dy - sum(dy * y)). One program holds a whole row
(N <= BLOCK_N): the row is read once and written once.
"""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

import kgate

# (BLOCK_N, num_warps): a narrow configuration for rows up to 1024 and a wide one up to 4096.
NARROW = {"BLOCK_N": 1024, "num_warps": 4}
WIDE = {"BLOCK_N": 4096, "num_warps": 8}


@kgate.register(signature={"x": "*bf16", "y": "*bf16", "stride_x": "i32", "stride_y": "i32", "N": "i32"},
                constexprs={"BLOCK_N": 4096}, num_warps=8, kind="reduction", variants=[NARROW])
@triton.jit
def softmax_fwd_kernel(x, y, stride_x, stride_y, N, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    v = tl.load(x + row * stride_x + cols, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(v - tl.max(v, axis=0))  # masked lanes: exp(-inf) = 0
    out = e / tl.sum(e, axis=0)
    tl.store(y + row * stride_y + cols, out.to(y.dtype.element_ty), mask=mask)


@kgate.register(signature={"y": "*bf16", "dy": "*bf16", "dx": "*bf16", "stride": "i32", "N": "i32"},
                constexprs={"BLOCK_N": 4096}, num_warps=8, kind="reduction", variants=[NARROW])
@triton.jit
def softmax_bwd_kernel(y, dy, dx, stride, N, BLOCK_N: tl.constexpr):
    base = tl.program_id(0).to(tl.int64) * stride
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    p = tl.load(y + base + cols, mask=mask, other=0.0).to(tl.float32)
    d = tl.load(dy + base + cols, mask=mask, other=0.0).to(tl.float32)
    out = p * (d - tl.sum(p * d, axis=0))
    tl.store(dx + base + cols, out.to(dx.dtype.element_ty), mask=mask)


def softmax_forward(x: Any) -> dict[str, Any]:
    """Row softmax of a contiguous 2-D fp16/bf16 tensor with rows of at most 4096."""
    import torch

    M, N = _check(x)
    y = torch.empty_like(x)
    softmax_fwd_kernel[(M,)](x, y, x.stride(0), y.stride(0), N, **_config(N))
    return {"y": y}


def softmax_backward(y: Any, dy: Any) -> dict[str, Any]:
    """dx from the forward's output y and the output gradient dy."""
    import torch

    M, N = _check(y)
    if dy.shape != y.shape or dy.dtype != y.dtype or not dy.is_contiguous():
        raise ValueError("dy must be contiguous with y's shape and dtype")
    dx = torch.empty_like(y)
    softmax_bwd_kernel[(M,)](y, dy, dx, y.stride(0), N, **_config(N))
    return {"dx": dx}


def _config(n: int) -> dict[str, int]:
    """The registered configuration that holds a row of n elements."""
    return NARROW if n <= NARROW["BLOCK_N"] else WIDE


def _check(x: Any) -> tuple[int, int]:
    if x.dim() != 2 or not x.is_contiguous() or x.shape[1] > WIDE["BLOCK_N"]:
        raise ValueError(f"expected a contiguous [M, N] tensor with N <= {WIDE['BLOCK_N']}, got {tuple(x.shape)}")
    return int(x.shape[0]), int(x.shape[1])
