"""Dynamic shared memory sizes that the file does not settle are never taken, and settled ones are read where any
launch gives them: a size changed through a reference, a variable another file may change, a name a template
parameter or a structured binding declares, a value the declared type cannot hold, a comparison C makes unsigned;
a `cudaLaunchKernelEx` takes its own configuration's size, `cudaLaunchKernel` gives one too, and a launch whose
chevrons are spaced (`k<<  <g, b, bytes>>  >(x)`, which nvcc reads as `<<<`) is a launch for KG104 and KG302."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import kgate

from kgate.collect.cuda_launches import smem_sites

KERNELS = {"k", "big", "small"}


@pytest.mark.parametrize("text", [
    # A function that takes the size by reference may change it.
    "void pick(int& s);\nvoid h(float* x) { int smem = 16 * 1024; pick(smem); k<<<1, 128, smem>>>(x); }",
    "void h(float* x, int o) { int smem = 1024; std::swap(smem, o); k<<<1, 128, smem>>>(x); }",
    "int main() { int smem = 1024; std::cin >> smem; k<<<1, 128, smem>>>(0); }",
    "void h(float* x) { int smem = 1024; int& alias = smem; alias = 200000; k<<<1, 128, smem>>>(x); }",
    # A variable outside any function: another file (`extern int g_smem;`) may assign it.
    "int g_smem = 16 * 1024;\nvoid h(float* x) { k<<<1, 128, g_smem>>>(x); }",
    # A template parameter of any type, or a structured binding, hides the file's constant of the same name.
    "constexpr int S = 1024;\ntemplate <typename T, T S> void h(float* x) { k<<<1, 128, S>>>(x); }",
    "constexpr int S = 1024;\ntemplate <bool S> void h(float* x) { k<<<1, 128, S ? 1024 : 200000>>>(x); }",
    "constexpr int S = 1024;\nvoid h(float* x, std::pair<int, int> p) { auto [S, T] = p; k<<<1, 128, S>>>(x); }",
    # C keeps another value than the one written: the type is narrower, or the comparison is unsigned.
    "constexpr unsigned short S = 65536 + 1024;\nvoid h(float* x) { k<<<1, 128, S>>>(x); }",
    "constexpr int S = (-1 < 1u) ? 1024 : 200 * 1024;\nvoid h(float* x) { k<<<1, 128, S>>>(x); }",
])
def test_a_size_the_file_does_not_settle_is_no_site(text: str) -> None:
    assert smem_sites("__global__ void k(float* x) {}\n" + text, "a.cu", KERNELS) == []


def test_a_value_passed_to_a_kernel_or_read_in_a_condition_is_still_settled() -> None:
    text = ("__global__ void k(float* x, int n) {}\n"
            "void h(float* x, bool b) { int smem = 4096; if (smem) {} k<<<1, 128, smem>>>(x, smem);\n"
            "  cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);\n"
            "  printf(\"%d\", std::max(smem, 1024)); }\n")
    assert [(s.kernel, s.bytes) for s in smem_sites(text, "a.cu", KERNELS)] == [("k", 4096), ("k", 4096)]


CONFIGS = """\
void launch(float* x, void** args) {
  cudaLaunchConfig_t a = {};
  cudaLaunchConfig_t b = {};
  a.dynamicSmemBytes = 200 * 1024;
  b.dynamicSmemBytes = 1024;
  cudaLaunchKernelEx(&a, big, x);
  cudaLaunchKernelEx(&b, small, x);
  cudaLaunchConfig_t c = {dim3(1), dim3(128), 150 * 1024, 0};
  cudaLaunchKernelEx(&c, small, x);
  cudaLaunchConfig_t d{.gridDim = 1, .blockDim = 128, .dynamicSmemBytes = 120 * 1024};
  cudaLaunchKernelEx(&d, big, x);
  cudaLaunchKernel((void*)small, dim3(1), dim3(128), args, 110 * 1024, 0);
  cudaLaunchCooperativeKernel(big, 1, 128, args, 111 * 1024);
}
void passed(cudaLaunchConfig_t* p, float* x) {
  cudaLaunchConfig_t q; q.dynamicSmemBytes = 5000; cudaLaunchKernelEx(p, big, x);
}
void pointed(cudaLaunchConfig_t* p, float* x) {
  p->dynamicSmemBytes = 6000; cudaLaunchKernelEx(p, small, x);
}
"""


def test_each_launch_takes_the_size_of_its_own_configuration() -> None:
    found = sorted((s.line, s.kernel, s.bytes, s.via) for s in smem_sites(CONFIGS, "a.cu", KERNELS))
    assert found == [
        (6, "big", 204800, "cudaLaunchKernelEx"),
        (7, "small", 1024, "cudaLaunchKernelEx"),
        (9, "small", 153600, "cudaLaunchKernelEx"),
        (11, "big", 122880, "cudaLaunchKernelEx"),
        (12, "small", 112640, "cudaLaunchKernel"),
        (13, "big", 113664, "cudaLaunchCooperativeKernel"),
        (19, "small", 6000, "cudaLaunchKernelEx"),
    ], found


@pytest.mark.parametrize("chevrons", [("<< <", ">> >"), ("<<  <", ">>  >"), ("<<\t<", ">>\t>")])
def test_a_spaced_launch_gives_its_size(chevrons: tuple[str, str]) -> None:
    opening, closing = chevrons
    text = f"__global__ void k(float* x) {{}}\nvoid h(float* x) {{ k{opening}1, 128, 200 * 1024{closing}(x); }}\n"
    assert [(s.kernel, s.bytes) for s in smem_sites(text, "a.cu", KERNELS)] == [("k", 204800)]


SPACED = """\
__global__ void big(float* x) {
  extern __shared__ float s[];
  s[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  x[threadIdx.x] = s[threadIdx.x ^ 1];
}
void launch(float* x) {
  big<<  <1, 128, 200 * 1024>>  >(x);
}
"""


def test_kgate_lint_reads_a_launch_whose_chevrons_are_spaced_twice(tmp_path: Path) -> None:
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\n\n[[cuda]]\nsources = ["*.cu"]\n')
    (tmp_path / "spaced.cu").write_text(SPACED)
    run = kgate("lint", cwd=tmp_path)
    assert run.code == 1, run.stdout + run.stderr
    assert "spaced.cu:8:3: KG302 error launch-guard" in run.stdout


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_kgate_check_gates_the_size_of_a_spaced_launch_and_of_its_own_configuration(tmp_path: Path) -> None:
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\n\n[[cuda]]\nsources = ["*.cu"]\n')
    (tmp_path / "spaced.cu").write_text(SPACED.replace("big", "spaced"))
    (tmp_path / "configs.cu").write_text(SPACED.split("void launch")[0] + SPACED.split("void launch")[0].replace(
        "big", "small") + CONFIGS.split("void passed")[0].split("  cudaLaunchConfig_t c")[0] + "}\n")
    run = kgate("check", "--select", "KG104", cwd=tmp_path)
    assert run.code == 1, run.stdout + run.stderr
    findings = [line for line in run.stdout.splitlines() if "KG104" in line]
    assert len(findings) == 2, run.stdout
    assert any("[spaced spaced.cu @ sm_120a]" in line and "given at spaced.cu:8" in line for line in findings)
    assert any("[big configs.cu @ sm_120a]" in line and "given at configs.cu:18" in line for line in findings)


SCOPED = """\
namespace big { __global__ void k(float* x) { extern __shared__ float s[]; s[threadIdx.x] = x[0]; x[1] = s[1]; } }
namespace small { __global__ void k(float* x) { extern __shared__ float s[]; s[threadIdx.x] = x[0]; x[1] = s[1]; } }
void launch(float* x) {
  cudaFuncSetAttribute(big::k, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024);
  big::k<<<1, 128, 200 * 1024>>>(x);
  small::k<<<1, 128, 1024>>>(x);
  cudaGetLastError();
}
"""


@pytest.mark.parametrize(("display", "size"), [
    ("big::k", 204800),
    ("small::k", 1024),
    ("ops::v1::big::k", 204800),  # an inline namespace the launch does not write
])
def test_a_site_that_writes_a_namespace_gives_its_size_to_that_namespaces_kernel(display: str, size: int) -> None:
    from kgate.collect.cuda_launches import largest_smem

    sites = smem_sites(SCOPED, "k.cu", {"k"})
    given = largest_smem(display, sites, {})
    assert given is not None and given.bytes == size, (given, sites)


def test_a_namespace_alias_names_the_kernel_in_any_namespace() -> None:
    from kgate.collect.cuda_launches import largest_smem

    aliased = SCOPED.replace("void launch", "namespace bg = big;\nvoid launch").replace("big::k<<<", "bg::k<<<")
    sites = smem_sites(aliased.replace("cudaFuncSetAttribute(big::k", "cudaFuncSetAttribute(bg::k"), "k.cu", {"k"})
    given = largest_smem("big::k", sites, {})
    assert given is not None and given.bytes == 204800, sites


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_kgate_check_gates_each_namespaces_kernel_with_its_own_launch(tmp_path: Path) -> None:
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\n\n[[cuda]]\nsources = ["*.cu"]\n')
    (tmp_path / "k.cu").write_text(SCOPED)
    run = kgate("check", "--select", "KG104", cwd=tmp_path)
    assert run.code == 1, run.stdout + run.stderr
    findings = [line for line in run.stdout.splitlines() if "KG104" in line]
    assert len(findings) == 1 and "[big::k k.cu @ sm_120a]" in findings[0], run.stdout


FLAGGED = """\
#ifndef SMEM_BYTES
#define SMEM_BYTES (16 * 1024)
#endif
#define KEPT (8 * 1024)
void launch(float* x) {
  k<<<1, 128, SMEM_BYTES>>>(x);
  big<<<1, 128, STAGES * KEPT>>>(x);
  small<<<1, 128, KEPT>>>(x);
}
"""


def test_a_size_the_compiles_flags_define_is_theirs() -> None:
    from kgate.collect.cpp_constants import given_macros

    given = given_macros(["-O3", "-DSMEM_BYTES=200*1024", "-D", "STAGES=4", "-DKEPT=1", "-DGONE=2", "-UGONE"])
    assert given == {"SMEM_BYTES": "200*1024", "STAGES": "4", "KEPT": "1"}
    found = {(s.kernel, s.bytes) for s in smem_sites(FLAGGED, "a.cu", KERNELS, (), given)}
    # `#ifndef SMEM_BYTES` skips the file's default; STAGES is the flag's alone; the file's own `#define KEPT`
    # replaces the flag's.
    assert found == {("k", 204800), ("big", 32768), ("small", 8192)}, found
    assert {(s.kernel, s.bytes) for s in smem_sites(FLAGGED, "a.cu", KERNELS)} == {("small", 8192)}


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_kgate_check_gates_a_size_the_tables_flags_define(tmp_path: Path) -> None:
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\n\n[[cuda]]\nsources = ["*.cu"]\n'
                                         'flags = ["-DSMEM_BYTES=200*1024"]\n')
    (tmp_path / "k.cu").write_text(SPACED.split("void launch")[0].replace("big", "k") + FLAGGED.split("  big<<<")[0]
                                   + "}\n")
    run = kgate("check", "--select", "KG104", cwd=tmp_path)
    assert run.code == 1, run.stdout + run.stderr
    assert "204800 of them dynamic, given at k.cu:12" in run.stdout, run.stdout


HEADER_LAUNCH = """\
#pragma once
#ifndef SMEM_BYTES
#define SMEM_BYTES (16 * 1024)
#endif
__global__ void big(float* x) { extern __shared__ float s[]; s[threadIdx.x] = x[0]; x[1] = s[1]; }
inline void launch(float* x) { big<<<1, 128, SMEM_BYTES>>>(x); cudaGetLastError(); }
"""


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize(("flags", "found"), [
    ('["-DSMEM_BYTES=200*1024"]', True),
    ('[]', False),  # the header's own default, 16 KB
])
def test_a_launch_in_a_header_reads_the_macros_its_includers_compile_with(tmp_path: Path, flags: str,
                                                                          found: bool) -> None:
    (tmp_path / "kgate.toml").write_text(f'targets = ["sm_120a"]\n\n[[cuda]]\nsources = ["*.cu"]\nflags = {flags}\n')
    (tmp_path / "launch.cuh").write_text(HEADER_LAUNCH)
    (tmp_path / "k.cu").write_text('#include "launch.cuh"\nvoid run(float* x) { launch(x); }\n')
    run = kgate("check", "--select", "KG104", cwd=tmp_path)
    assert run.code == (1 if found else 0), run.stdout + run.stderr
    assert ("204800 of them dynamic, given at launch.cuh:6" in run.stdout) == found, run.stdout
