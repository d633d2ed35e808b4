"""Held-out cases for a hand-edited or outgrown baseline: pins of a target the configuration no longer lists (a
project that dropped sm_90a, or a baseline written for another target). A full run never compared them and `kgate
baseline update` never removed them, so they stayed for good, silently, ready to accept a regression up to the old
numbers the day the target came back. A run of every target the project names answers for them: they are GONE, and
the update removes them. A run restricted with `--target` still says nothing about the targets it did not build."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import kgate

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
CFG = ('targets = {targets}\n\n[[cuda]]\nsources = ["*.cu"]\n\n[options.register-ceiling]\nthreshold = 1\n')
KERNEL = "__global__ void scale(float* x) { x[threadIdx.x] *= 2.0f; }\n"


def _project(root: Path, targets: str) -> None:
    (root / "kgate.toml").write_text(CFG.format(targets=targets))
    (root / "k.cu").write_text(KERNEL)


@needs_nvcc
def test_pins_of_a_target_dropped_from_the_configuration_are_gone(tmp_path: Path) -> None:
    _project(tmp_path, '["sm_120a", "sm_90a"]')
    pinned = kgate("baseline", "update", "--accept-new", "-j", "1", cwd=tmp_path)
    assert pinned.code == 0, pinned.stdout + pinned.stderr
    assert "|sm_90a" in (tmp_path / "kgate-baseline.toml").read_text()
    _project(tmp_path, '["sm_120a"]')
    run = kgate("check", "-j", "1", cwd=tmp_path)
    assert run.code == 1, run.stdout + run.stderr
    assert "GONE      scale|k.cu|sm_90a: pinned kernel variant of sm_90a, a target the project no longer builds" \
        in run.stdout
    assert "GONE      KG102|k.cu|scale|k.cu|sm_90a" in run.stdout and "sm_120a:" not in run.stdout
    update = kgate("baseline", "update", "-j", "1", cwd=tmp_path)
    assert update.code == 0 and "removed   scale|k.cu|sm_90a: sm_90a no longer built" in update.stdout, update.stdout
    assert "sm_90a" not in (tmp_path / "kgate-baseline.toml").read_text()
    assert kgate("check", "-j", "1", cwd=tmp_path).code == 0


@needs_nvcc
def test_a_run_restricted_to_a_target_says_nothing_of_the_others(tmp_path: Path) -> None:
    _project(tmp_path, '["sm_120a", "sm_90a"]')
    assert kgate("baseline", "update", "--accept-new", "-j", "1", cwd=tmp_path).code == 0
    run = kgate("check", "-j", "1", "--target", "sm_120a", cwd=tmp_path)
    assert run.code == 0 and "GONE" not in run.stdout, run.stdout + run.stderr
    update = kgate("baseline", "update", "-j", "1", "--target", "sm_120a", cwd=tmp_path)
    assert update.code == 0 and "|sm_90a" in (tmp_path / "kgate-baseline.toml").read_text(), update.stdout


PINS = ('version = 2\n\n[findings]\n\n[[toolchain]]\nversions = { "cuda.nvcc" = "13.0.88" }\n\n[toolchain.kernels]\n'
        '"scale|k.cu|sm_120a" = { %s }\n')


@pytest.mark.parametrize("fields, said", [
    ("registers = 8, spill_bytes = 0, stack_bytes = 0, smem_bytes = 0, occupancy = 1", "(it has `occupancy`)"),
    ("registers = 8, spill_bytes = 0, stack_bytes = 0", "(no `smem_bytes`)"),
    ("regs = 8, spill_bytes = 0, stack_bytes = 0, smem_bytes = 0", "(it has `regs`; no `registers`)"),
])
def test_a_hand_edited_kernel_pin_names_the_field_that_is_wrong(tmp_path: Path, fields: str, said: str) -> None:
    _project(tmp_path, '["sm_120a"]')
    (tmp_path / "kgate-baseline.toml").write_text(PINS % fields)
    run = kgate("lint", "--no-cache", cwd=tmp_path)
    assert run.code == 2 and "kgate-baseline.toml:9: kernel entry 'scale|k.cu|sm_120a'" in run.stderr, run.stderr
    assert said in run.stderr
