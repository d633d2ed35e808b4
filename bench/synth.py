"""A synthetic kernel repository for kgate's benchmarks and sharding tests.

`generate(root, modules=10)` writes `modules` Python files of five Triton
kernels each (elementwise, reduction and GEMM kernels with varied tiles,
warps, stages and dtypes), each registered with two variants, plus CUDA C++
sources, and a kgate.toml that registers them. Deterministic: the same
arguments give the same files.
"""

from __future__ import annotations

import json
from pathlib import Path

ELEMENTWISE = '''
@triton.jit
def {name}(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(x + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(y + offs, mask=mask, other=0.0).to(tl.float32)
    g = a * tl.sigmoid({alpha} * a) * b
    tl.store(out + offs, g.to(out.dtype.element_ty), mask=mask)
'''

REDUCTION = '''
@triton.jit
def {name}(x, w, out, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    v = tl.load(x + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    scale = tl.load(w + cols, mask=mask, other=0.0).to(tl.float32)
    rms = tl.sqrt(tl.sum(v * v, axis=0) / n_cols + eps)
    tl.store(out + row * n_cols + cols, (v / rms * scale * {alpha}).to(out.dtype.element_ty), mask=mask)
'''

GEMM = '''
@triton.jit
def {name}(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a + rm[:, None] * K + rk[None, :]
    b_ptrs = b + rk[:, None] * N + rn[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        x = tl.load(a_ptrs, mask=rk[None, :] < K - k * BK, other=0.0)
        y = tl.load(b_ptrs, mask=rk[:, None] < K - k * BK, other=0.0)
        acc = tl.dot(x, y, acc)
        a_ptrs += BK
        b_ptrs += BK * N
    acc = acc * {alpha}
    tl.store(c + rm[:, None] * N + rn[None, :], acc.to(c.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))
'''

CUDA = '''// Synthetic CUDA kernels for kgate's benchmark.
#include <cuda_fp16.h>

template <int BLOCK, int UNROLL>
__global__ void scale_kernel(const float* __restrict__ x, float* __restrict__ y, int n, float alpha) {{
    int base = (blockIdx.x * BLOCK + threadIdx.x) * UNROLL;
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {{
        int i = base + u;
        if (i < n) y[i] = x[i] * alpha + {alpha}f;
    }}
}}

template <int BLOCK>
__global__ void row_sum_kernel(const __half* __restrict__ x, float* __restrict__ out, int cols) {{
    __shared__ float partial[BLOCK];
    float acc = 0.f;
    for (int c = threadIdx.x; c < cols; c += BLOCK) acc += __half2float(x[blockIdx.x * cols + c]);
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {{
        if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
        __syncthreads();
    }}
    if (threadIdx.x == 0) out[blockIdx.x] = partial[0] * {alpha}f;
}}

template __global__ void scale_kernel<128, 1>(const float*, float*, int, float);
template __global__ void scale_kernel<256, 2>(const float*, float*, int, float);
template __global__ void scale_kernel<256, 4>(const float*, float*, int, float);
template __global__ void row_sum_kernel<128>(const __half*, float*, int);
template __global__ void row_sum_kernel<256>(const __half*, float*, int);
'''

DTYPES = ("fp16", "bf16", "fp32")


def _module(index: int) -> tuple[str, list[dict]]:
    """The source of one module and its registrations."""
    parts = ["import triton", "import triton.language as tl", ""]
    entries: list[dict] = []
    mod = f"synth.k{index:03d}"
    for j in range(5):
        alpha = f"{1.0 + index * 0.01 + j * 0.001:.3f}"
        dtype = DTYPES[(index + j) % 3]
        kind = ("elementwise", "reduction", "gemm", "elementwise", "gemm")[j]
        name = f"{kind}_{index:03d}_{j}"
        if kind == "elementwise":
            parts.append(ELEMENTWISE.format(name=name, alpha=alpha))
            block = 512 << ((index + j) % 4)
            entries.append({"kernel": f"{mod}:{name}", "kind": kind,
                            "signature": {"x": f"*{dtype}", "y": f"*{dtype}", "out": f"*{dtype}", "n": "i32"},
                            "constexprs": {"BLOCK": block}, "num_warps": 4,
                            "variants": [{"BLOCK": block * 2, "num_warps": 8}]})
        elif kind == "reduction":
            parts.append(REDUCTION.format(name=name, alpha=alpha))
            block = 1024 << (index % 3)
            entries.append({"kernel": f"{mod}:{name}", "kind": kind,
                            "signature": {"x": f"*{dtype}", "w": f"*{dtype}", "out": f"*{dtype}", "n_cols": "i32",
                                          "eps": "fp32"},
                            "constexprs": {"BLOCK": block}, "num_warps": 4 << (j % 2),
                            "variants": [{"BLOCK": block // 2, "num_warps": 4}]})
        else:
            gemm_dtype = ("fp16", "bf16")[(index + j) % 2]
            parts.append(GEMM.format(name=name, alpha=alpha))
            bm, bn, bk = (64, 64, 32) if (index + j) % 2 else (128, 64, 32)
            entries.append({"kernel": f"{mod}:{name}", "kind": kind,
                            "signature": {"a": f"*{gemm_dtype}", "b": f"*{gemm_dtype}", "c": f"*{gemm_dtype}",
                                          "M": "i32", "N": "i32", "K": "i32"},
                            "constexprs": {"BM": bm, "BN": bn, "BK": bk}, "num_warps": 4,
                            "num_stages": 2 + (index % 3),
                            "variants": [{"BN": 32, "num_stages": 2}]})
    return "\n".join(parts), entries


def _toml(value: object) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, str):
        return json.dumps(value)
    return str(value)


def generate(root: Path, modules: int = 10, cuda_files: int = 4, targets: tuple[str, ...] = ("sm_120a",)) -> dict:
    """Write the synthetic repository; return counts of what it registers."""
    package = root / "synth"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text('"""Synthetic kernels."""\n')
    lines = [f"targets = {_toml(list(targets))}", 'python-path = ["."]', 'exclude = ["build"]', ""]
    variants = 0
    for index in range(modules):
        source, entries = _module(index)
        (package / f"k{index:03d}.py").write_text(source)
        for entry in entries:
            lines.append("[[triton]]")
            lines.extend(f"{key} = {_toml(value)}" for key, value in entry.items())
            lines.append("")
            variants += 1 + len(entry["variants"])
    csrc = root / "csrc"
    csrc.mkdir(exist_ok=True)
    for index in range(cuda_files):
        (csrc / f"ops{index:02d}.cu").write_text(CUDA.format(alpha=f"{0.5 + index * 0.25:.2f}"))
    if cuda_files:
        lines += ["[[cuda]]", 'sources = ["csrc/*.cu"]', ""]
    (root / "kgate.toml").write_text("\n".join(lines))
    return {"triton_variants": variants, "cuda_kernels": cuda_files * 5, "modules": modules}


def edit_one_kernel(root: Path, round_: int = 1) -> Path:
    """Change one kernel's source (a constant of the first module's first kernel), as a developer's edit would."""
    import re

    path = root / "synth" / "k000.py"
    text = path.read_text()
    path.write_text(re.sub(r"\b1\.\d{3} \* a\b", f"{1 + round_ / 1000:.3f} * a", text, count=1))
    return path
