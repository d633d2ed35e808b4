"""A CUDA kernel that uses dynamic shared memory (`extern __shared__`) of a size no launch site of the source settles
(one the run computes; one a library's launcher sets, as CUTLASS's adapter does from `sizeof(SharedStorage)`) is
reported so: its shared memory is its static figure `+?` in the table and `smem_dynamic_unknown` in JSON, never a
silent static figure."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import kgate

from kgate.facts.ptx import parse_ptx

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")

# A library outside the project: a kernel template whose launcher sizes its dynamic shared memory from the
# operator's SharedStorage, as CUTLASS's device_kernel and GemmUniversalAdapter do.
LIBRARY = """\
#pragma once
#include <cuda_runtime.h>
namespace minilib {
template <class Op>
__global__ void device_kernel(typename Op::Params params) {
  extern __shared__ char smem[];
  Op op;
  op(params, smem);
}
template <class Op>
struct Adapter {
  static void run(typename Op::Params params) {
    int smem_size = int(sizeof(typename Op::SharedStorage));
    cudaFuncSetAttribute(device_kernel<Op>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_size);
    device_kernel<Op><<<1, 128, smem_size>>>(params);
  }
};
}  // namespace minilib
"""

PROJECT = """\
#include <minilib/adapter.h>
struct Copy {
  struct Params { const float* x; float* y; };
  struct SharedStorage { float tile[128][129]; };
  __device__ void operator()(Params p, char* smem) {
    auto& s = *reinterpret_cast<SharedStorage*>(smem);
    s.tile[threadIdx.x][0] = p.x[threadIdx.x];
    __syncthreads();
    p.y[threadIdx.x] = s.tile[127 - threadIdx.x][0];
  }
};
void copy(const float* x, float* y) { minilib::Adapter<Copy>::run({x, y}); }

__global__ void run_time_size(float* y) {
  extern __shared__ float buf[];
  buf[threadIdx.x] = y[threadIdx.x];
  __syncthreads();
  y[threadIdx.x] = buf[127 - threadIdx.x];
}
__global__ void settled_size(float* y) {
  extern __shared__ float buf[];
  buf[threadIdx.x] = y[threadIdx.x];
  __syncthreads();
  y[threadIdx.x] = buf[127 - threadIdx.x];
}
__global__ void static_only(float* y) {
  __shared__ float buf[128];
  buf[threadIdx.x] = y[threadIdx.x];
  __syncthreads();
  y[threadIdx.x] = buf[127 - threadIdx.x];
}
void launch(float* y, int n) {
  run_time_size<<<1, 128, n * sizeof(float)>>>(y);
  settled_size<<<1, 128, 128 * sizeof(float)>>>(y);
  static_only<<<1, 128>>>(y);
}
"""


@needs_nvcc
def test_the_report_says_which_kernels_dynamic_shared_memory_is_unknown(tmp_path: Path) -> None:
    library = tmp_path / "lib" / "include" / "minilib"
    library.mkdir(parents=True)
    (library / "adapter.h").write_text(LIBRARY)
    project = tmp_path / "project"
    project.mkdir()
    (project / "kgate.toml").write_text('targets = ["sm_120a"]\n\n[[cuda]]\nsources = ["*.cu"]\n'
                                        f'flags = ["-I{tmp_path / "lib" / "include"}", "-std=c++17"]\n')
    (project / "k.cu").write_text(PROJECT)
    run = kgate("check", "--format", "json", "--select", "KG104", cwd=project)
    assert run.code == 0, run.stdout + run.stderr
    kernels = {k["kernel"].split("<")[0]: k for k in json.loads(run.stdout)["kernels"]}
    assert {name: k["smem_dynamic_unknown"] for name, k in kernels.items()} == {
        "minilib::device_kernel": True, "run_time_size": True, "settled_size": False, "static_only": False}
    static = _static_smem(project / "k.cu", f"-I{tmp_path / 'lib' / 'include'}")
    assert kernels["settled_size"]["smem_bytes"] == static["settled_size"] + 128 * 4  # the launch's own size
    table = kgate("check", "--select", "KG104", "--show-kernels", cwd=project).stdout
    smem = {line.split()[0].split("<")[0]: line.split()[5] for line in table.splitlines() if "k.cu" in line}
    assert smem == {"minilib::device_kernel": f"{static['device_kernel']}+?",
                    "run_time_size": f"{static['run_time_size']}+?",
                    "settled_size": str(kernels["settled_size"]["smem_bytes"]),
                    "static_only": str(static["static_only"])}, table


def _static_smem(source: Path, *flags: str) -> dict[str, int]:
    """Each entry's static shared memory as `nvcc -Xptxas -v` gives it for sm_120a, by the last of the names its
    mangled name holds that the test uses."""
    done = subprocess.run(["nvcc", "-arch=sm_120a", "-std=c++17", *flags, "-cubin", "-Xptxas", "-v", str(source),
                           "-o", str(source.with_suffix(".cubin"))], check=True, capture_output=True, text=True)
    out: dict[str, int] = {}
    entry = ""
    for line in (done.stdout + done.stderr).splitlines():
        if (found := re.search(r"Compiling entry function '([^']+)'", line)) is not None:
            entry = next(n for n in ("device_kernel", "run_time_size", "settled_size", "static_only")
                         if n in found.group(1))
            out[entry] = 0  # ptxas names no smem of an entry that has none
        elif entry and (used := re.search(r"(\d+) bytes smem", line)) is not None:
            out[entry] = int(used.group(1))
    return out

PTX = """\
.version 8.8
.target sm_120a
.address_size 64
.extern .shared .align 16 .b8 smem[];
.func helper()
{
	.reg .b64 %rd<2>;
	mov.u64 %rd1, smem;
	ret;
}
.visible .entry through_a_call()
{
	call.uni helper, ();
	ret;
}
.visible .entry own()
{
	.reg .b32 %r<2>;
	mov.u32 %r1, smem;
	ret;
}
.visible .entry none()
{
	.reg .b32 %r<2>;
	mov.u32 %r1, smemx;
	ret;
}
"""


def test_an_entry_uses_dynamic_shared_memory_where_it_or_a_callee_names_an_extern_shared_array() -> None:
    facts = parse_ptx(PTX)
    assert {e.name: e.dynamic_shared for e in facts.entries} == {"through_a_call": True, "own": True, "none": False}


MIXED = """\
#include <cuda_runtime.h>
__global__ void mixed_sites(float* y) {
  extern __shared__ float buf[];
  buf[threadIdx.x] = y[threadIdx.x];
  __syncthreads();
  y[threadIdx.x] = buf[127 - threadIdx.x];
}
__global__ void capped(float* y) {
  extern __shared__ float buf[];
  buf[threadIdx.x] = y[threadIdx.x];
  __syncthreads();
  y[threadIdx.x] = buf[127 - threadIdx.x];
}
void launch(float* y, int n) {
  mixed_sites<<<1, 128, 1024>>>(y);
  mixed_sites<<<1, 128, n * sizeof(float)>>>(y);
  cudaFuncSetAttribute(capped, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024);
  capped<<<1, 128, n * sizeof(float)>>>(y);
}
"""


@needs_nvcc
def test_a_kernel_one_of_whose_launches_the_run_sizes_has_an_unknown_size_unless_an_opt_in_caps_it(
        tmp_path: Path) -> None:
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\n\n[[cuda]]\nsources = ["*.cu"]\n')
    (tmp_path / "k.cu").write_text(MIXED)
    run = kgate("check", "--format", "json", "--select", "KG104", cwd=tmp_path)
    assert run.code == 0, run.stdout + run.stderr
    kernels = {k["kernel"]: k for k in json.loads(run.stdout)["kernels"]}
    assert {name: k["smem_dynamic_unknown"] for name, k in kernels.items()} == {"mixed_sites": True, "capped": False}
    static = _static_smem_of(tmp_path / "k.cu")
    assert kernels["mixed_sites"]["smem_bytes"] == static["mixed_sites"] + 1024  # the settled part, and more
    assert kernels["capped"]["smem_bytes"] == static["capped"] + 64 * 1024
    table = kgate("check", "--select", "KG104", "--show-kernels", cwd=tmp_path).stdout
    assert f"{static['mixed_sites'] + 1024}+?" in table, table


def _static_smem_of(source: Path) -> dict[str, int]:
    done = subprocess.run(["nvcc", "-arch=sm_120a", "-cubin", "-Xptxas", "-v", str(source), "-o",
                           str(source.with_suffix(".cubin"))], check=True, capture_output=True, text=True)
    out: dict[str, int] = {}
    entry = ""
    for line in (done.stdout + done.stderr).splitlines():
        if (found := re.search(r"Compiling entry function '([^']+)'", line)) is not None:
            entry = next(n for n in ("mixed_sites", "capped") if n in found.group(1))
            out[entry] = 0
        elif entry and (used := re.search(r"(\d+) bytes smem", line)) is not None:
            out[entry] = int(used.group(1))
    return out


@needs_nvcc
def test_the_audit_shows_a_dynamic_size_the_source_does_not_settle(tmp_path: Path) -> None:
    """The audit's tables, budget rows and headroom terms write the figure as `+?` where the kernel's dynamic shared
    memory is not known, as the terminal's table does: not as the kernel's whole shared memory."""
    project = tmp_path / "p"
    project.mkdir()
    (project / "kgate.toml").write_text('targets = ["sm_120a"]\n\n[[cuda]]\nsources = ["*.cu"]\n')
    (project / "k.cu").write_text(MIXED)
    run = kgate("audit", "-o", str(tmp_path / "audit"), cwd=project)
    assert run.code == 0, run.stdout + run.stderr
    static = _static_smem_of(project / "k.cu")
    unknown = f"{static['mixed_sites'] + 1024:,}+?"
    markdown = (tmp_path / "audit" / "report.md").read_text()
    assert f"| {unknown} |" in markdown  # the ranking's column
    assert f"shared memory per CTA | {unknown} of 101,376 B" in markdown
    assert f"({unknown} of 101,376 bytes per CTA)" in markdown  # the headroom term
    assert f"{static['capped'] + 64 * 1024:,}+?" not in markdown
    assert unknown in (tmp_path / "audit" / "report.html").read_text()
