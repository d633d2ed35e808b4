"""Suppression comments on compiled findings: `kgate check` applies the same engine as `kgate lint`.

A compiled finding points at the kernel's `def` line; a `# kgate: ignore[CODE] reason`
there silences it. Unused ones are reported only when the run compiled that
kernel for every configured target (and, for source rules, when it linted the project).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from conftest import kgate

KERNELS = textwrap.dedent('''\
    import triton
    import triton.language as tl

    import kgate

    SIG = {"x": "*fp32", "out": "*fp32", "n_cols": "i32"}


    @kgate.register(signature=SIG, constexprs={"BLOCK": 16384}, num_warps=4, kind="reduction")
    @triton.jit
    def rms_whole(x, out, n_cols, BLOCK: tl.constexpr):  # kgate: ignore[KG105] rows are short in practice
        cols = tl.arange(0, BLOCK)
        v = tl.load(x + tl.program_id(0) * n_cols + cols, mask=cols < n_cols, other=0.0)
        tl.store(out + cols, v / tl.sqrt(tl.sum(v * v, axis=0)), mask=cols < n_cols)


    @kgate.register(signature=SIG, constexprs={"BLOCK": 1024}, num_warps=4, kind="elementwise")
    @triton.jit
    def copy(x, out, n_cols, BLOCK: tl.constexpr):  # kgate: ignore[KG103] spills were expected
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out + offs, tl.load(x + offs, mask=offs < n_cols), mask=offs < n_cols)


    @kgate.register(signature=SIG, constexprs={"BLOCK": 1024}, num_warps=4, kind="elementwise")
    @triton.jit
    def copy2(x, out, n_cols, BLOCK: tl.constexpr):  # kgate: ignore[KG201] check runs the source rules too
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out + offs, tl.load(x + offs, mask=offs < n_cols), mask=offs < n_cols)
''')


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("suppress-check")
    (root / "kgate.toml").write_text('targets = ["sm_120a"]\npython-path = ["."]\n')
    (root / "kernels.py").write_text(KERNELS)
    return root


def test_check_applies_suppressions_and_reports_unused_ones(project: Path) -> None:
    run = kgate("check", "--format", "json", cwd=project)
    assert run.code == 0, run.stderr
    data = run.json()
    # Unused: KG103 (copy does not spill) and KG201 (copy2 is not autotuned; check runs the source rules too).
    assert [(f["code"], f["line"], f["kernel"]) for f in data["findings"]] == [("KG002", 19, None),
                                                                              ("KG002", 26, None)]
    assert "KG103" in data["findings"][0]["message"] and "KG201" in data["findings"][1]["message"]
    assert data["summary"]["suppressed"] == 1
    assert len(data["kernels"]) == 3


def test_a_partial_check_judges_no_suppression_unused(project: Path) -> None:
    run = kgate("check", "--format", "json", "--kernel", "copy", cwd=project)
    assert run.code == 0, run.stderr
    assert run.json()["findings"] == []


def test_a_suppression_without_a_reason_fails_check(project: Path) -> None:
    path = project / "kernels.py"
    path.write_text(KERNELS.replace("# kgate: ignore[KG105] rows are short in practice", "# kgate: ignore[KG105]"))
    try:
        run = kgate("check", "--format", "json", cwd=project)
    finally:
        path.write_text(KERNELS)
    assert run.code == 1
    assert sorted((f["code"], f["line"]) for f in run.json()["findings"]) == [("KG002", 19), ("KG002", 26),
                                                                               ("KG003", 11)]
    assert run.json()["summary"]["suppressed"] == 1
