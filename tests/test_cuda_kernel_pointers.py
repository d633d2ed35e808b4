"""A kernel reached through a function-pointer variable (`auto kernel = &k<T>; cudaFuncSetAttribute(kernel, ...);
kernel<<<g, b, bytes>>>(...)`) is given the dynamic shared memory, and the PDL launch, that the variable's sites
give: the sites name each kernel the function assigns the variable."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import kgate

from kgate.collect.cuda_launches import pdl_launch_sites, smem_sites

KERNELS = {"k", "other"}
HEAD = "template <typename T> __global__ void k(T* x) {}\n__global__ void other(float* x) {}\n"


def _sites(body: str) -> list[tuple[int, str, str | None, int, str]]:
    return sorted((s.line, s.kernel, s.template, s.bytes, s.via) for s in smem_sites(HEAD + body, "a.cu", KERNELS))


def test_the_attribute_and_the_launch_through_an_auto_variable_name_its_kernel() -> None:
    body = ("template <typename T> void launch(T* x) {\n"
            "  auto kernel = &k<T>;\n"
            "  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024);\n"
            "  kernel<<<1, 128, 150 * 1024>>>(x);\n}\n")
    assert _sites(body) == [(5, "k", "<T>", 204800, "cudaFuncSetAttribute"), (6, "k", "<T>", 153600, "<<<>>>")]


def test_a_pointer_declarator_a_cast_and_a_dereferenced_launch_name_every_kernel_it_may_hold() -> None:
    body = ("void pick(float* x, bool big) {\n"
            "  void (*kernel)(float*) = big ? k<float> : other;\n"
            "  if (big) (*kernel)<<<1, 128, 120 * 1024>>>(x);\n"
            "  cudaFuncSetAttribute((const void*)kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 1024);\n}\n")
    assert _sites(body) == [(5, "k", "<float>", 122880, "<<<>>>"), (5, "other", None, 122880, "<<<>>>"),
                            (6, "k", "<float>", 1024, "cudaFuncSetAttribute"),
                            (6, "other", None, 1024, "cudaFuncSetAttribute")]


def test_a_later_assignment_adds_its_kernel_and_the_launch_config_apis_follow_the_variable() -> None:
    body = ("void pick(float* x, void** args, int n) {\n"
            "  decltype(&other) kernel = other;\n"
            "  if (n > 4) kernel = k<float>;\n"
            "  cudaLaunchKernel((void*)kernel, dim3(1), dim3(128), args, 110 * 1024, 0);\n"
            "  cudaLaunchConfig_t c = {};\n  c.dynamicSmemBytes = 7000;\n  cudaLaunchKernelEx(&c, kernel, x);\n}\n")
    assert _sites(body) == [(6, "k", "<float>", 112640, "cudaLaunchKernel"), (6, "other", None, 112640,
                                                                               "cudaLaunchKernel"),
                            (9, "k", "<float>", 7000, "cudaLaunchKernelEx"),
                            (9, "other", None, 7000, "cudaLaunchKernelEx")]


@pytest.mark.parametrize("body", [
    # A parameter: which kernel it holds is its caller's.
    "void launch(void (*kernel)(float*), float* x) { kernel<<<1, 128, 200 * 1024>>>(x); }\n",
    # A variable outside any function: another file may assign it.
    "void (*kernel)(float*) = other;\nvoid launch(float* x) { kernel<<<1, 128, 200 * 1024>>>(x); }\n",
    # Another function's variable of the same name.
    "void a() { auto kernel = &other; }\nvoid b(void (*kernel)(float*), float* x) { kernel<<<1, 1, 4096>>>(x); }\n",
    # A comparison is no assignment.
    "void launch(void (*kernel)(float*), float* x) { if (kernel == other) kernel<<<1, 1, 4096>>>(x); }\n",
])
def test_a_variable_the_function_does_not_assign_holds_no_kernel_the_file_can_tell(body: str) -> None:
    assert _sites(body) == []


def test_a_pdl_launch_through_a_variable_names_its_kernel() -> None:
    text = HEAD + ("void launch(float* x) {\n  auto kernel = k<float>;\n  cudaLaunchConfig_t config = {};\n"
                   "  cudaLaunchAttribute attribute[1];\n"
                   "  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;\n"
                   "  attribute[0].val.programmaticStreamSerializationAllowed = 1;\n"
                   "  cudaLaunchKernelEx(&config, kernel, x);\n}\n")
    assert [(s.line, s.kernel, s.template) for s in pdl_launch_sites(text, "a.cu", KERNELS, ())] == [
        (9, "k", "<float>")]


POINTED = """\
#include <cuda_runtime.h>
template <typename T>
__global__ void my_kernel(T* out) {
  extern __shared__ float buf[];
  buf[threadIdx.x] = threadIdx.x;
  __syncthreads();
  out[threadIdx.x] = buf[(threadIdx.x + 1) % blockDim.x];
}
template <typename T>
void launch(T* out, cudaStream_t stream) {
  auto kernel = &my_kernel<T>;
  int smem = 160 * 1024;
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  kernel<<<1, 128, smem, stream>>>(out);
}
template void launch<float>(float*, cudaStream_t);
"""


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_kgate_check_judges_static_and_dynamic_memory_of_a_kernel_held_by_a_variable(tmp_path: Path) -> None:
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\n\n[[cuda]]\nsources = ["*.cu"]\n')
    (tmp_path / "k.cu").write_text(POINTED)
    run = kgate("check", "--select", "KG104", cwd=tmp_path)
    assert run.code == 1, run.stdout + run.stderr
    findings = [line for line in run.stdout.splitlines() if "KG104" in line]
    assert len(findings) == 1 and "my_kernel<float>" in findings[0], run.stdout
    assert "163840 of them dynamic, given at k.cu:13" in findings[0], findings


def test_a_variable_named_as_a_kernel_is_the_variable_where_its_function_assigns_it() -> None:
    body = ("void small(float* x) { other<<<1, 128, 1024>>>(x); }\n"
            "void big(float* x) {\n"
            "  auto other = &k<float>;\n"
            "  cudaFuncSetAttribute(other, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024);\n"
            "  other<<<1, 128, 200 * 1024>>>(x);\n}\n")
    assert _sites(body) == [(3, "other", None, 1024, "<<<>>>"), (6, "k", "<float>", 204800, "cudaFuncSetAttribute"),
                            (7, "k", "<float>", 204800, "<<<>>>")]


def test_a_pdl_launch_through_a_variable_named_as_a_kernel_names_the_kernel_it_holds() -> None:
    text = HEAD + ("void launch(float* x) {\n  auto other = k<float>;\n  cudaLaunchConfig_t config = {};\n"
                   "  cudaLaunchAttribute attribute[1];\n"
                   "  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;\n"
                   "  attribute[0].val.programmaticStreamSerializationAllowed = 1;\n"
                   "  cudaLaunchKernelEx(&config, other, x);\n}\n")
    assert [(s.line, s.kernel, s.template) for s in pdl_launch_sites(text, "a.cu", KERNELS, ())] == [
        (9, "k", "<float>")]
