"""Kernels a CUDA file instantiates from a library outside the project: a template kernel of a header library (a
CUTLASS GEMM's `device_kernel<GemmKernel>`) carries the project's tile and schedule choices and is gated, at the file
that instantiates it; the kernels of the toolkit's own core libraries (CUB, Thrust, libcu++) and a library's kernel
the project does not instantiate are not."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import DATA, kgate

from kgate.collect.cuda_names import short_name, template_head
from kgate.facts.build import _core_library

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")

LIBRARY = """\
#pragma once
namespace tiles {
template <int TILE>
__global__ void device_kernel(float* x) {
  __shared__ float staged[TILE];
  staged[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  x[threadIdx.x] = staged[TILE - 1 - threadIdx.x];
}
__global__ void never_instantiated(float* x) { x[0] = 1.0f; }
template <int TILE>
struct Adapter {
  static void run(float* x, cudaStream_t stream) { device_kernel<TILE><<<1, TILE, 0, stream>>>(x); }
};
}  // namespace tiles
"""

OPS = """\
#include <cub/cub.cuh>
#include "tiles/kernel.cuh"

__global__ void own(float* x) { x[threadIdx.x] *= 2.0f; }

void reverse(float* x, cudaStream_t stream) { tiles::Adapter<256>::run(x, stream); }

void total(const float* in, float* out, int n, void* scratch, size_t bytes, cudaStream_t stream) {
  cub::DeviceReduce::Sum(scratch, bytes, in, out, n, stream);
}
"""


@needs_nvcc
def test_a_library_template_the_file_instantiates_is_gated_and_the_toolkits_own_are_not(tmp_path: Path) -> None:
    (tmp_path / "lib" / "include" / "tiles").mkdir(parents=True)
    (tmp_path / "lib" / "include" / "tiles" / "kernel.cuh").write_text(LIBRARY)
    project = tmp_path / "proj"
    project.mkdir()
    (project / "ops.cu").write_text(OPS)
    (project / "kgate.toml").write_text('targets = ["sm_120a"]\n[[cuda]]\nsources = ["ops.cu"]\n'
                                        'flags = ["-I../lib/include"]\n')
    run = kgate("check", "--format", "json", cwd=project)
    assert run.code == 0, run.stdout + run.stderr
    kernels = {k["kernel"]: k for k in json.loads(run.stdout)["kernels"]}
    assert set(kernels) == {"own", "tiles::device_kernel<256>"}, sorted(kernels)
    instantiated = kernels["tiles::device_kernel<256>"]
    assert instantiated["path"] == "ops.cu" and instantiated["smem_bytes"] >= 1024  # the project's TILE decides it


def test_a_symbol_too_long_for_the_demangler_is_named_by_what_leads_it() -> None:
    symbol = (DATA / "cutlass_sm120_block_scaled_gemm.symbol").read_text().strip()
    name = short_name(symbol)
    assert name.startswith("cutlass::device_kernel<#") and name.endswith(">") and len(name) < 40
    assert short_name(symbol) == name  # stable: a baseline keys the kernel by it
    assert template_head(symbol) == ("cutlass", "device_kernel")


@pytest.mark.parametrize("symbol, expected", [
    ("_Z4k_exILi3EEvPf", True), ("_ZN5tiles13device_kernelILi256EEEvPf", True), ("_ZN5OuterIiE6kernelEv", True),
    ("_Z6kernelPf", False), ("_ZN5tiles18never_instantiatedEPf", False), ("plain_c_kernel", False),
    ("_Z6kernelP5ArrayIfE", False), ("_Z" + "9" * 5000 + "k", False),
])
def test_a_template_instantiation_is_read_from_the_mangled_symbol(symbol: str, expected: bool) -> None:
    assert (template_head(symbol) is not None) is expected


@pytest.mark.parametrize("path, expected", [
    ("/usr/local/cuda/include/cub/device/dispatch/dispatch_reduce.cuh", True),
    ("/usr/local/cuda/targets/x86_64-linux/include/cccl/thrust/system/cuda/detail/for_each.h", True),
    ("/venv/lib/python3.11/site-packages/nvidia/cu13/include/cccl/cuda/std/__algorithm/copy.h", True),
    ("/opt/cutlass/include/cutlass/device_kernel.h", False),
    ("/src/project/third_party/cub_like/include/ops/cub/kernel.cuh", False),
])
def test_the_toolkits_core_libraries_are_told_by_their_include_folders(path: str, expected: bool) -> None:
    assert _core_library(Path(path)) is expected
