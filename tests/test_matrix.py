"""The Triton version matrix (`kgate check --triton VERSION`).

The comparison and its report are pure functions of `kgate check --format json` rows and are tested here
on rows; the whole command (an environment made from the package index, the kernels compiled under another
Triton) runs with KGATE_TEST_MATRIX=1, since it downloads a Triton release (about 600 MB installed).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import copy_project, kgate

from kgate.compile.environments import MARKER, _verified, parse_versions
from kgate.core.errors import ToolchainError
from kgate.report import matrix


def row(kernel: str, regs: int, block_scaled: bool = False, variant: str = "BLOCK=64,warps=4,stages=3,bf16#00000000",
        target: str = "sm_120a", language: str = "triton") -> dict:
    op = "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale" if block_scaled else \
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
    return {"kernel": kernel, "variant": variant, "target": target, "language": language, "registers": regs,
            "spill_bytes": 0, "smem_bytes": 1024, "instructions": {op: 4}}


def test_a_lost_block_scaled_mma_heads_the_report() -> None:
    here = [row("k:mxfp8", 158, True), row("k:same", 40), row("k:more", 40), row("cuda_kernel", 30, language="cuda")]
    older = matrix.Release("3.5.1", {(r["kernel"], r["variant"], r["target"]): r for r in (
        row("k:mxfp8", 177, False), row("k:same", 40), row("k:more", 44), row("k:only_old", 10))}, failing=2,
        seconds=12.5)
    table = matrix.matrix("3.9.0", here, 0, [older])
    lines = matrix.render(table)
    assert lines[0].startswith("Triton matrix: 3.9.0 | 3.5.1")
    body = [line for line in lines[3:] if line.startswith("k:")]
    assert body[0].split()[0] == "k:mxfp8" and "block-scaled | plain" in body[0] and "158 | 177" in body[0]
    assert {line.split()[0] for line in body} == {"k:mxfp8", "k:more", "k:only_old"}  # k:same is not shown
    assert "- | 10" in next(line for line in body if line.startswith("k:only_old"))
    assert lines[-1] == ("Triton 3.5.1: 4 variant(s) compiled in 12.5 s; 3 differ from 3.9.0; block-scaled MMA lost "
                         "in 1, gained in 0; 2 failing finding(s)")
    data = matrix.to_json(table)
    assert data["versions"] == ["3.9.0", "3.5.1"] and data["failing"] == {"3.9.0": 0, "3.5.1": 2}
    lost = next(c for c in data["changed"] if c["kernel"] == "k:mxfp8")
    assert lost["by_version"]["3.5.1"]["mma"] == "plain" and lost["by_version"]["3.9.0"]["mma"] == "block-scaled"
    json.dumps(data)


def test_release_numbers_are_checked() -> None:
    assert parse_versions("3.5.1, 3.6.0,3.5.1") == ["3.5.1", "3.6.0"]
    for bad in ("", "latest", "3.x", "3.6.0;rm"):
        with pytest.raises(ToolchainError):
            parse_versions(bad)


def test_an_environment_is_used_only_when_its_record_matches_its_files(tmp_path: Path) -> None:
    folder = tmp_path / "triton-3.6.0-py3"
    site = folder / "lib" / "python3.x" / "site-packages"
    (site / "triton" / "_C").mkdir(parents=True)
    (site / "triton-3.6.0.dist-info").mkdir()
    (site / "triton" / "_C" / "libtriton.so").write_bytes(b"x" * 10)
    (folder / "bin").mkdir()
    (folder / "bin" / "python").write_text("")
    assert not _verified(folder, "3.6.0")  # no record: half made, or made by something else
    from kgate.compile.environments import _identity

    (folder / MARKER).write_text(json.dumps(_identity(folder, "3.6.0"), sort_keys=True))
    assert _verified(folder, "3.6.0")
    assert not _verified(folder, "3.7.1")
    (site / "triton" / "_C" / "libtriton.so").write_bytes(b"x" * 11)  # not the files it was made with
    assert not _verified(folder, "3.6.0")


@pytest.mark.skipif(os.environ.get("KGATE_TEST_MATRIX") != "1",
                    reason="downloads Triton 3.5.1 into an environment of its own; set KGATE_TEST_MATRIX=1")
def test_the_matrix_shows_block_scaled_mma_lost_under_triton_3_5(tmp_path: Path) -> None:
    project = copy_project("compiled", tmp_path)
    env = {"KGATE_TOOLCHAINS": os.environ.get("KGATE_TEST_TOOLCHAINS", str(tmp_path / "toolchains"))}
    run = kgate("check", "--triton", "3.5.1", "--kernel", "block_scale:mxfp8_tile", "--target", "sm_120a",
                "--format", "json", cwd=project, env=env, timeout=3600)
    assert run.code == 1, run.stderr
    data = run.json()
    lost = [c for c in data["matrix"]["changed"] if c["kernel"] == "block_scale:mxfp8_tile"]
    assert lost and all(c["by_version"]["3.5.1"]["mma"] == "plain" for c in lost)
    assert any(d["kind"] == "TOOLCHAIN" and d["subject"] == "triton 3.5.1" and d["fails"] for d in data["ratchet"])
