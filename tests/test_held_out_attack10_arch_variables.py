"""KG301 reads the architecture a shell script or a Makefile gives through a variable however the file passes it:
quoted (`-arch="$ARCH"`), through another variable (`GPU = $(SM)`), or as the number of an `sm_`/`compute_` word
(`SM ?= 120` under `-arch=sm_$(SM)`), or by a loop over a list (`$(foreach sm,$(SMS),...)`, `for sm in 90 120`);
a number the word goes on suffixing (`sm_$(SM)a`) or a suffixed value
(`SM ?= 120a`) is the `a` target, and is not reported."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import kgate

KERNEL = """\
__global__ void k(float* x) {
#ifdef __CUDA_ARCH_FEAT_SM120_ALL
  x[0] = 1;
#endif
}
"""


def _lint(tmp_path: Path, name: str, build: str) -> list[str]:
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\n')
    (tmp_path / "k.cu").write_text(KERNEL)
    (tmp_path / name).write_text(build)
    run = kgate("lint", "--select", "KG301", cwd=tmp_path)
    assert run.code in (0, 1), run.stdout + run.stderr
    return [line for line in run.stdout.splitlines() if "KG301" in line]


@pytest.mark.parametrize(("name", "build", "where"), [
    ("Makefile", "SM ?= 120\nall:\n\tnvcc -gencode arch=compute_$(SM),code=sm_$(SM) -c k.cu\n", "Makefile:1:7"),
    ("Makefile", "CUDA_ARCH := 120\nNVCCFLAGS := -arch=sm_$(CUDA_ARCH)\nall:\n\tnvcc $(NVCCFLAGS) -c k.cu\n",
     "Makefile:1:14"),
    ("Makefile", "SM = sm_120\nGPU = $(SM)\nall:\n\tnvcc -arch=$(GPU) -c k.cu\n", "Makefile:1:6"),
    ("build.sh", "#!/bin/sh\nARCH=sm_120\nnvcc -arch=\"$ARCH\" -c k.cu\n", "build.sh:2:6"),
    ("build.sh", "#!/bin/sh\nARCH=\"sm_120\"\nnvcc --gpu-architecture \"${ARCH}\" -c k.cu\n", "build.sh:2:7"),
    ("build.sh", "#!/bin/sh\nARCH=120\nnvcc -arch=sm_${ARCH} -c k.cu\n", "build.sh:2:6"),
    # A loop over the architectures: the CUDA samples' `SMS` list, a literal list, a shell loop.
    ("Makefile", "SMS ?= 90 120\n$(foreach sm,$(SMS),$(eval GENCODE_FLAGS += -gencode arch=compute_$(sm),"
     "code=sm_$(sm)))\nall:\n\tnvcc $(GENCODE_FLAGS) -c k.cu\n", "Makefile:1:11"),
    ("Makefile", "GENCODE = $(foreach sm,90 120,-gencode arch=compute_$(sm),code=sm_$(sm))\nall:\n"
     "\tnvcc $(GENCODE) -c k.cu\n", "Makefile:1:27"),
    ("build.sh", "#!/bin/sh\nfor sm in 90 120; do\n  nvcc -gencode arch=compute_${sm},code=sm_${sm} -c k.cu\ndone\n",
     "build.sh:2:14"),
])
def test_an_architecture_passed_through_a_variable_is_read(tmp_path: Path, name: str, build: str,
                                                             where: str) -> None:
    found = _lint(tmp_path, name, build)
    assert len(found) == 1 and found[0].startswith(f"{where}: KG301 error arch-target:"), found


@pytest.mark.parametrize("build", [
    "SM ?= 120\nall:\n\tnvcc -gencode arch=compute_$(SM)a,code=sm_$(SM)a -c k.cu\n",
    "SM ?= 120a\nall:\n\tnvcc -gencode arch=compute_$(SM),code=sm_$(SM) -c k.cu\n",
    "SM = sm_120a\nGPU = $(SM)\nall:\n\tnvcc -arch=$(GPU) -c k.cu\n",
    "SMS ?= 90 120a\n$(foreach sm,$(SMS),$(eval GENCODE_FLAGS += -gencode arch=compute_$(sm),code=sm_$(sm)))\n",
])
def test_the_a_target_through_a_variable_is_not_reported(tmp_path: Path, build: str) -> None:
    assert _lint(tmp_path, "Makefile", build) == []


CMAKE_HEAD = "cmake_minimum_required(VERSION 3.24)\nproject(p LANGUAGES CUDA)\n"


@pytest.mark.parametrize(("build", "where"), [
    ("set(ARCH 120)\nadd_library(k k.cu)\nset_target_properties(k PROPERTIES CUDA_ARCHITECTURES ${ARCH})\n",
     "CMakeLists.txt:3:10"),
    ("set(SM 120)\nadd_library(k k.cu)\ntarget_compile_options(k PRIVATE -gencode arch=compute_${SM},code=sm_${SM})\n",
     "CMakeLists.txt:3:8"),
    ('set(GPU_ARCHS "120" CACHE STRING "archs")\nset(CMAKE_CUDA_ARCHITECTURES ${GPU_ARCHS})\nadd_library(k k.cu)\n',
     "CMakeLists.txt:3:16"),
    ("foreach(sm 90 120)\n  list(APPEND FLAGS -gencode arch=compute_${sm},code=sm_${sm})\nendforeach()\n"
     "add_library(k k.cu)\ntarget_compile_options(k PRIVATE ${FLAGS})\n", "CMakeLists.txt:3:15"),
    ("set(A 120)\nset(B ${A})\nadd_library(k k.cu)\nset_target_properties(k PROPERTIES CUDA_ARCHITECTURES ${B})\n",
     "CMakeLists.txt:3:7"),
])
def test_an_architecture_a_cmake_variable_holds_is_read(tmp_path: Path, build: str, where: str) -> None:
    found = _lint(tmp_path, "CMakeLists.txt", CMAKE_HEAD + build)
    assert len(found) == 1 and found[0].startswith(f"{where}: KG301 error arch-target:"), found


@pytest.mark.parametrize("build", [
    "set(ARCH 120a)\nadd_library(k k.cu)\nset_target_properties(k PROPERTIES CUDA_ARCHITECTURES ${ARCH})\n",
    'set(GPU_ARCHS "120a" CACHE STRING "archs such as 120 or 100")\nset(CMAKE_CUDA_ARCHITECTURES ${GPU_ARCHS})\n'
    "add_library(k k.cu)\n",
    # The bare value is a portable target's, whose source uses no sm_120a-only code.
    "set(PORTABLE 120)\nadd_library(portable portable.cu)\n"
    "set_target_properties(portable PROPERTIES CUDA_ARCHITECTURES ${PORTABLE})\nadd_library(fast k.cu)\n"
    "set_target_properties(fast PROPERTIES CUDA_ARCHITECTURES 120a)\n",
])
def test_the_a_target_or_a_portable_target_through_a_cmake_variable_is_not_reported(tmp_path: Path,
                                                                                   build: str) -> None:
    (tmp_path / "portable.cu").write_text("__global__ void p(float* x) { x[0] = 1; }\n")
    assert _lint(tmp_path, "CMakeLists.txt", CMAKE_HEAD + build) == []


def test_a_cmake_architecture_a_setting_and_a_loop_both_read_is_reported_once(tmp_path: Path) -> None:
    build = ("set(CMAKE_CUDA_ARCHITECTURES 120)\nforeach(ARCH ${CMAKE_CUDA_ARCHITECTURES})\n"
             "  list(APPEND F -gencode=arch=compute_${ARCH},code=sm_${ARCH})\nendforeach()\nadd_library(k k.cu)\n")
    found = _lint(tmp_path, "CMakeLists.txt", CMAKE_HEAD + build)
    assert len(found) == 1 and found[0].startswith("CMakeLists.txt:3:30: KG301"), found


SETUP = "from torch.utils.cpp_extension import CUDAExtension\n"


@pytest.mark.parametrize(("script", "where"), [
    ('ARCH = "120"\next = CUDAExtension("m", ["k.cu"], extra_compile_args={"nvcc": '
     '[f"-gencode=arch=compute_{ARCH},code=sm_{ARCH}"]})\n', "setup.py:2:9"),
    ('SM = "sm_120"\next = CUDAExtension("m", ["k.cu"], extra_compile_args={"nvcc": ["-arch=" + SM]})\n',
     "setup.py:2:7"),
])
def test_an_architecture_a_python_constant_holds_is_read(tmp_path: Path, script: str, where: str) -> None:
    found = _lint(tmp_path, "setup.py", SETUP + script)
    assert len(found) == 1 and found[0].startswith(f"{where}: KG301 error arch-target:"), found


@pytest.mark.parametrize("script", [
    'ARCH = "120a"\next = CUDAExtension("m", ["k.cu"], extra_compile_args={"nvcc": '
    '[f"-gencode=arch=compute_{ARCH},code=sm_{ARCH}"]})\n',
    'SM = "sm_120"\nNAME = "kernels_" + SM\next = CUDAExtension(NAME, ["k.cu"])\n',  # a name, no flag
])
def test_a_python_constant_of_the_a_target_or_of_no_flag_is_not_reported(tmp_path: Path, script: str) -> None:
    assert _lint(tmp_path, "setup.py", SETUP + script) == []
