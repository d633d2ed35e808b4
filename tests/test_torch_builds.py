"""The torch extensions a project's build scripts declare (`kgate.collect.torch_builds`): the sources they list are
compiled with the nvcc flags the script gives them, and what the script's text does not settle is named in a
compile error, never guessed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import kgate

from kgate.collect.torch_builds import by_source, torch_builds

SETUP = """\
import os
from pathlib import Path
from setuptools import setup
from torch.utils import cpp_extension

BLOCK = 64
TILE_SIZE = 128
HERE = Path(__file__).resolve().parent
NVCC = ["-O3", f"-DBLOCK={BLOCK}", "-DTILE=" + str(TILE_SIZE), "-gencode=arch=compute_80,code=sm_80"]

setup(
    name="ext",
    ext_modules=[
        cpp_extension.CUDAExtension(
            "ext_cuda",
            ["csrc/binding.cpp", str(HERE / "csrc" / "kernel.cu"), os.path.join(os.path.dirname(__file__), "csrc/other.cu")],
            extra_compile_args={"cxx": ["-O3"], "nvcc": NVCC + ["--use_fast_math", "-DWIDTH=4 -DDEPTH=2"]},
        ),
    ],
)
"""

RUN = """\
import sys
from torch.utils.cpp_extension import load

HEAD_SIZE = int(sys.argv[1])
VERSION = "v2"
mod = load(name="wkv", sources=[f"cuda/wkv_{VERSION}.cu"],
           extra_cuda_cflags=["--use_fast_math", f"-D_N_={HEAD_SIZE}", "-res-usage"])
"""


def _tree(root: Path) -> None:
    (root / "csrc").mkdir()
    for name in ("binding.cpp", "kernel.cu", "other.cu"):
        (root / "csrc" / name).write_text("// source\n")
    (root / "setup.py").write_text(SETUP)
    (root / "wkv" / "cuda").mkdir(parents=True)
    (root / "wkv" / "cuda" / "wkv_v2.cu").write_text("// source\n")
    (root / "wkv" / "cuda" / "wkv_v1.cu").write_text("// source\n")
    (root / "wkv" / "run.py").write_text(RUN)


def test_a_build_script_lists_its_sources_with_the_nvcc_flags_it_settles(tmp_path: Path) -> None:
    _tree(tmp_path)
    kernels = [tmp_path / "csrc" / "kernel.cu", tmp_path / "csrc" / "other.cu", tmp_path / "wkv" / "cuda" / "wkv_v2.cu"]
    builds = by_source(torch_builds(tmp_path, kernels + [tmp_path / "wkv" / "cuda" / "wkv_v1.cu"]))
    setup = builds[(tmp_path / "csrc" / "kernel.cu").resolve()]
    assert setup.script.name == "setup.py"
    assert SETUP.splitlines()[setup.line - 1].strip() == "cpp_extension.CUDAExtension("
    # The architecture is kgate's to choose; the rest in order, each item one argument as BuildExtension passes it
    # (it quotes each one for its ninja file): "-DWIDTH=4 -DDEPTH=2" defines WIDTH as `4 -DDEPTH=2`.
    assert setup.flags == ("-O3", "-DBLOCK=64", "-DTILE=128", "--use_fast_math", "-DWIDTH=4 -DDEPTH=2")
    assert builds[(tmp_path / "csrc" / "other.cu").resolve()] is setup
    assert setup.unsettled == ()
    loaded = builds[(tmp_path / "wkv" / "cuda" / "wkv_v2.cu").resolve()]
    assert loaded.script.name == "run.py" and "--use_fast_math" in loaded.flags
    assert not any(flag.startswith("-D_N_") for flag in loaded.flags)
    assert loaded.unsettled == ("f'-D_N_={HEAD_SIZE}'",)
    assert "wkv/run.py:6" in loaded.note(tmp_path) and "-D_N_={HEAD_SIZE}" in loaded.note(tmp_path)
    # A version the script does not load is no source of it.
    assert (tmp_path / "wkv" / "cuda" / "wkv_v1.cu").resolve() not in builds


def test_two_builds_of_one_source_give_it_the_flags_they_share(tmp_path: Path) -> None:
    (tmp_path / "k.cu").write_text("// source\n")
    (tmp_path / "a.py").write_text('from torch.utils.cpp_extension import load\n'
                                   'load("a", ["k.cu"], extra_cuda_cflags=["-DA=1", "-DSHARED=2"])\n')
    (tmp_path / "b.py").write_text('import torch.utils.cpp_extension\n'
                                   'torch.utils.cpp_extension.load("b", ["k.cu"], extra_cuda_cflags=["-DSHARED=2"])\n')
    (tmp_path / "c.py").write_text('def load(*a, **k): pass\nload("c", ["k.cu"], extra_cuda_cflags=["-DC=3"])\n')
    [build] = by_source(torch_builds(tmp_path, [tmp_path / "k.cu"])).values()
    assert build.flags == ("-DSHARED=2",)


KERNEL = """\
__global__ void sized(float* out) {
  __shared__ float tile[TILE];
  tile[threadIdx.x % TILE] = BLOCK;
  __syncthreads();
  out[threadIdx.x] = tile[(threadIdx.x + 1) % TILE];
}
"""


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_kgate_check_compiles_a_setup_py_source_with_its_defines_and_names_what_a_script_leaves_unsettled(
        tmp_path: Path) -> None:
    _tree(tmp_path)
    (tmp_path / "csrc" / "kernel.cu").write_text(KERNEL)
    (tmp_path / "wkv" / "cuda" / "wkv_v2.cu").write_text(KERNEL.replace("TILE", "_N_").replace("BLOCK", "1"))
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\n[[cuda]]\nsources = ["csrc/kernel.cu", "wkv/cuda/wkv_v2.cu"]\n')
    run = kgate("check", "--format", "json", cwd=tmp_path)
    report = run.json()
    smem = {k["kernel"]: k["smem_bytes"] for k in report["kernels"]}
    assert smem == {"sized": 512}, (smem, run.stderr)  # TILE=128 floats, from setup.py's nvcc flags
    [failure] = [f for f in report["findings"] if f["code"] == "KG001"]
    assert failure["path"] == "wkv/cuda/wkv_v2.cu" and "_N_" in failure["message"], failure
    assert "wkv/run.py:6" in failure["message"] and "[[cuda]] table's `flags`" in failure["message"], failure
    # Given in the table, the value is the project's: the file compiles.
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\n[[cuda]]\nsources = ["csrc/kernel.cu"]\n'
                                         '[[cuda]]\nsources = ["wkv/cuda/wkv_v2.cu"]\nflags = ["-D_N_=64"]\n')
    again = kgate("check", "--format", "json", cwd=tmp_path).json()
    assert sorted((k["path"], k["smem_bytes"]) for k in again["kernels"]) == [
        ("csrc/kernel.cu", 512), ("wkv/cuda/wkv_v2.cu", 256)], again["kernels"]
    assert [f for f in again["findings"] if f["code"] == "KG001"] == []


def _build(root: Path, script: str, name: str = "setup.py") -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    (root / "k.cu").write_text("// source\n")
    (root / name).write_text("from torch.utils.cpp_extension import CUDAExtension, load\n" + script)
    found = by_source(torch_builds(root, [root / "k.cu"])).get((root / "k.cu").resolve())
    return (found.flags, found.unsettled) if found else None


@pytest.mark.parametrize("script", [
    "F = ['-O3']\nF.append('-DX=1')\nCUDAExtension('x', ['k.cu'], extra_compile_args={'nvcc': F})\n",
    "import os\nF = ['-O3']\nif os.environ.get('X'):\n    F += ['-DX=1']\n"
    "CUDAExtension('x', ['k.cu'], extra_compile_args={'nvcc': F})\n",
    "import os\nF = ['-O3']\nif os.environ.get('X'):\n    F = ['-O3', '-DX=1']\n"
    "CUDAExtension('x', ['k.cu'], extra_compile_args={'nvcc': F})\n",
    "A = {'nvcc': ['-O3']}\nA['nvcc'].extend(['-DX=1'])\nCUDAExtension('x', ['k.cu'], extra_compile_args=A)\n",
])
def test_flags_the_script_changes_after_giving_them_are_unsettled_not_dropped(tmp_path: Path, script: str) -> None:
    found = _build(tmp_path, script)
    assert found is not None and "-DX=1" not in found[0] and found[1], found


@pytest.mark.parametrize(("script", "flags", "unsettled"), [
    ("CUDAExtension('x', ['k.cu'], extra_compile_args=dict(cxx=['-O2'], nvcc=['-DX=1']))\n", ("-DX=1",), ()),
    ("K = 'nv' + 'cc'\nCUDAExtension('x', ['k.cu'], extra_compile_args={K: ['-DX=1']})\n", ("-DX=1",), ()),
    ("import os\nCUDAExtension('x', ['k.cu'], extra_compile_args={os.environ['K']: ['-DX=1']})\n", (),
     ("{os.environ['K']: ['-DX=1']}",)),
])
def test_the_nvcc_flags_of_a_dict_call_or_a_computed_key(tmp_path: Path, script: str, flags: tuple[str, ...],
                                                         unsettled: tuple[str, ...]) -> None:
    assert _build(tmp_path, script) == (flags, unsettled)


def test_two_builds_share_whole_options_never_half_of_one(tmp_path: Path) -> None:
    (tmp_path / "k.cu").write_text("// source\n")
    (tmp_path / "a.py").write_text('from torch.utils.cpp_extension import load\n'
                                   'load("a", ["k.cu"], extra_cuda_cflags=["-O3", "--maxrregcount", "64", '
                                   '"-Xptxas", "-v", "-Xcompiler", "-fPIC"])\n')
    (tmp_path / "b.py").write_text('from torch.utils.cpp_extension import load\n'
                                   'load("b", ["k.cu"], extra_cuda_cflags=["-O3", "--maxrregcount", "128", '
                                   '"-Xcompiler", "-v", "-Xcompiler", "-fPIC"])\n')
    [build] = by_source(torch_builds(tmp_path, [tmp_path / "k.cu"])).values()
    assert build.flags == ("-O3", "-Xcompiler", "-fPIC")


def test_a_linked_script_lists_its_sources_from_the_folder_it_is_run_in(tmp_path: Path) -> None:
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "setup.py").write_text(
        "from pathlib import Path\nfrom torch.utils.cpp_extension import CUDAExtension\n"
        "HERE = Path(__file__).resolve().parent\n"
        "CUDAExtension('x', ['k.cu'], extra_compile_args={'nvcc': ['-DFROM=' + str(HERE)]})\n")
    (tmp_path / "ext").mkdir()
    (tmp_path / "ext" / "setup.py").symlink_to("../shared/setup.py")
    (tmp_path / "ext" / "k.cu").write_text("// source\n")
    [(source, build)] = by_source(torch_builds(tmp_path, [tmp_path / "ext" / "k.cu"])).items()
    assert source == (tmp_path / "ext" / "k.cu").resolve() and build.script.parent == tmp_path / "ext"
    # `Path(__file__).resolve()` of a linked script is its target's.
    assert build.flags == (f"-DFROM={(tmp_path / 'shared').resolve()}",)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_kgate_check_compiles_a_source_whose_build_passes_ptxas_a_flag_of_its_own(tmp_path: Path) -> None:
    (tmp_path / "kernel.cu").write_text(KERNEL)
    (tmp_path / "setup.py").write_text(
        "from torch.utils.cpp_extension import CUDAExtension\n"
        "CUDAExtension('x', ['kernel.cu'], extra_compile_args={'nvcc': ['-Xptxas', '-v', '--use_fast_math', "
        "'-DTILE=64', '-DBLOCK=1']})\n")
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\n[[cuda]]\nsources = ["kernel.cu"]\ntorch = false\n')
    report = kgate("check", "--format", "json", cwd=tmp_path).json()
    assert [f for f in report["findings"] if f["code"] == "KG001"] == [], report["findings"]
    assert {k["kernel"]: k["smem_bytes"] for k in report["kernels"]} == {"sized": 256}


def test_load_flags_are_split_as_a_shell_splits_them_and_an_extensions_are_one_argument_each(tmp_path: Path) -> None:
    flags = '["-DNAME=\\"ext\\"", "-DA=1 -DB=2", "-gencode arch=compute_80,code=sm_80"]'
    (tmp_path / "setup").mkdir()
    (tmp_path / "load").mkdir()
    assert _build(tmp_path / "setup", f"CUDAExtension('x', ['k.cu'], extra_compile_args={{'nvcc': {flags}}})\n") == (
        ('-DNAME="ext"', "-DA=1 -DB=2"), ())
    assert _build(tmp_path / "load", f"load('x', ['k.cu'], extra_cuda_cflags={flags})\n", "run.py") == (
        ("-DNAME=ext", "-DA=1", "-DB=2"), ())
