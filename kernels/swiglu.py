"""SwiGLU, forward and backward: y = silu(a) * b, elementwise, computed in fp32.

The forward kernel is the consumer of the up-projection GEMM and is launched
with programmatic dependent launch (PDL): `gdc_wait()` comes before its first
load, so the GEMM's epilogue may still be running when it starts.

Kernel modules import no torch: `kgate check` imports them in compile
workers. The launchers import it when called.
"""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

import kgate

from .common import cdiv, interpreted

BLOCK = 1024
NUM_WARPS = 4


@kgate.register(signature={"a": "*bf16", "b": "*bf16", "y": "*bf16", "n": "i32"},
                constexprs={"BLOCK": BLOCK, "PDL": True}, num_warps=NUM_WARPS, pdl=True, kind="elementwise")
@triton.jit
def swiglu_fwd_kernel(a, b, y, n, BLOCK: tl.constexpr, PDL: tl.constexpr):
    # The wait must precede every global access: a and b are the previous kernel's output.
    # PDL is a constexpr so that Triton's CPU interpreter, which cannot execute the
    # wait (and runs kernels one at a time anyway), can run the same kernel.
    if PDL:
        gdc_wait()
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(a + offs, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(b + offs, mask=mask, other=0.0).to(tl.float32)
    if PDL:
        gdc_launch_dependents()
    out = x * tl.sigmoid(x) * g
    tl.store(y + offs, out.to(y.dtype.element_ty), mask=mask)


@kgate.register(signature={"a": "*bf16", "b": "*bf16", "dy": "*bf16", "da": "*bf16", "db": "*bf16", "n": "i32"},
                constexprs={"BLOCK": BLOCK}, num_warps=NUM_WARPS, kind="elementwise")
@triton.jit
def swiglu_bwd_kernel(a, b, dy, da, db, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(a + offs, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(b + offs, mask=mask, other=0.0).to(tl.float32)
    d = tl.load(dy + offs, mask=mask, other=0.0).to(tl.float32)
    s = tl.sigmoid(x)
    # silu'(x) = s * (1 + x * (1 - s)); it crosses zero at x = -1.2785, where
    # the fp32 evaluation's absolute error becomes a large relative one.
    dsilu = s * (1.0 + x * (1.0 - s))
    tl.store(da + offs, (d * g * dsilu).to(da.dtype.element_ty), mask=mask)
    tl.store(db + offs, (d * x * s).to(db.dtype.element_ty), mask=mask)


def swiglu_forward(a: Any, b: Any) -> dict[str, Any]:
    """y = silu(a) * b for same-shape contiguous fp16/bf16 tensors (PDL launch on a GPU)."""
    import torch

    _check_pair(a, b)
    y = torch.empty_like(a)
    n = a.numel()
    pdl = not interpreted(swiglu_fwd_kernel) and torch.cuda.is_available() and a.is_cuda
    swiglu_fwd_kernel[(cdiv(n, BLOCK),)](a, b, y, n, BLOCK=BLOCK, PDL=pdl, num_warps=NUM_WARPS, launch_pdl=pdl)
    return {"y": y}


def swiglu_backward(a: Any, b: Any, dy: Any) -> dict[str, Any]:
    """(da, db) of y = silu(a) * b, given dy."""
    import torch

    _check_pair(a, b)
    _check_pair(a, dy)
    da, db = torch.empty_like(a), torch.empty_like(b)
    n = a.numel()
    swiglu_bwd_kernel[(cdiv(n, BLOCK),)](a, b, dy, da, db, n, BLOCK=BLOCK, num_warps=NUM_WARPS)
    return {"da": da, "db": db}


def _check_pair(x: Any, y: Any) -> None:
    if x.shape != y.shape or x.dtype != y.dtype or not (x.is_contiguous() and y.is_contiguous()):
        raise ValueError(f"expected two contiguous tensors of one shape and dtype, got {tuple(x.shape)} "
                         f"{x.dtype} and {tuple(y.shape)} {y.dtype}")
