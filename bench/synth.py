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


# --------------------------------------------------------------------------- a serving engine's Python tree

TRITON_UTILS = '''"""The engine's one import of Triton, with a stand-in where Triton is not installed."""

try:
    import triton
    import triton.language as tl

    HAS_TRITON = True
except ImportError:
    HAS_TRITON = False

    class _Placeholder:
        def __getattr__(self, name):
            return self

        def __call__(self, *args, **kwargs):
            return self

    triton = _Placeholder()
    tl = _Placeholder()
'''

SERVING_KERNELS = '''"""Kernels of group {g}, module {i}."""

from engine.triton_utils import tl, triton

CONFIGS_{i} = [triton.Config({{"BLOCK": b}}, num_warps=w) for b in (128, 256) for w in (4, 8)]


@triton.jit
def _act_{i}(v, ALPHA: tl.constexpr):
    return v * tl.sigmoid(ALPHA * v)


{fused_tune}@triton.jit
def fused_{i}(x, out, n_tokens, hidden, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    v = tl.load(x + row * hidden + cols, mask=cols < hidden, other=0.0)
    tl.store(out + row * hidden + cols, _act_{i}(v, {alpha}), mask=cols < hidden)


{reduce_tune}@triton.jit
def reduce_{i}(x, acc, n_tokens, hidden, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    v = tl.load(x + tl.program_id(0) * hidden + cols, mask=cols < hidden, other=0.0)
    tl.atomic_add(acc + cols, v, mask=cols < hidden){debug}


@triton.jit
def rope_{i}(q, cos, sin, T, HEAD: tl.constexpr, ROWS: tl.constexpr):
    offs = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    tl.store(q + offs, tl.load(q + offs) * tl.load(cos + offs) + tl.load(sin + offs), mask=offs < T)


def rope_{i}_launch(q, cos, sin):
    rope_{i}[(triton.cdiv(q.shape[0], 64),)](q, cos, sin, q.shape[0], HEAD=q.shape[-1], ROWS=64)
'''

SERVING_OPS = '''"""Launchers of group {g}, module {i}."""

import torch

from engine.kernels.g{g}.k{k} import fused_{k}, reduce_{k}
from engine.triton_utils import triton
{other}

def fused_{i}_op(x, rows):
    out = torch.empty_like(x)
    fused_{k}[(rows,)](x, out, rows, x.shape[-1])
    return out


def reduce_{i}_op(x):
    acc = torch.zeros(x.shape[-1], device=x.device)
    reduce_{k}[(x.shape[0],)](x, acc, x.shape[0], x.shape[-1])
    return acc


def grid_{i}(n):
    return (triton.cdiv(n, 128),)
'''

SERVING_LAYER = '''"""A layer of group {g}, module {i}."""

import torch

from engine.ops.g{g}.o{o} import fused_{o}_op, reduce_{o}_op
{other}

class Layer{i}(torch.nn.Module):
    def __init__(self, hidden_size):
        super().__init__()
        self.hidden_size = hidden_size

    def forward(self, hidden):
        tokens = hidden.shape[0]
        out = fused_{o}_op(hidden, {rows})
        return out + reduce_{o}_op(out)
'''

SERVING_PLAIN = '''"""Model code of group {g}, module {i}: the bulk of an engine, Python that names no kernel."""

import dataclasses
import logging
import os
from typing import Any

logger = logging.getLogger(__name__)
{other}

@dataclasses.dataclass
class Settings{i}:
    hidden_size: int = {hidden}
    num_heads: int = 32
    max_tokens: int = int(os.environ.get("MAX_TOKENS_{i}", "8192"))

    def scaled(self, factor: int) -> "Settings{i}":
        return dataclasses.replace(self, hidden_size=self.hidden_size * factor)
{methods}'''

SERVING_METHOD = '''

def step_{i}_{n}(batch: dict[str, Any], settings: Settings{i}, retries: int = 3) -> dict[str, Any]:
    """Schedule one step of requests {n}: admit, pad and order them."""
    admitted = {{}}
    for name, request in sorted(batch.items(), key=lambda item: item[1].get("priority", 0)):
        if len(admitted) >= settings.max_tokens // max(1, request.get("tokens", 1)):
            logger.debug("deferred %s after %d admitted", name, len(admitted))
            continue
        tokens = request.get("tokens", 0)
        padded = (tokens + settings.num_heads - 1) // settings.num_heads * settings.num_heads
        admitted[name] = {{**request, "padded": padded, "attempt": retries - request.get("left", retries)}}
    if not admitted and batch:
        raise RuntimeError(f"no request of {{len(batch)}} fits {{settings.max_tokens}} tokens")
    return {{name: value for name, value in admitted.items() if value["padded"] > 0}}
'''

SERVING_TEST = '''"""Tests of group {g}."""

import os

import torch

from engine.ops.g{g}.o{o} import fused_{o}_op


def test_fused_{i}():
    os.environ["{variable}"] = "1"
    x = torch.randn(16, 128)
    assert fused_{o}_op(x, 16).shape == x.shape
'''

SERVING_CU = '''#include <cuda_runtime.h>
#include "launch_check.h"

__global__ void scale_{i}(float* x, int n) {{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= {alpha}f;
}}

// Other files call this one: their calls decide.
void scale_{i}_launch(float* x, int n, cudaStream_t stream) {{
  scale_{i}<<<(n + 255) / 256, 256, 0, stream>>>(x, n);
}}

void run_{i}(float* x, int n, cudaStream_t stream) {{
  scale_{j}_launch(x, n, stream);
  {check}
}}
'''


def serving_engine(root: Path, modules: int = 10000, cuda_files: int = 40, kernel_share: float = 0.04,
                   methods_per_module: int = 8) -> dict[str, int]:
    """A Python tree shaped like a serving engine's: `modules` Python files in `engine/` and `tests/`, plus
    `cuda_files` .cu files whose launch helpers other files call. In the proportions of the serving engines of the
    labelled corpus: `kernel_share` of the modules define Triton kernels, taking Triton through the engine's own
    `engine.triton_utils` (two in five of them autotuned, keyed on a run-time shape in some, decided by what their
    launchers' callers in other modules pass; an autotuned atomic kernel, its buffer reset in most; a constexpr passed a
    shape); half again as many launcher modules import those kernels and each other, two and a half times as many
    layers call the launchers and import each other, and the rest is model and scheduling code of about 8 KB a module
    (`methods_per_module`) that names no kernel. Deterministic: the same arguments give the same files."""
    kernels = max(1, int(modules * kernel_share))
    ops, layers, tests = kernels * 3 // 2, kernels * 5 // 2, max(1, modules // 50)
    plain = modules - kernels - ops - layers - tests - 3
    group = 50  # modules per package
    engine = root / "engine"
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text('[project]\nname = "engine"\n')
    counts = {"python": 0, "cuda": 0}

    def write(rel: str, text: str) -> None:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.name != "__init__.py" and not (path.parent / "__init__.py").exists() and rel.startswith("engine/"):
            (path.parent / "__init__.py").write_text("")
            counts["python"] += 1
        path.write_text(text)
        counts["python" if rel.endswith(".py") else "cuda"] += 1

    engine.mkdir(parents=True, exist_ok=True)
    write("engine/__init__.py", '"""A serving engine."""\n')
    write("engine/triton_utils.py", TRITON_UTILS)
    for i in range(kernels):
        key = ('"n_tokens", "hidden"', '"hidden"', '"hidden"')[i % 3]
        fused_tune = f"@triton.autotune(configs=CONFIGS_{i}, key=[{key}])\n" if i % 5 < 2 else ""
        reset = ', reset_to_zero=["acc"]' if i % 4 else ""
        reduce_tune = f'@triton.autotune(configs=CONFIGS_{i}, key=["hidden"]{reset})\n' if i % 5 == 0 else ""
        debug = '\n    tl.device_print("acc", v)' if i % 97 == 0 else ""
        write(f"engine/kernels/g{i // group}/k{i}.py", SERVING_KERNELS.format(
            g=i // group, i=i, fused_tune=fused_tune, reduce_tune=reduce_tune, debug=debug, alpha=f"{1 + i % 7 / 10:.1f}"))
    for i in range(ops):
        k = i % kernels
        other = f"from engine.ops.g{(i - 1) // group}.o{i - 1} import grid_{i - 1}\n" if i % 5 and i else ""
        write(f"engine/ops/g{k // group}/o{i}.py", SERVING_OPS.format(g=k // group, i=i, k=k, other=other))
    for i in range(layers):
        o = i % ops
        other = f"from engine.layers.g{(i - 1) // group}.l{i - 1} import Layer{i - 1}\n" if i % 3 and i else ""
        rows = "tokens" if i % 2 else "self.hidden_size"
        write(f"engine/layers/g{i // group}/l{i}.py", SERVING_LAYER.format(g=(o % kernels) // group, i=i, o=o,
                                                                          other=other, rows=rows))
    for i in range(plain):
        other = f"from engine.layers.g{(i % layers) // group}.l{i % layers} import Layer{i % layers}\n" \
            if i % 2 else ""
        methods = "".join(SERVING_METHOD.format(i=i, n=n) for n in range(methods_per_module))
        write(f"engine/models/g{i // group}/m{i}.py", SERVING_PLAIN.format(g=i // group, i=i, other=other,
                                                                          hidden=1024 << i % 3, methods=methods))
    for i in range(tests):
        o = i % ops
        write(f"tests/test_o{i}.py", SERVING_TEST.format(g=(o % kernels) // group, i=i, o=o,
                                                         variable="TRITON_INTERPRET" if i % 10 == 0 else "DEBUG"))
    if cuda_files:
        write("csrc/launch_check.h", "#pragma once\n#include <cstdlib>\n#include <cuda_runtime.h>\n"
              "#define CHECK_LAUNCH() do { if (cudaGetLastError() != cudaSuccess) abort(); } while (0)\n")
    for i in range(cuda_files):
        j = (i + 1) % cuda_files
        check = "CHECK_LAUNCH();" if i % 3 else ""
        write(f"csrc/ops{i:03d}.cu", SERVING_CU.format(i=i, j=j, check=check, alpha=f"{0.5 + i % 4 / 4:.2f}"))
    return counts


def serving_files(root: Path) -> dict[str, Path]:
    """Files of a `serving_engine` tree a one-file edit is measured on: a kernel module (`leaf`), and a launcher
    module whose calls decide a kernel module's verdicts (`read by others`)."""
    return {"leaf": root / "engine" / "models" / "g0" / "m0.py",
            "kernel": root / "engine" / "kernels" / "g0" / "k1.py",
            "read by others": root / "engine" / "ops" / "g0" / "o1.py"}
