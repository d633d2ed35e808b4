"""A run disassembles the kernels whose SASS its selected rules read, and reports no other kernel's SASS.

The plan comes from the selection (`kgate.evaluate.plan`), so the same project and the same cache give a run that
selects no SASS rule no SASS at all, and a warm run that newly selects one the SASS it reads (disassembled from the
cached cubins, nothing compiled again); a later run that deselects it reports no SASS again, whatever the cache
holds. Real compiles: nvcc for the local-memory folder, Triton and nvcc for the PDL one.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import copy_project, kgate


def _sass(project: Path, *args: str) -> tuple[dict[tuple[str, str], bool], set[str], str]:
    """Per (kernel, target): whether the report holds its SASS; the codes found; the summary of the first run with
    this selection (`-v`: how many units it compiled)."""
    verbose = kgate("check", "-v", "--exit-zero", *args, cwd=project).stdout
    run = kgate("check", "--format", "json", "--exit-zero", *args, cwd=project)
    assert run.code == 0, run.stderr
    data = run.json()
    return ({(k["kernel"], k["target"]): k["sass"] is not None for k in data["kernels"]},
            {f["code"] for f in data["findings"]}, verbose)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_a_warm_run_that_newly_selects_a_sass_rule_gets_its_sass(tmp_path: Path) -> None:
    project = copy_project("rules/KG109", tmp_path)
    # local-memory-in-loop deselected: the stack frame of histogram_local is not disassembled.
    without, codes, _ = _sass(project, "--select", "KG103")
    assert not any(without.values()) and "KG109" not in codes
    # Selected on the same cache: the kernel with a stack frame is disassembled from its cubin, nothing compiles.
    with_rule, codes, verbose = _sass(project, "--select", "KG103,KG109")
    assert "0 compiled" in verbose
    assert "KG109" in codes
    assert {kernel for (kernel, _target), has in with_rule.items() if has} == {"histogram_local"}
    # Deselected again (named otherwise, so that the first run's record is not replayed): the cache keeps the SASS,
    # the report does not show it.
    again, _codes, _ = _sass(project, "--select", "spill")
    assert again == without


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_the_pdl_kernels_are_disassembled_only_where_their_rule_reads_it(tmp_path: Path) -> None:
    project = copy_project("rules/KG107", tmp_path)
    plain, _codes, _ = _sass(project, "--select", "KG102")
    assert not any(plain.values())
    read, codes, verbose = _sass(project, "--select", "KG107")
    assert "0 compiled" in verbose and "KG107" in codes
    # pdl-missing-wait reads the SASS of a PDL kernel that waits and writes nothing before the wait (for ACQBULK):
    # not of a kernel that is not PDL, nor of one whose PTX writes global memory before its wait.
    disassembled = {kernel for (kernel, _target), has in read.items() if has}
    assert "pdl_missing_wait:wait_first" in disassembled
    assert not disassembled & {"pdl_missing_wait:not_pdl", "pdl_missing_wait:store_before_wait",
                               "pdl_missing_wait:atomic_before_wait", "pdl_missing_wait:wait_under_branch"}
    every, _codes, _ = _sass(project, "--select", "KG102", "--sass")
    assert all(every.values())
    assert _sass(project, "--select", "register-ceiling")[0] == plain  # not the first run's record: another name
