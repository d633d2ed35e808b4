"""A compiled finding in some configs of an autotuned launch, judged as the configs ship.

fixtures/autotune is captured on CPU tensors (every autotune config bound) and compiled for sm_120a, where a 5-stage
64x64x128 bf16 tile outgrows the 99 KB of shared memory a CTA may have and a 2-stage 64x64x32 one fits: one config
of two failing is a warning naming the config; every config failing, the config a GPU capture marked `picked`,
`strict-configs` and a kernel with no autotuner stay errors. The finding's identity is the same either way, and a
baseline that pinned the error accepts the warning without failing the run.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from conftest import copy_project, kgate

from kgate.collect import captures

pytest.importorskip("torch", reason="the captured launchers take torch tensors (pip install torch, or kgate's extra ulp: kernel-gate[ulp])")

BUDGET = 101376  # the opt-in shared memory of an sm_120a CTA
GPU = "NVIDIA GeForce RTX 5090"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = copy_project("autotune", tmp_path_factory.mktemp("autotune"))
    run = kgate("capture", "--device", "cpu", "--", sys.executable, "launch.py", cwd=root)
    assert run.code == 0, run.stderr
    return root


@pytest.fixture(scope="module")
def checked(project: Path) -> dict:
    run = kgate("check", "--format", "json", cwd=project)
    assert run.code == 1, run.stderr
    return run.json()


def copy_tree(project: Path, tmp_path: Path) -> Path:
    """A copy of the captured project (its cache too: nothing compiles again)."""
    target = tmp_path / "copy"
    shutil.copytree(project, target, symlinks=True)
    return target


def findings(data: dict, kernel: str) -> list[dict]:
    return [f for f in data["findings"] if f["kernel"] == f"ops:{kernel}" and f["code"] == "KG104"]


def rows(data: dict, kernel: str) -> dict[int, dict]:
    """The kernel's rows by num_stages (its configs differ in their pipeline)."""
    return {k["num_stages"]: k for k in data["kernels"] if k["kernel"] == f"ops:{kernel}"}


def test_the_compiler_puts_one_config_over_the_budget_and_the_other_under(checked: dict) -> None:
    for kernel in ("one_deep_config", "config_with_a_heuristic", "registered_configs"):
        configs = rows(checked, kernel)
        assert configs[5]["smem_bytes"] > BUDGET >= configs[2]["smem_bytes"], kernel


@pytest.mark.parametrize("kernel", ["one_deep_config", "config_with_a_heuristic", "registered_configs"])
def test_a_finding_in_one_config_of_two_is_a_warning_that_names_it(checked: dict, kernel: str) -> None:
    """Captured, captured with a heuristic under the autotuner that follows the config (EVEN_K), registered."""
    (found,) = findings(checked, kernel)
    assert found["severity"] == "warning"
    assert found["variant"] == rows(checked, kernel)[5]["variant"]
    assert "autotune config BK=128, num_warps=4, num_stages=5 is one of the 2 configs of this autotuned launch, " \
           "the only one with this finding: prune it" in found["message"]


def test_every_config_failing_stays_an_error(checked: dict) -> None:
    found = findings(checked, "every_config_deep")
    assert [f["severity"] for f in found] == ["error", "error"]
    assert all("every one of the 2 configs of this autotuned launch has it" in f["message"] for f in found)
    assert {f["message"].rsplit("this one: ", 1)[1] for f in found} == {
        "BK=128, num_warps=4, num_stages=5)", "BK=128, num_warps=8, num_stages=5)"}


def test_a_kernel_without_an_autotuner_is_judged_as_before(checked: dict) -> None:
    (found,) = findings(checked, "plain_deep")
    assert found["severity"] == "error" and "autotune" not in found["message"]


def test_one_failing_config_does_not_fail_the_run(project: Path) -> None:
    run = kgate("check", "--kernel", "one_deep_config", cwd=project)
    assert run.code == 0, run.stdout
    assert "0 errors, 1 warning" in run.stdout


def test_strict_configs_keeps_the_rules_severity(project: Path, checked: dict, tmp_path: Path) -> None:
    strict = copy_tree(project, tmp_path)
    with open(strict / "kgate.toml", "a") as handle:
        handle.write("strict-configs = true\n")
    data = kgate("check", "--format", "json", cwd=strict).json()
    (found,) = findings(data, "one_deep_config")
    assert found["severity"] == "error" and "(strict-configs: every config is gated as if it ships)" in found["message"]
    (lenient,) = findings(checked, "one_deep_config")
    assert found["identity"] == lenient["identity"]  # the same finding for the baseline, whatever its severity


def test_the_config_a_gpu_capture_picked_stays_an_error(project: Path, tmp_path: Path) -> None:
    """The capture of an RTX 5090 on which the autotuner picked the deep config (written as `kgate capture` writes a
    GPU's: the device's name and capability, `picked = true`)."""
    gpu = copy_tree(project, tmp_path)
    path = gpu / "kgate-capture.toml"
    loaded = captures.load(path, path.name)
    entries = [captures.CapturedSpec(e.spec, (GPU,), e.spec.kernel == "ops:one_deep_config" and e.spec.num_stages == 5)
               for e in loaded.entries]
    captures.save(captures.CaptureFile({GPU: {"triton": "3.9.0", "capability": "12.0"}}, entries), path, path.name)
    data = kgate("check", "--format", "json", cwd=gpu).json()
    (found,) = findings(data, "one_deep_config")
    assert found["severity"] == "error"
    assert "the only one with this finding, and the one the autotuner picked on the GPU" in found["message"]
    (other,) = findings(data, "config_with_a_heuristic")  # picked nowhere: still a warning
    assert other["severity"] == "warning"


def test_a_pinned_error_that_is_now_a_warning_is_accepted_and_unpinned_by_an_update(project: Path,
                                                                                    tmp_path: Path) -> None:
    """A baseline pinned while every config was an error (an older kgate, or strict-configs): the finding is the same
    one, now a warning the baseline need not pin. Its pin is said as gone without failing the run, and an update
    removes it."""
    root = copy_tree(project, tmp_path)
    config = (root / "kgate.toml").read_text()
    (root / "kgate.toml").write_text(config + "strict-configs = true\n")
    assert kgate("baseline", "update", "--accept-new", cwd=root).code == 0
    pinned = (root / "kgate-baseline.toml").read_text()
    assert "KG104|ops.py|ops:one_deep_config|" in pinned
    (root / "kgate.toml").write_text(config)
    run = kgate("check", "--format", "json", cwd=root)
    assert run.code == 0, run.stdout
    (gone,) = [d for d in run.json()["ratchet"] if d["kind"] == "GONE"
               and d["subject"].startswith("KG104|ops.py|ops:one_deep_config|")]
    assert not gone["fails"] and "reported as a warning now, below fail-on" in gone["detail"]
    assert kgate("baseline", "update", cwd=root).code == 0
    assert "ops:one_deep_config" not in (root / "kgate-baseline.toml").read_text().split("[toolchain.findings]")[1]
    assert not [d for d in kgate("check", "--format", "json", cwd=root).json()["ratchet"] if d["kind"] == "GONE"]


def test_sarif_and_the_table_say_which_capture_a_row_comes_from(project: Path, checked: dict) -> None:
    assert {k["kernel"]: k["captured"] for k in checked["kernels"]}["ops:one_deep_config"] == ["cpu sm_120a"]
    assert rows(checked, "registered_configs")[5]["captured"] == []
    sarif = kgate("check", "--format", "sarif", cwd=project).json()
    properties = {(r["properties"]["kernel"], r["properties"]["severity"]): r["properties"]
                  for r in sarif["runs"][0]["results"]}
    assert properties[("ops:one_deep_config", "warning")]["captured"] == ["cpu sm_120a"]
    assert "captured" not in properties[("ops:registered_configs", "warning")]
    table = kgate("check", "--show-kernels", cwd=project).stdout.splitlines()
    assert table[0].split()[-1] == "captured"
    assert next(line for line in table if "ops:registered_configs" in line).rstrip().endswith(" -")
    assert next(line for line in table if "ops:one_deep_config" in line).rstrip().endswith(" cpu sm_120a")


def test_configs_read_from_the_capture_are_the_autotuners(project: Path) -> None:
    """Offline every config is bound, and the capture says of none that it was picked."""
    text = (project / "kgate-capture.toml").read_text()
    assert "picked" not in text
    entries = captures.load(project / "kgate-capture.toml", "kgate-capture.toml").entries
    assert sorted(json.dumps([e.spec.constexprs["BK"], e.spec.num_stages]) for e in entries
                  if e.spec.kernel == "ops:one_deep_config") == ["[128, 5]", "[32, 2]"]
