"""Dynamic shared memory sized by what only the compiler knows (`sizeof(typename Kernel::SharedStorage)`, a type's
`SharedStorageSize`), as CUTLASS's adapters and code written like them size `extern __shared__` storage: the
compiler evaluates it for each instantiation in a probe compile of the kernel's file
(`kgate.collect.smem_expressions`, `kgate.compile.cuda_probe`), and KG104 judges the sum. A size the compiler could
only evaluate by guessing what a name means stays unknown (`+?`).

Sizes are of plain structs of arrays, which the language fixes (two 128 x 200 float arrays are 204800 bytes); the
static part is what ptxas reports for the same file."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import kgate

from kgate.collect.cpp_constants import Constants
from kgate.collect.cpp_text import shared_blank, without_disabled
from kgate.collect.cuda_launches import smem_sites
from kgate.collect.cuda_names import short_name
from kgate.collect.smem_expressions import CompilerSizes, InstanceSize, instance_size
from kgate.compile.cuda_probe import probe_source, rejected_lines, sizes_in

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")

# The adapter, in a project header: CUTLASS's device::GemmUniversalAdapter sizes the kernel's dynamic shared memory
# from `GemmKernel::SharedStorageSize` and opts in above 48 KB; device_kernel hands it to the operator.
ADAPTER = """\
#pragma once
#include <cuda_runtime.h>
namespace mini {
template <class Operator>
__global__ void device_kernel(typename Operator::Params params) {
  extern __shared__ char smem[];
  Operator op;
  op(params, *reinterpret_cast<typename Operator::SharedStorage*>(smem));
}
namespace device {
template <class GemmKernel_>
class GemmAdapter {
 public:
  using GemmKernel = GemmKernel_;
  static cudaError_t run(typename GemmKernel::Params const& params, cudaStream_t stream) {
    int smem_size = GemmKernel::SharedStorageSize;
    if (smem_size >= (48 << 10)) {
      cudaError_t result = cudaFuncSetAttribute(device_kernel<GemmKernel>,
                                                cudaFuncAttributeMaxDynamicSharedMemorySize, smem_size);
      if (result != cudaSuccess) return result;
    }
    device_kernel<GemmKernel><<<1, 128, smem_size, stream>>>(params);
    return cudaGetLastError();
  }
  // A size that is no constant expression: the probe's compiler rejects its definition, the others stand.
  static void run_sized_at_run_time(typename GemmKernel::Params const& params) {
    device_kernel<GemmKernel><<<1, 128, GemmKernel::bytes()>>>(params);
  }
};
}  // namespace device
}  // namespace mini
"""

GEMMS = """\
#include "adapter.cuh"
namespace kernels {
template <int kM, int kN>
struct TiledGemm {
  struct Params { const float* a; float* c; };
  struct SharedStorage { float a[kM][kN]; float b[kM][kN]; };
  static constexpr int SharedStorageSize = sizeof(SharedStorage);
  static int bytes() { return 1; }
  __device__ void operator()(Params const& p, SharedStorage& s) {
    s.a[threadIdx.x % kM][0] = p.a[threadIdx.x];
    __syncthreads();
    p.c[threadIdx.x] = s.a[(threadIdx.x + 1) % kM][0] + s.b[0][threadIdx.x % kN];
  }
};
}  // namespace kernels

// Tuned for a 228 KB part: 2 x 128 x 200 floats, 204800 bytes; its twin 2 x 64 x 64 floats, 32768 bytes.
using Sm90Gemm = kernels::TiledGemm<128, 200>;
using Sm120Gemm = kernels::TiledGemm<64, 64>;
void gemm_sm90(const float* a, float* c, cudaStream_t stream) {
  mini::device::GemmAdapter<Sm90Gemm>::run({a, c}, stream);
}
void gemm_sm120(const float* a, float* c, cudaStream_t stream) {
  mini::device::GemmAdapter<Sm120Gemm>::run({a, c}, stream);
  mini::device::GemmAdapter<Sm120Gemm>::run_sized_at_run_time({a, c});
}

// Written by hand the same way, through a function-pointer variable, for a type of the file's anonymous namespace:
// 4 x 4096 floats, 65536 bytes.
template <class Config>
__global__ void staged(float* x) {
  extern __shared__ float stages[];
  stages[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  x[threadIdx.x] = stages[(threadIdx.x + 1) % Config::kWidth];
}
namespace {
struct Wide { static constexpr int kWidth = 4096; struct SharedStorage { float stages[4][4096]; }; };
}
template <class Config>
void launch_staged(float* x) {
  auto kernel = &staged<Config>;
  const int smem = int(sizeof(typename Config::SharedStorage));
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  kernel<<<1, 128, smem>>>(x);
}

// A size the run computes stays unknown.
template <class T>
__global__ void scaled(T* x) {
  extern __shared__ char buffer[];
  reinterpret_cast<T*>(buffer)[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  x[threadIdx.x] = reinterpret_cast<T*>(buffer)[(threadIdx.x + 1) % 128];
}
template <class T>
void launch_scaled(T* x, int n) { scaled<T><<<1, 128, n * sizeof(T)>>>(x); }

// A class's own SharedStorage (131072 bytes) hides the namespace's (16 bytes): evaluated away from the class, the
// name would be the namespace's, so it stays unknown.
struct SharedStorage { char bytes[16]; };
template <class T>
__global__ void pipelined(T* x) {
  extern __shared__ char buffer[];
  reinterpret_cast<T*>(buffer)[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  x[threadIdx.x] = reinterpret_cast<T*>(buffer)[(threadIdx.x + 1) % 128];
}
template <class T>
struct Pipeline {
  struct SharedStorage { T stages[4][8192]; };
  static void run(T* x) { pipelined<T><<<1, 128, sizeof(SharedStorage)>>>(x); }
};

void launch_all(float* x, int n) {
  launch_staged<Wide>(x);
  launch_scaled(x, n);
  Pipeline<float>::run(x);
}
"""


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    (project / "include").mkdir(parents=True)
    (project / "include" / "adapter.cuh").write_text(ADAPTER)
    (project / "gemms.cu").write_text(GEMMS)
    (project / "kgate.toml").write_text('targets = ["sm_120a"]\n\n[[cuda]]\nsources = ["*.cu"]\n'
                                        'flags = ["-Iinclude", "-std=c++17"]\n')
    return project


@needs_nvcc
def test_an_adapters_shared_storage_is_sized_by_the_compiler_for_each_instantiation(tmp_path: Path) -> None:
    project = _project(tmp_path)
    run = kgate("check", "--format", "json", "--select", "KG104", cwd=project)
    assert run.code == 1, run.stdout + run.stderr
    report = json.loads(run.stdout)
    kernels = {_named(k["kernel"]): k for k in report["kernels"]}
    static = _static_smem(project / "gemms.cu", "-Iinclude")
    dynamic = {name: (k["smem_bytes"] - static[name], k["smem_dynamic_unknown"]) for name, k in kernels.items()}
    assert dynamic == {"device_kernel<Sm90Gemm>": (204800, False), "device_kernel<Sm120Gemm>": (32768, False),
                       "staged<Wide>": (65536, False), "scaled<float>": (0, True), "pipelined<float>": (0, True)}
    opted = ADAPTER.splitlines().index(next(line for line in ADAPTER.splitlines() if "cudaFuncSetAttribute" in line))
    assert [(f["code"], f["path"], _named(f["kernel"])) for f in report["findings"]] == [
        ("KG104", "include/adapter.cuh", "device_kernel<Sm90Gemm>")]
    assert f"204800 of them dynamic, given at include/adapter.cuh:{opted + 1}" in report["findings"][0]["message"]
    table = kgate("check", "--select", "KG104", "--show-kernels", cwd=project).stdout
    shown = {row.split()[0]: row.split()[5] for row in table.splitlines()
             if row.startswith(("scaled<", "pipelined<", "staged<"))}
    assert shown == {"scaled<float>": f"{static['scaled<float>']}+?",
                     "pipelined<float>": f"{static['pipelined<float>']}+?",
                     "staged<Wide>": str(static["staged<Wide>"] + 65536)}, table


@needs_nvcc
def test_a_probe_is_compiled_again_when_a_header_outside_the_project_changes_and_only_then(tmp_path: Path) -> None:
    library = tmp_path / "lib"
    library.mkdir()
    (library / "tile.h").write_text("#pragma once\n#define TILE_N 200\n")
    project = tmp_path / "project"
    project.mkdir()
    (project / "k.cu").write_text(
        '#include <tile.h>\n#include <cuda_runtime.h>\n'
        'template <class Config> __global__ void k(float* x) {\n  extern __shared__ float s[];\n'
        '  s[threadIdx.x] = x[0];\n  __syncthreads();\n  x[threadIdx.x] = s[threadIdx.x + 1];\n}\n'
        'struct Tile { struct SharedStorage { float a[128][TILE_N]; }; };\n'
        'template <class Config> void launch(float* x) {\n'
        '  k<Config><<<1, 128, sizeof(typename Config::SharedStorage)>>>(x);\n}\n'
        'void go(float* x) { launch<Tile>(x); }\n')
    (project / "kgate.toml").write_text('targets = ["sm_120a"]\n\n[[cuda]]\nsources = ["*.cu"]\n'
                                        f'flags = ["-I{library}", "-std=c++17"]\n')

    def smem() -> int:
        run = kgate("check", "--format", "json", "--select", "KG104", "--no-baseline", cwd=project)
        (only,) = json.loads(run.stdout)["kernels"]
        assert not only["smem_dynamic_unknown"], only
        return int(only["smem_bytes"])

    first = smem()
    probes = sorted((project / ".kgate-cache").rglob("cuda-probe/*.json"))
    assert len(probes) == 1
    written = probes[0].stat().st_mtime_ns
    assert smem() == first and probes[0].stat().st_mtime_ns == written  # read back, not compiled again
    (library / "tile.h").write_text("#pragma once\n#define TILE_N 100\n")
    assert smem() == first - 128 * 100 * 4


_ALIASES = {"TiledGemm<128,200>": "Sm90Gemm", "TiledGemm<64,64>": "Sm120Gemm"}


def _named(kernel: str) -> str:
    """A kernel as the tests name it: without namespaces and spaces, a GEMM's operator by the file's alias."""
    name = re.sub(r"\(anonymousnamespace\)::|\w+::", "", re.sub(r"\s+", "", kernel))
    for written, alias in _ALIASES.items():
        name = name.replace(written, alias)
    return name


def _static_smem(source: Path, *flags: str) -> dict[str, int]:
    """Each entry's static shared memory as `nvcc -Xptxas -v` gives it for sm_120a, by `_named`."""
    done = subprocess.run(["nvcc", "-arch=sm_120a", "-std=c++17", *flags, "-cubin", "-Xptxas", "-v", source.name,
                           "-o", os.devnull], cwd=source.parent, check=True, capture_output=True, text=True)
    out: dict[str, int] = {}
    entry = ""
    for line in (done.stdout + done.stderr).splitlines():
        if (found := re.search(r"Compiling entry function '([^']+)'", line)) is not None:
            entry = _named(short_name(found.group(1)))
            out[entry] = 0  # ptxas names no smem of an entry that has none
        elif entry and (used := re.search(r"(\d+) bytes smem", line)) is not None:
            out[entry] = int(used.group(1))
    return out


# --- the reading of the sizes, without a compiler -----------------------------------------------------------------

SITES = """\
struct Tag { char bytes[8]; };
struct Plain { static void run(float* x) { k<Tag><<<1, 128, sizeof(Tag)>>>(x); } };
struct Base { using Store = char[64]; };
template <class Op> struct Derived : Base {
  static void run(float* x) { k<Op><<<1, 128, sizeof(Store)>>>(x); }
};
template <class Op> struct Outside { static void run(float* x); };
template <class Op> void Outside<Op>::run(float* x) { k<Op><<<1, 128, sizeof(Store)>>>(x); }
#define LAUNCH(T) k<T><<<1, 128, sizeof(T)>>>(x)
template <class Op> void in_macro(float* x) { LAUNCH(Op); }
template <class Op> void mapped(float* x, int n) {
  const int twice = 2 * int(sizeof(typename Op::SharedStorage));
  k<Op><<<1, 128, twice>>>(x);
  k<Op><<<1, 128, n * sizeof(Op)>>>(x);
  k2<float, Op><<<1, 128, sizeof(Op)>>>(x);
}
"""


def _line(text: str) -> int:
    return SITES.splitlines().index(next(line for line in SITES.splitlines() if text in line)) + 1


def test_a_size_for_the_compiler_keeps_the_names_only_the_sites_scope_may_declare_as_hidden() -> None:
    found = [(s.line, s.kernel, s.template, s.compiler.expression, s.compiler.hidden)
             for s in smem_sites(SITES, "s.cu", {"k", "k2"}, compiler=True) if s.compiler is not None]
    assert found == [
        (_line("struct Plain"), "k", "<Tag>", "sizeof(Tag)", ()),  # the namespace's name: seen alike from it
        # a name of a launch in a macro is its use's: every one hidden (the kernel's arguments may give it)
        (_line("#define LAUNCH"), "k", "<T>", "sizeof(T)", ("T",)),
        # a local's value is its text; a run-time size (`n`, the function's parameter) is none
        (_line("k<Op><<<1, 128, twice"), "k", "<Op>", "(2 * int(sizeof(typename Op::SharedStorage)))", ("Op",)),
        (_line("k2<float, Op>"), "k2", "<float,Op>", "sizeof(Op)", ("Op",)),
    ]
    # A base class may declare `Store`, and so may the class of a member function defined outside it: hidden, and
    # no template argument of the kernel gives it, so neither site is one.
    code = without_disabled(shared_blank(SITES).code)
    sizes = CompilerSizes(code, Constants([code]))
    for at in (code.index("sizeof(Store)"), code.rindex("sizeof(Store)")):
        found_size = sizes.of("sizeof(Store)", at)
        assert found_size is not None and found_size.hidden == ("Store",)


def test_only_names_the_sites_scope_declares_stand_for_the_instantiations_arguments() -> None:
    (site,) = [s for s in smem_sites(SITES, "s.cu", {"k2"}, compiler=True) if s.compiler is not None]
    assert site.compiler is not None
    of_float = instance_size(site.compiler, site.kernel, site.scope, site.template, "_Z2k2If3MidEvPf")
    of_double = instance_size(site.compiler, site.kernel, site.scope, site.template, "_Z2k2Id3MidEvPf")
    assert of_float is not None and of_double is not None
    assert (of_float.expression.replace(" ", ""), of_float.kernel.replace(" ", "")) == ("sizeof(Mid)", "k2<float,Mid>")
    # `float` is written, not a parameter: the probe spells `k2<float, Mid>` for k2<double, Mid> too, and its PTX
    # names another kernel than the one asked about
    assert of_double.kernel == of_float.kernel
    ptx = ".global .align 8 .u64 kgate_smem_bytes_0 = 52;\n.global .align 8 .u64 kgate_smem_kernel_0 = _Z2k2If3MidEvPf;\n"
    assert sizes_in(ptx, {0: of_float}) == {0: 52}
    assert sizes_in(ptx, {0: of_double}) == {}


def test_an_instantiation_the_source_cannot_spell_is_not_asked_about() -> None:
    (site,) = [s for s in smem_sites(SITES, "s.cu", {"k2"}, compiler=True) if s.compiler is not None]
    assert site.compiler is not None
    lambda_type = "_Z2k2IfZ4mainEUlvE_EvPf"  # k2<float, main::{lambda()#1}>
    assert instance_size(site.compiler, site.kernel, site.scope, site.template, lambda_type) is None


def test_the_files_anonymous_namespace_is_the_same_in_the_probe() -> None:
    size = InstanceSize((), "sizeof(Wide)", "k<Wide>", "_Z1kIN42_GLOBAL__N__2f3dcce6_4_k_cu_3658822a_106254WideEEvPf")
    ptx = ("kgate_smem_bytes_3 = 64;\n"
           "kgate_smem_kernel_3 = _Z1kIN42_GLOBAL__N__0ce4ee18_4_k_cu_eeb0f9cb_106394WideEEvPf;\n")
    assert sizes_in(ptx, {3: size}) == {3: 64}


def test_the_probes_lines_say_which_definitions_the_compiler_rejected() -> None:
    items = {0: InstanceSize(("a", ""), "sizeof(A)", "k<A>", "s0"), 1: InstanceSize((), "X::n", "k<X>", "s1")}
    text, lines = probe_source("/p/k.cu", items)
    numbered = text.splitlines()
    assert numbered[0] == '#include "/p/k.cu"'
    assert [numbered[n - 1] for n in lines[0]][0] == "namespace a { namespace  { "
    output = ("/tmp/probe.cu(7): error: expression must have a constant value\n"
              "/p/k.cu(3): error: no member\n  detected during instantiation at line 2 of /tmp/probe.cu\n")
    assert rejected_lines(output, "/tmp/probe.cu") == {7, 2}
    assert {index for index, span in lines.items() if rejected_lines(output, "/tmp/probe.cu") & set(span)} == {0, 1}
