"""`kgate diff` in a shallow clone, the checkout CI makes by default (actions/checkout fetches one commit).

A pull request's branch cloned with `--depth 2` holds its last two commits and the default branch's tip, but not
their merge base. `kgate diff` without a base compared the working tree with HEAD~1 instead, as if HEAD were on the
default branch: the pull request's earlier commits were left out of the comparison, and a kernel they added or
changed was reported `identical` (or not at all). A revision beyond the shallow history was "not a commit of this
repository", which it is. Both now say that the clone is shallow and how to fetch what the diff needs.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from test_diff_sides import GIT_ENV, _diff, _git, _repo

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
CFG = 'targets = ["sm_120a"]\n\n[[cuda]]\nsources = ["*.cu"]\n'
K = "__global__ void scale(float* x) { x[threadIdx.x] *= 2.0f; }\n"


def _branch_of_two_commits(tmp_path: Path) -> Path:
    origin = _repo(tmp_path / "origin", {"k.cu": K}, CFG)
    (origin / "k.cu").write_text(K + "__global__ void two(float* x) { x[0] = 2.0f; }\n")
    _git(origin, "commit", "-q", "-am", "main moves on")
    _git(origin, "checkout", "-q", "-b", "feature", "HEAD~1")
    (origin / "k.cu").write_text(K + "__global__ void added_first(float* x) { x[0] = 3.0f; }\n")
    _git(origin, "commit", "-q", "-am", "first commit of the change")
    (origin / "k.cu").write_text(K + "__global__ void added_first(float* x) { x[0] = 3.0f; }\n"
                                 "__global__ void added_second(float* x) { x[0] = 4.0f; }\n")
    _git(origin, "commit", "-q", "-am", "second commit of the change")
    _git(origin, "checkout", "-q", "main")
    return origin


def _clone(origin: Path, into: Path, *args: str) -> Path:
    subprocess.run(["git", "clone", "-q", *args, f"file://{origin}", str(into)], check=True, capture_output=True,
                   env=GIT_ENV)
    return into


def test_a_merge_base_beyond_a_shallow_history_is_not_replaced_by_the_last_commit(tmp_path: Path) -> None:
    origin = _branch_of_two_commits(tmp_path)
    clone = _clone(origin, tmp_path / "clone", "--depth", "2", "--branch", "feature", "--no-single-branch")
    run = _diff(clone)
    assert run.code == 2, run.stdout + run.stderr
    assert "kgate: error: the merge base of HEAD and origin/main is not in this shallow clone's history" \
        in run.stderr, run.stderr
    assert "git fetch --unshallow" in run.stderr, run.stderr
    assert "HEAD~1" not in run.stdout, run.stdout


@pytest.mark.parametrize("rev", ["HEAD~1", "HEAD~5"])
def test_a_revision_beyond_a_shallow_history_says_the_clone_is_shallow(tmp_path: Path, rev: str) -> None:
    origin = _repo(tmp_path / "origin", {"k.cu": K}, CFG)
    (origin / "k.cu").write_text(K.replace("2.0f", "3.0f"))
    _git(origin, "commit", "-q", "-am", "second")
    clone = _clone(origin, tmp_path / "clone", "--depth", "1")
    run = _diff(clone, rev)
    assert run.code == 2, run.stdout + run.stderr
    assert f"kgate: error: unknown revision {rev!r}: not a commit of this shallow clone's history" in run.stderr, \
        run.stderr


def test_a_name_that_is_no_revision_of_a_full_clone_is_still_unknown(tmp_path: Path) -> None:
    project = _repo(tmp_path / "p", {"k.cu": K}, CFG)
    run = _diff(project, "no-such-branch")
    assert run.code == 2
    assert "kgate: error: unknown revision 'no-such-branch': not a commit of this repository" in run.stderr


@needs_nvcc
def test_a_deep_enough_clone_diffs_against_the_merge_base(tmp_path: Path) -> None:
    origin = _branch_of_two_commits(tmp_path)
    clone = _clone(origin, tmp_path / "clone", "--branch", "feature", "--no-single-branch")
    run = _diff(clone)
    assert run.code == 0, run.stdout + run.stderr
    assert "merge base with origin/main" in run.stdout, run.stdout
    new = sorted(line.split()[1] for line in run.stdout.splitlines() if line.startswith("new "))
    assert new == ["added_first", "added_second"], run.stdout
