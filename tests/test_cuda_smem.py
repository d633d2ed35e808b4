"""The dynamic shared memory a CUDA kernel is launched with, read from the source and gated with its static memory.

fixtures/rules/KG104/dynamic_smem.cu plants the rule's cases on recorded facts (tests/test_rules.py); here the
reading of the sizes (`kgate.collect.cpp_constants`), of the sites (`kgate.collect.cuda_launches.smem_sites`) and a
real `kgate check` compiling with nvcc: the launch in one file, the kernel in another, a template's instances
launched with different sizes, a launch written in a macro.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import kgate

from kgate.collect.cpp_constants import Constants
from kgate.collect.cuda_launches import smem_sites

DEFINED = """
#define TILE (32 * 1024)
#define TWICE (2 * TILE)
#define PARAMETRIC(x) (x * 2)
const int SHARED_MEM = 96 * 1024;   // a comment
constexpr static size_t kVec = sizeof(float4) * 8;
constexpr int kBraced{7};
static const unsigned kSuffixed = 0x100u;
int reassigned = 3;
int defined_twice = 1;
void f() { reassigned = 4; int local = 5; local += 1; }
namespace other { int defined_twice = 2; }
"""


@pytest.mark.parametrize(("expression", "value"), [
    ("96 * 1024", 98304),
    ("SHARED_MEM", 98304),
    ("TWICE + 16", 65552),
    ("kVec", 128),
    ("kBraced * 2", 14),
    ("kSuffixed", 256),
    ("4 * sizeof(half) * 1024ull", 8192),
    ("(int)(TILE / 3)", 10922),
    ("static_cast<int>(TILE) >> 1", 16384),
    ("-7 / 2", -3),  # C truncates
    ("-7 % 2", -1),
    ("SHARED_MEM > 65536 ? 1 : 2", 1),
    # Never guessed: a call, a function-like macro, a name assigned again, one defined twice, a local, `sizeof` of a
    # type whose size the file does not settle, a run-time variable.
    ("PARAMETRIC(4)", None),
    ("reassigned", None),
    ("defined_twice", None),
    ("local", None),
    ("sizeof(MyStruct) * 4", None),
    ("n * sizeof(float)", None),
    ("max(TILE, 4)", None),
    ("1 << 70", None),
    ("", None),
])
def test_a_size_is_what_the_file_settles_it_to_or_nothing(expression: str, value: int | None) -> None:
    assert Constants([DEFINED]).value(expression) == value


KERNELS = {"fill", "tiled", "Marlin", "ex"}

LAUNCHES = r"""
#define SMEM (40 * 1024)
const int STAGES = 4;
void host(float* out, int n, cudaStream_t s) {
  fill<<<1, 128, STAGES * SMEM, s>>>(out);
  // fill<<<1, 128, 200 * 1024>>>(out);
  const char* text = "fill<<<1, 128, 300 * 1024>>>(out)";
  tiled<2><<<dim3(1), dim3(128), 8 * 1024>>>(out);
  if (n) tiled<
      1
    ><<<1, 128, 2 * STAGES * SMEM>>>(out);
  fill<<<1, 128, n * 4>>>(out);
  fill<<<1, 128>>>(out);
  cudaLaunchConfig_t config = {};
  config.dynamicSmemBytes = 64 * 1024;
  cudaLaunchKernelEx(&config, ex, out);
}
#define CALL_IF(N) \
  else if (n == N) { \
    cudaFuncSetAttribute(Marlin<256, N>, cudaFuncAttributeMaxDynamicSharedMemorySize, \
                         SMEM \
    ); \
    Marlin<256, N><<<1, 256, SMEM, s>>>(out); \
  }
"""


def test_the_sites_are_launches_attributes_and_configurations_with_settled_sizes() -> None:
    sites = smem_sites(LAUNCHES, "host.cu", KERNELS)
    found = sorted((s.line, s.kernel, s.template, s.bytes, s.via) for s in sites)
    assert found == [
        (5, "fill", None, 163840, "<<<>>>"),
        (8, "tiled", "<2>", 8192, "<<<>>>"),
        (9, "tiled", "<1>", 327680, "<<<>>>"),
        (16, "ex", None, 65536, "cudaLaunchKernelEx"),
        (20, "Marlin", "<256,N>", 40960, "cudaFuncSetAttribute"),
        (23, "Marlin", "<256,N>", 40960, "<<<>>>"),
    ], found


def test_a_size_may_name_a_constant_of_an_included_header() -> None:
    header = "#pragma once\nconstexpr int kSmem = 120 * 1024;\n"
    sites = smem_sites("void h(float* o) { fill<<<1, 32, kSmem>>>(o); }\n", "h.cu", KERNELS, (header,))
    assert [(s.kernel, s.bytes) for s in sites] == [("fill", 122880)]
    assert smem_sites("void h(float* o) { fill<<<1, 32, kSmem>>>(o); }\n", "h.cu", KERNELS) == []


KERNEL_FILE = """\
#include <cuda_runtime.h>
template <int N>
__global__ void tiled(float* out) {
  extern __shared__ float buf[];
  buf[threadIdx.x] = threadIdx.x * N;
  __syncthreads();
  out[threadIdx.x] = buf[(threadIdx.x + 1) % blockDim.x];
}
template __global__ void tiled<1>(float*);
template __global__ void tiled<2>(float*);

__global__ void opted_in(float* out) {
  extern __shared__ float buf[];
  buf[threadIdx.x] = threadIdx.x;
  __syncthreads();
  out[threadIdx.x] = buf[(threadIdx.x + 1) % blockDim.x];
}
"""

HOST_FILE = """\
#include <cuda_runtime.h>
template <int N> __global__ void tiled(float* out);
__global__ void opted_in(float* out);
constexpr int kStages = 4;

#define LAUNCH(KERNEL, BYTES) \\
  cudaFuncSetAttribute(KERNEL, cudaFuncAttributeMaxDynamicSharedMemorySize, BYTES); \\
  KERNEL<<<1, 128, BYTES>>>(out)

void launch(float* out) {
  tiled<1><<<1, 128, kStages * 40 * 1024>>>(out);
  tiled<2><<<1, 128, 32 * 1024>>>(out);
  cudaFuncSetAttribute(opted_in, cudaFuncAttributeMaxDynamicSharedMemorySize, SIZE);
}
"""


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_kgate_check_gates_the_launched_size_of_the_instance_launched_and_follows_the_host_file(
        tmp_path: Path) -> None:
    (tmp_path / "kernels.cu").write_text(KERNEL_FILE)
    (tmp_path / "host.cu").write_text(HOST_FILE.replace("SIZE", "64 * 1024"))
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\nselect = ["KG104"]\n[[cuda]]\nsources = ["*.cu"]\n')

    def check(*extra: str) -> dict:
        run = kgate("check", "--format", "json", *extra, cwd=tmp_path)
        assert run.code in (0, 1), run.stdout + run.stderr
        return run.json()

    report = check()
    smem = {k["kernel"]: k["smem_bytes"] for k in report["kernels"]}
    assert smem == {"tiled<1>": 163840, "tiled<2>": 32768, "opted_in": 65536}, smem
    [finding] = report["findings"]
    assert finding["kernel"] == "tiled<1>" and finding["path"] == "kernels.cu" and finding["line"] == 3, finding
    assert "163840 bytes" in finding["message"] and "host.cu:11" in finding["message"], finding
    assert [(r["path"], r["line"]) for r in finding["related"]] == [("host.cu", 11)], finding
    # The host file alone changes: the kernels' file is not compiled again, and the verdict follows the new size.
    (tmp_path / "host.cu").write_text(HOST_FILE.replace("SIZE", "160 * 1024"))
    warm = check()
    assert sorted(f["kernel"] for f in warm["findings"]) == ["opted_in", "tiled<1>"], warm["findings"]
    assert warm["findings"] == check("--no-cache")["findings"]


@pytest.mark.parametrize(("expression", "value"), [
    # C's literals: octal, digit separators, binary; what only Python reads is no C expression.
    ("010 * 1024", 8192),
    ("96'000", 96000),
    ("0b1'0000'0000 * 16", 4096),
    ("1_024", None),
    ("0o10", None),
    ("1024uz", None),
    # `!` binds as C's unary operators do, C++'s `not` is `!`; comparisons are C's, one at a time.
    ("!0 * 4096", 4096),
    ("not 0 * 4096", 4096),
    ("!!8 << 12", 4096),
    ("(3 > 2 > 1) * 4096 + 1", 1),
    ("3 > 2 > 1 ? 4096 : 2048", 2048),
    # A step past `int`, or an unsigned value that wraps, is no size.
    ("65536 * 65536", None),
    ("1 << 31", None),
    ("(0u - 1024) / 2 + 4096", None),
    ("-1u + 4097", None),
    ("(1024 + 127) & ~127", 1024),
    ("sizeof(float) * 1024", 4096),
    ("true * 4096", 4096),
])
def test_c_literals_operators_and_ranges(expression: str, value: int | None) -> None:
    assert Constants([DEFINED]).value(expression) == value


SCOPED = """
constexpr int SMEM = 1024;
namespace cfg { struct Tile { static constexpr int kSmem = 8 * 1024; }; }
enum class Stage : int { One = 1024, Two, Four = Two * 4 };
enum { A, B, C };
#ifndef CONFIGURED
#define CONFIGURED (16 * 1024)
#endif
void by_parameter(int SMEM) { fill<<<1, 32, SMEM>>>(0); }
template <size_t SMEM> void by_template() { fill<<<1, 32, SMEM>>>(0); }
void local() { const int bytes = 2048; fill<<<1, 32, bytes>>>(0); }
void other() { const int bytes = 4096; fill<<<1, 32, bytes>>>(0); }
void elsewhere() { fill<<<1, 32, bytes>>>(0); }
constexpr int LATER = 1024;
void before() { fill<<<1, 32, LATER>>>(0); const int LATER = 2048; }
void changed(bool b, int c) {
  int in_else = 1024; if (b) {} else in_else = 4096;
  int in_case = 1024; switch (c) { case 1: in_case = 4096; }
  int bumped = 1024; bumped++;
  int chained = 1024; c = chained = 4096;
  int pointed = 1024; get(&pointed);
  int kept = 1024; if (b && kept) {}
  fill<<<1, 32, in_else + in_case + bumped + chained + pointed + kept>>>(0);
}
"""


@pytest.mark.parametrize(("expression", "function", "value"), [
    ("cfg::Tile::kSmem", None, 8192),
    ("Stage::Four", None, 4100),
    ("(C + 1) * 1024", None, 3072),
    ("CONFIGURED", None, None),  # the build may define it (`-DCONFIGURED=...`)
    ("SMEM", "by_template", None),
    ("bytes", "local", 2048),
    ("bytes", "other", 4096),
    ("bytes", "elsewhere", None),
    ("LATER", "before", 1024),  # the local is declared after the use
    ("bytes", None, None),
    ("in_else", "changed", None),
    ("in_case", "changed", None),
    ("bumped", "changed", None),
    ("chained", "changed", None),
    ("pointed", "changed", None),
    ("kept", "changed", 1024),
])
def test_a_name_is_what_the_scope_of_its_use_sees(expression: str, function: str | None, value: int | None) -> None:
    at = SCOPED.index("<<<", SCOPED.index(f"void {function}(")) if function else None
    assert Constants([SCOPED]).value(expression, at) == value


def test_a_parameter_or_a_template_parameter_is_no_constant_and_a_dead_launch_no_site() -> None:
    sites = smem_sites(SCOPED + "#if 0\nvoid dead() { fill<<<1, 32, 300 * 1024>>>(0); }\n#endif\n", "s.cu", KERNELS)
    assert sorted(s.bytes for s in sites) == [1024, 2048, 4096], sites


def test_a_comparison_in_parentheses_in_the_template_arguments_does_not_close_them() -> None:
    code = ("void h() {\n  tiled<float, (4 > 2 ? 8 : 4)><<<1, 32, 4096>>>(0);\n"
            "  cudaFuncSetAttribute(tiled<float, (4 > 2)>, cudaFuncAttributeMaxDynamicSharedMemorySize, 8192);\n}\n")
    sites = smem_sites(code, "t.cu", KERNELS)
    assert [(s.template, s.bytes) for s in sites] == [("<float,(4>2?8:4)>", 4096), ("<float,(4>2)>", 8192)]


def test_a_function_templates_locals_are_its_own_though_its_parameters_say_class() -> None:
    """`template <class T> void f() {` opens a function's body, not a class's: its locals are constants there (they
    were taken for variables of the file's scope, which settle nothing); a class template's members stay none."""
    code = ("template <class T> void launch(T* o) { int bytes = 48 * 1024; fill<<<1, 32, bytes>>>(o); }\n"
            "template <class T> struct Holder { int kept = 8 * 1024; void run(T* o) { fill<<<1, 32, kept>>>(o); } };\n")
    assert [(s.line, s.bytes) for s in smem_sites(code, "t.cu", KERNELS)] == [(1, 48 * 1024)]
