"""Every compiler a check needs is found before its first compile: a missing nvcc or NVRTC for the configured CUDA
sources, or a missing ptxas for a target, stops the run with exit 2 and one line before any Triton kernel compiled.

The evidence is the cache, not a clock: a Triton compile leaves a record under v1/compiled/ (and a run that gets as
far as compiling makes the cache folder); the failure must come before either.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, Run, kgate

from kgate.compile.preflight import missing_ptxas, triton_ptxas
from kgate.support.install import install_hint
from kgate.support.tools import triton_bin_dir

KERNEL = (FIXTURES / "bad" / "import-error" / "k.py").read_text()  # a small kernel that compiles
TRITON = """targets = ["sm_120a"]
python-path = ["."]

[[triton]]
kernel = "k:good"
signature = { x = "*fp32", n = "i32" }
constexprs = { BLOCK = 128 }
"""
CUDA = '\n[[cuda]]\nsources = ["*.cu"]\n'


def project(root: Path, config: str) -> Path:
    root.mkdir()
    (root / "kgate.toml").write_text(config)
    (root / "k.py").write_text(KERNEL)
    (root / "good.cu").write_text("__global__ void good_kernel(float* x) { x[0] = 1.0f; }\n")
    return root


def compile_records(root: Path) -> list[str]:
    folder = root / ".kgate-cache" / "v1" / "compiled"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def without_cuda_python(tmp_path: Path) -> str:
    """A folder for the front of PYTHONPATH whose `cuda` package hides cuda-python (NVRTC and cuda.pathfinder)."""
    (tmp_path / "hide" / "cuda").mkdir(parents=True)
    (tmp_path / "hide" / "cuda" / "__init__.py").write_text("")
    return str(tmp_path / "hide")


def no_nvcc_path() -> str:
    """A PATH with Python and the system's programs and no nvcc."""
    folders = [os.path.dirname(sys.executable), "/usr/bin", "/bin"]
    assert not any(Path(folder, "nvcc").exists() for folder in folders), "nvcc is in a system folder here"
    return os.pathsep.join(folders)


def one_line(run: Run, expected: str) -> None:
    assert run.code == 2, run.stdout + run.stderr
    assert run.stderr.splitlines() == [expected] and "Traceback" not in run.stderr, run.stderr


def test_no_cuda_compiler_stops_the_run_before_any_triton_kernel_compiles(tmp_path: Path) -> None:
    root = project(tmp_path / "p", TRITON + CUDA)
    env = {"PATH": no_nvcc_path(), "CUDA_HOME": "", "CUDA_PATH": "", "PYTHONPATH": without_cuda_python(tmp_path)}
    run = kgate("check", cwd=root, env=env, process=True)  # a process of its own: cuda-python hidden from its imports
    one_line(run, "kgate: error: no CUDA compiler found for the configured CUDA sources: set `nvcc = \"/path/to/"
                  "nvcc\"` in the configuration, set CUDA_HOME, put nvcc on PATH, or pip install "
                  "'cuda-toolkit[nvcc,nvvm,crt,cudart,cccl]' (the release your torch pins, if it pins one) beside "
                  f"NVRTC: {install_hint('cuda')}; NVRTC alone compiles device-only sources (see docs/cuda.md)")
    assert compile_records(root) == [] and not (root / ".kgate-cache").exists()
    # The same project without its CUDA table compiles its Triton kernel in that environment: what stopped the run
    # was the missing compiler, found first.
    (root / "kgate.toml").write_text(TRITON)
    run = kgate("check", cwd=root, env=env, process=True)
    assert run.code == 0, run.stdout + run.stderr
    assert len(compile_records(root)) == 1


def test_a_compiler_the_configuration_asks_for_is_found_before_triton_compiles(tmp_path: Path) -> None:
    root = project(tmp_path / "p", TRITON + CUDA + 'compiler = "nvcc"\n')
    run = kgate("check", cwd=root, env={"PATH": no_nvcc_path(), "CUDA_HOME": "", "CUDA_PATH": "",
                                        "PYTHONPATH": without_cuda_python(tmp_path)}, process=True)
    one_line(run, "kgate: error: compiler = 'nvcc' in the configuration, but nvcc was not found (see `kgate doctor`)")
    assert compile_records(root) == []


def triton_without(tmp_path: Path, name: str) -> Path:
    """A site folder with the installed Triton package made of links to its files, whose wheel folder of binary
    tools (backends/nvidia/bin) lacks `name`."""
    real = triton_bin_dir()
    if real is None:
        pytest.skip("this Triton has no backends/nvidia/bin folder")
    package, site = real.parents[2], tmp_path / "site"
    chain = [package, package / "backends", package / "backends" / "nvidia", real]  # copied as folders
    for folder in chain:
        mirror = site / "triton" / folder.relative_to(package)
        mirror.mkdir(parents=True)
        for entry in folder.iterdir():
            if entry not in chain and entry.name != name:
                (mirror / entry.name).symlink_to(entry)
    return site


def test_a_target_without_its_ptxas_stops_the_run_before_any_compile(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    site = triton_without(tmp_path, "ptxas-blackwell")
    root = project(tmp_path / "p", TRITON)
    monkeypatch.delenv("TRITON_PTXAS_BLACKWELL_PATH", raising=False)  # Triton would run that one instead
    run = kgate("check", cwd=root, env={"PYTHONPATH": str(site)}, process=True)  # its own process: that Triton
    missing = site / "triton" / "backends" / "nvidia" / "bin" / "ptxas-blackwell"
    one_line(run, f"kgate: error: ptxas-blackwell not found: Triton compiles sm_120a with the ptxas-blackwell in its "
                  f"wheel ({missing}, which is missing) or the one TRITON_PTXAS_BLACKWELL_PATH names; reinstall "
                  f"triton or set TRITON_PTXAS_BLACKWELL_PATH")
    assert compile_records(root) == []


def test_which_ptxas_each_target_needs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert triton_ptxas("sm_120a") == ("ptxas-blackwell",) and triton_ptxas("sm_100a") == ("ptxas-blackwell",)
    assert set(triton_ptxas("sm_90a")) == {"ptxas", "ptxas-blackwell"}  # the release decides which
    monkeypatch.delenv("TRITON_PTXAS_PATH", raising=False)
    monkeypatch.delenv("TRITON_PTXAS_BLACKWELL_PATH", raising=False)
    (tmp_path / "ptxas").write_bytes(b"")
    assert missing_ptxas("sm_90a", tmp_path) is None
    assert missing_ptxas("sm_120a", tmp_path) is not None and missing_ptxas("sm_120a", None) is not None
    monkeypatch.setenv("TRITON_PTXAS_BLACKWELL_PATH", str(tmp_path / "ptxas"))
    assert missing_ptxas("sm_120a", tmp_path) is None  # Triton runs the one the variable names
