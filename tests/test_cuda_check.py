"""CUDA C++ kernels compiled for sm_120a by nvcc (and NVRTC) on this CPU-only machine, gated by `kgate check`.

fixtures/cuda/ holds .cu files with host code, templates, an anonymous
namespace and launch sites; each `__global__` line states its findings
(`// expect: CODE@target`). One cold `kgate check` compiles them all.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Run, copy_project, expectations, kgate

from kgate.collect.cuda_names import short_name
from kgate.collect.cuda_sources import CudaSource, cuda_sources
from kgate.core.config import load_config
from kgate.facts.ptxas_log import parse_ptxas_log

SUFFIXES = (".cu", ".cuh")
pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_project("cuda", tmp_path_factory.mktemp("cuda"))


@pytest.fixture(scope="module")
def cold(project: Path) -> Run:
    return kgate("check", "--format", "json", cwd=project)


def _files(project: Path) -> list[CudaSource]:
    """The CUDA sources the project configures: each is one unit of the cache."""
    return cuda_sources(load_config(project / "kgate.toml"))


def _kernels(run: Run) -> dict[str, dict]:
    return {k["kernel"]: k for k in run.json()["kernels"]}


def test_findings_are_exactly_the_inline_expectations(project: Path, cold: Run) -> None:
    assert cold.code == 1, cold.stderr
    found = {(f["path"], f["line"], f["code"], f["target"]) for f in cold.json()["findings"]}
    assert found == expectations(project, SUFFIXES)


def test_kernel_names_are_demangled_with_template_arguments(cold: Run) -> None:
    names = set(_kernels(cold))
    assert {"ops::rmsnorm_kernel<__half, 128>", "ops::rmsnorm_kernel<float, 256>", "anon_waits",
            "load_before_wait", "spill_kernel"} <= names
    assert not any(name.startswith("_Z") or "(" in name or "anonymous" in name for name in names)
    assert all(k["language"] == "cuda" for k in cold.json()["kernels"])


def test_every_kernel_points_at_its_global_line(project: Path, cold: Run) -> None:
    for record in cold.json()["kernels"]:
        line = (project / record["path"]).read_text().splitlines()[record["line"] - 1]
        assert "__global__" in line, (record["kernel"], line)


def test_pdl_comes_from_launch_sites_wrappers_and_configuration(cold: Run) -> None:
    kernels = _kernels(cold)
    launched = {name for name, k in kernels.items() if k["pdl"]}
    assert launched == {"load_before_wait", "wait_first", "wait_under_branch", "anon_waits", "wrapped_no_wait",
                        "wrapped_waits", "configured_pdl_kernel"}


def test_pdl_findings_name_the_access_and_waiting_kernels_show_acqbulk(cold: Run) -> None:
    messages = {f["kernel"]: f["message"] for f in cold.json()["findings"] if f["code"] == "KG107"}
    # Under the branch the kernel writes `out` before it waits on some path: an error; a load alone names `x`.
    assert "writes global memory before griddepcontrol.wait" in messages["wait_under_branch"]
    assert "(`out`) can race the kernel before this one" in messages["wait_under_branch"]
    assert "`x` by `ld.global" in messages["load_before_wait"] and "pdl.cu:10" in messages["load_before_wait"]
    assert "has no griddepcontrol.wait" in messages["wrapped_no_wait"]
    kernels = _kernels(cold)
    for name in ("wait_first", "wrapped_waits", "anon_waits"):
        assert kernels[name]["sass"].get("ACQBULK", 0) >= 1, name


def test_block_scaled_mma_for_sm_120a_is_qmma_sf(project: Path, cold: Run) -> None:
    kernel = _kernels(cold)["mxf8_mma_kernel"]
    assert kernel["ptx_target"] == "sm_120a"
    assert any("kind::mxf8f6f4.block_scale" in op for op in kernel["instructions"])
    # Its PTX already has the instruction, so no rule reads its SASS: --sass asks for it anyway.
    assert kernel["sass"] is None
    with_sass = _kernels(kgate("check", "--format", "json", "--sass", "--kernel", "mxf8*", cwd=project))
    assert any(op.startswith("QMMA.SF") for op in with_sass["mxf8_mma_kernel"]["sass"])


def test_sass_is_read_only_where_a_rule_needs_it(cold: Run) -> None:
    with_sass = {name for name, k in _kernels(cold).items() if k["sass"] is not None}
    # PDL kernels that wait before every write (ACQBULK confirmed: a load before the wait may be a declared one),
    # the block-scale misses (their SASS MMA named) and the kernels ptxas gave a stack frame (where their local
    # memory is used: local-memory-in-loop).
    stacked = {name for name, k in _kernels(cold).items() if k["stack_bytes"] > 0}
    assert stacked >= {"spill_kernel", "fits_kernel"}
    assert with_sass == {"wait_first", "wrapped_waits", "anon_waits", "load_before_wait", "bf16_instead_kernel",
                         "bare_mma_kernel"} | stacked


def test_the_same_source_built_for_the_bare_arch_is_reported(project: Path, tmp_path: Path) -> None:
    """block_scale.cu unchanged; only the project's flags name compute_120/sm_120, as a real build would (the
    project's other sources left out: a file is compiled whole, whichever of its kernels `--kernel` names)."""
    bare = copy_project("cuda", tmp_path)
    config = bare / "kgate.toml"
    first_table = config.read_text().split("\n[[cuda]]", 2)[:2]
    config.write_text("\n[[cuda]]".join(first_table).replace(
        'sources = ["pdl.cu", "block_scale.cu", "spill.cu", "templates.cu"]', 'sources = ["block_scale.cu"]').replace(
        'flags = ["-I.", "-std=c++17", "-O3"]',
        'flags = ["-I.", "-std=c++17", "-O3", "-gencode", "arch=compute_120,code=sm_120"]'))
    assert 'sources = ["block_scale.cu"]' in config.read_text() and "bare_arch" not in config.read_text()
    run = kgate("check", "--format", "json", "--kernel", "mxf8_mma*", cwd=bare)
    found = {(f["path"], f["line"], f["code"]) for f in run.json()["findings"]}
    assert found == {("block_scale.cu", 8, "KG101"), ("block_scale.cu", 8, "KG106")}
    assert _kernels(run)["mxf8_mma_kernel"]["ptx_target"] == "sm_120"


def test_spill_numbers_equal_an_independent_nvcc_run(project: Path, cold: Run, tmp_path: Path) -> None:
    proc = subprocess.run(["nvcc", "-I.", "-std=c++17", "-O3", "-Xptxas", "-v",
                           "-gencode", "arch=compute_120a,code=sm_120a", "-c", "spill.cu",
                           "-o", str(tmp_path / "spill.o")], cwd=project, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    independent = {short_name(name): res for name, res in parse_ptxas_log(proc.stdout + proc.stderr).items()}
    kernels = _kernels(cold)
    assert set(independent) == {"spill_kernel", "fits_kernel"}
    for name, res in independent.items():
        record = kernels[name]
        assert (record["registers"], record["spill_bytes"], record["spill_loads"], record["stack_bytes"]) == \
            (res.registers, res.spill_stores, res.spill_loads, res.stack_frame), name
    assert independent["spill_kernel"].spill_stores > 0


def test_a_warm_run_compiles_nothing_and_reports_the_same(project: Path, cold: Run) -> None:
    warm = kgate("check", "-v", cwd=project)
    assert f"0 compiled, {len(_files(project))} from cache" in warm.stdout
    again = kgate("check", "--format", "json", cwd=project)
    assert again.stdout == cold.stdout


def test_editing_a_header_recompiles_only_the_files_that_include_it(project: Path, cold: Run) -> None:
    header = project / "pdl_launch.cuh"
    original = header.read_text()
    try:
        header.write_text(original + "\n// edited\n")
        run = kgate("check", "-v", cwd=project)
        assert f"1 compiled, {len(_files(project)) - 1} from cache" in run.stdout  # pdl.cu
    finally:
        header.write_text(original)


OUTSIDE_KERNEL = """\
#include "ext/work.cuh"
#include <scale.cuh>
__global__ void accumulate(float* x, int n) {
  int i = threadIdx.x;
  float acc = 0;
#pragma unroll
  for (int k = 0; k < WORK * SCALE; ++k) acc += x[i + k * n] * x[i + 2 * k * n];
  x[i] = acc;
}
"""


def test_a_header_outside_the_project_is_in_the_key_of_the_files_that_read_it(tmp_path: Path) -> None:
    """Headers reached through a symlinked folder that leads out of the project, or under an include folder the
    flags name outside it: the compiler's own list of what it read is kept beside the record, so editing one
    compiles again and the figures follow the header (as a run without a cache gives them)."""
    outside, project = tmp_path / "shared", tmp_path / "project"
    (outside / "inc").mkdir(parents=True)
    (outside / "sys").mkdir()
    project.mkdir()
    (outside / "inc" / "work.cuh").write_text("#define WORK 1\n")
    (outside / "sys" / "scale.cuh").write_text("#define SCALE 1\n")
    (project / "ext").symlink_to(outside / "inc")
    (project / "acc.cu").write_text(OUTSIDE_KERNEL)
    include = outside / "sys"
    (project / "kgate.toml").write_text(f'python-path = ["."]\n[[cuda]]\nsources = ["acc.cu"]\n'
                                        f'flags = ["-I{include}"]\n')

    def check() -> tuple[str, dict]:
        verbose = kgate("check", "-v", cwd=project)
        assert verbose.code == 0, verbose.stdout + verbose.stderr
        compiled = re.search(r"(\d+) compiled", verbose.stdout)
        assert compiled is not None, verbose.stdout
        return compiled.group(1), kgate("check", "--format", "json", cwd=project).json()["kernels"]

    def fresh() -> dict:
        return kgate("check", "--format", "json", "--no-cache", cwd=project).json()["kernels"]

    first = check()
    assert first[0] == "1" and check() == ("0", first[1])  # warm: from the cache
    (outside / "inc" / "work.cuh").write_text("#define WORK 32\n")
    edited = check()
    assert edited == ("1", fresh()) and edited[1][0]["registers"] != first[1][0]["registers"]
    (outside / "sys" / "scale.cuh").write_text("#define SCALE 4\n")
    again = check()
    assert again == ("1", fresh()) and again[1] != edited[1]


def test_kernel_filter_applies_to_cuda_names(project: Path, cold: Run) -> None:
    run = kgate("check", "--format", "json", "--kernel", "wait_*", "--kernel", "ops::*<__half*", cwd=project)
    assert set(_kernels(run)) == {"wait_first", "wait_under_branch", "ops::rmsnorm_kernel<__half, 128>"}


def test_terminal_table_lists_cuda_kernels(project: Path, cold: Run) -> None:
    out = kgate("check", "--show-kernels", cwd=project)
    assert re.search(r"^ops::rmsnorm_kernel<__half, 128>\s+templates\.cu\s+sm_120a\s", out.stdout, re.MULTILINE)
    variants = len(cold.json()["kernels"])
    assert out.stdout.rstrip().splitlines()[-1].startswith(f"kgate check: FAILED: {variants} kernel variant(s)")


def test_a_missing_configured_nvcc_is_one_line_and_exit_2(tmp_path: Path) -> None:
    project = copy_project("cuda", tmp_path)
    (project / "kgate.toml").write_text('nvcc = "no/such/nvcc"\n' + (project / "kgate.toml").read_text())
    run = kgate("check", cwd=project)
    assert run.code == 2
    assert run.stderr.strip().splitlines() == [
        "kgate: error: nvcc = 'no/such/nvcc' in the configuration: no such executable"]


def test_sources_that_match_nothing_are_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "kgate.toml").write_text('[[cuda]]\nsources = ["csrc/**/*.cu"]\n')
    run = kgate("check", cwd=tmp_path)
    assert run.code == 2
    assert "no file matches 'csrc/**/*.cu'" in run.stderr and "Traceback" not in run.stderr


def test_nvrtc_compiles_device_only_sources_and_refuses_host_code(tmp_path: Path) -> None:
    project = copy_project("cuda_nvrtc", tmp_path)
    run = kgate("check", "--format", "json", cwd=project)
    found = {(f["path"], f["line"], f["code"], f["target"]) for f in run.json()["findings"]}
    assert found == expectations(project, SUFFIXES)
    host = next(f for f in run.json()["findings"] if f["code"] == "KG001")
    assert "host code needs nvcc" in host["message"]
    assert set(_kernels(run)) == {"consumer_reads_first<__half>", "consumer_waits<__half>"}


def test_ptx_target_and_the_other_compiled_rules_are_planted_in_cuda_sources(project: Path) -> None:
    planted = {code for _path, _line, code, _target in expectations(project, SUFFIXES)}
    assert {"KG001", "KG101", "KG103", "KG106", "KG107"} <= planted


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_a_cuda_file_whose_name_is_not_utf8_is_gated_in_every_format(tmp_path: Path) -> None:
    import json
    import xml.etree.ElementTree as ET

    with open(bytes(tmp_path / "x") + b"\xff.cu", "w") as handle:  # os.fsdecode: "x\udcff.cu"
        handle.write("__global__ void inc(float* x) { x[threadIdx.x] += 1.0f; }\n")
    (tmp_path / "kgate.toml").write_text('[[cuda]]\nsources = ["*.cu"]\n')
    runs = {fmt: kgate("check", "--format", fmt, cwd=tmp_path) for fmt in ("json", "sarif", "junit")}
    for fmt, run in runs.items():
        assert run.code == 0 and "Traceback" not in run.stderr, (fmt, run.stderr)
    assert [k["kernel"] for k in runs["json"].json()["kernels"]] == ["inc"]
    json.loads(runs["sarif"].stdout)
    assert ET.fromstring(runs["junit"].stdout).get("tests") == "1"
    # Bytes: the summary line shows the name as it is on a terminal.
    audit = subprocess.run([sys.executable, "-m", "kgate", "audit"], cwd=tmp_path, capture_output=True, check=False)
    assert audit.returncode == 0 and b"Traceback" not in audit.stderr, audit.stderr
    assert "x\\xff.cu" in (tmp_path / "kgate-audit" / "report.html").read_text()


PDL_LATER = """\
#include <cuda_runtime.h>

__global__ void never_waits(const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = x[i] * 2.0f;
}

__global__ void stores_then_waits(const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 0.0f;
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (i < n) out[i] = x[i];
}
"""

PDL_LAUNCH = """\
#include <cuda_runtime.h>

__global__ void stores_then_waits(const float* x, float* out, int n);

void launch(const float* x, float* out, int n, cudaStream_t stream) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3((n + 255) / 256);
  config.blockDim = dim3(256);
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  cudaLaunchKernelEx(&config, stores_then_waits, x, out, n);
}
"""


def test_a_kernel_made_pdl_after_its_facts_were_cached_is_traced(tmp_path: Path) -> None:
    """Only kernels that may be PDL (a `pdl` glob, a PDL launch site) have their accesses before a wait traced, the
    costliest reading of the PTX: a kernel the configuration, then a launch site, makes PDL in a warm cache is
    read again from the cached PTX and reported as a run without a cache reports it."""
    (tmp_path / "k.cu").write_text(PDL_LATER)
    toml = 'targets = ["sm_120a"]\n[[cuda]]\nsources = ["*.cu"]\n'
    (tmp_path / "kgate.toml").write_text(toml)

    def findings(*extra: str) -> list[dict]:
        run = kgate("check", "--format", "json", *extra, cwd=tmp_path)
        assert run.code in (0, 1), run.stdout + run.stderr
        assert run.stdout, run.stderr
        return [f for f in run.json()["findings"] if f["code"] == "KG107"]

    assert findings() == []  # cached: nothing is PDL
    (tmp_path / "kgate.toml").write_text(toml + 'pdl = ["never_waits"]\n')
    by_config = findings()
    assert [(f["kernel"], f["severity"]) for f in by_config] == [("never_waits", "error")]
    assert "no griddepcontrol.wait" in by_config[0]["message"] and "`x`" in by_config[0]["message"], by_config
    assert by_config == findings("--no-cache")
    # Another file launches a kernel of k.cu with PDL: k.cu, unchanged, is not compiled again.
    (tmp_path / "host.cu").write_text(PDL_LAUNCH)
    (tmp_path / "kgate.toml").write_text(toml)
    by_launch = findings()
    assert [f["kernel"] for f in by_launch] == ["stores_then_waits"], by_launch
    assert "writes global memory before griddepcontrol.wait" in by_launch[0]["message"], by_launch
    assert by_launch == findings("--no-cache")
