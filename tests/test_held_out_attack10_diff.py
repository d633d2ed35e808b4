"""`kgate diff --require-identical` does not prove a CUDA kernel unchanged when its SASS is the same but a header or
a host-side constant changed the dynamic shared memory its launch gives it: the same code then runs at another
occupancy (or, past the card's budget, does not launch). The variant is `changed`, saying so."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from test_diff_sides import _diff, _repo

CFG = 'targets = ["sm_120a"]\n\n[[cuda]]\nsources = ["*.cu"]\n'
KERNEL = """\
#include "size.h"
__global__ void staged(float* x) {
  extern __shared__ float s[];
  s[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  x[threadIdx.x] = s[threadIdx.x ^ 1];
}
void launch(float* x) { staged<<<1, 128, SMEM>>>(x); }
"""


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_the_same_sass_launched_with_another_dynamic_size_is_changed(tmp_path: Path) -> None:
    project = _repo(tmp_path / "p", {"k.cu": KERNEL, "size.h": "#define SMEM (16 * 1024)\n"}, CFG)
    run = _diff(project, "HEAD", "--require-identical")
    assert run.code == 0 and "1 identical, 0 changed" in run.stdout, run.stdout + run.stderr
    (project / "size.h").write_text("#define SMEM (200 * 1024)\n")
    run = _diff(project, "HEAD", "--require-identical")
    assert run.code == 1, run.stdout + run.stderr
    assert "0 identical, 1 changed" in run.stdout, run.stdout
    assert "the same SASS, launched with 204800 bytes of dynamic shared memory instead of 16384 (given at k.cu:8)" \
        in run.stdout, run.stdout


PDL_HOST = """\
void launch(float* x, cudaStream_t s) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = PDL;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = 1;
  cfg.blockDim = 128;
  cfg.stream = s;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  cudaError_t e = cudaLaunchKernelEx(&cfg, staged, x);
}
"""


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_the_same_sass_launched_with_pdl_now_is_changed(tmp_path: Path) -> None:
    kernel = KERNEL.replace('#include "size.h"\n', '#include "pdl.h"\n').split("void launch")[0]
    project = _repo(tmp_path / "p", {"k.cu": kernel + PDL_HOST, "pdl.h": "#define PDL 0\n"}, CFG)
    (project / "pdl.h").write_text("#define PDL 1\n")
    (project / "k.cu").write_text(kernel + PDL_HOST.replace("= PDL;", "= 1;"))
    run = _diff(project, "HEAD", "--require-identical")
    assert run.code == 1, run.stdout + run.stderr
    assert "the same SASS, launched with programmatic dependent launch (PDL) now" in run.stdout, run.stdout


SETUP = """\
import os
from setuptools import setup
from torch.utils.cpp_extension import CUDAExtension
S = int(os.environ.get("SCALE", 2))
setup(name="m", ext_modules=[CUDAExtension("m", ["k.cu"], extra_compile_args={"nvcc": ["-O3", f"-DSCALE={S}"]})])
"""
SCALED = "#ifndef SCALE\n#define SCALE 1\n#endif\n__global__ void scale(float* x) { x[threadIdx.x] *= SCALE; }\n"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_a_changed_build_script_whose_flags_kgate_cannot_read_is_no_proof(tmp_path: Path) -> None:
    project = _repo(tmp_path / "p", {"k.cu": SCALED, "setup.py": SETUP}, CFG)
    run = _diff(project, "HEAD", "--require-identical")
    assert run.code == 0 and "1 identical, 0 changed" in run.stdout, run.stdout + run.stderr
    (project / "setup.py").write_text(SETUP.replace('"SCALE", 2', '"SCALE", 3'))
    run = _diff(project, "HEAD", "--require-identical")
    assert run.code == 1, run.stdout + run.stderr
    assert "the build script that gives it flags kgate cannot read (f'-DSCALE={S}') changed" in run.stdout, run.stdout
