"""A synthetic CUDA tree shaped like a serving engine's `csrc`, for the cold-check benchmark.

`generate(root, files=12, heavy=...)` writes `files` `.cu` files under `csrc/`, each a set of
templated kernels instantiated explicitly through macros over dtypes and tile sizes (hundreds of
instances per file, as an engine's activation, norm, GEMM, top-k, PDL and block-scaled MMA files
have), one of them much heavier than the rest (many more and larger GEMM tiles: about a third of nvcc's
CPU time over the 8 files of `bench/cuda_floor_bench.py`'s default, more with more `heavy_tiles`), and a
kgate.toml that gates them for sm_120a. Some kernels keep
arrays in local memory (a stack frame, whose SASS a rule reads), some wait on the previous grid
(PDL, configured and launched with `cudaLaunchKernelEx`), some issue block-scaled MMA (expected).
Deterministic: the same arguments give the same files.
"""

from __future__ import annotations

from pathlib import Path

HEADER = """\
#pragma once
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cstdint>

namespace serve {
__device__ __forceinline__ void grid_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void launch_dependents() { asm volatile("griddepcontrol.launch_dependents;"); }

template <int WARPS>
__device__ __forceinline__ float block_reduce(float v, float* scratch) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  float t = threadIdx.x < WARPS ? scratch[threadIdx.x] : 0.f;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
  return t;
}
}  // namespace serve

#define SERVE_DTYPES(X, ...) X(float, __VA_ARGS__) X(__half, __VA_ARGS__) X(__nv_bfloat16, __VA_ARGS__)
"""

# Each family: a templated kernel (named with the file's number) and the macro that instantiates one of it.
ACTIVATION = """\
template <typename T, int VEC, int BLOCK>
__global__ void __launch_bounds__(BLOCK) silu_and_mul_{n}(const T* __restrict__ x, T* __restrict__ out, int d) {{
  const int row = blockIdx.x;
  for (int i = threadIdx.x * VEC; i < d; i += BLOCK * VEC) {{
#pragma unroll
    for (int v = 0; v < VEC; ++v) {{
      const float a = float(x[row * 2 * d + i + v]), b = float(x[row * 2 * d + d + i + v]);
      out[row * d + i + v] = T(a / (1.f + __expf(-a)) * b * {scale}f);
    }}
  }}
}}
#define ACT_{n}(T, VEC, BLOCK) template __global__ void silu_and_mul_{n}<T, VEC, BLOCK>(const T*, T*, int);
"""

NORM = """\
template <typename T, int VEC, int BLOCK>
__global__ void __launch_bounds__(BLOCK) rms_norm_{n}(const T* __restrict__ x, const T* __restrict__ w,
                                                     T* __restrict__ out, int d, float eps) {{
  __shared__ float scratch[BLOCK / 32];
  float acc = 0.f;
  for (int i = threadIdx.x * VEC; i < d; i += BLOCK * VEC)
#pragma unroll
    for (int v = 0; v < VEC; ++v) {{ const float t = float(x[blockIdx.x * d + i + v]); acc += t * t; }}
  const float r = rsqrtf(serve::block_reduce<BLOCK / 32>(acc, scratch) / d + eps);
  for (int i = threadIdx.x * VEC; i < d; i += BLOCK * VEC)
#pragma unroll
    for (int v = 0; v < VEC; ++v)
      out[blockIdx.x * d + i + v] = T(float(x[blockIdx.x * d + i + v]) * r * float(w[i + v]) * {scale}f);
}}
#define NORM_{n}(T, VEC, BLOCK) template __global__ void rms_norm_{n}<T, VEC, BLOCK>(const T*, const T*, T*, int, float);
"""

GEMM = """\
template <typename T, int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN)) gemm_tile_{n}(const T* __restrict__ A, const T* __restrict__ B,
                                                                      T* __restrict__ C, int M, int N, int K) {{
  __shared__ float As[BK][BM];
  __shared__ float Bs[BK][BN];
  constexpr int THREADS = (BM / TM) * (BN / TN);
  const int tx = threadIdx.x % (BN / TN), ty = threadIdx.x / (BN / TN);
  float acc[TM][TN] = {{}};
  for (int k0 = 0; k0 < K; k0 += BK) {{
    for (int i = threadIdx.x; i < BK * BM; i += THREADS)
      As[i / BM][i % BM] = float(A[(blockIdx.y * BM + i % BM) * K + k0 + i / BM]);
    for (int i = threadIdx.x; i < BK * BN; i += THREADS)
      Bs[i / BN][i % BN] = float(B[(k0 + i / BN) * N + blockIdx.x * BN + i % BN]);
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; ++kk)
#pragma unroll
      for (int m = 0; m < TM; ++m)
#pragma unroll
        for (int c = 0; c < TN; ++c) acc[m][c] += As[kk][ty * TM + m] * Bs[kk][tx * TN + c];
    __syncthreads();
  }}
#pragma unroll
  for (int m = 0; m < TM; ++m)
#pragma unroll
    for (int c = 0; c < TN; ++c)
      C[(blockIdx.y * BM + ty * TM + m) * N + blockIdx.x * BN + tx * TN + c] = T(acc[m][c] * {scale}f);
}}
#define GEMM_{n}(T, BM, BN, BK, TM, TN) \\
  template __global__ void gemm_tile_{n}<T, BM, BN, BK, TM, TN>(const T*, const T*, T*, int, int, int);
"""

# A per-thread top-k held in an array indexed at run time: local memory, a stack frame, used in a loop.
TOPK = """\
template <typename T, int K>
__global__ void __launch_bounds__(128) topk_gating_{n}(const T* __restrict__ logits, int* __restrict__ ids, int experts) {{
  float best[K];
  int which[K];
#pragma unroll
  for (int i = 0; i < K; ++i) {{ best[i] = -1e30f; which[i] = -1; }}
  for (int e = threadIdx.x; e < experts; e += 128) {{
    const float v = float(logits[blockIdx.x * experts + e]) * {scale}f;
    int slot = K - 1;
    while (slot > 0 && best[slot - 1] < v) {{ best[slot] = best[slot - 1]; which[slot] = which[slot - 1]; --slot; }}
    if (best[slot] < v) {{ best[slot] = v; which[slot] = e; }}
  }}
  for (int i = 0; i < K; ++i) ids[(blockIdx.x * 128 + threadIdx.x) * K + i] = which[i];
}}
#define TOPK_{n}(T, K) template __global__ void topk_gating_{n}<T, K>(const T*, int*, int);
"""

# Waits on the previous grid before its first load: a PDL kernel, configured and launched as one.
PDL = """\
template <typename T, int BLOCK>
__global__ void __launch_bounds__(BLOCK) fused_add_pdl_{n}(const T* __restrict__ x, T* __restrict__ residual, int n) {{
  serve::grid_wait();
  const int i = blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) residual[i] = T(float(residual[i]) + float(x[i]) * {scale}f);
  serve::launch_dependents();
}}
#define PDL_{n}(T, BLOCK) template __global__ void fused_add_pdl_{n}<T, BLOCK>(const T*, T*, int);

void launch_fused_add_{n}(const float* x, float* residual, int n, cudaStream_t stream) {{
  cudaLaunchConfig_t config = {{}};
  config.gridDim = dim3((n + 255) / 256);
  config.blockDim = dim3(256);
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  cudaError_t err = cudaLaunchKernelEx(&config, fused_add_pdl_{n}<float, 256>, x, residual, n);
  (void)err;
}}
"""

BLOCK_SCALED = """\
template <int STEPS>
__global__ void mxf8_gemm_{n}(const uint32_t* a, const uint32_t* b, const uint32_t* sf, float* out) {{
  const unsigned t = threadIdx.x;
  float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
#pragma unroll
  for (int k = 0; k < STEPS; ++k)
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e4m3.f32.ue8m0 "
        "{{%0, %1, %2, %3}}, {{%4, %5, %6, %7}}, {{%8, %9}}, {{%0, %1, %2, %3}}, %10, {{0, 0}}, %11, {{0, 0}};\\n"
        : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
        : "r"(a[t + k * 128]), "r"(a[t + 32 + k * 128]), "r"(a[t + 64 + k * 128]), "r"(a[t + 96 + k * 128]),
          "r"(b[t + k * 64]), "r"(b[t + 32 + k * 64]), "r"(sf[k]), "r"(sf[k + 1]));
  out[t * 4] = d0 * {scale}f; out[t * 4 + 1] = d1; out[t * 4 + 2] = d2; out[t * 4 + 3] = d3;
}}
#define MXF8_{n}(STEPS) template __global__ void mxf8_gemm_{n}<STEPS>(const uint32_t*, const uint32_t*, const uint32_t*, float*);
"""

VECS = (1, 2, 4, 8)
BLOCKS = (128, 256, 512, 1024)
# GEMM tiles (BM, BN, BK, TM, TN): a light file has the first few, the heavy file all of them, and more.
TILES = [(32, 32, 8, 2, 2), (64, 32, 8, 4, 2), (64, 64, 8, 4, 4), (64, 64, 16, 4, 4), (128, 64, 8, 8, 4),
         (128, 64, 16, 8, 4), (128, 128, 8, 8, 8), (64, 128, 8, 4, 8), (128, 128, 16, 8, 8), (128, 32, 8, 8, 2),
         (32, 128, 8, 2, 8), (64, 64, 32, 4, 4), (128, 64, 32, 8, 4), (64, 128, 16, 4, 8), (128, 128, 32, 8, 8),
         (256, 64, 8, 8, 4)]


def cuda_file(n: int, tiles: int) -> tuple[str, int]:
    """One file's source and its number of kernel instances: every family, `tiles` GEMM tiles over three dtypes."""
    scale = f"{1 + n / 100:.2f}"
    parts = ['#include "serve.cuh"\n']
    lines: list[str] = []
    count = 0
    for family in (ACTIVATION, NORM, GEMM, TOPK, PDL, BLOCK_SCALED):
        parts.append(family.format(n=n, scale=scale))
    for vec in VECS:
        for block in BLOCKS[:3]:
            lines.append(f"SERVE_DTYPES(ACT_{n}, {vec}, {block})")
            count += 3
    for vec in VECS:
        for block in BLOCKS:
            lines.append(f"SERVE_DTYPES(NORM_{n}, {vec}, {block})")
            count += 3
    for index in range(tiles):
        bm, bn, bk, tm, tn = TILES[index % len(TILES)]
        bk *= 1 + 2 * (index // len(TILES))  # past the table: the same tiles again, deeper in K (x3, x5, ...)
        lines.append(f"SERVE_DTYPES(GEMM_{n}, {bm}, {bn}, {bk}, {tm}, {tn})")
        count += 3
    for k in (2, 4, 8, 16):
        lines.append(f"SERVE_DTYPES(TOPK_{n}, {k})")
        count += 3
    for block in BLOCKS:
        lines.append(f"SERVE_DTYPES(PDL_{n}, {block})")
        count += 3
    for steps in (1, 2, 4):
        lines.append(f"MXF8_{n}({steps})")
        count += 1
    return "\n".join(parts) + "\n" + "\n".join(lines) + "\n", count


def generate(root: Path, files: int = 12, tiles: int = 3, heavy_tiles: int = 32) -> dict[str, int]:
    """Write the tree; the file `csrc/moe/fused_moe.cu` is the heavy one. Counts of what was written."""
    csrc = root / "csrc"
    (csrc / "include").mkdir(parents=True, exist_ok=True)
    (csrc / "include" / "serve.cuh").write_text(HEADER)
    folders = ("activation", "attention", "layernorm", "quantization", "sampling")
    kernels = 0
    for n in range(files):
        heavy = n == files // 2
        path = csrc / "moe" / "fused_moe.cu" if heavy else csrc / folders[n % len(folders)] / f"ops_{n:02d}.cu"
        path.parent.mkdir(parents=True, exist_ok=True)
        text, count = cuda_file(n, heavy_tiles if heavy else tiles)
        path.write_text(text)
        kernels += count
    (root / "kgate.toml").write_text(
        'targets = ["sm_120a"]\n\n[[cuda]]\nsources = ["csrc/**/*.cu"]\n'
        'flags = ["-Icsrc/include", "-std=c++17", "-O3"]\n'
        'pdl = ["fused_add_pdl*"]\n'
        'expect = { "mxf8_gemm*" = ["block_scale"] }\n'
        'kind = { "gemm_tile*" = "gemm", "rms_norm*" = "reduction", "silu_and_mul*" = "elementwise" }\n')
    return {"files": files, "kernels": kernels}
