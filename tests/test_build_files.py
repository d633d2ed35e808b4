"""How KG301 reads build files and sources (kgate.collect.build_settings, build_units, build_sources): only
settings are builds, only code is use, and a setting compiles the sources of the unit it is written for.

tests/test_rules.py runs the rule on fixtures/rules/KG301/; these pin the modules' answers as data.
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest

from kgate.collect.build_settings import settings
from kgate.collect.build_sources import arch_uses, code_of, included, owned_sources
from kgate.collect.build_units import units

CMAKE = """\
# a comment: -gencode arch=compute_90,code=sm_90
if(CMAKE_CUDA_ARCHITECTURES STREQUAL "120")
  message(FATAL_ERROR "TORCH_CUDA_ARCH_LIST must name 12.0a (not 12.0);
  set CMAKE_CUDA_ARCHITECTURES 120a")
endif()
set(CMAKE_CUDA_ARCHITECTURES 90 120)
"""


def kept(rel: str, text: str) -> list[str]:
    """The lines of `text` that keep words once comments and prose are blanked, their spaces collapsed."""
    return [" ".join(line.split()) for line in settings(rel, text).splitlines() if line.strip()]


def test_cmake_messages_conditions_and_comments_are_no_settings() -> None:
    assert kept("CMakeLists.txt", CMAKE) == ["if( )", "message(", ")", "endif()", "set(CMAKE_CUDA_ARCHITECTURES 90 120)"]
    assert len(settings("CMakeLists.txt", CMAKE)) == len(CMAKE)


PYTHON = '''\
"""Build with TORCH_CUDA_ARCH_LIST=9.0a; 9.0 drops wgmma."""
import os, logging
if os.environ.get("TORCH_CUDA_ARCH_LIST") == "9.0":
    raise RuntimeError("TORCH_CUDA_ARCH_LIST=9.0 is not enough")
logging.getLogger(__name__).warning("nvcc -arch=sm_90 drops wgmma")
assert ARCH, "set -arch=sm_90a"
os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0"  # not "9.0a": a comment
NVCC = ["-gencode", "arch=compute_90,code=sm_90#not a comment"]
'''


def test_python_prose_is_blanked_and_settings_are_kept() -> None:
    lines = settings("setup.py", PYTHON).splitlines()
    assert kept("setup.py", PYTHON)[:5] == ["import os, logging", "if == :", "raise",
                                            "logging.getLogger(__name__).warning( )", "assert ARCH,"]
    assert lines[6].rstrip() == 'os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0"'
    assert lines[7] == PYTHON.splitlines()[7]  # a `#` inside a string is no comment
    # Reading only the lines near some offsets gives the same answer on those lines.
    near = [PYTHON.index("TORCH_CUDA_ARCH_LIST\"] =")]
    assert settings("setup.py", PYTHON, ast.parse(PYTHON), near).splitlines()[6] == lines[6]


def test_shell_echo_and_make_messages_are_no_settings() -> None:
    shell = 'echo "use -arch=sm_90a, not -arch=sm_90"; nvcc -arch=sm_90 a.cu\n'
    assert kept("build.sh", shell) == ["echo ; nvcc -arch=sm_90 a.cu"]
    make = '$(info NVCC_FLAGS -arch=sm_90 is wrong)\nall:\n\t@echo "-arch=sm_90"\n\tnvcc -arch=sm_90a a.cu\n'
    assert kept("Makefile", make) == ["$(info )", "all:", "@echo", "nvcc -arch=sm_90a a.cu"]


def test_only_code_uses_arch_specific_instructions() -> None:
    text = ('// setmaxnreg would help here\nconst char* s = "wgmma";\n'
            'asm volatile("setmaxnreg.inc.sync.aligned.u32 240;" ::: "memory");\n')
    code = code_of(text)
    assert "setmaxnreg would" not in code and "wgmma" not in code
    assert 'asm volatile("setmaxnreg.inc.sync.aligned.u32 240;" ::: "memory")' in code


def test_a_source_compiles_the_headers_it_includes(tmp_path: Path) -> None:
    (tmp_path / "inc").mkdir()
    (tmp_path / "a.cu").write_text('#include "inc/b.cuh"\n')
    (tmp_path / "inc" / "b.cuh").write_text('#include "c.h"\n// wgmma in a comment\n')
    (tmp_path / "inc" / "c.h").write_text('asm("wgmma.fence.sync.aligned;");\n')
    (tmp_path / "other.cu").write_text("__global__ void k() {}\n")
    owned = owned_sources(str(tmp_path))
    reached = included([str(tmp_path / "a.cu")], owned)
    assert sorted(os.path.relpath(p, tmp_path) for p in reached) == ["a.cu", "inc/b.cuh", "inc/c.h"]
    wgmma = {"90": re.compile(r"\bwgmma\b")}
    assert arch_uses(sorted(reached), wgmma, [b"wgmma"]) == {"90": (str(tmp_path / "inc" / "c.h"), "wgmma")}
    assert arch_uses([str(tmp_path / "inc" / "b.cuh"), str(tmp_path / "other.cu")], wgmma, [b"wgmma"]) == {}


UNITS = """\
add_library(hopper STATIC hopper.cu)
set_target_properties(hopper PROPERTIES CUDA_ARCHITECTURES "90a")
set(COMMON_SRCS ${CMAKE_CURRENT_SOURCE_DIR}/common.cu util.cpp)
add_library(common STATIC ${COMMON_SRCS})
list(APPEND COMMON_FLAGS "-gencode=arch=compute_90,code=sm_90")
target_compile_options(common PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:${COMMON_FLAGS}>)
file(GLOB GEN generated/*.cu)
add_library(gen STATIC ${GEN})
set_target_properties(gen PROPERTIES CUDA_ARCHITECTURES "90")
set_source_files_properties(fp4.cu PROPERTIES COMPILE_OPTIONS "-gencode=arch=compute_120a,code=sm_120a")
set(CMAKE_CUDA_ARCHITECTURES 90)
"""


def test_cmake_settings_belong_to_the_targets_and_files_they_are_written_for() -> None:
    found = units("CMakeLists.txt", UNITS, None)
    assert [sorted(u.sources) for u in found.for_line(2)] == [["hopper.cu"]]
    assert [sorted(u.sources) for u in found.for_line(5)] == [["common.cu", "util.cpp"]]  # through its variable
    assert [(sorted(u.sources), u.known) for u in found.for_line(9)] == [([], False)]  # a glob: unknown
    assert [sorted(u.sources) for u in found.for_line(10)] == [["fp4.cu"]]
    assert found.for_line(11) == []  # the whole build's default
    assert sorted(s for u in found.replacing("CUDA_ARCHITECTURES") for s in u.sources) == ["hopper.cu"]


SETUP = """\
NVCC = ["-gencode=arch=compute_90a,code=sm_90a"]
setup(ext_modules=[
    CUDAExtension("hopper", ["hopper.cu"], extra_compile_args={"nvcc": NVCC}),
    CUDAExtension("common", sources=["common.cu", os.path.join("csrc", "b.cu")]),
    CUDAExtension("gen", glob.glob("gen/*.cu")),
])
"""


@pytest.mark.parametrize(("line", "expected"), [(1, [(["hopper.cu"], "TORCH_CUDA_ARCH_LIST")]),
                                                 (4, [(["common.cu", "csrc/b.cu"], "")]), (5, [([], "")])])
def test_setup_settings_belong_to_the_extension_that_uses_them(line: int, expected: list[object]) -> None:
    found = units("setup.py", SETUP, ast.parse(SETUP))
    assert [(sorted(u.sources), u.replaces) for u in found.for_line(line)] == expected
    assert [u.known for u in found.units] == [True, True, False]
