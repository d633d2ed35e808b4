"""Command-line arguments given twice or out of range: what the gate does with them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import kgate

CU = "__global__ void inc(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] += 1.0f; }\n"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_a_target_named_twice_is_gated_once(tmp_path: Path) -> None:
    (tmp_path / "t.cu").write_text(CU)
    (tmp_path / "kgate.toml").write_text('[[cuda]]\nsources = ["t.cu"]\n')
    once = kgate("check", "--target", "sm_120a", "--format", "json", cwd=tmp_path)
    twice = kgate("check", "--target", "sm_120a", "--target", "sm_120a", "--format", "json", cwd=tmp_path)
    assert once.code == twice.code == 0, once.stdout + once.stderr + twice.stderr
    rows = [(k["kernel"], k["target"]) for k in twice.json()["kernels"]]
    assert rows == [(k["kernel"], k["target"]) for k in once.json()["kernels"]] == [("inc", "sm_120a")]
