"""`kgate diff` between revisions, beyond tests/test_diff*.py, tests/test_held_out_diff.py and
tests/test_held_out_revision_diff.py: a diff run inside a git hook (whose GIT_INDEX_FILE names the index of the
commit being made) or with git's repository variables set, the project's own checkout hooks, selections that leave
nothing to compare, revisions in every spelling git has, repositories without a commit or with one, a separate git
folder, line endings converted by the repository's configuration, and kernels whose code names their source file.
Each side is compiled for real; the counts are what a correct diff finds.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from conftest import kgate
from test_diff_sides import _diff, _git, _repo
from test_held_out_revision_diff import _commit, _counts, _with_submodule
from test_import_keys import CFG, LARGE, SMALL, TUNED

CUDA_CFG = 'targets = ["sm_120a"]\n\n[[cuda]]\nsources = ["k.cu"]\n'
CUDA_FILE = '''#include <cassert>
#include <cstdio>
__global__ void scale(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  assert(i < n);
  if (i == 0) printf("%s:%d\\n", __FILE__, __LINE__);
  x[i] *= 2.f;
}
'''
ASSERTS = TUNED.replace("    v = tl.load(x + offs, mask=offs < n)\n",
                        '    v = tl.load(x + offs, mask=offs < n)\n    tl.device_assert(v >= 0, "negative input")\n')


def _changed(tmp_path: Path) -> Path:
    """A project whose tune.json the working tree changed since HEAD (one variant changes)."""
    project = _repo(tmp_path / "p", {"ops.py": TUNED, "tune.json": SMALL})
    (project / "tune.json").write_text(LARGE)
    return project


def _hook(project: Path, name: str, body: str, folder: Path | None = None) -> None:
    hook = (folder or project / ".git" / "hooks") / name
    hook.parent.mkdir(parents=True, exist_ok=True)
    hook.write_text("#!/bin/sh\n" + body)
    hook.chmod(0o755)


# ------------------------------------------------------------------------------- git's environment and hooks

def test_a_diff_in_a_pre_commit_hook_leaves_the_commit_being_made_as_it_is(tmp_path: Path) -> None:
    """git runs the hook with GIT_INDEX_FILE naming the index of the commit (`.git/index.lock` for `commit -a`): the
    base's checkout must never write it."""
    project = _changed(tmp_path)
    _hook(project, "pre-commit", f'"{sys.executable}" -m kgate diff HEAD > "{tmp_path}/diff.txt" 2>&1\nexit 0\n')
    _git(project, "commit", "-q", "-a", "-m", "larger tile")
    assert "0 identical, 1 changed" in (tmp_path / "diff.txt").read_text(), (tmp_path / "diff.txt").read_text()
    assert _git(project, "show", "HEAD:tune.json") == LARGE
    assert _git(project, "status", "--porcelain") == ""


def test_a_staged_change_survives_a_diff_run_with_git_index_file_set(tmp_path: Path) -> None:
    project = _changed(tmp_path)
    _git(project, "add", "tune.json")
    run = kgate("diff", "HEAD", cwd=project, env={"GIT_INDEX_FILE": str(project / ".git" / "index")}, process=True)
    assert run.code == 0 and "0 identical, 1 changed" in _counts(run), run.stdout + run.stderr
    assert _git(project, "diff", "--cached", "--name-only") == "tune.json"


def test_git_dir_and_work_tree_set_for_the_repository_itself(tmp_path: Path) -> None:
    project = _changed(tmp_path)
    run = kgate("diff", "HEAD", cwd=project, env={"GIT_DIR": str(project / ".git"), "GIT_WORK_TREE": str(project)},
                process=True)
    assert run.code == 0 and "0 identical, 1 changed" in _counts(run), run.stdout + run.stderr


def test_git_dir_of_the_superproject_does_not_stand_for_a_submodule(tmp_path: Path) -> None:
    project = _with_submodule(tmp_path)
    run = kgate("diff", "HEAD", "--require-identical", cwd=project, env={"GIT_DIR": str(project / ".git")},
                process=True)
    assert run.code == 0 and "2 identical, 0 changed" in _counts(run), run.stdout + run.stderr


def test_a_failing_post_checkout_hook_is_not_run_for_the_base(tmp_path: Path) -> None:
    """A hook that needs a program CI lacks (git-lfs) fails `git worktree add`; the base's checkout runs none."""
    project = _changed(tmp_path)
    _hook(project, "post-checkout", 'echo "git-lfs was not found on your path" >&2\nexit 2\n')
    run = _diff(project, "HEAD")
    assert run.code == 0 and "0 identical, 1 changed" in _counts(run), run.stdout + run.stderr


def test_a_hook_of_core_hookspath_does_not_write_into_the_working_tree(tmp_path: Path) -> None:
    project = _changed(tmp_path)
    _hook(project, "post-checkout", f'echo ran >> "{project}/hook.log"\n', folder=project / ".githooks")
    _git(project, "config", "core.hooksPath", ".githooks")
    run = _diff(project, "HEAD")
    assert run.code == 0 and "0 identical, 1 changed" in _counts(run), run.stdout + run.stderr
    assert not (project / "hook.log").exists()


# ------------------------------------------------------------------------------- what is selected

def test_a_language_the_project_has_no_kernel_in_is_an_error_not_an_identical_diff(tmp_path: Path) -> None:
    project = _changed(tmp_path)
    run = _diff(project, "HEAD", "--require-identical", "--language", "cuda")
    assert run.code == 2 and "--language cuda: nothing to gate" in run.stderr, run.stdout + run.stderr


def test_triton_alone_on_a_cuda_project_is_an_error(tmp_path: Path) -> None:
    project = _repo(tmp_path / "p", {"k.cu": "__global__ void k(float* x) { x[0] = 1.f; }\n"}, CUDA_CFG)
    run = _diff(project, "HEAD", "--require-identical", "--language", "triton")
    assert run.code == 2 and "--language triton: nothing to gate" in run.stderr, run.stdout + run.stderr


def test_a_target_given_on_the_command_line_is_the_one_compared(tmp_path: Path) -> None:
    project = _changed(tmp_path)
    run = _diff(project, "HEAD", "--target", "sm_90a")
    assert run.code == 0 and "0 identical, 1 changed" in _counts(run), run.stdout + run.stderr
    assert " sm_90a" in run.stdout and " sm_120a" not in run.stdout


# ------------------------------------------------------------------------------- what the code names

def test_a_triton_device_assert_names_the_source_file_alike_on_both_sides(tmp_path: Path) -> None:
    project = _repo(tmp_path / "p", {"ops.py": ASSERTS, "tune.json": SMALL})
    run = _diff(project, "HEAD", "--require-identical")
    assert run.code == 0 and "1 identical, 0 changed" in _counts(run), run.stdout + run.stderr


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is needed")
def test_a_cuda_assert_and_file_macro_name_the_source_alike_on_both_sides(tmp_path: Path) -> None:
    project = _repo(tmp_path / "p", {"k.cu": CUDA_FILE}, CUDA_CFG)
    run = _diff(project, "HEAD", "--require-identical")
    assert run.code == 0 and "1 identical, 0 changed" in _counts(run), run.stdout + run.stderr


# ------------------------------------------------------------------------------- revisions and repositories

@pytest.mark.parametrize("rev", ["HEAD@{1}", ":/base", "main~0", "@", "main^{}"])
def test_every_spelling_of_a_commit_is_a_base(tmp_path: Path, rev: str) -> None:
    project = _repo(tmp_path / "p", {"ops.py": TUNED, "tune.json": SMALL})
    _git(project, "commit", "-q", "--allow-empty", "-m", "second")
    run = _diff(project, rev, "--require-identical")
    assert run.code == 0 and "1 identical, 0 changed" in _counts(run), run.stdout + run.stderr


@pytest.mark.parametrize("rev", ["HEAD:ops.py", "HEAD~5", "@{-1}", "HEAD..main", "HEAD^!", "main^@", "HEAD@{upstream}"])
def test_what_names_no_single_commit_is_one_error(tmp_path: Path, rev: str) -> None:
    project = _repo(tmp_path / "p", {"ops.py": TUNED, "tune.json": SMALL})
    run = _diff(project, rev)
    assert run.code == 2 and run.stderr.strip().splitlines() == [
        f"kgate: error: unknown revision {rev!r}: not a commit of this repository"], run.stderr


def test_a_revision_that_looks_like_an_option_is_not_one(tmp_path: Path) -> None:
    project = _repo(tmp_path / "p", {"ops.py": TUNED, "tune.json": SMALL})
    run = _diff(project, "--", "--orphan")
    assert run.code == 2 and "unknown revision '--orphan'" in run.stderr, run.stderr
    assert _git(project, "worktree", "list", "--porcelain").count("worktree ") == 1


def test_a_repository_without_a_commit_is_one_error(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    (project / "kgate.toml").write_text(CFG)
    (project / "ops.py").write_text(TUNED)
    (project / "tune.json").write_text(SMALL)
    _git(project, "init", "-q", "-b", "main")
    run = _diff(project)
    assert run.code == 2 and run.stderr.strip() == "kgate: error: unknown revision 'HEAD': not a commit of this " \
                                                   "repository", run.stderr


def test_the_default_base_of_a_single_commit_is_one_error(tmp_path: Path) -> None:
    project = _repo(tmp_path / "p", {"ops.py": TUNED, "tune.json": SMALL})
    run = _diff(project)
    assert run.code == 2 and "unknown revision 'HEAD~1'" in run.stderr, run.stderr


def test_a_repository_with_a_separate_git_folder(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    for name, text in {"kgate.toml": CFG, ".gitignore": ".kgate-cache/\n__pycache__/\n", "ops.py": TUNED,
                       "tune.json": SMALL}.items():
        (project / name).write_text(text)
    _git(project, "init", "-q", "-b", "main", "--separate-git-dir", str(tmp_path / "p.git"))
    _commit(project, "base")
    (project / "tune.json").write_text(LARGE)
    run = _diff(project, "HEAD")
    assert run.code == 0 and "0 identical, 1 changed" in _counts(run), run.stdout + run.stderr


def test_line_endings_converted_by_core_autocrlf(tmp_path: Path) -> None:
    project = _repo(tmp_path / "p", {"ops.py": TUNED, "tune.json": SMALL})
    _git(project, "config", "core.autocrlf", "true")
    run = _diff(project, "HEAD", "--require-identical")
    assert run.code == 0 and "1 identical, 0 changed" in _counts(run), run.stdout + run.stderr



# ------------------------------------------------------------------------------- what git does to a checkout

def _filtered(tmp_path: Path, smudge: str) -> Path:
    """A project whose tune.json git filters on checkout (`smudge`), committed small, the working tree re-checked out."""
    project = _repo(tmp_path / "p", {"ops.py": TUNED, "tune.json": SMALL, ".gitattributes": "tune.json filter=big\n"})
    _git(project, "config", "filter.big.smudge", smudge)
    _git(project, "config", "filter.big.clean", "sed s/8192/256/")
    return project


def test_a_smudge_filter_applies_to_the_base_as_to_the_working_tree(tmp_path: Path) -> None:
    project = _filtered(tmp_path, "sed s/256/8192/")
    (project / "tune.json").unlink()
    _git(project, "checkout", "--", "tune.json")
    assert "8192" in (project / "tune.json").read_text()
    run = _diff(project, "HEAD", "--require-identical")
    assert run.code == 0 and "1 identical, 0 changed" in _counts(run), run.stdout + run.stderr


def test_a_required_filter_that_cannot_run_is_one_error(tmp_path: Path) -> None:
    project = _filtered(tmp_path, "no-such-filter-program")
    _git(project, "config", "filter.big.required", "true")
    run = _diff(project, "HEAD", "--require-identical")
    assert run.code == 2 and len(run.stderr.strip().splitlines()) == 1, run.stdout + run.stderr
    assert run.stderr.startswith("kgate: error: cannot check out "), run.stderr
    assert _git(project, "worktree", "list", "--porcelain").count("worktree ") == 1


def test_git_work_tree_alone_names_no_other_tree(tmp_path: Path) -> None:
    project = _changed(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    run = kgate("diff", "HEAD", cwd=project, env={"GIT_WORK_TREE": str(tmp_path / "elsewhere")}, process=True)
    assert run.code == 0 and "0 identical, 1 changed" in _counts(run), run.stdout + run.stderr
    assert not any((tmp_path / "elsewhere").iterdir())


def test_a_file_mode_changed_alone_is_identical(tmp_path: Path) -> None:
    project = _repo(tmp_path / "p", {"ops.py": TUNED, "tune.json": SMALL})
    (project / "ops.py").chmod(0o755)
    (project / "tune.json").chmod(0o600)
    run = _diff(project, "HEAD", "--require-identical")
    assert run.code == 0 and "1 identical, 0 changed" in _counts(run), run.stdout + run.stderr


def test_a_copied_repository_and_its_cache_compare_what_the_copy_holds(tmp_path: Path) -> None:
    project = _changed(tmp_path)
    assert "0 identical, 1 changed" in _counts(_diff(project, "HEAD"))
    copy = tmp_path / "q"
    shutil.copytree(project, copy, symlinks=True)
    (copy / "tune.json").write_text(SMALL)
    run = _diff(copy, "HEAD", "--require-identical")
    assert run.code == 0 and "1 identical, 0 changed" in _counts(run), run.stdout + run.stderr
    assert "0 identical, 1 changed" in _counts(_diff(project, "HEAD"))


def test_a_remote_tracking_branch_of_a_clone_is_a_base(tmp_path: Path) -> None:
    origin = _repo(tmp_path / "origin", {"ops.py": TUNED, "tune.json": SMALL})
    clone = tmp_path / "clone"
    _git(tmp_path, "clone", "-q", str(origin), str(clone))
    (clone / "tune.json").write_text(LARGE)
    run = _diff(clone, "origin/main")
    assert run.code == 0 and "0 identical, 1 changed" in _counts(run), run.stdout + run.stderr


def test_a_name_both_a_tag_and_a_branch_is_the_tag_as_git_reads_it(tmp_path: Path) -> None:
    project = _repo(tmp_path / "p", {"ops.py": TUNED, "tune.json": SMALL})
    _git(project, "tag", "v1")
    (project / "tune.json").write_text(LARGE)
    _commit(project, "larger tile")
    _git(project, "branch", "v1")
    assert "0 identical, 1 changed" in _counts(_diff(project, "v1"))
    assert "0 identical, 1 changed" in _counts(_diff(project, "tags/v1"))
    assert "1 identical, 0 changed" in _counts(_diff(project, "heads/v1"))
