"""`kgate diff` in a shallow clone, the checkout CI makes by default (actions/checkout fetches one commit).

A pull request's branch cloned with `--depth 2` holds its last two commits and the default branch's tip, but not
their merge base. `kgate diff` without a base compared the working tree with HEAD~1 instead, as if HEAD were on the
default branch: the pull request's earlier commits were left out of the comparison, and a kernel they added or
changed was reported `identical` (or not at all). A revision beyond the shallow history was "not a commit of this
repository", which it is. Both now say that the clone is shallow and how to fetch what the diff needs.
"""

from __future__ import annotations

import re
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


# A refactor that moves a CUDA kernel to another file (a file renamed, a kernel split out of a file of several)
# changes no machine code. A CUDA variant is named by its file, so the moved kernel was `gone` at the old name and
# `new` at the new one, and `--require-identical` failed the refactor. It is now paired with the variant it
# replaces, as a tile size changed in a registration is, where the pairing is unambiguous.


def test_a_cuda_kernel_moved_to_another_file_is_paired() -> None:
    from kgate.diff.compare import renamed_variants

    gone = [("scale", "src/a.cu", "sm_120a")]
    assert renamed_variants(gone, [("scale", "src/moved.cu", "sm_120a")]) == {("scale", "src/moved.cu", "sm_120a"):
                                                                               gone[0]}
    two = [("scale", "src/b.cu", "sm_120a"), ("scale", "src/c.cu", "sm_120a")]
    assert renamed_variants(gone, two) == {}  # which one it became is not known
    assert renamed_variants(gone, [("scale", "src/b.cu", "sm_90a")]) == {}  # another target
    assert renamed_variants(gone, [("other", "src/b.cu", "sm_120a")]) == {}  # another kernel
    assert renamed_variants([("", "src/a.cu", "sm_120a")], [("", "src/b.cu", "sm_120a")]) == {}  # failed files
    # A Triton kernel's name is its module's: a variant of no constexpr is not a file.
    assert renamed_variants([("m:k", "fp16#00000000", "sm_120a")], [("m:k", "fp16#11111111", "sm_120a")]) == {}


@needs_nvcc
def test_a_move_refactor_is_identical(tmp_path: Path) -> None:
    other = "__global__ void other(float* x) { x[0] = 7.0f; }\n"
    project = _repo(tmp_path / "p", {"src/a.cu": K, "src/b.cu": other}, CFG.replace('"*.cu"', '"src/**/*.cu"'))
    _git(project, "mv", "src/a.cu", "src/renamed.cu")
    (project / "src" / "ops").mkdir()
    _git(project, "mv", "src/b.cu", "src/ops/b.cu")
    run = _diff(project, "HEAD", "--require-identical", "--format", "json")
    assert run.code == 0, run.stdout + run.stderr
    rows = {(v["kernel"], v["variant"], v["base_variant"], v["status"]) for v in run.json()["variants"]}
    assert rows == {("scale", "src/renamed.cu", "src/a.cu", "identical"),
                    ("other", "src/ops/b.cu", "src/b.cu", "identical")}, rows


@needs_nvcc
def test_a_moved_kernel_whose_code_changed_is_changed_not_new(tmp_path: Path) -> None:
    project = _repo(tmp_path / "p", {"a.cu": K}, CFG)
    (project / "a.cu").unlink()
    (project / "b.cu").write_text(K.replace("2.0f", "3.0f"))
    run = _diff(project, "HEAD")
    assert run.code == 0, run.stdout + run.stderr
    assert "0 identical, 1 changed, 0 new, 0 gone" in run.stdout, run.stdout
    assert "was a.cu" in run.stdout, run.stdout


# An error in a file only the base revision holds (its capture file, a glob of its CUDA table that matched none of
# its files) was said as if it were the working tree's: `kgate-capture.toml: invalid TOML` where the working tree
# has no such file, or `no file matches 'src/*.cu'` where it has one. It now names the base revision, as an
# unreadable base configuration already did; the working tree's own errors are said as before.


def test_the_base_revisions_capture_file_is_named_as_the_bases(tmp_path: Path) -> None:
    project = _repo(tmp_path / "p", {"k.cu": K, "kgate-capture.toml": "version = 1\n[[specialization]]\nbad = [\n"},
                    CFG)
    _git(project, "rm", "-q", "kgate-capture.toml")
    run = _diff(project, "HEAD")
    assert run.code == 2, run.stdout + run.stderr
    # (tomli, on Python 3.10, gives the line of the error; tomllib does not)
    assert run.stderr.startswith("kgate: error: the base revision HEAD (") and \
        re.search(r"\): kgate-capture\.toml(:\d+)?: invalid TOML", run.stderr), run.stderr
    (project / "kgate-capture.toml").write_text("version = 7\n")  # the working tree's own: no base named
    run = _diff(project, "HEAD")
    assert run.code == 2 and "kgate: error: kgate-capture.toml:1: unsupported capture file version 7" in run.stderr \
        and "base revision" not in run.stderr, run.stderr


def test_a_glob_that_matched_no_file_at_the_base_is_named_as_the_bases(tmp_path: Path) -> None:
    project = _repo(tmp_path / "p", {"old.cu": K}, CFG.replace('"*.cu"', '"src/*.cu"'))
    (project / "src").mkdir()
    _git(project, "mv", "old.cu", "src/a.cu")
    run = _diff(project, "HEAD")
    assert run.code == 2, run.stdout + run.stderr
    assert "kgate: error: the base revision HEAD (" in run.stderr and \
        "): kgate.toml: cuda[0].sources: no file matches 'src/*.cu'" in run.stderr, run.stderr
