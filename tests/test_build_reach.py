"""KG302 leaves alone the C++/CUDA files no build compiles (`kgate.collect.build_reach`), and only those: a file
becomes built the moment the build names it (no cached verdict of the file's own state stands), recursive and
relative globs are read as CMake reads them, and any build kgate cannot read keeps every file judged."""

from __future__ import annotations

from pathlib import Path

from conftest import kgate

LAUNCH = """#include <cuda_runtime.h>
__global__ void k(float* x) {{ x[threadIdx.x] += 1.f; }}
void launch_{name}(float* x) {{
  k<<<1, 32>>>(x);
}}
"""
SETUP = """from setuptools import setup
from torch.utils.cpp_extension import CUDAExtension
setup(name="e", ext_modules=[CUDAExtension("e", {sources})])
"""


def _project(root: Path, files: dict[str, str]) -> Path:
    (root / "kgate.toml").parent.mkdir(parents=True, exist_ok=True)
    (root / "kgate.toml").write_text('select = ["KG302"]\n')
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def _reported(root: Path, *args: str) -> set[str]:
    run = kgate("lint", "--no-baseline", "--format", "json", *args, cwd=root)
    assert "Traceback" not in run.stderr, run.stderr
    return {finding["path"] for finding in run.json()["findings"] if finding["code"] == "KG302"}


def test_a_file_the_build_starts_to_compile_is_judged_on_the_next_warm_run(tmp_path: Path) -> None:
    root = _project(tmp_path / "p", {"ext/setup.py": SETUP.format(sources='["a.cu"]'),
                                     "ext/a.cu": LAUNCH.format(name="a"), "ext/b.cu": LAUNCH.format(name="b")})
    assert _reported(root) == {"ext/a.cu"}
    assert _reported(root) == {"ext/a.cu"}  # warm
    (root / "ext/setup.py").write_text(SETUP.format(sources='["a.cu", "b.cu"]'))
    assert _reported(root) == {"ext/a.cu", "ext/b.cu"}
    (root / "ext/setup.py").write_text(SETUP.format(sources='["a.cu"]'))
    assert _reported(root) == {"ext/a.cu"}


def test_a_recursive_glob_reaches_every_folder_below_its_own(tmp_path: Path) -> None:
    cmake = ('cmake_minimum_required(VERSION 3.24)\nproject(g LANGUAGES CUDA)\n'
             'file(GLOB_RECURSE SRC CONFIGURE_DEPENDS "${CMAKE_CURRENT_SOURCE_DIR}/src/*.cu")\nadd_library(g ${SRC})\n')
    root = _project(tmp_path / "p", {"lib/CMakeLists.txt": cmake, "lib/src/deep/er/x.cu": LAUNCH.format(name="x"),
                                     "lib/src/y.cu": LAUNCH.format(name="y"), "lib/old/z.cu": LAUNCH.format(name="z")})
    assert _reported(root, "--no-cache") == {"lib/src/deep/er/x.cu", "lib/src/y.cu"}


def test_a_build_kgate_cannot_read_keeps_every_file_judged(tmp_path: Path) -> None:
    relative = ('project(r LANGUAGES CUDA)\nfile(GLOB SRC RELATIVE "${CMAKE_SOURCE_DIR}/.." "src/*.cu")\n'
                'add_library(r ${SRC})\n')
    generated = 'project(v LANGUAGES CUDA)\nadd_library(v ${SOURCES_FROM_ELSEWHERE})\n'
    globbed_setup = ('import glob\nfrom setuptools import setup\nfrom torch.utils.cpp_extension import CUDAExtension\n'
                     'setup(name="e", ext_modules=[CUDAExtension("e", glob.glob("csrc/*.cu"))])\n')
    root = _project(tmp_path / "p", {
        "rel/CMakeLists.txt": relative, "rel/src/a.cu": LAUNCH.format(name="a"), "rel/b.cu": LAUNCH.format(name="b"),
        "var/CMakeLists.txt": generated, "var/c.cu": LAUNCH.format(name="c"),
        "py/setup.py": globbed_setup, "py/csrc/d.cu": LAUNCH.format(name="d"), "py/e.cu": LAUNCH.format(name="e"),
        "make/CMakeLists.txt": "project(m LANGUAGES CUDA)\nadd_library(m f.cu)\n", "make/f.cu": LAUNCH.format(name="f"),
        "make/Makefile": "all:\n\tcmake -B build\n", "make/g.cu": LAUNCH.format(name="g"),
        "none/h.cu": LAUNCH.format(name="h")})
    assert _reported(root, "--no-cache") == {"rel/src/a.cu", "rel/b.cu", "var/c.cu", "py/csrc/d.cu", "py/e.cu",
                                             "make/f.cu", "make/g.cu", "none/h.cu"}


SETUP_AT = """from setuptools import setup
from torch.utils.cpp_extension import CUDAExtension
{lines}
setup(name="e", ext_modules=[CUDAExtension("e", {sources})])
"""


def test_a_list_of_sources_the_setup_script_changes_after_binding_it_is_not_read_as_bound(tmp_path: Path) -> None:
    looped = SETUP_AT.format(lines="sources = []\nfor name in ['gemm', 'scale']:\n    sources.append(f'csrc/{name}.cu')",
                             sources="sources")
    extended = SETUP_AT.format(lines="import glob\nsources = ['csrc/ops.cu']\nsources += glob.glob('csrc/extra/*.cu')",
                               sources="sources")
    bound = SETUP_AT.format(lines="sources = ['csrc/ops.cu']", sources="sources")
    root = _project(tmp_path / "p", {
        "loop/setup.py": looped, "loop/csrc/gemm.cu": LAUNCH.format(name="g"), "loop/csrc/scale.cu": LAUNCH.format(name="s"),
        "ext/setup.py": extended, "ext/csrc/ops.cu": LAUNCH.format(name="o"), "ext/csrc/extra/more.cu": LAUNCH.format(name="m"),
        # The good twin: bound once and never changed, the list is what the extension compiles.
        "once/setup.py": bound, "once/csrc/ops.cu": LAUNCH.format(name="o"), "once/csrc/ops_old.cu": LAUNCH.format(name="x")})
    assert _reported(root, "--no-cache") == {"loop/csrc/gemm.cu", "loop/csrc/scale.cu", "ext/csrc/ops.cu",
                                             "ext/csrc/extra/more.cu", "once/csrc/ops.cu"}


CMAKE = "cmake_minimum_required(VERSION 3.24)\nproject(p LANGUAGES CXX CUDA)\n"


def test_the_builds_of_a_project_are_read_together(tmp_path: Path) -> None:
    root = _project(tmp_path / "p", {
        # The root's build compiles the tests; the extension in python/ compiles ../csrc/op.cu.
        "CMakeLists.txt": CMAKE + "add_executable(t tests/t.cu)\n", "tests/t.cu": "int main() { return 0; }\n",
        "python/setup.py": SETUP.format(sources='["../csrc/op.cu"]'), "csrc/op.cu": LAUNCH.format(name="op"),
        # A header only another build's source includes.
        "ext/setup.py": SETUP.format(sources='["e.cu"]'), "ext/e.cu": '#include "../common/launch.cuh"\n',
        "common/launch.cuh": LAUNCH.format(name="common"),
        # The good twin: a copy no build names or includes.
        "csrc/op_old.cu": LAUNCH.format(name="old")})
    assert _reported(root, "--no-cache") == {"csrc/op.cu", "common/launch.cuh"}


def test_a_file_an_include_names_through_a_macro_may_be_any(tmp_path: Path) -> None:
    root = _project(tmp_path / "p", {
        "setup.py": SETUP.format(sources='["csrc/ops.cu"]'),
        "csrc/ops.cu": '#define IMPL_HEADER "impl.cuh"\n#include IMPL_HEADER\nvoid ops() {}\n',
        "csrc/impl.cuh": LAUNCH.format(name="impl")})
    assert _reported(root, "--no-cache") == {"csrc/impl.cuh"}


def test_cmake_paths_are_read_from_the_folder_cmake_reads_them_from(tmp_path: Path) -> None:
    root = _project(tmp_path / "p", {
        # A .cmake file's relative glob is read from the folder of the CMakeLists.txt that includes it.
        "a/CMakeLists.txt": CMAKE + "include(cmake/kernels.cmake)\n",
        "a/cmake/kernels.cmake": "file(GLOB KSRCS csrc/*.cu)\nadd_library(k SHARED ${KSRCS})\n",
        "a/csrc/op.cu": LAUNCH.format(name="a"), "a/attic/op.cu": LAUNCH.format(name="a_old"),
        # ${PROJECT_SOURCE_DIR} in a folder add_subdirectory reads is the folder that declares the project.
        "b/CMakeLists.txt": CMAKE + "add_subdirectory(lib)\n",
        "b/lib/CMakeLists.txt": "file(GLOB SRCS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/csrc/*.cu)\nadd_library(k ${SRCS})\n",
        "b/csrc/op.cu": LAUNCH.format(name="b"), "b/lib/csrc/op.cu": LAUNCH.format(name="b_old")})
    assert _reported(root, "--no-cache") == {"a/csrc/op.cu", "b/csrc/op.cu"}


def test_a_script_or_module_that_compiles_sources_itself_is_a_build_kgate_cannot_read(tmp_path: Path) -> None:
    root = _project(tmp_path / "p", {
        "CMakeLists.txt": CMAKE + "add_library(k SHARED src/op.cu)\n", "src/op.cu": LAUNCH.format(name="op"),
        "py/build_tools.py": "import glob, subprocess\n"
                             "subprocess.check_call(['nvcc', '-shared', '-o', 't.so', *glob.glob('*.cu')])\n",
        "py/CMakeLists.txt": CMAKE + "add_library(py SHARED main.cu)\n", "py/main.cu": "void f() {}\n",
        "py/tool.cu": LAUNCH.format(name="tool"),
        "sh/build": "#!/bin/bash\nnvcc -O3 -o bench *.cu\n",
        "sh/CMakeLists.txt": CMAKE + "add_library(sh SHARED main.cu)\n", "sh/main.cu": "void f() {}\n",
        "sh/b.cu": LAUNCH.format(name="b"),
        "mk/Makefile.cuda": "all:\n\tnvcc -o bench $(wildcard *.cu)\n",
        "mk/CMakeLists.txt": CMAKE + "add_library(mk SHARED main.cu)\n", "mk/main.cu": "void f() {}\n",
        "mk/c.cu": LAUNCH.format(name="c"),
        "ext/hook.py": "from setuptools import Extension\nEXT = Extension('x', sources=SOURCES)\n",
        "ext/CMakeLists.txt": CMAKE + "add_library(ext SHARED main.cu)\n", "ext/main.cu": "void f() {}\n",
        "ext/d.cu": LAUNCH.format(name="d"),
        # The good twin: a module that only reads results and a script that runs CMake compile nothing themselves.
        "ok/report.py": "import json\nprint(json.load(open('results.json')))\n",
        "ok/run.sh": "#!/bin/bash\ncmake -B out && cmake --build out\n",
        "ok/CMakeLists.txt": CMAKE + "add_library(ok SHARED main.cu)\n", "ok/main.cu": "void f() {}\n",
        "ok/e.cu": LAUNCH.format(name="e")})
    assert _reported(root, "--no-cache") == {"src/op.cu", "py/tool.cu", "sh/b.cu", "mk/c.cu", "ext/d.cu"}


def test_a_build_that_names_no_sources_leaves_its_own_files_judged(tmp_path: Path) -> None:
    root = _project(tmp_path / "p", {
        # A Python package whose examples are compiled by hand: nothing says they are not built.
        "pyproject.toml": "[project]\nname = 'p'\n", "examples/demo.cu": LAUNCH.format(name="demo"),
        # The build below it is read on its own terms.
        "ext/setup.py": SETUP.format(sources='["a.cu"]'), "ext/a.cu": LAUNCH.format(name="a"),
        "ext/a_backup.cu": LAUNCH.format(name="backup")})
    assert _reported(root, "--no-cache") == {"examples/demo.cu", "ext/a.cu"}
