"""`kgate diff` where a CUDA table's own flags name the working tree by absolute path (`-I/work/repo/inc`, `-I
/work/repo/inc`, `--include-path=...`, `-isystem ...`, `-include .../h.cuh`): the base's side compiled the working
tree's header, and an edited header was proved "SASS identical". Each side compiles its own headers, as a
compile_commands.json that names the working tree by absolute path already did."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_diff_sides import _diff, _repo

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
HEADER = "__device__ __forceinline__ float scaled(float x) { return x * 2.0f; }\n"
EDITED = "__device__ __forceinline__ float scaled(float x) { return x * 3.0f + 1.0f; }\n"
KERNEL = '#include "h.cuh"\n__global__ void scale(float* x) { x[threadIdx.x] = scaled(x[threadIdx.x]); }\n'


def _config(flags: list[str]) -> str:
    return f'targets = ["sm_120a"]\n\n[[cuda]]\nsources = ["k.cu"]\nflags = {json.dumps(flags)}\n'


@needs_nvcc
@pytest.mark.parametrize("spelling", ["-I@", "-I @", "--include-path=@", "-isystem @", "-include @/h.cuh"])
def test_absolute_flags_of_a_cuda_table_name_each_sides_own_header(tmp_path: Path, spelling: str) -> None:
    repo = tmp_path / "repo"
    flags = [part.replace("@", str(repo / "inc")) for part in spelling.split(" ")]
    kernel = KERNEL.replace('#include "h.cuh"\n', "") if spelling.startswith("-include") else KERNEL
    if spelling.startswith("-isystem"):
        kernel = kernel.replace('"h.cuh"', "<h.cuh>")
    _repo(repo, {"k.cu": kernel, "inc/h.cuh": HEADER}, _config(flags))
    (repo / "inc" / "h.cuh").write_text(EDITED)
    run = _diff(repo, "HEAD", "--require-identical", "--format", "json")
    assert run.code == 1, run.stdout + run.stderr
    assert [v["status"] for v in run.json()["variants"]] == ["changed"], run.stdout


@needs_nvcc
def test_a_source_including_the_working_trees_header_by_absolute_path_is_not_proved_identical(tmp_path: Path) -> None:
    """`#include "/work/repo/inc/h.cuh"`: the base's checkout compiles the working tree's edited header, not its own
    copy. No compile can stand for the base's, so its variant fails naming why, and the refactor gate fails."""
    repo = tmp_path / "repo"
    _repo(repo, {"k.cu": KERNEL.replace('"h.cuh"', f'"{repo / "inc" / "h.cuh"}"'), "inc/h.cuh": HEADER},
          _config([]))
    (repo / "inc" / "h.cuh").write_text(EDITED)
    run = _diff(repo, "HEAD", "--require-identical")
    assert run.code == 1, run.stdout
    assert "a file of the working tree named by absolute path" in run.stdout and "SASS identical" not in run.stdout


@needs_nvcc
def test_a_header_the_base_revision_does_not_hold_is_the_working_trees_for_both_sides(tmp_path: Path) -> None:
    """Good twin: a generated header in an ignored folder, included by absolute path; the base has no copy of its
    own, so both sides compile the one there is, and the unchanged kernel is identical."""
    repo = tmp_path / "repo"
    generated = repo / "build" / "gen.cuh"
    _repo(repo, {"k.cu": KERNEL.replace('"h.cuh"', f'"{generated}"')}, _config([]))
    generated.parent.mkdir()
    generated.write_text(HEADER)
    run = _diff(repo, "HEAD", "--require-identical")
    assert run.code == 0 and "SASS identical" in run.stdout, run.stdout + run.stderr


@pytest.mark.parametrize("edited", [True, False])
def test_a_kernel_module_reading_the_working_trees_file_by_absolute_path(tmp_path: Path, edited: bool) -> None:
    """A module that reads `open("/work/repo/tune.txt")` at import read the working tree's file on the base's side
    too, and a changed tile was proved identical. The base's import of a working-tree file whose checkout copy
    differs is not the base's: its kernel fails on that side, saying why. With the same bytes in both, the read is
    the base's own copy, and the unchanged kernel is identical."""
    from test_import_keys import HELPERS, _module

    repo = tmp_path / "repo"
    module = HELPERS + _module(f'int(open({str(repo / "tune.txt")!r}).read())')
    _repo(repo, {"ops.py": module, "tune.txt": "256"})
    if edited:
        (repo / "tune.txt").write_text("8192")
    run = _diff(repo, "HEAD", "--require-identical")
    if edited:
        assert run.code == 1 and "a file of the working tree named by absolute path" in run.stdout, run.stdout
    else:
        assert run.code == 0 and "SASS identical" in run.stdout, run.stdout + run.stderr
