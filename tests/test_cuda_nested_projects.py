"""CUDA files of a project nested in the checked one (a folder with its own `kgate.toml` or `[tool.kgate]`) are that
project's: its flags, targets and baseline. A glob of the outer project leaves them to it and the check says so; a
file the outer table names literally is still compiled with the outer table's settings."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import kgate

from kgate.collect.cuda_sources import cuda_sources, nested_projects
from kgate.core.config import load_config
from kgate.core.errors import ConfigError

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")

# The nested project's kernel compiles only with the size its own configuration defines.
NESTED = """\
#ifndef TILE
#error TILE must be set by the build
#endif
__global__ void staged(float* x) {
    __shared__ float t[TILE];
    t[threadIdx.x % TILE] = x[threadIdx.x];
    __syncthreads();
    x[threadIdx.x] = t[(threadIdx.x + 1) % TILE];
}
"""


def _tree(root: Path, sources: str, nested_config: str = "kgate.toml") -> Path:
    (root / "sub" / "k").mkdir(parents=True)
    (root / "kgate.toml").write_text(f'targets = ["sm_120a"]\n[[cuda]]\nsources = [{sources}]\n')
    (root / "top.cu").write_text("__global__ void top(float* x) { x[threadIdx.x] *= 2; }\n")
    (root / "sub" / "k" / "a.cu").write_text(NESTED)
    inner = 'targets = ["sm_120a"]\n[[cuda]]\nsources = ["k/*.cu"]\nflags = ["-DTILE=64"]\n'
    if nested_config == "pyproject.toml":
        inner = "[project]\nname = 'sub'\n[tool.kgate]\n" + inner.replace("[[cuda]]", "[[tool.kgate.cuda]]")
    (root / "sub" / nested_config).write_text(inner)
    return root


@pytest.mark.parametrize("nested_config", ["kgate.toml", "pyproject.toml"])
def test_a_glob_leaves_the_files_of_a_nested_project_to_it(tmp_path: Path, nested_config: str) -> None:
    root = _tree(tmp_path, '"**/*.cu"', nested_config)
    config = load_config(root / "kgate.toml")
    assert [s.rel for s in cuda_sources(config)] == ["top.cu"]
    assert nested_projects(config) == ["sub"]


def test_a_pyproject_without_a_kgate_table_makes_no_project(tmp_path: Path) -> None:
    root = _tree(tmp_path, '"**/*.cu"')
    (root / "sub" / "kgate.toml").unlink()
    (root / "sub" / "pyproject.toml").write_text("[project]\nname = 'sub'\n")
    config = load_config(root / "kgate.toml")
    assert [s.rel for s in cuda_sources(config)] == ["sub/k/a.cu", "top.cu"] and nested_projects(config) == []


def test_a_glob_that_matches_only_a_nested_project_names_it(tmp_path: Path) -> None:
    root = _tree(tmp_path, '"sub/**/*.cu"')
    with pytest.raises(ConfigError, match=r"matches files only in sub/, which is a project with a configuration"):
        cuda_sources(load_config(root / "kgate.toml"))


def test_a_file_named_literally_is_the_tables_own(tmp_path: Path) -> None:
    root = _tree(tmp_path, '"top.cu", "sub/k/a.cu"')
    config = load_config(root / "kgate.toml")
    assert [s.rel for s in cuda_sources(config)] == ["sub/k/a.cu", "top.cu"] and nested_projects(config) == []


@needs_nvcc
def test_the_check_says_what_it_left_to_a_nested_project_even_from_a_warm_run(tmp_path: Path) -> None:
    root = _tree(tmp_path, '"**/*.cu"')
    moved = (root / "sub" / "kgate.toml").read_text()
    (root / "sub" / "kgate.toml").unlink()
    before = kgate("check", cwd=root)  # no nested project yet: its file is the outer one's, without its size
    assert before.code == 1 and "TILE must be set" in before.stdout, before.stdout + before.stderr
    (root / "sub" / "kgate.toml").write_text(moved)
    after = kgate("check", cwd=root)
    assert after.code == 0, after.stdout + after.stderr
    assert "CUDA files in sub/ are not compiled here" in after.stdout + after.stderr
    inner = kgate("check", cwd=root / "sub")
    assert inner.code == 0, inner.stdout + inner.stderr
