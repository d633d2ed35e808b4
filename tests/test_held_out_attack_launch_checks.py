"""KG302 on launch and check spellings the earlier cases do not use: a template argument holding a shift
(`t<(8 >> 1)><<<...>>>`, reported at its own line, not at the top of the file), a check through a helper that
returns whether the last error is clear, a lambda that launches checked after its call, a check after a comment,
a loop of launches checked once after it, an early `return` between the launch and its check; `cudaLaunchKernel`
and `cudaLaunchCooperativeKernel` calls whose returned error is dropped, cast to void, wrapped, kept or read back."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import kgate

HEAD = """\
#include <cuda_runtime.h>
#include <stdexcept>
#define CUDA_CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) throw std::runtime_error("cuda"); } while (0)
__global__ void k(float* x) { x[0] = 1.f; }
template <int N> __global__ void t(float* x) { x[0] = N; }
"""
# name -> (the code after HEAD, the lines (of the whole file) KG302 reports)
CASES: dict[str, tuple[str, list[int]]] = {
    "shift_in_template_argument": ("void f(float* x) { t<(8 >> 1)><<<1, 1>>>(x); }\n", [6]),
    "shift_in_template_argument_checked": ("void f(float* x) { t<(8 >> 1)><<<1, 1>>>(x); "
                                           "CUDA_CHECK(cudaGetLastError()); }\n", []),
    "comparison_in_template_argument": ("void f(float* x) {\n  t<(3 > 1)><<<1, 1>>>(x);\n}\n", [7]),
    "two_shifted_launches": ("void f(float* x) {\n  t<(8 >> 1)><<<1, 1>>>(x);\n  t<(16 >> 2)><<<1, 1>>>(x);\n}\n",
                             [7, 8]),
    "helper_reads_the_error": ("static bool ok() { return cudaGetLastError() == cudaSuccess; }\n"
                               "void f(float* x) { k<<<1, 1>>>(x); if (!ok()) throw std::runtime_error(\"x\"); }\n",
                               []),
    "lambda_checked_after_its_call": ("void f(float* x) { auto go = [&] { k<<<1, 1>>>(x); }; go(); "
                                      "CUDA_CHECK(cudaGetLastError()); }\n", []),
    "comment_before_the_check": ("void f(float* x) { k<<<1, 1>>>(x);\n  // checked below\n"
                                 "  CUDA_CHECK(cudaGetLastError()); }\n", []),
    "loop_checked_once": ("void f(float* x) { for (int i = 0; i < 4; ++i) { k<<<1, 1>>>(x + i); } "
                          "CUDA_CHECK(cudaPeekAtLastError()); }\n", []),
    "return_before_the_check": ("void f(float* x) { k<<<1, 1>>>(x); return; CUDA_CHECK(cudaGetLastError()); }\n",
                                [6]),
    "unchecked": ("void f(float* x) { k<<<1, 1>>>(x); }\n", [6]),
    # the runtime's other launch calls return the launch's error as cudaLaunchKernelEx does
    "launch_kernel_dropped": ("void f(void** a) { cudaLaunchKernel((void*)k, dim3(1), dim3(1), a, 0, 0); }\n", [6]),
    "launch_kernel_void_cast": ("void f(void** a) {\n  (void)cudaLaunchKernel((const void*)k, 1, 1, a);\n}\n", [7]),
    "launch_kernel_wrapped": ("void f(void** a) { CUDA_CHECK(cudaLaunchKernel((void*)k, 1, 1, a, 0, 0)); }\n", []),
    "launch_kernel_assigned": ("cudaError_t f(void** a) { cudaError_t e = cudaLaunchKernel((void*)k, 1, 1, a, 0, 0); "
                               "return e; }\n", []),
    "launch_kernel_read_back": ("void f(void** a) { cudaLaunchKernel((void*)k, 1, 1, a, 0, 0);\n"
                                "  CUDA_CHECK(cudaGetLastError()); }\n", []),
    "cooperative_dropped": ("void f(void** a) { cudaLaunchCooperativeKernel((void*)k, 1, 1, a, 0, 0); }\n", [6]),
    "cooperative_returned": ("cudaError_t f(void** a) { return cudaLaunchCooperativeKernel((void*)k, 1, 1, a); }\n",
                             []),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_launch_check_spellings(tmp_path: Path, case: str) -> None:
    code, lines = CASES[case]
    (tmp_path / "k.cu").write_text(HEAD + code)
    run = kgate("lint", "--format", "json", "--select", "KG302", "k.cu", cwd=tmp_path)
    found = sorted(f["line"] for f in run.json()["findings"] if f["code"] == "KG302")
    assert found == lines, (run.stdout, run.stderr)
    assert run.code == (1 if lines else 0), run.stderr


def test_a_dropped_launch_call_is_named_as_written(tmp_path: Path) -> None:
    (tmp_path / "k.cu").write_text(HEAD + CASES["cooperative_dropped"][0])
    run = kgate("lint", "--format", "json", "--select", "KG302", "k.cu", cwd=tmp_path)
    (finding,) = run.json()["findings"]
    assert "the error cudaLaunchCooperativeKernel returns is dropped" in finding["message"], finding
