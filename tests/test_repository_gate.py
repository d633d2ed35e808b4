"""This repository gates its own kernels against its committed baseline, as `.ci/run` does with `kgate check`.

A copy of the bundled kernels, the configuration and the baseline passes; the
same copy with one kernel changed the way a real regression looks (the PDL wait
moved after the loads it protects) fails, which is what makes CI red: the
repository asks pdl-missing-wait for its strict policy, since its PDL kernels
read only the previous kernel's output.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import Run, copy_repository, kgate

WAIT_FIRST = '''    if PDL:
        gdc_wait()
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(a + offs, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(b + offs, mask=mask, other=0.0).to(tl.float32)
'''
WAIT_LATE = '''    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(a + offs, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(b + offs, mask=mask, other=0.0).to(tl.float32)
    if PDL:
        gdc_wait()
'''


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory, repository_checked: tuple[Path, Run]) -> Path:
    """A checkout of this repository whose cache holds every kernel (compiled once for the test session)."""
    assert repository_checked[1].code == 0, repository_checked[1].stdout + repository_checked[1].stderr
    return copy_repository(repository_checked, tmp_path_factory.mktemp("repository"))


def test_the_bundled_kernels_pass_their_own_gate(copy: Path) -> None:
    run = kgate("check", "--show-kernels", cwd=copy)
    assert run.code == 0, run.stdout + run.stderr
    assert "kgate check: passed:" in run.stdout
    # The row's verdict, then the capture it came from (the H200's, which predates recorded capabilities).
    assert any("kernels.mxfp8:mxfp8_matmul_kernel" in line and "sm_120a" in line and "block_scale" in line
               and line.split()[-3:] == ["ok", "NVIDIA", "H200"] for line in run.stdout.splitlines())


def test_a_regressed_copy_of_a_bundled_kernel_fails_the_gate(copy: Path) -> None:
    # The gate as CI runs it (strict), with pins for the Triton this test runs under: the committed baseline pins
    # some releases, and an update adds this one's if it is another, leaving those as they are.
    assert kgate("baseline", "update", "--accept-new", cwd=copy).code == 0
    path = copy / "kernels" / "swiglu.py"
    original = path.read_text()
    assert WAIT_FIRST in original
    path.write_text(original.replace(WAIT_FIRST, WAIT_LATE))
    try:
        run = kgate("check", cwd=copy, env={"CI": "true"})
    finally:
        path.write_text(original)
    assert run.code == 1
    lines = run.stdout.splitlines()
    # New against the baseline, said on the finding's own line and on no line of its own.
    assert any("KG107 error pdl-missing-wait (new): " in line and "swiglu_fwd_kernel" in line for line in lines)
    assert not any(line.startswith("NEW") and "swiglu_fwd_kernel" in line for line in lines)
    assert kgate("check", "-q", cwd=copy, env={"CI": "true"}).code == 0  # the original again: green, from the cache
