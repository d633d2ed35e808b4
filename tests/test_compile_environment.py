"""What a compiler reads from the environment is part of the key of what was compiled from it.

Triton reads its knobs at every compile and nvcc adds `NVCC_APPEND_FLAGS` to every command line, so a record made
without them is a different kernel: a warm run with the variable set must report what a cold run with it does,
never the cached kernel of a run without it. Each case compiles for real, first without the variable (which fills
the cache), then with it, and compares with a run that has the variable and no cache.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import kgate

from kgate.support.compiler_env import nvcc_environment, triton_environment, triton_names

AXPB = '''import triton
import triton.language as tl


@triton.jit
def axpb(x, y, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(y + i, tl.load(x + i, mask=m) * 2.5 + 1.0, mask=m)
'''
TRITON = '''targets = ["sm_120a"]
python-path = ["."]

[[triton]]
kernel = "k:axpb"
signature = { x = "*fp32", y = "*fp32", n = "i32" }
constexprs = { BLOCK = 128 }
'''
# Many values live at once: far more than 32 registers unless the compiler is told otherwise.
WIDE = '''__global__ void wide_kernel(const float* x, float* y) {
    float v[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) v[i] = x[threadIdx.x + i * 256];
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 64; ++i) s += v[i] * v[63 - i];
    y[threadIdx.x] = s;
}
'''


def kernel_facts(root: Path, *args: str, env: dict[str, str] | None = None) -> dict:
    run = kgate("check", "--sass", "--format", "json", "--exit-zero", *args, cwd=root, env=env)
    assert run.code == 0, run.stderr
    kernels = run.json()["kernels"]
    assert len(kernels) == 1, kernels
    return kernels[0]


def test_a_triton_knob_set_at_the_check_is_the_kernel_it_reports(tmp_path: Path) -> None:
    (tmp_path / "k.py").write_text(AXPB)
    (tmp_path / "kgate.toml").write_text(TRITON)
    fused = kernel_facts(tmp_path)  # fills the cache, FP fusion at Triton's default
    knob = {"TRITON_DEFAULT_FP_FUSION": "0"}  # x * a + b as FMUL and FADD: no FFMA
    cold = kernel_facts(tmp_path, "--no-cache", env=knob)
    assert "FFMA" in fused["sass"] and "FFMA" not in cold["sass"], (fused["sass"], cold["sass"])
    warm = kernel_facts(tmp_path, env=knob)
    assert warm["sass"] == cold["sass"] and warm["registers"] == cold["registers"]
    # and back: the run without the knob is served its own record, not the last one written
    assert kernel_facts(tmp_path)["sass"] == fused["sass"]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_nvcc_flags_from_the_environment_are_the_kernel_it_reports(tmp_path: Path) -> None:
    (tmp_path / "wide.cu").write_text(WIDE)
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\n\n[[cuda]]\nsources = ["*.cu"]\n')
    plain = kernel_facts(tmp_path)
    capped = {"NVCC_APPEND_FLAGS": "-maxrregcount=32"}
    cold = kernel_facts(tmp_path, "--no-cache", env=capped)
    assert plain["registers"] > 32 >= cold["registers"], (plain["registers"], cold["registers"])
    assert kernel_facts(tmp_path, env=capped)["registers"] == cold["registers"]
    assert kernel_facts(tmp_path)["registers"] == plain["registers"]


def test_the_variables_read_are_the_compilers_own(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TRITON_DEFAULT_FP_FUSION", "DISABLE_PTXAS_OPT", "TRITON_CACHE_DIR", "TRITON_HOME", "NVCC_APPEND_FLAGS",
                 "HOME"):
        monkeypatch.setenv(name, "1")
    assert "DISABLE_PTXAS_OPT" in triton_names()  # a knob without the TRITON_ prefix
    read = triton_environment()
    assert {"TRITON_DEFAULT_FP_FUSION", "DISABLE_PTXAS_OPT"} <= set(read)
    # kgate sets the first for its workers, the second says only where Triton keeps its files, Triton reads no third
    assert not {"TRITON_CACHE_DIR", "TRITON_HOME", "HOME"} & set(read)
    assert nvcc_environment() == {"NVCC_APPEND_FLAGS": "1"}


def test_an_unchanged_run_is_not_replayed_under_a_knob_without_the_triton_prefix(tmp_path: Path) -> None:
    """The replay of an unchanged run is keyed on the same variables: `DISABLE_PTXAS_OPT` has no TRITON_ prefix."""
    (tmp_path / "k.py").write_text(AXPB)
    (tmp_path / "kgate.toml").write_text(TRITON)

    def facts(*args: str, env: dict[str, str] | None = None) -> dict:
        run = kgate("check", "--format", "json", "--exit-zero", *args, cwd=tmp_path, env=env, process=True)
        assert run.code == 0, run.stderr
        return {k: v for k, v in run.json()["kernels"][0].items() if k in ("registers", "sass", "stack_bytes")}

    optimised = facts()
    assert facts() == optimised  # the second run is the replay
    knob = {"DISABLE_PTXAS_OPT": "1"}  # ptxas at -O0
    cold = facts("--no-cache", env=knob)
    assert facts(env=knob) == cold


FLAGGED_SMEM = """\
#ifndef SMEM_BYTES
#define SMEM_BYTES (16 * 1024)
#endif
__global__ void staged(float* out) {
  extern __shared__ float buf[];
  buf[threadIdx.x] = threadIdx.x;
  __syncthreads();
  out[threadIdx.x] = buf[(threadIdx.x + 1) % blockDim.x];
}
void launch(float* out) { staged<<<1, 128, SMEM_BYTES>>>(out); }
"""


def _smem_bytes(project: Path, env: dict[str, str] | None) -> int:
    """The shared memory `kgate check` reports for the one kernel of `project`, run with `env`."""
    run = kgate("check", "--format", "json", "--exit-zero", "--select", "KG104", cwd=project, env=env, process=True)
    assert run.code == 0, run.stderr
    return int(run.json()["kernels"][0]["smem_bytes"])


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_a_macro_nvccs_flag_variables_define_counts_where_nvcc_puts_it(tmp_path: Path) -> None:
    """`-D`/`-U` in NVCC_PREPEND_FLAGS and NVCC_APPEND_FLAGS are nvcc's definitions: the dynamic shared memory a launch
    gives is read with them (prepended before the file's flags, appended after), warm or cold."""
    (tmp_path / "staged.cu").write_text(FLAGGED_SMEM)
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\n\n[[cuda]]\nsources = ["*.cu"]\n'
                                         'flags = ["-DSMEM_BYTES=150*1024"]\n')

    def smem(env: dict[str, str] | None = None) -> int:
        return _smem_bytes(tmp_path, env)

    # undefined again: a name `#ifndef` asks about that the flags leave undefined settles nothing (not guessed), so
    # the kernel's figure is its static shared memory alone (the compiler's), which every other figure adds to
    static = smem({"NVCC_APPEND_FLAGS": "-USMEM_BYTES"})
    assert static < 16 * 1024  # not the file's default either
    assert smem() - static == 150 * 1024
    assert smem({"NVCC_APPEND_FLAGS": "-DSMEM_BYTES=32*1024"}) - static == 32 * 1024  # after the file's: nvcc's last -D
    assert smem({"NVCC_PREPEND_FLAGS": "-DSMEM_BYTES=32*1024"}) - static == 150 * 1024  # before: the file's is last
    assert smem() - static == 150 * 1024  # and back, from the cache


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_a_macro_an_options_file_defines_counts_where_it_is_named(tmp_path: Path) -> None:
    """An options file named in nvcc's flag variables or in the file's flags (`--options-file F`, `-optf F`, read
    where nvcc runs) defines its macros there, as nvcc reads them."""
    (tmp_path / "staged.cu").write_text(FLAGGED_SMEM)
    (tmp_path / "opts.txt").write_text("-DSMEM_BYTES=32*1024\n")
    (tmp_path / "none.txt").write_text("-O3\n")
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\n\n[[cuda]]\nsources = ["*.cu"]\n'
                                         'flags = ["-DSMEM_BYTES=150*1024"]\n')

    def smem(env: dict[str, str] | None = None) -> int:
        return _smem_bytes(tmp_path, env)

    static = smem({"NVCC_APPEND_FLAGS": "-USMEM_BYTES"})
    assert smem({"NVCC_APPEND_FLAGS": "--options-file opts.txt"}) - static == 32 * 1024
    assert smem({"NVCC_APPEND_FLAGS": "-optf=none.txt,opts.txt"}) - static == 32 * 1024
    assert smem({"NVCC_PREPEND_FLAGS": "--options-file=opts.txt"}) - static == 150 * 1024  # before the file's
    assert smem({"NVCC_APPEND_FLAGS": "--options-file none.txt"}) - static == 150 * 1024
