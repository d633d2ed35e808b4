"""`kgate capture --verify`: kgate's offline compile of each captured specialisation next to the kernel a GPU loaded.

On this CPU-only machine the comparison runs on a real offline compile for the H200's target, with the figures the
driver reports planted (equal to the compile's, then one of them off); on a machine with a CUDA GPU (marker `gpu`)
the whole command runs against the live kernels, and every figure must be equal.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import copy_project, kgate

from kgate.capture.session import Recorded
from kgate.collect import captures
from kgate.commands.capture import _captured_facts
from kgate.core.config import load_config
from kgate.pipeline.capture_verify import comparisons, verify

torch = pytest.importorskip("torch", reason="the captured launchers take torch tensors (pip install torch, or kgate's extra ulp: kernel-gate[ulp])")


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    project = copy_project("capture", tmp_path_factory.mktemp("verify"))
    run = kgate("capture", "--device", "cpu", "--", sys.executable, "launch.py", "4096", cwd=project)
    assert run.code == 0, run.stderr
    return project


def _recorded(project: Path, live: dict) -> Recorded:
    """The capture of one specialisation (the project's plain row kernel), with what the driver would report."""
    entry = next(e for e in captures.load(project / "kgate-capture.toml", "kgate-capture.toml").entries
                 if e.spec.kernel == "ops:even_kernel")
    recorded = Recorded(file=captures.CaptureFile(entries=[entry]))
    recorded.live[f"{entry.spec.kernel}|{entry.spec.variant}"] = live
    return recorded


def test_verify_says_equal_only_when_every_figure_is_the_compiles(project: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    config = load_config(start=project)
    entry = _recorded(project, {}).file.entries[0]
    compiled = _captured_facts(config, [entry], "sm_90a", 1)
    assert not compiled.failures and len(compiled.facts) == 1
    res = compiled.facts[0].resources
    same = {"arch": 90, "n_regs": res.registers, "shared": res.smem_bytes, "local": res.stack_bytes}

    assert verify(config, _recorded(project, same), jobs=1, compile_facts=_captured_facts) is False
    out = capsys.readouterr().out
    assert "1 specialisation(s): 1 equal to the live kernel, 0 different" in out
    assert [line.rstrip().rsplit("  ", 1)[-1] for line in out.splitlines() if line.startswith("ops:")] == ["equal"]

    for figure, key in (("registers", "n_regs"), ("shared", "shared"), ("local", "local")):
        off = {**same, key: same[key] + 8}
        assert verify(config, _recorded(project, off), jobs=1, compile_facts=_captured_facts) is True, figure
        out = capsys.readouterr().out
        assert f"DIFFERENT: {figure}" in out and "0 equal to the live kernel, 1 different" in out, out


def test_a_gpu_kernel_kgate_does_not_target_is_counted_not_compared(project: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    config = load_config(start=project)
    assert verify(config, _recorded(project, {"arch": 75, "n_regs": 1, "shared": 0}), jobs=1,
                  compile_facts=_captured_facts) is False
    assert "0 specialisation(s)" in capsys.readouterr().out.splitlines()[-1]


def test_a_kernel_the_gpu_could_not_load_is_never_equal(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A kernel the driver could not load (Triton's OutOfResources) has nothing to compare but Triton's own shared
    memory figure: it was counted "equal to the live kernel" when that figure matched, and the command passed."""
    config = load_config(start=project)
    entry = _recorded(project, {}).file.entries[0]
    shared = _captured_facts(config, [entry], "sm_90a", 1).facts[0].resources.smem_bytes
    live = {"arch": 90, "shared": shared, "error": "OutOfResources: out of resource: shared memory"}
    assert verify(config, _recorded(project, live), jobs=1, compile_facts=_captured_facts) is True
    out = capsys.readouterr().out
    assert "not loaded: OutOfResources" in out
    assert "0 equal to the live kernel, 0 different, 0 not compiled offline, 1 not loaded on the GPU" in out, out


def test_only_figures_the_driver_gave_are_compared(project: Path) -> None:
    config = load_config(start=project)
    entry = _recorded(project, {}).file.entries[0]
    facts = _captured_facts(config, [entry], "sm_90a", 1).facts[0]
    assert [name for name, _ours, _theirs in comparisons(facts, {"shared": 0})] == ["shared"]


@pytest.mark.gpu
def test_on_a_gpu_every_captured_specialisation_equals_the_live_kernel(tmp_path: Path) -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    project = copy_project("capture", tmp_path)
    run = kgate("capture", "--verify", "--", sys.executable, "launch.py", "--device", "cuda", "4096", "4168",
                cwd=project, process=True)
    assert run.code == 0, run.stdout + run.stderr
    summary = run.stdout.rstrip().splitlines()[-1]
    assert " 0 different, 0 not compiled offline" in summary, run.stdout
    rows = [line for line in run.stdout.splitlines()[1:] if line.startswith("ops:")]
    assert rows and all(line.rstrip().endswith("equal") for line in rows), run.stdout
