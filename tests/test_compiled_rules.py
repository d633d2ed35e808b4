"""`kgate check` on real kernels compiled for sm_120a and sm_90a on this CPU-only machine.

fixtures/compiled/ is a project of GEMM, reduction, PDL and block-scaled kernels that the report, audit
and cache tests share; its `def` lines state the findings this toolchain gives them (`# expect: CODE@target`).
Each rule's own cases are in fixtures/rules/<CODE>/ (tests/test_rules.py); here one real compile shows the
same verdicts from today's compiler, and pins the cache and the terminal report.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from conftest import REPO, Run, copy_compiled, expectations, kgate, ptxas_calls

from kgate.collect.registry import triton_entries
from kgate.core.config import load_config
from kgate.facts.ptxas_log import parse_ptxas_log


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, compiled_cold: tuple[Path, Run]) -> Path:
    """This file's copy of the project, compiled: its cache holds every variant the cold run compiled."""
    return copy_compiled(compiled_cold, tmp_path_factory.mktemp("compiled"))


@pytest.fixture(scope="module")
def cold(compiled_cold: tuple[Path, Run]) -> Run:
    """The one cold `kgate check --format json` of the project (the copy it ran in is the one `project` copies)."""
    return compiled_cold[1]


def test_todays_compiler_gives_the_planted_findings(project: Path, cold: Run) -> None:
    """The recorded facts of fixtures/rules/ age with the toolchain; this compile does not. Only the codes
    planted here are compared, so a new rule is judged on its own folder and not by this project."""
    assert cold.code == 1, cold.stderr
    planted = expectations(project) | expectations(project, optional=True)
    codes = {code for _path, _line, code, _target in planted}
    found = {(f["path"], f["line"], f["code"], f["target"]) for f in cold.json()["findings"] if f["code"] in codes}
    # Every expected finding, and nothing else but those a compiler version may decide either way.
    assert expectations(project) <= found <= planted


def test_block_scaled_mma_on_sm_120a_and_a_note_on_sm_90a(cold: Run) -> None:
    data = cold.json()
    kernels = {(k["kernel"], k["target"]): k for k in data["kernels"]}
    native = kernels[("block_scale:mxfp8_tile", "sm_120a")]["instructions"]
    assert any("kind::mxf8f6f4.block_scale" in op for op in native)
    notes = [f for f in data["findings"] if f["kernel"] == "block_scale:mxfp8_tile"]
    assert [(f["target"], f["severity"]) for f in notes] == [("sm_90a", "note")]
    fallback = next(f for f in data["findings"] if f["kernel"] == "block_scale:mixed_tile" and f["target"] == "sm_120a")
    assert fallback["severity"] == "error"
    assert "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in fallback["message"]
    assert "HMMA" in fallback["message"]


def test_smem_over_99kb_fails_sm_120a_and_fits_sm_90a(cold: Run) -> None:
    kernels = {(k["kernel"], k["target"]): k for k in cold.json()["kernels"]}
    big = "gemm_resources:gemm_deep_pipeline"
    assert kernels[(big, "sm_120a")]["smem_bytes"] > 101376
    assert 101376 < kernels[(big, "sm_90a")]["smem_bytes"] <= 232448
    message = next(f["message"] for f in cold.json()["findings"] if f["kernel"] == big)
    assert "101376" in message and "fit" in message


def test_spill_past_the_cliff_is_an_error(cold: Run) -> None:
    spill = next(f for f in cold.json()["findings"]
                 if f["kernel"] == "gemm_resources:gemm_spills" and f["target"] == "sm_120a")
    assert spill["code"] == "KG103" and spill["severity"] == "error" and "cliff" in spill["message"]


def test_json_has_the_documented_fields(cold: Run) -> None:
    data = cold.json()
    for f in data["findings"]:
        assert {"code", "name", "severity", "path", "line", "kernel", "variant", "target", "message"} <= set(f)
    for k in data["kernels"]:
        assert {"kernel", "variant", "target", "registers", "spill_bytes", "stack_bytes", "smem_bytes",
                "instructions"} <= set(k)
    config = load_config(REPO / "fixtures" / "compiled" / "kgate.toml")
    registered = {(e.kernel, target) for e in triton_entries(config) for target in config.targets}
    assert {(k["kernel"], k["target"]) for k in data["kernels"]} == registered


def variants(cold: Run, prefix: str = "") -> int:
    """How many kernel variants of the cold run have a name starting with `prefix`: what a cache line counts."""
    return len([k for k in cold.json()["kernels"] if k["kernel"].startswith(prefix)])


def test_registers_and_spills_equal_an_independent_ptxas_run(compiled_cold: tuple[Path, Run],
                                                             tmp_path: Path) -> None:
    """ptxas -v run by the test on every PTX kgate compiled, with the options this Triton release itself gave
    ptxas for it (recorded as the cold compile ran them: tests/ptxas_calls), says what kgate reported."""
    records = {(k["kernel"].split(":")[1], k["target"]): k for k in compiled_cold[1].json()["kernels"]}
    compared = 0
    for call in ptxas_calls(compiled_cold):
        if call["ptx"] is None:
            continue  # `ptxas --version`
        ptx = Path(call["ptx"])
        target = re.search(r"^\.target\s+(\w+)", ptx.read_text(), re.MULTILINE).group(1)  # type: ignore[union-attr]
        command = [str(ptx) if part.endswith(".ptx") else part for part in call["command"]]
        if "-o" in command:
            command[command.index("-o") + 1] = str(tmp_path / "out.cubin")
        proc = subprocess.run(command, capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stderr
        for name, res in parse_ptxas_log(proc.stdout + proc.stderr).items():
            record = records[(name, target)]
            assert (record["registers"], record["spill_bytes"], record["spill_loads"]) == \
                (res.registers, res.spill_stores, res.spill_loads), name
            compared += 1
    assert compared == len(records)


def test_a_warm_run_compiles_nothing_and_reports_the_same(project: Path, cold: Run) -> None:
    warm = kgate("check", "-v", cwd=project)
    assert warm.code == 1
    assert f"0 compiled, {variants(cold)} from cache" in warm.stdout
    again = kgate("check", "--format", "json", cwd=project)
    assert again.stdout == cold.stdout


def test_editing_one_kernel_recompiles_that_kernel_only(project: Path, cold: Run) -> None:
    pdl = project / "pdl.py"
    original = pdl.read_text()
    try:
        pdl.write_text(original.replace("    gdc_launch_dependents()\n", "    gdc_launch_dependents()\n    v = v + 1.0\n"))
        run = kgate("check", "-v", cwd=project)
        edited = variants(cold, "pdl:wait_first")  # on both targets
        assert edited == 2 and f"{edited} compiled, {variants(cold) - edited} from cache" in run.stdout
    finally:
        pdl.write_text(original)


SHARED_HELPER = """\
import triton
import triton.language as tl

import kgate

SIG = dict(x="*fp32", n="i32")


@triton.jit
def _scaled(v):
    return v * 2.0


@kgate.register(signature=SIG, constexprs={"BLOCK": 64})
@triton.jit
def first(x, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(x + i, _scaled(tl.load(x + i, mask=i < n)), mask=i < n)


@kgate.register(signature=SIG, constexprs={"BLOCK": 128})
@triton.jit
def second(x, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(x + i, _scaled(tl.load(x + i, mask=i < n)) + 1.0, mask=i < n)


@kgate.register(signature=SIG, constexprs={"BLOCK": 64})
@triton.jit
def apart(x, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(x + i, tl.load(x + i, mask=i < n) + 1.0, mask=i < n)
"""


def test_editing_a_shared_helper_recompiles_every_kernel_that_calls_it(tmp_path: Path) -> None:
    """Two kernels of a module call a helper of it, a third does not: editing the helper compiles the two again,
    on both targets, and the third comes from the cache."""
    kernels = tmp_path / "kernels.py"
    kernels.write_text(SHARED_HELPER)
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a", "sm_90a"]\npython-path = ["."]\n')
    cold = kgate("check", "-v", cwd=tmp_path)
    assert cold.code == 0 and "6 compiled, 0 from cache" in cold.stdout, cold.stdout + cold.stderr
    kernels.write_text(SHARED_HELPER.replace("return v * 2.0", "return v * 3.0"))
    edited = kgate("check", "-v", cwd=tmp_path)
    assert edited.code == 0 and "4 compiled, 2 from cache" in edited.stdout, edited.stdout + edited.stderr
    assert "0 compiled, 6 from cache" in kgate("check", "-v", cwd=tmp_path).stdout


def test_terminal_table_shows_every_variant_and_a_verdict(project: Path, cold: Run) -> None:
    out = kgate("check", "--show-kernels", cwd=project)
    assert out.code == 1
    lines = out.stdout.splitlines()
    assert lines[0].split()[:4] == ["kernel", "variant", "target", "regs"]
    assert any("mxf8f6f4.block_scale" in line and "sm_120a" in line and line.rstrip().endswith("ok")
               for line in lines)
    assert out.stdout.rstrip().splitlines()[-1].startswith(f"kgate check: FAILED: {variants(cold)} kernel variant(s)")
