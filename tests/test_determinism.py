"""The same inputs give the same bytes: JSON, SARIF and the baseline, whatever the workers and the cache did.

Compiles finish in any order over any number of workers, and a warm run reads facts back from the
cache instead of compiling: none of that may show in a report or in the baseline, or a CI job that
compares reports (or a baseline under review) would see changes that are not there.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import copy_project, kgate

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")


def _report(project: Path, fmt: str, *args: str) -> str:
    run = kgate("check", "--format", fmt, *args, cwd=project)
    assert run.code == 1, run.stderr
    return run.stdout


def test_check_reports_are_the_same_bytes_across_jobs_and_a_warm_cache(tmp_path: Path) -> None:
    one, two = copy_project("mixed", tmp_path / "one"), copy_project("mixed", tmp_path / "two")
    cold_serial = _report(one, "json", "--jobs", "1")
    cold_parallel = _report(two, "json", "--jobs", "2")
    assert cold_serial == cold_parallel
    assert _report(one, "json", "--jobs", "2") == _report(two, "json", "--jobs", "1") == cold_serial  # warm
    sarif = copy_project("mixed", tmp_path / "sarif")
    cold_sarif = _report(sarif, "sarif", "--jobs", "2")
    assert cold_sarif == _report(one, "sarif", "--jobs", "1") == _report(sarif, "sarif")
    assert '"version": "2.1.0"' in cold_sarif and "kernels:pdl_scale" in cold_serial
    # Nor on what ran before on the same cache: `check --sass` keeps every kernel's SASS there, a later check
    # reports the SASS it reads (the kernels whose rules read it), as before.
    with_sass = _report(two, "json", "--sass")
    assert with_sass != cold_serial
    assert _report(two, "json") == cold_serial


def test_baseline_update_writes_the_same_bytes_every_time(tmp_path: Path) -> None:
    project = copy_project("mixed", tmp_path / "a")
    other = copy_project("mixed", tmp_path / "b")
    baseline = project / "kgate-baseline.toml"
    assert kgate("baseline", "update", "--accept-new", "--jobs", "1", cwd=project).code == 0
    first = baseline.read_bytes()
    assert kgate("baseline", "update", "--accept-new", cwd=project).code == 0  # warm, default jobs
    assert baseline.read_bytes() == first
    assert kgate("baseline", "update", "--accept-new", "--jobs", "2", cwd=other).code == 0  # cold, two workers
    assert (other / "kgate-baseline.toml").read_bytes() == first
    assert b'"KG201|kernels.py|tuned|n" = 1' in first and b'"KG302|csrc/add.cu|launch_add|add<float>" = 1' in first


def test_lint_reports_do_not_depend_on_how_many_processes_read_the_files(tmp_path: Path) -> None:
    """A cold lint of enough files forks workers (kgate.evaluate.source); jobs = 1 reads them all in one process."""
    for index in range(120):
        folder = tmp_path / "tree" / f"pkg{index % 7}"
        folder.mkdir(parents=True, exist_ok=True)
        key = "M" if index % 3 else "BLOCK"
        (folder / f"k{index}.py").write_text(
            "import triton\nimport triton.language as tl\n\n\n"
            f"@triton.autotune(configs=[], key=[\"{key}\"])\n@triton.jit\n"
            f"def k{index}(x, M, BLOCK: tl.constexpr):\n    tl.atomic_add(x, 1)\n")
    tree = tmp_path / "tree"
    (tree / "kgate.toml").write_text("")
    parallel = kgate("lint", "--format", "json", "--no-cache", cwd=tree)
    (tree / "kgate.toml").write_text("jobs = 1\n")
    serial = kgate("lint", "--format", "json", "--no-cache", cwd=tree)
    warm = [kgate("lint", "--format", "json", cwd=tree) for _ in range(2)]
    assert parallel.code == serial.code == 1
    assert parallel.stdout == serial.stdout == warm[0].stdout == warm[1].stdout
    assert len(parallel.json()["findings"]) == 120 + 80  # KG202 everywhere, KG201 where the key is `M`
