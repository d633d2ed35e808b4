"""KG301 on build-file shapes the earlier cases do not use: CMake generator expressions, scikit-build settings in
`pyproject.toml` (`[tool.scikit-build.cmake.define]`, `cmake.args`, a cibuildwheel environment), a comment of a
`pyproject.toml`, `TORCH_CUDA_ARCH_LIST` set with `os.environ.setdefault`, nvcc flags in a `CUDAExtension` and in a
Makefile's quoted `-gencode`. Each project holds one build file beside `k.cu`, whose `setmaxnreg` needs sm_120a.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import kgate

KERNEL = '__global__ void k(float* x) { asm volatile("setmaxnreg.inc.sync.aligned.u32 240;"); x[0] = 1.f; }\n'
SCIKIT = '[build-system]\nrequires = ["scikit-build-core"]\nbuild-backend = "scikit_build_core.build"\n' \
         '[project]\nname = "m"\nversion = "0.1"\n'
CMAKE = "project(p LANGUAGES CUDA)\nadd_library(k k.cu)\n"
SETUP = ('from setuptools import setup\nfrom torch.utils.cpp_extension import BuildExtension, CUDAExtension\n'
         'import os\n{}\nsetup(name="m", ext_modules=[CUDAExtension("m", ["k.cu"]{})], '
         'cmdclass={{"build_ext": BuildExtension}})\n')

# name -> ({file: text}, the architecture KG301 reports, or None)
CASES: dict[str, tuple[dict[str, str], str | None]] = {
    "generator_expression_bare": ({"CMakeLists.txt": CMAKE + "set_property(TARGET k PROPERTY CUDA_ARCHITECTURES "
                                   "$<IF:$<CONFIG:Debug>,120,120>)\n"}, "120"),
    "generator_expression_a": ({"CMakeLists.txt": CMAKE + "set_property(TARGET k PROPERTY CUDA_ARCHITECTURES "
                                "$<$<CONFIG:Release>:120a>)\n"}, None),
    "generator_expression_options": ({"CMakeLists.txt": CMAKE + "target_compile_options(k PRIVATE "
                                      "$<$<COMPILE_LANGUAGE:CUDA>:-gencode arch=compute_120,code=sm_120>)\n"},
                                     "compute_120"),
    "scikit_build_define": ({"pyproject.toml": SCIKIT + '[tool.scikit-build.cmake.define]\n'
                             'CMAKE_CUDA_ARCHITECTURES = "120"\n', "CMakeLists.txt": CMAKE}, "120"),
    "scikit_build_define_a": ({"pyproject.toml": SCIKIT + '[tool.scikit-build.cmake.define]\n'
                               'CMAKE_CUDA_ARCHITECTURES = "120a"\n', "CMakeLists.txt": CMAKE}, None),
    "scikit_build_args": ({"pyproject.toml": SCIKIT + '[tool.scikit-build]\n'
                           'cmake.args = ["-DCMAKE_CUDA_ARCHITECTURES=120"]\n', "CMakeLists.txt": CMAKE}, "120"),
    "scikit_build_comment": ({"pyproject.toml": SCIKIT + '[tool.scikit-build.cmake.define]\n'
                              '# CMAKE_CUDA_ARCHITECTURES = "120" loses setmaxnreg\n'
                              'CMAKE_CUDA_ARCHITECTURES = "120a"\n', "CMakeLists.txt": CMAKE}, None),
    "cibuildwheel_environment": ({"pyproject.toml": SCIKIT + '[tool.cibuildwheel.environment]\n'
                                  'TORCH_CUDA_ARCH_LIST = "12.0"\n', "setup.py": SETUP.format("", "")}, "12.0"),
    "environ_setdefault": ({"setup.py": SETUP.format('os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "12.0+PTX")',
                                                     "")}, "12.0+PTX"),
    "extension_nvcc_arch_pair": ({"setup.py": SETUP.format("", ', extra_compile_args={"nvcc": ["-arch", "sm_120"]}')},
                                 "sm_120"),
    "makefile_quoted_gencode": ({"Makefile": 'GENCODE := -gencode arch=compute_120,code=\\"sm_120,compute_120\\"\n'
                                 'k.o: k.cu\n\tnvcc $(GENCODE) -c k.cu -o k.o\n'}, "compute_120"),
    "makefile_info": ({"Makefile": "$(info building for sm_120 would lose setmaxnreg)\n"
                       "k.o: k.cu\n\tnvcc -arch=sm_120a -c k.cu -o k.o\n"}, None),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_build_file_shapes(tmp_path: Path, case: str) -> None:
    files, expected = CASES[case]
    (tmp_path / "k.cu").write_text(KERNEL)
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    run = kgate("lint", "--format", "json", "--select", "KG301", ".", cwd=tmp_path)
    found = [f for f in run.json()["findings"] if f["code"] == "KG301"]
    if expected is None:
        assert run.code == 0 and not found, (run.stderr, found)
        return
    assert run.code == 1 and found, (run.stderr, run.stdout)
    assert any(f"`{expected}` builds for the bare architecture" in f["message"] for f in found), found
    assert all("builds for the bare architecture" in f["message"] for f in found), found
