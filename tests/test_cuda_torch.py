"""PyTorch extension sources compile with the flags torch's build gives them, from the torch installed here.

A `.cu` that includes torch's headers (itself or through a project header) is compiled with torch's include
folders, Python's, and the defines and options of torch's `CUDAExtension` build; a plain `.cu` beside it gets none
of them. One cold `kgate check` compiles the extension source; its kernel's figures are nvcc's own for the same
command.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import Run, kgate

from kgate.collect import cuda_sources as sources_module
from kgate.collect import torch_ext
from kgate.collect.cuda_names import short_name
from kgate.collect.cuda_sources import CudaSource, cuda_sources
from kgate.core.config import load_config
from kgate.core.errors import ConfigError
from kgate.facts.ptxas_log import parse_ptxas_log

TORCH = torch_ext.find_torch()
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
needs_torch = pytest.mark.skipif(TORCH is None, reason="torch is not installed")

# The stream of the launcher: torch's current stream where its CUDA headers are complete (a CUDA build of torch),
# the default stream with a CPU build, whose c10/cuda headers lack their configuration header.
STREAM = ("#include <ATen/cuda/CUDAContext.h>\n", "at::cuda::getCurrentCUDAStream()") \
    if TORCH is not None and not TORCH.cpu_only else ("", "0")
EXTENSION = f"""\
#include <torch/extension.h>
{STREAM[0]}
__global__ void scale_kernel(const float* __restrict__ x, float* __restrict__ y, float a, int n) {{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i] * y[i];
}}

void scale(torch::Tensor x, torch::Tensor y, double a) {{
  TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
  TORCH_CHECK(x.numel() == y.numel(), "x and y differ in size");
  int n = static_cast<int>(x.numel());
  cudaStream_t stream = {STREAM[1]};
  scale_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x.data_ptr<float>(), y.data_ptr<float>(), float(a), n);
  cudaGetLastError();
}}
"""
PLAIN = """\
__global__ void plain_kernel(float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * y[i];
}
"""
# A project header that includes torch: the file that includes it is an extension source as well.
HEADER = "#pragma once\n#include <c10/macros/Macros.h>\n"
VIA_HEADER = '#include "ops.h"\n__global__ void via_header_kernel(float* y) { y[threadIdx.x] = 1.0f; }\n'


def _project(root: Path, files: dict[str, str], table: str = "") -> Path:
    (root / "csrc").mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / "csrc" / name).write_text(text, encoding="utf-8")
    (root / "kgate.toml").write_text(f'[[cuda]]\nsources = ["csrc/*.cu"]\n{table}', encoding="utf-8")
    return root


def _sources(root: Path) -> dict[str, CudaSource]:
    return {Path(s.rel).name: s for s in cuda_sources(load_config(root / "kgate.toml"))}


def _torch_flags(torch: torch_ext.Torch) -> set[str]:
    return {f"-I{torch.folder / 'include'}", "-DTORCH_API_INCLUDE_EXTENSION_H", "--expt-relaxed-constexpr",
            "-D__CUDA_NO_HALF_OPERATORS__"}


@pytest.fixture
def fresh_torch():
    """The torch lookup made again for a test that changes where torch is found, and after it."""
    torch_ext._find_torch.cache_clear()
    yield
    torch_ext._find_torch.cache_clear()


# --------------------------------------------------------------------------- which files, which flags

@needs_torch
def test_an_extension_source_gets_torchs_flags_and_a_plain_one_none(tmp_path: Path) -> None:
    assert TORCH is not None
    found = _sources(_project(tmp_path, {"ext.cu": EXTENSION, "plain.cu": PLAIN, "via.cu": VIA_HEADER,
                                         "ops.h": HEADER}))
    for name in ("ext.cu", "via.cu"):
        assert _torch_flags(TORCH) <= set(found[name].flags), name
        assert f"-std={TORCH.standard}" in found[name].flags
    assert "-DTORCH_EXTENSION_NAME=ext" in found["ext.cu"].flags
    assert found["plain.cu"].flags == ()
    assert found["ext.cu"].key != found["plain.cu"].key


@needs_torch
def test_flags_that_give_torchs_folder_or_a_standard_are_kept_as_they_are(tmp_path: Path) -> None:
    assert TORCH is not None
    given = f'flags = ["-I{TORCH.folder / "include"}"]\n'
    found = _sources(_project(tmp_path / "given", {"via.cu": VIA_HEADER, "ops.h": HEADER}, given))
    assert found["via.cu"].flags == (f"-I{TORCH.folder / 'include'}",)
    found = _sources(_project(tmp_path / "std", {"via.cu": VIA_HEADER, "ops.h": HEADER}, 'flags = ["-std=c++17"]\n'))
    assert [f for f in found["via.cu"].flags if f.startswith("-std")] == ["-std=c++17"]


@needs_torch
def test_torch_true_gives_every_file_the_flags_and_false_none(tmp_path: Path) -> None:
    assert TORCH is not None
    every = _sources(_project(tmp_path / "t", {"plain.cu": PLAIN}, "torch = true\n"))
    assert _torch_flags(TORCH) <= set(every["plain.cu"].flags)
    none = _sources(_project(tmp_path / "f", {"via.cu": VIA_HEADER, "ops.h": HEADER}, "torch = false\n"))
    assert none["via.cu"].flags == () and none["via.cu"].torch_note == ""


@pytest.mark.parametrize("value", ['"yes"', "1", '["auto"]'])
def test_a_torch_value_other_than_auto_true_or_false_is_a_configuration_error(tmp_path: Path, value: str) -> None:
    _project(tmp_path, {"plain.cu": PLAIN}, f"torch = {value}\n")
    with pytest.raises(ConfigError, match=r'cuda\[0\]\.torch: must be "auto", true or false'):
        load_config(tmp_path / "kgate.toml")


def _fake_torch(site: Path, version: str, *, cuda: bool = True) -> Path:
    """An installed torch as an extension build reads it: its package folder, version and headers."""
    folder = site / "torch"
    (folder / "include" / "c10" / "macros").mkdir(parents=True)
    (folder / "__init__.py").write_text("", encoding="utf-8")
    (folder / "version.py").write_text(f"__version__ = '{version}'\n", encoding="utf-8")
    (folder / "include" / "c10" / "macros" / "Macros.h").write_text("#pragma once\n", encoding="utf-8")
    cuda_dir = folder / "include" / "c10" / "cuda"
    (cuda_dir / "impl").mkdir(parents=True)
    (cuda_dir / "CUDAMacros.h").write_text("#include <c10/cuda/impl/cuda_cmake_macros.h>\n", encoding="utf-8")
    if cuda:
        (cuda_dir / "impl" / "cuda_cmake_macros.h").write_text("#pragma once\n", encoding="utf-8")
    return folder


def test_a_changed_torch_version_changes_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 fresh_torch: None) -> None:
    project = _project(tmp_path / "p", {"via.cu": VIA_HEADER, "ops.h": HEADER})
    keys = []
    for version in ("2.90.0", "2.90.0", "2.91.0"):
        torch_ext._find_torch.cache_clear()
        site = tmp_path / f"site{len(keys)}"
        _fake_torch(site, version)
        with monkeypatch.context() as patch:
            patch.syspath_prepend(str(site))
            source = _sources(project)["via.cu"]
            assert f"-I{site / 'torch' / 'include'}" in source.flags
            keys.append(source.key)
    # Two folders with one version: the content key is the same (the flags, which name the folder, are keyed
    # apart); another version is another key.
    assert keys[0] == keys[1] != keys[2]


def test_torch_is_found_without_importing_it(tmp_path: Path, fresh_torch: None) -> None:
    folder = _fake_torch(tmp_path, "2.90.0+cu132")
    (folder / "__init__.py").write_text("raise SystemExit('imported')\n", encoding="utf-8")
    found = torch_ext.find_torch([str(tmp_path)])
    assert found is not None and found.version == "2.90.0+cu132" and found.folder == folder
    assert torch_ext.find_torch([str(tmp_path / "nothing")]) is None


# --------------------------------------------------------------------------- compiled

@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Run]:
    project = _project(tmp_path_factory.mktemp("torchext"), {"ext.cu": EXTENSION, "plain.cu": PLAIN})
    return project, kgate("check", "--format", "json", cwd=project)


@needs_nvcc
@needs_torch
def test_an_extension_source_compiles_and_its_figures_are_nvccs_own(compiled: tuple[Path, Run],
                                                                     tmp_path: Path) -> None:
    project, run = compiled
    assert not [f for f in run.json()["findings"] if f["code"] == "KG001"], run.stdout
    kernels = {k["kernel"]: k for k in run.json()["kernels"]}
    assert {"scale_kernel", "plain_kernel"} <= set(kernels)
    source = _sources(project)["ext.cu"]
    proc = subprocess.run(["nvcc", *source.flags, "-cubin", "-Xptxas", "-v",
                           "--generate-code=arch=compute_120a,code=sm_120a", "-o", str(tmp_path / "k.cubin"),
                           "csrc/ext.cu"], cwd=project, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    independent = {short_name(name): res for name, res in parse_ptxas_log(proc.stdout + proc.stderr).items()}
    got = kernels["scale_kernel"]
    want = independent["scale_kernel"]
    assert (got["registers"], got["spill_bytes"], got["stack_bytes"]) == \
        (want.registers, want.spill_stores, want.stack_frame)


@needs_nvcc
@needs_torch
def test_torch_false_leaves_the_extension_source_a_compile_error(tmp_path: Path) -> None:
    project = _project(tmp_path, {"ext.cu": EXTENSION}, "torch = false\n")
    errors = [f for f in kgate("check", "--format", "json", cwd=project).json()["findings"] if f["code"] == "KG001"]
    assert len(errors) == 1 and "torch/extension.h" in errors[0]["message"]
    assert "TORCH_EXTENSION_NAME" not in errors[0]["message"] and torch_ext.MISSING not in errors[0]["message"]


@needs_nvcc
@needs_torch
def test_the_reproduce_line_of_an_extension_source_shows_the_flags_added(tmp_path: Path) -> None:
    assert TORCH is not None
    project = _project(tmp_path, {"via.cu": VIA_HEADER.replace("1.0f;", "undeclared;"), "ops.h": HEADER})
    errors = [f for f in kgate("check", "--format", "json", cwd=project).json()["findings"] if f["code"] == "KG001"]
    assert len(errors) == 1 and "undeclared" in errors[0]["message"]
    reproduce = errors[0]["message"].split("(reproduce: ", 1)[1]
    assert all(flag in reproduce for flag in _torch_flags(TORCH)), reproduce
    assert "-DTORCH_EXTENSION_NAME=via" in reproduce


@needs_nvcc
def test_without_torch_an_extension_sources_error_says_to_install_it(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sources_module, "find_torch", lambda: None)
    project = _project(tmp_path, {"ext.cu": EXTENSION, "plain.cu": PLAIN})
    run = kgate("check", cwd=project)
    errors = [line for line in run.stdout.splitlines() if "KG001" in line]
    assert len(errors) == 1 and "csrc/ext.cu" in errors[0], run.stdout
    assert f"compile-error: {torch_ext.MISSING}: " in errors[0] and "torch/extension.h" in errors[0]


@needs_nvcc
def test_a_cpu_build_of_torch_is_named_when_its_cuda_headers_fall_short(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch,
                                                                      fresh_torch: None) -> None:
    _fake_torch(tmp_path / "site", "2.90.0+cpu", cuda=False)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    uses_cuda = '#include <c10/cuda/CUDAMacros.h>\n__global__ void k(float* y) { y[0] = 1.0f; }\n'
    wrong = '#include <c10/macros/Macros.h>\n__global__ void k(float* y) { y[0] = undeclared; }\n'
    absent = '#include <c10/macros/Macros.h>\n#include "absent.h"\n__global__ void k(float* y) { y[0] = 1.0f; }\n'
    project = _project(tmp_path / "p", {"cuda.cu": uses_cuda, "wrong.cu": wrong, "absent.cu": absent})
    errors = {Path(f["path"]).name: f["message"]
              for f in kgate("check", "--format", "json", cwd=project).json()["findings"] if f["code"] == "KG001"}
    assert errors["cuda.cu"].startswith("torch 2.90.0+cpu here is a CPU build, whose CUDA headers are incomplete")
    assert "cuda_cmake_macros.h" in errors["cuda.cu"]
    # An error that is not a missing header, or a missing header of the project's, is the source's own.
    assert "undeclared" in errors["wrong.cu"] and "CPU build" not in errors["wrong.cu"]
    assert "absent.h" in errors["absent.cu"] and "CPU build" not in errors["absent.cu"]


# A kernel file of a `CUDAExtension` that includes no torch header (its launcher in a .cpp does), calling a constexpr
# host function from device code: torch's build passes `--expt-relaxed-constexpr`, so it builds there.
RELAXED = """\
constexpr int ceildiv(int a, int b) { return (a + b - 1) / b; }
__global__ void tiles_kernel(int* out, int n) { out[threadIdx.x] = ceildiv(n, 64); }
"""


@needs_nvcc
def test_a_kernel_file_built_by_torch_that_needs_its_relaxed_constexpr_is_told_how_to_get_it(tmp_path: Path) -> None:
    project = _project(tmp_path, {"tiles.cu": RELAXED})
    errors = [f for f in kgate("check", "--format", "json", cwd=project).json()["findings"] if f["code"] == "KG001"]
    assert len(errors) == 1 and "--expt-relaxed-constexpr" in errors[0]["message"]
    assert "set `torch = true` in its [[cuda]] table, else add the flag to its `flags`" in errors[0]["message"]
    project = _project(tmp_path, {"tiles.cu": RELAXED}, 'flags = ["--expt-relaxed-constexpr"]\n')
    run = kgate("check", "--format", "json", cwd=project)
    assert [f for f in run.json()["findings"] if f["code"] == "KG001"] == [], run.stdout
    # With torch's flags, nothing is said of them: the source already has the flag.
    assert torch_ext.explain("", "error: ... '--expt-relaxed-constexpr' ...", torch_flags=True) == \
        "error: ... '--expt-relaxed-constexpr' ..."
