"""How many CUDA kernels per second `kgate check` gates, cold and warm, next to plain nvcc.

    python bench/cuda_bench.py                      # generate a tree: 24 files x 8 kernels
    python bench/cuda_bench.py --files 48 --kernels 6
    python bench/cuda_bench.py --src path/to/csrc --flags "-Ipath/to/include -std=c++17"
    python bench/cuda_bench.py --adapter            # and every file launches through a CUTLASS-style adapter

With `--src`, the folder is copied to a temporary place and gated as it is
(its own kgate.toml or pyproject.toml if it has one, else one written with
`sources = ["**/*.cu"]` and `--flags`). Without it, a tree of `.cu` files
with host launchers, templates with explicit instantiations, shared-memory
reductions, block-scaled MMA and PDL launches is generated, so the numbers
can be reproduced anywhere nvcc is.

Printed side by side from one run, all with the same number of parallel jobs:
- nvcc: `nvcc -cubin -Xptxas -v` on every file for sm_120a (what kgate's cold
  run cannot beat: it runs the same compiler);
- kgate cold: `kgate check` with an empty cache (compile, parse, SASS where
  needed, rules);
- kgate warm: the same again, nothing changed (no compiler runs).

With `--adapter`, every generated file also launches a kernel through a CUTLASS-style adapter that sizes its
dynamic shared memory by `sizeof(typename Kernel::SharedStorage)`: the cold run compiles a probe of every file
to evaluate it (docs/cuda.md), so `cold / nvcc` against a run without `--adapter` shows what the probes cost.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

GENCODE = "--generate-code=arch=compute_120a,code=sm_120a"

HEADER = """\
#pragma once
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cstdint>

namespace bench {
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

template <int BLOCK>
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float partial[BLOCK];
  partial[threadIdx.x] = v;
  __syncthreads();
  for (int s = BLOCK / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  return partial[0];
}
}  // namespace bench
"""

# A CUTLASS-style adapter (`--adapter`): the kernel's dynamic shared memory is its operator's SharedStorage.
ADAPTER = """\
namespace bench {
template <class Operator>
__global__ void device_kernel(typename Operator::Params params) {
  extern __shared__ char smem[];
  Operator op;
  op(params, *reinterpret_cast<typename Operator::SharedStorage*>(smem));
}
template <class Kernel_>
struct Adapter {
  using Kernel = Kernel_;
  static void run(typename Kernel::Params params, cudaStream_t stream) {
    int smem_size = int(sizeof(typename Kernel::SharedStorage));
    cudaFuncSetAttribute(device_kernel<Kernel>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_size);
    device_kernel<Kernel><<<1, 256, smem_size, stream>>>(params);
    (void)cudaGetLastError();
  }
};
}  // namespace bench
"""

ADAPTED = """\
namespace ops_{i} {{
struct Tile {{
  struct Params {{ float* y; }};
  struct SharedStorage {{ float rows[64][65 + {i} % 7]; }};
  __device__ void operator()(Params const& p, SharedStorage& s) {{
    s.rows[threadIdx.x % 64][threadIdx.x % 65] = p.y[threadIdx.x];
    __syncthreads();
    p.y[threadIdx.x] = s.rows[(threadIdx.x + 1) % 64][0];
  }}
}};
}}  // namespace ops_{i}
void launch_tile_{i}(float* y, cudaStream_t stream) {{ bench::Adapter<ops_{i}::Tile>::run({{y}}, stream); }}
"""

KERNELS = [
    # elementwise, templated on type and vector width
    """\
template <typename T, int VEC>
__global__ void __launch_bounds__(256) scale_{i}(const T* __restrict__ x, T* __restrict__ y, float a, int n) {{
  const int base = (blockIdx.x * 256 + threadIdx.x) * VEC;
#pragma unroll
  for (int v = 0; v < VEC; ++v)
    if (base + v < n) y[base + v] = T(float(x[base + v]) * a + {i}.0f);
}}
template __global__ void scale_{i}<float, 4>(const float*, float*, float, int);
template __global__ void scale_{i}<__nv_bfloat16, 8>(const __nv_bfloat16*, __nv_bfloat16*, float, int);
""",
    # row reduction with shared memory
    """\
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) rms_{i}(const float* x, float* out, int cols) {{
  float acc = 0.f;
  for (int c = threadIdx.x; c < cols; c += BLOCK) acc += x[blockIdx.x * cols + c] * x[blockIdx.x * cols + c];
  const float total = bench::block_sum<BLOCK>(acc);
  const float r = rsqrtf(total / cols + 1e-6f);
  for (int c = threadIdx.x; c < cols; c += BLOCK) out[blockIdx.x * cols + c] = x[blockIdx.x * cols + c] * r;
}}
template __global__ void rms_{i}<128>(const float*, float*, int);
template __global__ void rms_{i}<512>(const float*, float*, int);
""",
    # a small register-tiled matmul
    """\
__global__ void __launch_bounds__(256) tile_mm_{i}(const float* a, const float* b, float* c, int n) {{
  __shared__ float as[16][17], bs[16][17];
  const int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
  float acc = 0.f;
  for (int k = 0; k < n; k += 16) {{
    as[threadIdx.y][threadIdx.x] = a[row * n + k + threadIdx.x];
    bs[threadIdx.y][threadIdx.x] = b[(k + threadIdx.y) * n + col];
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < 16; ++kk) acc += as[threadIdx.y][kk] * bs[kk][threadIdx.x];
    __syncthreads();
  }}
  c[row * n + col] = acc;
}}
""",
    # block-scaled MMA tile (sm_120a)
    """\
__global__ void mxf8_tile_{i}(const uint32_t* a, const uint32_t* b, const uint32_t* sf, float* out) {{
  const unsigned t = threadIdx.x;
  float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
  for (int k = 0; k < {i} + 2; ++k)
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e4m3.f32.ue8m0 "
        "{{%0, %1, %2, %3}}, {{%4, %5, %6, %7}}, {{%8, %9}}, {{%0, %1, %2, %3}}, %10, {{0, 0}}, %11, {{0, 0}};\\n"
        : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
        : "r"(a[t + k * 128]), "r"(a[t + 32 + k * 128]), "r"(a[t + 64 + k * 128]), "r"(a[t + 96 + k * 128]),
          "r"(b[t + k * 64]), "r"(b[t + 32 + k * 64]), "r"(sf[k]), "r"(sf[k + 1]));
  out[t * 4] = d0; out[t * 4 + 1] = d1; out[t * 4 + 2] = d2; out[t * 4 + 3] = d3;
}}
""",
    # PDL consumer
    """\
__global__ void __launch_bounds__(256) consume_{i}(const float* x, float* y, int n) {{
  bench::pdl_wait();
  const int i = blockIdx.x * 256 + threadIdx.x;
  if (i < n) y[i] = x[i] * 0.5f + {i}.0f;
}}
""",
]

LAUNCHER = """\
void launch_{i}(const float* x, float* y, int n, cudaStream_t stream) {{
  scale_{i}<float, 4><<<(n + 1023) / 1024, 256, 0, stream>>>(x, y, 2.f, n);
  rms_{r}<128><<<n / 512, 128, 0, stream>>>(x, y, 512);
  cudaLaunchConfig_t config = {{}};
  config.gridDim = dim3((n + 255) / 256);
  config.blockDim = dim3(256);
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  cudaLaunchKernelEx(&config, consume_{c}, (const float*)y, y, n);
}}
"""


def generate(folder: Path, files: int, kernels: int, adapter: bool = False) -> None:
    """A tree of `files` .cu files under csrc/, each with about `kernels` kernels, and a shared header; with
    `adapter`, each file also launches a kernel through the header's CUTLASS-style adapter."""
    (folder / "csrc" / "include").mkdir(parents=True)
    (folder / "csrc" / "include" / "bench.cuh").write_text(HEADER + (ADAPTER if adapter else ""))
    for index in range(files):
        parts = ['#include "bench.cuh"\n']
        count = 0
        shape = 0
        while count < kernels:
            template = KERNELS[shape % len(KERNELS)]
            parts.append(template.format(i=index * 100 + shape))
            count += 2 if "template __global__" in template else 1
            shape += 1
        if shape >= len(KERNELS):
            parts.append(LAUNCHER.format(i=index * 100, r=index * 100 + 1, c=index * 100 + 4))
        if adapter:
            parts.append(ADAPTED.format(i=index))
        sub = folder / "csrc" / f"part{index % 4}"
        sub.mkdir(exist_ok=True)
        (sub / f"ops_{index:03d}.cu").write_text("\n".join(parts))
    (folder / "kgate.toml").write_text(
        'targets = ["sm_120a"]\n\n[[cuda]]\nsources = ["csrc/**/*.cu"]\n'
        'flags = ["-Icsrc/include", "-std=c++17", "-O3"]\nexpect = { "mxf8_tile*" = ["block_scale"] }\n')


def adopt(src: Path, folder: Path, flags: list[str]) -> None:
    shutil.copytree(src, folder, ignore=shutil.ignore_patterns(".kgate-cache", ".git", "build"))
    if not (folder / "kgate.toml").exists() and "tool.kgate" not in _read(folder / "pyproject.toml"):
        (folder / "kgate.toml").write_text(
            f'targets = ["sm_120a"]\n\n[[cuda]]\nsources = ["**/*.cu"]\nflags = {json.dumps(flags)}\n')


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def plain_nvcc(folder: Path, flags: list[str], jobs: int) -> tuple[float, int]:
    """Seconds for nvcc -cubin -Xptxas -v on every .cu file, and how many failed."""
    files = sorted(folder.rglob("*.cu"))
    out = Path(tempfile.mkdtemp(prefix="bench-nvcc-"))

    def one(path: Path) -> int:
        argv = ["nvcc", *flags, "-cubin", "-Xptxas", "-v", GENCODE, "-o", str(out / (path.stem + ".cubin")),
                str(path)]
        return subprocess.run(argv, cwd=folder, capture_output=True, check=False).returncode

    started = time.perf_counter()
    with ThreadPoolExecutor(jobs) as pool:
        codes = list(pool.map(one, files))
    seconds = time.perf_counter() - started
    shutil.rmtree(out, ignore_errors=True)
    return seconds, sum(1 for c in codes if c)


def kgate_check(folder: Path, jobs: int) -> tuple[float, dict]:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "kgate", "check", "--format", "json", "--no-baseline",
                           "-j", str(jobs)], cwd=folder, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        raise SystemExit(f"kgate check failed ({proc.returncode}): {proc.stderr.strip()}")
    return seconds, json.loads(proc.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", type=Path, help="a folder of CUDA sources to gate instead of a generated tree")
    parser.add_argument("--flags", default="-std=c++17 -O3", help="nvcc flags for --src without a kgate config")
    parser.add_argument("--files", type=int, default=24)
    parser.add_argument("--kernels", type=int, default=8, help="kernels per generated file (about)")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--repeat", type=int, default=1, help="interleaved rounds; the best of each is shown")
    parser.add_argument("--adapter", action="store_true",
                        help="every generated file also launches through a CUTLASS-style adapter (a probe each)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kgate-cuda-bench-"))
    folder = work / "tree"
    try:
        if args.src:
            flags = shlex.split(args.flags)
            adopt(args.src.resolve(), folder, flags)
        else:
            generate(folder, args.files, args.kernels, args.adapter)
            flags = ["-Icsrc/include", "-std=c++17", "-O3"]
        files = len(list(folder.rglob("*.cu")))
        times: dict[str, list[float]] = {"nvcc": [], "cold": [], "warm": []}
        for _ in range(args.repeat):
            # Interleaved, best of N: on a shared machine the load changes between runs.
            seconds, nvcc_failed = plain_nvcc(folder, flags, args.jobs)
            times["nvcc"].append(seconds)
            shutil.rmtree(folder / ".kgate-cache", ignore_errors=True)
            seconds, cold = kgate_check(folder, args.jobs)
            times["cold"].append(seconds)
            seconds, warm = kgate_check(folder, args.jobs)
            times["warm"].append(seconds)
            assert warm == cold, "a warm run must report exactly what the cold run did"
        nvcc_s, cold_s, warm_s = (min(times[k]) for k in ("nvcc", "cold", "warm"))
        kernels = len(cold["kernels"])
        tree = args.src or ("generated, launching through an adapter" if args.adapter else "generated")
        print(f"tree: {tree}: {files} .cu files, {kernels} kernels gated for sm_120a, "
              f"{args.jobs} job(s), {len(cold['findings'])} findings, best of {args.repeat}")
        if nvcc_failed:
            print(f"  ({nvcc_failed} file(s) did not compile with plain nvcc either)")
        rows = [("nvcc -cubin -Xptxas -v", nvcc_s), ("kgate check, cold cache", cold_s),
                ("kgate check, warm cache", warm_s)]
        for label, seconds in rows:
            print(f"  {label:<26} {seconds:7.2f} s   {kernels / seconds:8.1f} kernels/s")
        print(f"  cold / nvcc = {cold_s / nvcc_s:.2f}x   warm / cold = {warm_s / cold_s:.3f}x   "
              f"warm speed-up = {cold_s / warm_s:.1f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
