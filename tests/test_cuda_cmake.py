"""A CMake project gated end to end: CMake writes compile_commands.json, kgate compiles each file with its flags.

fixtures/cuda_cmake/ is a small `project(... LANGUAGES CXX CUDA)` library whose
block size comes from a compile definition and whose headers come from an
include folder that CMake passes through a response file: without the
build's real flags the sources do not even compile.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import copy_project, expectations, kgate

pytestmark = pytest.mark.skipif(shutil.which("cmake") is None or shutil.which("nvcc") is None,
                                reason="cmake and nvcc are needed")


def configure(project: Path, architectures: str) -> None:
    proc = subprocess.run(["cmake", "-S", ".", "-B", "build", "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON",
                           f"-DCMAKE_CUDA_ARCHITECTURES={architectures}"], cwd=project, capture_output=True, check=False,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (project / "build" / "compile_commands.json").is_file()


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    project = copy_project("cuda_cmake", tmp_path_factory.mktemp("cmake"))
    configure(project, "120a")
    return project


def test_check_reports_exactly_the_inline_expectations(project: Path) -> None:
    run = kgate("check", "--format", "json", cwd=project)
    # add_kernel's one finding: it loads `x` (named as add.cu declares it) before the wait, a warning.
    assert run.code == 0, run.stderr
    found = {(f["path"], f["line"], f["code"], f["target"]) for f in run.json()["findings"]}
    assert found == expectations(project, (".cu", ".cuh"))
    assert [(f["severity"], "`x` by `ld.global" in f["message"]) for f in run.json()["findings"]] == [("warning", True)]
    kernels = {k["kernel"]: k for k in run.json()["kernels"]}
    assert set(kernels) == {"add_kernel", "norm_kernel<float>"}
    # FUSED_OPS_BLOCK=256 from the build: __launch_bounds__(256) -> 8 warps, a 1 KB shared array.
    assert kernels["norm_kernel<float>"]["num_warps"] == 8
    assert kernels["norm_kernel<float>"]["smem_bytes"] == 256 * 4
    assert kernels["add_kernel"]["pdl"] is True


def test_without_the_builds_flags_the_sources_do_not_compile(project: Path, tmp_path: Path) -> None:
    bare = copy_project("cuda_cmake", tmp_path)
    config = bare / "kgate.toml"
    config.write_text(config.read_text().replace('compile_commands = "build/compile_commands.json"\n', ""))
    run = kgate("check", "--format", "json", cwd=bare)
    errors = {(f["path"], f["code"]) for f in run.json()["findings"]}
    assert errors == {("src/add.cu", "KG001"), ("src/norm.cu", "KG001")}
    assert all("FUSED_OPS_BLOCK" in f["message"] or "fused_ops.cuh" in f["message"] for f in run.json()["findings"])


def test_a_build_for_the_bare_architecture_is_compiled_as_the_build_does(project: Path, tmp_path: Path) -> None:
    bare = copy_project("cuda_cmake", tmp_path)
    configure(bare, "120")
    run = kgate("check", "--format", "json", "--select", "KG106", cwd=bare)
    assert {(f["path"], f["line"], f["code"]) for f in run.json()["findings"]} == {
        ("src/add.cu", 4, "KG106"), ("src/norm.cu", 5, "KG106")}
    assert {k["ptx_target"] for k in run.json()["kernels"]} == {"sm_120"}


def test_editing_the_shared_header_recompiles_both_files(project: Path) -> None:
    assert "0 compiled, 2 from cache" in kgate("check", "-v", cwd=project).stdout
    header = project / "include" / "fused_ops.cuh"
    original = header.read_text()
    try:
        header.write_text(original + "\n// edited\n")
        assert "2 compiled, 0 from cache" in kgate("check", "-v", cwd=project).stdout
    finally:
        header.write_text(original)
