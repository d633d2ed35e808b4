"""What the compilers read from the environment, beyond tests/test_compile_environment.py: Triton's knobs that its
compiled library reads (not listed in knobs.py), the ptxas a variable names (another release, a wrapper script, a
wrapper edited in place or reading a variable of its own, a link retargeted, a relative name), the nvcc PATH or
CUDA_HOME selects, the host compiler nvcc preprocesses with, headers found through CPATH, variables set to values
equal to their defaults, and variables that change no kernel.

Each case compiles real kernels: a run without the change fills the cache, then a warm run with it must report
what a run with it and no cache reports (and the run without it its own record again); a change that changes no
kernel compiles nothing.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import kgate
from test_compile_environment import AXPB, TRITON, WIDE

from kgate.support import tools

NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
PTXAS = tools.bundled_tool("ptxas-blackwell")
TOOLKIT_PTXAS = next((p for p in ("/usr/local/cuda/bin/ptxas",) if os.path.isfile(p)), None) or shutil.which("ptxas")
CUDA_CFG = 'targets = ["sm_120a"]\n\n[[cuda]]\nsources = ["*.cu"]\n'
# Device code that the preprocessor decides: a host compiler or a flag that defines KG_WRAPPED changes it.
WRAPPED = '''extern "C" __global__ void wrapped_kernel(float* x) {
#ifdef KG_WRAPPED
    x[threadIdx.x] = x[threadIdx.x] * 3.0f - 1.0f;
#else
    x[threadIdx.x] += 1.0f;
#endif
}
'''
TILED = '#include "tile.h"\n' + WIDE.replace("64", "TILE")
LIBDEVICE = AXPB.replace("import triton.language as tl\n",
                         "import triton.language as tl\nfrom triton.language.extra import libdevice\n").replace(
                             "* 2.5 + 1.0", "* 2.5 + libdevice.exp(1.0)")


def _write_program(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def _ptxas_wrapper(path: Path, extra: str) -> Path:
    """A ptxas that runs Triton's own with `extra` options (its version line unchanged)."""
    return _write_program(path, f'#!/bin/sh\ncase "$1" in --version) exec {PTXAS} "$@";; esac\nexec {PTXAS} "$@" {extra}\n')


def _nvcc_wrapper(path: Path, extra: str) -> Path:
    return _write_program(path, f'#!/bin/sh\nexec {_real_nvcc()} "$@" {extra}\n')


def _real_nvcc() -> str:
    """The nvcc binary itself (the one on PATH may be a script that runs it)."""
    from kgate.support.toolchain import nvcc_bin_dir

    return str(nvcc_bin_dir(str(NVCC)) / "nvcc")


def _gcc_wrapper(folder: Path, extra: str) -> Path:
    for name in ("gcc", "g++", "cc", "c++"):
        real = shutil.which(name, path="/usr/bin:/bin") or shutil.which(name)
        if real:
            _write_program(folder / name, f'#!/bin/sh\nexec {real} {extra} "$@"\n')
    return folder / "gcc"


def _outcome(root: Path, *args: str, env: dict[str, str] | None = None, process: bool = False) -> dict:
    run = kgate("check", "--sass", "--format", "json", "--exit-zero", *args, cwd=root, env=env, process=process)
    assert run.code == 0, run.stderr
    data = run.json()
    return {"kernels": [{k: v for k, v in kernel.items() if k in ("registers", "sass", "spill_bytes", "stack_bytes")}
                        for kernel in data["kernels"]],
            "findings": sorted(f["code"] for f in data["findings"])}


def _compiled(root: Path, env: dict[str, str] | None = None) -> str:
    run = kgate("check", "-v", cwd=root, env=env)
    return run.stdout + run.stderr


def _triton(root: Path, module: str = AXPB) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "k.py").write_text(module)
    (root / "kgate.toml").write_text(TRITON)
    return root


def _cuda(root: Path, source: str = WIDE, config: str = CUDA_CFG) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "k.cu").write_text(source)
    (root / "kgate.toml").write_text(config)
    return root


def _warm_is_cold(root: Path, before: dict[str, str] | None, after: dict[str, str] | None,
                  change: Callable[[], None] | None = None) -> tuple[dict, dict]:
    """The run without the change, then with it warm and cold; the two with it must agree. Both outcomes."""
    first = _outcome(root, env=before)
    if change is not None:
        change()
    warm = _outcome(root, env=after)
    cold = _outcome(root, "--no-cache", env=after)
    assert warm == cold
    return first, cold


# ---------------------------------------------------------------------------------------------- Triton's knobs

def _knob_of_this_triton(name: str) -> bool:
    """Whether the installed Triton reads the knob (its knobs module names it), read without importing Triton."""
    spec = importlib.util.find_spec("triton")
    knobs = Path(spec.origin).parent / "knobs.py" if spec is not None and spec.origin else None
    return knobs is not None and knobs.is_file() and name in knobs.read_text(encoding="utf-8")


@pytest.mark.parametrize("variable, value, differs", [
    ("DISABLE_LLVM_OPT", "1", True),  # read by Triton's compiled library, not named in knobs.py
    ("TRITON_FORCE_DISABLE_FP_FUSION", "1", _knob_of_this_triton("TRITON_FORCE_DISABLE_FP_FUSION")),  # 3.9 on
    ("PTXAS_OPTIONS", "--opt-level 0", True),
    ("TRITON_DISABLE_LINE_INFO", "1", False),
    ("TRITON_DEFAULT_FP_FUSION", "1", False),  # Triton's default, set: another key, the same kernel
    ("DISABLE_PTXAS_OPT", "0", False),
])
def test_a_knob_set_at_the_check_is_the_kernel_it_reports(tmp_path: Path, variable: str, value: str,
                                                          differs: bool) -> None:
    root = _triton(tmp_path)
    plain, knob = _warm_is_cold(root, None, {variable: value})
    assert (knob["kernels"][0]["sass"] != plain["kernels"][0]["sass"]) is differs
    assert _outcome(root) == plain  # and back: the run without it is served its own record


def test_every_variable_tritons_library_keys_its_cache_on_is_in_the_key() -> None:
    """Triton keys its own cache on the variables its compiled library reads; each is one kgate keys too."""
    import subprocess
    import sys

    from kgate.support.compiler_env import NOT_CODE, triton_names

    # The candidates are the upper-case words of the library's read-only data (its string literals); they are set
    # a few thousand at a time, since each putenv searches the whole environment.
    script = ("import os, re, triton._C.libtriton as lib\n"
              "from kgate.compile.elf import sections\n"
              "data = open(lib.__file__, 'rb').read()\n"
              "text = b'\\0'.join(sections(data, '.rodata').values()) or data\n"
              "names = sorted(set(n.decode() for n in re.findall(rb'[A-Z][A-Z0-9_]{3,}', text)) - set(os.environ))\n"
              "read = set()\n"
              "for start in range(0, len(names), 2000):\n"
              "    batch = names[start:start + 2000]\n"
              "    os.environ.update(dict.fromkeys(batch, '1'))\n"
              "    read.update(lib.get_cache_invalidating_env_vars())\n"
              "    for name in batch:\n"
              "        del os.environ[name]\n"
              "print('\\n'.join(sorted(read)))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
                          env={"PATH": os.environ.get("PATH", "")})
    assert done.returncode == 0, done.stderr
    read = set(done.stdout.split())
    assert read, done.stdout
    assert read - NOT_CODE <= set(triton_names()) | {n for n in read if n.startswith("TRITON_")}


def test_a_file_a_knob_names_is_keyed_by_its_content(tmp_path: Path) -> None:
    """TRITON_LIBDEVICE_PATH names the library linked into the kernel: a library rewritten in place is another."""
    root = _triton(tmp_path, LIBDEVICE)
    libdevice = next(Path(tools.triton_bin_dir() or ".").parent.glob("lib/libdevice*.bc"))
    copy = tmp_path / "libdevice.bc"
    shutil.copy(libdevice, copy)
    knob = {"TRITON_LIBDEVICE_PATH": str(copy)}
    good = _outcome(root, env=knob)
    assert good["kernels"], good
    copy.write_bytes(b"not bitcode" + bytes(64))
    assert _outcome(root, env=knob) == _outcome(root, "--no-cache", env=knob) != good


# ---------------------------------------------------------------------------------------------- the ptxas Triton runs

needs_ptxas = pytest.mark.skipif(PTXAS is None, reason="Triton's wheel has no ptxas-blackwell")


@needs_ptxas
@pytest.mark.skipif(TOOLKIT_PTXAS is None, reason="no CUDA toolkit ptxas")
def test_a_ptxas_of_another_release_named_by_its_variable(tmp_path: Path) -> None:
    root = _triton(tmp_path)
    _warm_is_cold(root, None, {"TRITON_PTXAS_BLACKWELL_PATH": str(TOOLKIT_PTXAS)})


@needs_ptxas
def test_a_ptxas_wrapper_script(tmp_path: Path) -> None:
    root = _triton(tmp_path)
    wrapper = _ptxas_wrapper(tmp_path / "bin" / "ptxas", "--opt-level 0")
    plain, wrapped = _warm_is_cold(root, None, {"TRITON_PTXAS_BLACKWELL_PATH": str(wrapper)})
    assert wrapped != plain


@needs_ptxas
def test_a_ptxas_wrapper_edited_in_place(tmp_path: Path) -> None:
    root = _triton(tmp_path)
    wrapper = _ptxas_wrapper(tmp_path / "bin" / "ptxas", "")
    env = {"TRITON_PTXAS_BLACKWELL_PATH": str(wrapper)}
    plain, wrapped = _warm_is_cold(root, env, env, lambda: _ptxas_wrapper(wrapper, "--opt-level 0"))
    assert wrapped != plain


@needs_ptxas
def test_a_ptxas_wrapper_that_reads_a_variable_of_its_own(tmp_path: Path) -> None:
    root = _triton(tmp_path)
    wrapper = _ptxas_wrapper(tmp_path / "bin" / "ptxas", "$KG_PTXAS_EXTRA")
    env = {"TRITON_PTXAS_BLACKWELL_PATH": str(wrapper)}
    plain, wrapped = _warm_is_cold(root, env, {**env, "KG_PTXAS_EXTRA": "--opt-level 0"})
    assert wrapped != plain


@needs_ptxas
@pytest.mark.skipif(TOOLKIT_PTXAS is None, reason="no CUDA toolkit ptxas")
def test_a_ptxas_link_retargeted(tmp_path: Path) -> None:
    root = _triton(tmp_path)
    link = tmp_path / "ptxas"
    link.symlink_to(str(PTXAS))
    env = {"TRITON_PTXAS_BLACKWELL_PATH": str(link)}

    def retarget() -> None:
        link.unlink()
        link.symlink_to(str(TOOLKIT_PTXAS))

    _warm_is_cold(root, env, env, retarget)


@needs_ptxas
def test_a_ptxas_named_by_a_relative_path(tmp_path: Path) -> None:
    root = _triton(tmp_path)
    _ptxas_wrapper(root / "tools" / "ptxas", "--opt-level 0")
    plain, wrapped = _warm_is_cold(root, None, {"TRITON_PTXAS_BLACKWELL_PATH": "tools/ptxas"})
    assert wrapped != plain


@needs_ptxas
def test_the_replay_of_a_run_whose_ptxas_wrapper_changed(tmp_path: Path) -> None:
    """An unchanged run is replayed; a run after the wrapper was rewritten in place is not that run."""
    root = _triton(tmp_path)
    wrapper = _ptxas_wrapper(tmp_path / "bin" / "ptxas", "")
    env = {"TRITON_PTXAS_BLACKWELL_PATH": str(wrapper)}
    plain = _outcome(root, env=env, process=True)
    assert _outcome(root, env=env, process=True) == plain  # the replay
    _ptxas_wrapper(wrapper, "--opt-level 0")
    assert _outcome(root, env=env, process=True) == _outcome(root, "--no-cache", env=env) != plain


@pytest.mark.parametrize("variable, value", [
    ("TMPDIR", "{tmp}"), ("CUDA_VISIBLE_DEVICES", "3"), ("TRITON_CACHE_DIR", "{tmp}/triton"), ("HOME", "{tmp}"),
])
def test_a_variable_that_changes_no_kernel_compiles_nothing(tmp_path: Path, variable: str, value: str) -> None:
    root = _triton(tmp_path / "p")
    (tmp_path / "elsewhere").mkdir()
    assert "1 compiled" in _compiled(root)
    assert "0 compiled, 1 from cache" in _compiled(root, {variable: value.replace("{tmp}", str(tmp_path / "elsewhere"))})


# ---------------------------------------------------------------------------------------------- nvcc

def _registers(outcome: dict) -> int:
    return int(outcome["kernels"][0]["registers"])


@needs_nvcc
def test_nvcc_prepend_flags(tmp_path: Path) -> None:
    root = _cuda(tmp_path)
    plain, capped = _warm_is_cold(root, None, {"NVCC_PREPEND_FLAGS": "-maxrregcount=32"})
    assert _registers(plain) > 32 >= _registers(capped)


@needs_nvcc
def test_nvcc_append_flags_set_to_nothing(tmp_path: Path) -> None:
    root = _cuda(tmp_path)
    plain, empty = _warm_is_cold(root, None, {"NVCC_APPEND_FLAGS": ""})
    assert empty == plain


@needs_nvcc
def test_nvcc_append_flags_that_define_a_macro(tmp_path: Path) -> None:
    root = _cuda(tmp_path, WRAPPED)
    plain, defined = _warm_is_cold(root, None, {"NVCC_APPEND_FLAGS": "-DKG_WRAPPED"})
    assert defined != plain


@needs_nvcc
def test_an_nvcc_wrapper_first_on_path(tmp_path: Path) -> None:
    root = _cuda(tmp_path / "p")
    _nvcc_wrapper(tmp_path / "bin" / "nvcc", "-maxrregcount=32")
    plain, capped = _warm_is_cold(root, None, {"PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"})
    assert _registers(plain) > 32 >= _registers(capped)


@needs_nvcc
def test_cuda_home_names_another_nvcc(tmp_path: Path) -> None:
    root = _cuda(tmp_path / "p")
    _nvcc_wrapper(tmp_path / "toolkit" / "bin" / "nvcc", "-maxrregcount=32")
    plain, capped = _warm_is_cold(root, None, {"CUDA_HOME": str(tmp_path / "toolkit")})
    assert _registers(plain) > 32 >= _registers(capped)


@needs_nvcc
def test_an_nvcc_wrapper_that_reads_a_variable_of_its_own(tmp_path: Path) -> None:
    root = _cuda(tmp_path / "p")
    _nvcc_wrapper(tmp_path / "bin" / "nvcc", "$KG_NVCC_EXTRA")
    env = {"PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}
    plain, capped = _warm_is_cold(root, env, {**env, "KG_NVCC_EXTRA": "-maxrregcount=32"})
    assert _registers(plain) > 32 >= _registers(capped)


@needs_nvcc
def test_nvcc_pinned_in_the_configuration_ignores_path(tmp_path: Path) -> None:
    root = _cuda(tmp_path / "p", config=CUDA_CFG.replace("\n\n", f'\nnvcc = "{_real_nvcc()}"\n\n', 1))
    _nvcc_wrapper(tmp_path / "bin" / "nvcc", "-maxrregcount=32")
    assert "1 compiled" in _compiled(root)
    assert "0 compiled, 1 from cache" in _compiled(root, {"PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"})


@needs_nvcc
def test_the_host_compiler_first_on_path(tmp_path: Path) -> None:
    """nvcc preprocesses device code with the gcc it finds on PATH: another one is another kernel."""
    root = _cuda(tmp_path / "p", WRAPPED)
    _gcc_wrapper(tmp_path / "bin", "-DKG_WRAPPED=1")
    plain, wrapped = _warm_is_cold(root, None, {"PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"})
    assert wrapped != plain


@needs_nvcc
def test_the_host_compiler_nvcc_ccbin_names_edited_in_place(tmp_path: Path) -> None:
    root = _cuda(tmp_path / "p", WRAPPED)
    gcc = _gcc_wrapper(tmp_path / "bin", "")
    env = {"NVCC_CCBIN": str(gcc)}
    plain, wrapped = _warm_is_cold(root, env, env, lambda: _gcc_wrapper(tmp_path / "bin", "-DKG_WRAPPED=1"))
    assert wrapped != plain


@needs_nvcc
def test_a_header_found_through_cpath_edited(tmp_path: Path) -> None:
    root = _cuda(tmp_path / "p", TILED)
    include = tmp_path / "include"
    include.mkdir()
    (include / "tile.h").write_text("#define TILE 64\n")
    env = {"CPATH": str(include)}
    wide, narrow = _warm_is_cold(root, env, env, lambda: (include / "tile.h").write_text("#define TILE 4\n"))
    assert _registers(narrow) < _registers(wide)
