"""The version matrix (`kgate check --triton VERSION`, `--cute-dsl VERSION`).

The comparison and its report are pure functions of `kgate check --format json` rows and are tested here
on rows; the whole command (an environment made from the package index, the kernels compiled under another
release) runs with KGATE_TEST_MATRIX=1, since it downloads a Triton release (about 600 MB installed) or CuTe DSL
releases (about 400 MB each).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from conftest import copy_project, kgate

from kgate.compile.environments import CUTE_DSL, MARKER, TRITON, _identity, _verified, parse_versions
from kgate.core.cute_dsl import decorator_kind
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
    with pytest.raises(ToolchainError, match="--cute-dsl 4.x: '4.x' is not a CuTe DSL release number such as 4.7.0"):
        parse_versions("4.x", CUTE_DSL)


def test_a_cute_dsl_matrix_compares_the_cute_dsl_rows_under_its_name() -> None:
    here = [row("k:scale", 10, language="cute"), row("k:wide", 80, language="cute"), row("t:tri", 40)]
    older = matrix.Release("4.8.0", {(r["kernel"], r["variant"], r["target"]): r for r in (
        row("k:scale", 10, language="cute"), row("k:wide", 88, language="cute"))}, failing=0, seconds=3.0)
    table = matrix.matrix("4.8.1", here, 0, [older], label="CuTe DSL", language="cute")
    lines = matrix.render(table)
    assert lines[0].startswith("CuTe DSL matrix: 4.8.1 | 4.8.0")
    assert [line.split()[0] for line in lines[3:] if line.startswith(("k:", "t:"))] == ["k:wide"]  # no Triton row
    assert lines[-1].startswith("CuTe DSL 4.8.0: 2 variant(s) compiled in 3.0 s; 1 differ from 4.8.1")
    assert matrix.to_json(table)["compiler"] == "CuTe DSL"


def test_a_release_that_cannot_import_a_kernel_fails() -> None:
    """A compile error before any target (a kernel the release cannot import or describe: the CuTe DSL 4.7's jit
    functions, before kgate knew their wrapper) is a failing finding of that release: the release whose every kernel
    failed so passed the matrix with "0 failing finding(s)"."""
    findings = [{"severity": "error", "kernel": "pkg.ops:scale", "target": None, "name": "compile-error",
                 "message": "pkg.ops:scale is not a @cute.jit function"},
                {"severity": "error", "kernel": None, "target": None, "name": "source-ban", "message": "a source rule"}]
    assert matrix.failing_of(findings) == 1
    assert matrix.compile_errors_of(findings * 2) == ("pkg.ops:scale is not a @cute.jit function",)
    older = matrix.Release("4.7.0", {}, matrix.failing_of(findings), 1.0, matrix.compile_errors_of(findings))
    lines = matrix.render(matrix.matrix("4.8.1", [], 0, [older], label="CuTe DSL", language="cute"))
    assert lines[-1] == "CuTe DSL 4.7.0: a compile failed: pkg.ops:scale is not a @cute.jit function"


def _wrapped(executor_name: str) -> object:
    """A function as nvidia-cutlass-dsl 4.7 decorates it (`BaseDSL.jit_runner`): the DSL class kept on a wrapper that
    calls the DSL's executor by name, and no `_decorator_kind`."""
    import functools

    def decorate(func):
        func._dsl_cls = object

        @functools.wraps(func)
        def jit_wrapper(*args, **kwargs):
            return getattr(func._dsl_cls, executor_name)(func, *args, **kwargs)

        return jit_wrapper

    def body(x):
        return x

    return decorate(body)


def test_a_function_an_earlier_cute_dsl_decorated_is_known_by_its_wrapper() -> None:
    """nvidia-cutlass-dsl 4.8 marks what its decorators made (`_decorator_kind`); 4.7 does not, and every kernel of a
    project compiled under 4.7 was "not a @cute.jit function"."""
    assert decorator_kind(_wrapped("_func")) == "jit"
    assert decorator_kind(_wrapped("_kernel_helper")) == "kernel"
    assert decorator_kind(print) is None and decorator_kind(lambda: None) is None


def test_a_cute_dsl_environment_is_used_only_when_its_record_matches_its_files(tmp_path: Path) -> None:
    folder = tmp_path / "nvidia-cutlass-dsl-4.7.0-py3"
    site = folder / "lib" / "python3.x" / "site-packages"
    libs = site / "nvidia_cutlass_dsl" / "dsl_packages" / "cutlass" / "_mlir" / "_mlir_libs"
    libs.mkdir(parents=True)
    (site / "nvidia_cutlass_dsl-4.7.0.dist-info").mkdir()
    (libs / "_cutlass_ir.so").write_bytes(b"x" * 10)
    (folder / "bin").mkdir()
    (folder / "bin" / "python").write_text("")
    (folder / MARKER).write_text(json.dumps(_identity(folder, "4.7.0", CUTE_DSL), sort_keys=True))
    assert _verified(folder, "4.7.0", CUTE_DSL)
    assert not _verified(folder, "4.7.0", TRITON)  # no Triton there
    (libs / "_cutlass_ir.so").write_bytes(b"x" * 11)
    assert not _verified(folder, "4.7.0", CUTE_DSL)


def test_one_release_matrix_a_run(tmp_path: Path) -> None:
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\n', encoding="utf-8")
    run = kgate("check", "--triton", "3.6.0", "--cute-dsl", "4.8.0", cwd=tmp_path)
    assert run.code == 2 and "--triton and --cute-dsl: one release matrix a run" in run.stderr, run.stderr


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


@pytest.mark.skipif(os.environ.get("KGATE_TEST_MATRIX") != "1",
                    reason="downloads nvidia-cutlass-dsl 4.8.0 and 4.7.0 into environments of their own; set "
                           "KGATE_TEST_MATRIX=1")
def test_the_cute_dsl_matrix_compiles_every_call_under_another_release(tmp_path: Path) -> None:
    """Under 4.8.0 every captured call compiles, to the figures of the DSL here (a kernel whose SASS is read
    included: that environment has no Triton, and so no cuobjdump of its own); under 4.7.0, which writes no ptxas
    report, each call's PTX is assembled again by Triton's ptxas and checked against the DSL's cubin: the same
    figures too, and the planted spill fails under both."""
    pytest.importorskip("cutlass.cute", reason="the CuTe DSL is not installed")
    project = copy_project("cute/verify", tmp_path)
    captured = kgate("capture", "--device", "cpu", "--target", "sm_90a", "--", sys.executable, "compile_ops.py",
                     cwd=project, process=True)
    assert captured.code == 0, captured.stderr
    env = {"KGATE_TOOLCHAINS": os.environ.get("KGATE_TEST_TOOLCHAINS", str(tmp_path / "toolchains"))}
    run = kgate("check", "--cute-dsl", "4.8.0,4.7.0", "--target", "sm_90a", cwd=project, env=env, timeout=3600)
    assert run.code == 1, run.stderr
    assert "CuTe DSL 4.8.0: 6 variant(s) compiled" in run.stdout and " 0 differ from " in run.stdout, run.stdout
    assert "CuTe DSL 4.7.0: 6 variant(s) compiled" in run.stdout, run.stdout
    line = next(line for line in run.stdout.splitlines() if line.startswith("CuTe DSL 4.7.0:"))
    assert " 0 differ from " in line and "a compile failed" not in run.stdout, run.stdout
    assert "TOOLCHAIN nvidia-cutlass-dsl 4.7.0: 1 failing finding(s)" in run.stdout, run.stdout


def _release_environment_of_this_triton(toolchains: Path) -> str:
    """An environment as `kgate check --triton` makes one (a virtual environment with the release alone and its
    record), holding this environment's Triton, linked rather than downloaded."""
    import importlib.metadata
    import subprocess
    import sysconfig

    import triton

    from kgate.compile.environments import _name

    version = importlib.metadata.version("triton")
    folder = toolchains / _name(TRITON, version)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    site = folder / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    here = Path(sysconfig.get_paths()["purelib"])
    (site / "triton").symlink_to(Path(triton.__file__).resolve().parent)
    (site / f"triton-{version}.dist-info").symlink_to(here / f"triton-{version}.dist-info")
    (folder / MARKER).write_text(json.dumps(_identity(folder, version), sort_keys=True))
    return version


def test_a_release_compiles_kernel_modules_that_import_the_projects_packages(tmp_path: Path) -> None:
    """A release's environment holds the release alone, while kernel modules import torch and other packages of the
    project's environment: those are imported from the project's environment, Triton from the release's. The matrix
    failed every such module with "No module named 'torch'"."""
    import importlib.util

    version = _release_environment_of_this_triton(tmp_path / "toolchains")
    project = tmp_path / "proj"
    project.mkdir()
    torch = "import torch\n" if importlib.util.find_spec("torch") is not None else ""  # where this environment has it
    (project / "kern.py").write_text(
        f"import pathspec\n{torch}import triton\nimport triton.language as tl\n\n\n"
        "@triton.jit\ndef add(x_ptr, n, BLOCK: tl.constexpr):\n"
        "    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
        "    tl.store(x_ptr + o, tl.load(x_ptr + o, mask=o < n) + 1, mask=o < n)\n", encoding="utf-8")
    (project / "kgate.toml").write_text(
        'targets = ["sm_120a"]\npython-path = ["."]\n\n[[triton]]\nkernel = "kern:add"\n'
        'signature = {x_ptr = "*fp32", n = "i32"}\nconstexprs = {BLOCK = 256}\n', encoding="utf-8")
    run = kgate("check", "--triton", version, cwd=project, env={"KGATE_TOOLCHAINS": str(tmp_path / "toolchains")},
                timeout=900)
    assert run.code == 0, run.stdout + run.stderr
    assert f"Triton {version}: 1 variant(s) compiled" in run.stdout and "0 failing finding(s)" in run.stdout, \
        run.stdout
