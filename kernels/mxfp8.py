"""MXFP8: e4m3 elements with one ue8m0 (power-of-two) scale per 32 elements along K.

- `mxfp8_matmul_kernel`: C = A @ B^T for A [M, K] and B [N, K], both
  quantized along K, through `tl.dot_scaled`. On sm_120a it must become the
  native block-scaled MMA (`mma.sync ... kind::mxf8f6f4.block_scale`); sm_90a
  has none, and Triton falls back to bf16 MMA there.
- `mxfp8_quantize_kernel`: rows of a bf16/fp16 tensor to e4m3 and scales.
  The scale of a block is the smallest power of two 2^s with
  amax / 2^s <= 448 (e4m3's largest value), so no element saturates.

The backward of C = A @ W^T uses the same GEMM on operands quantized along the
new reduction dimension: dA = dC @ W needs dC and W^T blocked along N, dW =
dC^T @ A needs dC^T and A^T blocked along M.
"""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

import kgate

from .common import cdiv
from .tiles import grouped_tile

GROUP = 32  # elements per scale
TILE = {"BM": 128, "BN": 128, "BK": 64, "GROUP_M": 8}
NUM_WARPS = 8
NUM_STAGES = 3
QUANT_ROWS = 8
QUANT_COLS = 256


@kgate.register(signature={"a": "*fp8e4nv", "a_scale": "*u8", "b": "*fp8e4nv", "b_scale": "*u8", "c": "*bf16",
                           "M": "i32", "N": "i32", "K": "i32", "stride_cm": "i32"},
                constexprs=TILE, num_warps=NUM_WARPS, num_stages=NUM_STAGES, kind="gemm",
                divisible=["a", "a_scale", "b", "b_scale", "c", "M", "N", "K", "stride_cm"],
                shapes=[{"M": 8192, "N": 4096, "K": 4096}])
@triton.jit
def mxfp8_matmul_kernel(a, a_scale, b, b_scale, c, M, N, K, stride_cm, BM: tl.constexpr, BN: tl.constexpr,
                        BK: tl.constexpr, GROUP_M: tl.constexpr):
    pid_m, pid_n = grouped_tile(M, N, BM, BN, GROUP_M)
    # Rows and columns past the edge wrap around instead of being masked (the store drops them).
    rm = (pid_m * BM + tl.arange(0, BM)) % M
    rn = (pid_n * BN + tl.arange(0, BN)) % N
    rk = tl.arange(0, BK)
    rs = tl.arange(0, BK // 32)
    ks = K // 32  # scales per row
    a_ptrs = a + rm[:, None] * K + rk[None, :]
    b_ptrs = b + rn[None, :] * K + rk[:, None]  # B is [N, K]: read as a [BK, BN] tile
    sa_ptrs = a_scale + rm[:, None] * ks + rs[None, :]
    sb_ptrs = b_scale + rn[:, None] * ks + rs[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        x = tl.load(a_ptrs, mask=rk[None, :] < K - k0, other=0.0)
        y = tl.load(b_ptrs, mask=rk[:, None] < K - k0, other=0.0)
        sx = tl.load(sa_ptrs, mask=rs[None, :] < ks - k0 // 32, other=127)
        sy = tl.load(sb_ptrs, mask=rs[None, :] < ks - k0 // 32, other=127)
        acc = tl.dot_scaled(x, sx, "e4m3", y, sy, "e4m3", acc)
        a_ptrs += BK
        b_ptrs += BK
        sa_ptrs += BK // 32
        sb_ptrs += BK // 32
    cm = pid_m * BM + tl.arange(0, BM)
    cn = pid_n * BN + tl.arange(0, BN)
    tl.store(c + cm[:, None] * stride_cm + cn[None, :], acc.to(c.dtype.element_ty),
             mask=(cm[:, None] < M) & (cn[None, :] < N))


@kgate.register(signature={"x": "*bf16", "q": "*fp8e4nv", "scale": "*u8", "R": "i32", "K": "i32"},
                constexprs={"ROWS": QUANT_ROWS, "COLS": QUANT_COLS}, num_warps=4, kind="elementwise")
@triton.jit
def mxfp8_quantize_kernel(x, q, scale, R, K, ROWS: tl.constexpr, COLS: tl.constexpr):
    rr = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    rc = tl.program_id(1) * COLS + tl.arange(0, COLS)
    mask = (rr[:, None] < R) & (rc[None, :] < K)
    offs = rr[:, None].to(tl.int64) * K + rc[None, :]
    v = tl.load(x + offs, mask=mask, other=0.0).to(tl.float32)
    blocks = tl.reshape(v, (ROWS, COLS // 32, 32))
    amax = tl.max(tl.abs(blocks), axis=2)
    # With amax = m * 2^e (1 <= m < 2): amax / 2^(e - 8) = 256 m, which is <= 448 unless m > 1.75.
    # Integer arithmetic on the bits keeps the scale exact (no log2, no division).
    bits = amax.to(tl.int32, bitcast=True)
    biased = ((bits >> 23) & 0xFF) - 8 + ((bits & 0x7FFFFF) > 0x600000).to(tl.int32)
    biased = tl.minimum(tl.maximum(biased, 1), 253)  # 2^-126 .. 2^126: the inverse stays a normal fp32
    inverse = ((254 - biased) << 23).to(tl.float32, bitcast=True)  # exactly 2^-s
    scaled = blocks * inverse[:, :, None]
    out = tl.reshape(scaled, (ROWS, COLS))
    tl.store(q + offs, out.to(tl.float8e4nv), mask=mask)
    rs = tl.program_id(1) * (COLS // 32) + tl.arange(0, COLS // 32)
    tl.store(scale + rr[:, None].to(tl.int64) * (K // 32) + rs[None, :], biased.to(tl.uint8),
             mask=(rr[:, None] < R) & (rs[None, :] < K // 32))


def mxfp8_matmul(a: Any, a_scale: Any, b: Any, b_scale: Any, out_dtype: str = "bf16") -> dict[str, Any]:
    """C = dequant(a) @ dequant(b)^T in bf16 or fp16, for e4m3 a [M, K], b [N, K] and uint8 scales [., K/32]."""
    import torch

    M, K = a.shape
    N = b.shape[0]
    if b.shape[1] != K or K % GROUP or a_scale.shape != (M, K // GROUP) or b_scale.shape != (N, K // GROUP):
        raise ValueError(f"MXFP8 operands do not fit: a {tuple(a.shape)}, b {tuple(b.shape)}, scales "
                         f"{tuple(a_scale.shape)} and {tuple(b_scale.shape)} (K must be a multiple of {GROUP})")
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[out_dtype]
    c = torch.empty((M, N), dtype=dtype, device=a.device)
    grid = (cdiv(M, TILE["BM"]) * cdiv(N, TILE["BN"]),)
    mxfp8_matmul_kernel[grid](a, a_scale, b, b_scale, c, M, N, K, c.stride(0), **TILE, num_warps=NUM_WARPS,
                              num_stages=NUM_STAGES)
    return {"c": c}


def mxfp8_quantize(x: Any) -> dict[str, Any]:
    """(q, scale) of a contiguous 2-D bf16/fp16 tensor, blocked by 32 along its last dimension."""
    import torch

    R, K = x.shape
    if K % GROUP or not x.is_contiguous():
        raise ValueError(f"expected a contiguous [R, K] tensor with K a multiple of {GROUP}, got {tuple(x.shape)}")
    q = torch.empty((R, K), dtype=torch.float8_e4m3fn, device=x.device)
    scale = torch.empty((R, K // GROUP), dtype=torch.uint8, device=x.device)
    mxfp8_quantize_kernel[(cdiv(R, QUANT_ROWS), cdiv(K, QUANT_COLS))](x, q, scale, R, K, ROWS=QUANT_ROWS,
                                                                      COLS=QUANT_COLS, num_warps=4)
    return {"q": q, "scale": scale}


def reference_scales(x: Any) -> Any:
    """The scale exponents s (int32, [R, K/32]) the quantizer must choose: the least s with amax <= 448 * 2^s."""
    import torch

    amax = x.double().abs().reshape(x.shape[0], -1, GROUP).amax(dim=-1)
    s = torch.ceil(torch.log2(amax / 448.0)).clamp(-126, 126)
    s = torch.where(amax > 0, s, torch.full_like(s, -126))
    # log2 of a double may land a hair off an exact power of two: settle the edge exactly.
    s = torch.where(amax > 448.0 * torch.exp2(s), s + 1, s)
    s = torch.where(amax <= 448.0 * torch.exp2(s - 1), s - 1, s)
    return s.to(torch.int32)


def quantize_reference(x: Any) -> tuple[Any, Any]:
    """(q, scale) in torch: the operands the GEMM tests feed the kernel, independent of the quantize kernel."""
    import torch

    s = reference_scales(x)
    scaled = x.double().reshape(x.shape[0], -1, GROUP) * torch.exp2(-s.double())[..., None]
    q = scaled.reshape(x.shape).to(torch.float8_e4m3fn)
    return q, (s + 127).to(torch.uint8)


def dequantize(q: Any, scale: Any) -> Any:
    """fp64 values of MXFP8 data."""
    import torch

    exps = scale.to(torch.float64) - 127
    return (q.double().reshape(q.shape[0], -1, GROUP) * torch.exp2(exps)[..., None]).reshape(q.shape)
