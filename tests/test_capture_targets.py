"""A captured launch is gated on the targets its capture applies to.

fixtures/device_tiles is built for sm_120a and sm_90a, and its launcher picks the tile by the device: BLOCK=4096
on a 12.0 device (an RTX 5090), BLOCK=1024 elsewhere (an H100 launches that one). Captured for sm_120a, the 4096
tile is gated on sm_120a only, never on sm_90a where it is never launched; captured for sm_90a too, each target
gets its own tile; `device-independent-launchers` gates every entry everywhere. Each row says which capture it came
from. Capture files an older kgate wrote (no `capability`) still read: an offline environment's target is in its
name, a GPU's without it applies to every target, as before.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from conftest import copy_project, kgate

from kgate.collect import captures
from kgate.core.errors import CaptureError

pytest.importorskip("torch", reason="the captured launchers take torch tensors (pip install torch, or kgate's extra ulp: kernel-gate[ulp])")

CAPTURE = "kgate-capture.toml"


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project captured offline for sm_120a only, and checked once (its cache holds both tiles afterwards)."""
    root = copy_project("device_tiles", tmp_path_factory.mktemp("tiles"))
    run = kgate("capture", "--device", "cpu", "--target", "sm_120a", "--", sys.executable, "launch.py", cwd=root)
    assert run.code == 0, run.stderr
    return root


def copy_of(root: Path, tmp_path: Path) -> Path:
    target = tmp_path / "copy"
    shutil.copytree(root, target, symlinks=True)
    return target


def gated(root: Path) -> dict[tuple[int, str], list[str]]:
    """(BLOCK, target) of every row `kgate check` gates -> the captures it says the row came from."""
    run = kgate("check", "--format", "json", cwd=root)
    assert run.code == 0, run.stdout + run.stderr
    return {(k["constexprs"]["BLOCK"], k["target"]): k["captured"] for k in run.json()["kernels"]}


def test_a_capture_for_one_target_records_its_capability(captured: Path) -> None:
    loaded = captures.load(captured / CAPTURE, CAPTURE)
    assert loaded.environments == {"cpu sm_120a": {"capability": "12.0", "triton": loaded.environments[
        "cpu sm_120a"]["triton"]}}
    (entry,) = loaded.entries
    assert entry.spec.constexprs["BLOCK"] == 4096
    assert entry.applies_to("sm_120a") and not entry.applies_to("sm_90a")


def test_a_launch_captured_for_one_target_is_not_gated_on_another(captured: Path) -> None:
    assert gated(captured) == {(4096, "sm_120a"): ["cpu sm_120a"]}


def test_device_independent_launchers_gate_every_entry_on_every_target(captured: Path, tmp_path: Path) -> None:
    root = copy_of(captured, tmp_path)
    with open(root / "kgate.toml", "a") as handle:
        handle.write("device-independent-launchers = true\n")
    assert gated(root) == {(4096, "sm_120a"): ["cpu sm_120a"], (4096, "sm_90a"): ["cpu sm_120a"]}


def test_each_target_gates_the_tile_its_own_capture_recorded(captured: Path, tmp_path: Path) -> None:
    root = copy_of(captured, tmp_path)
    run = kgate("capture", "--device", "cpu", "--target", "sm_90a", "--", sys.executable, "launch.py", cwd=root)
    assert run.code == 0, run.stderr
    assert gated(root) == {(4096, "sm_120a"): ["cpu sm_120a"], (1024, "sm_90a"): ["cpu sm_90a"]}
    table = kgate("check", "--show-kernels", cwd=root).stdout.splitlines()
    assert table[0].split()[-1] == "captured"
    assert [line.split()[2] + " " + " ".join(line.split()[-2:]) for line in table[2:4]] == [
        "sm_90a cpu sm_90a", "sm_120a cpu sm_120a"]


def rewrite(root: Path, old: str, new: str) -> None:
    path = root / CAPTURE
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_an_older_offline_capture_without_capability_applies_to_the_target_in_its_name(captured: Path,
                                                                                       tmp_path: Path) -> None:
    root = copy_of(captured, tmp_path)
    rewrite(root, 'capability = "12.0"\n', "")
    assert gated(root) == {(4096, "sm_120a"): ["cpu sm_120a"]}


def test_an_older_gpu_capture_without_capability_applies_to_every_target(captured: Path, tmp_path: Path) -> None:
    root = copy_of(captured, tmp_path)
    (root / CAPTURE).write_text((root / CAPTURE).read_text().replace('capability = "12.0"\n', "")
                                .replace("cpu sm_120a", "NVIDIA H200"))
    assert gated(root) == {(4096, "sm_120a"): ["NVIDIA H200"], (4096, "sm_90a"): ["NVIDIA H200"]}


def test_a_gpu_capture_applies_to_its_devices_target(captured: Path, tmp_path: Path) -> None:
    root = copy_of(captured, tmp_path)
    (root / CAPTURE).write_text((root / CAPTURE).read_text().replace('capability = "12.0"', 'capability = "9.0"')
                                .replace("cpu sm_120a", "NVIDIA H100 80GB HBM3"))
    assert gated(root) == {(4096, "sm_90a"): ["NVIDIA H100 80GB HBM3"]}


def test_a_capture_on_a_device_of_no_target_gates_nothing_and_says_why(captured: Path, tmp_path: Path) -> None:
    root = copy_of(captured, tmp_path)
    (root / CAPTURE).write_text((root / CAPTURE).read_text().replace('capability = "12.0"', 'capability = "8.9"')
                                .replace("cpu sm_120a", "NVIDIA GeForce RTX 4090"))
    run = kgate("check", cwd=root)
    assert run.code == 2
    assert "a captured launch is gated on the targets its capture bound for" in run.stderr
    assert "device-independent-launchers = true" in run.stderr


@pytest.mark.parametrize("value", ['"nine"', '"9"', '"sm_90"', '"9.10"', "9.0"])
def test_a_capability_that_is_not_major_dot_minor_is_refused_with_its_line(value: str) -> None:
    text = f'version = 1\n\n[captured."NVIDIA H100"]\ncapability = {value}\ntriton = "3.9.0"\n'
    with pytest.raises(CaptureError) as raised:
        captures.parse(text.encode(), CAPTURE)
    assert raised.value.line == (4 if value.startswith('"') else 3)
