"""`kgate diff`: each side is the project as its own revision has it, wherever its inputs are kept.

Kernels in a git submodule, a build's compile_commands.json that git does not keep (or that names the working
tree's files by absolute path), renamed, deleted and added kernel modules, a base that fails to import, a base
named by branch or by commit, a dirty index and a repository whose path has spaces.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import kgate
from test_import_keys import CFG, LARGE, SMALL, TUNED

GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "protocol.file.allow",
           "GIT_CONFIG_VALUE_0": "always"}


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=GIT_ENV).stdout.strip()


def _repo(folder: Path, files: dict[str, str], config: str = CFG) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in {"kgate.toml": config, ".gitignore": ".kgate-cache/\n__pycache__/\nbuild/\n", **files}.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    _git(folder, "init", "-q", "-b", "main")
    _git(folder, "add", "-A")
    _git(folder, "commit", "-q", "-m", "base")
    return folder


def _diff(project: Path, *args: str):  # type: ignore[no-untyped-def]
    run = kgate("diff", *args, cwd=project)
    assert "Traceback" not in run.stderr, run.stderr
    return run


def _left_worktrees(*repos: Path) -> list[str]:
    return [line for repo in repos for line in _git(repo, "worktree", "list", "--porcelain").splitlines()
            if line.startswith("worktree ")][len(repos):]


def test_kernels_in_a_submodule_are_compiled_on_both_sides(tmp_path: Path) -> None:
    sub = _repo(tmp_path / "lib-src", {"ops.py": TUNED, "tune.json": SMALL})
    project = _repo(tmp_path / "p", {}, CFG.replace('["."]', '["lib"]'))
    _git(project, "submodule", "add", "-q", str(sub), "lib")
    _git(project, "commit", "-q", "-m", "the kernels' submodule")
    same = _diff(project, "HEAD", "--require-identical")
    assert same.code == 0 and "1 identical, 0 changed, 0 new, 0 gone" in same.stdout, same.stdout + same.stderr
    (project / "lib" / "tune.json").write_text(LARGE)
    changed = _diff(project, "HEAD", "--require-identical")
    assert changed.code == 1 and "0 identical, 1 changed" in changed.stdout, changed.stdout + changed.stderr
    assert _left_worktrees(project) == [] and _git(project / "lib", "worktree", "list").count("\n") == 0


def test_a_submodule_commit_the_clone_lacks_is_one_error(tmp_path: Path) -> None:
    sub = _repo(tmp_path / "lib-src", {"ops.py": TUNED, "tune.json": SMALL})
    project = _repo(tmp_path / "p", {"local.py": _two_kernels("local_kernel"), "tune.json": SMALL},
                    CFG.replace('["."]', '[".", "lib"]'))
    _git(project, "submodule", "add", "-q", str(sub), "lib")
    _git(project, "commit", "-q", "-m", "the kernels' submodule")
    shutil.rmtree(project / "lib")
    (project / "lib").mkdir()
    shutil.rmtree(project / ".git" / "modules" / "lib")  # nor does git keep one for it
    run = _diff(project, "HEAD")
    assert run.code == 2 and "the working tree has no clone of it" in run.stderr, run.stderr
    assert _left_worktrees(project) == []


CU = '''\
#ifndef SCALE
#error "SCALE comes from the build"
#endif
extern "C" __global__ void scale_kernel(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * SCALE;
}
'''


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is needed")
@pytest.mark.parametrize("kept", ["ignored", "committed", "outside"])
def test_a_build_database_names_each_sides_own_sources(tmp_path: Path, kept: str) -> None:
    """cmake writes absolute paths; the database is in an ignored build/, committed, or outside the repository."""
    top = tmp_path / "work tree"  # a path with a space, as a checkout may be
    database = "../build/compile_commands.json" if kept == "outside" else "build/compile_commands.json"
    config = f'targets = ["sm_120a"]\n\n[[cuda]]\nsources = ["src/*.cu"]\ncompile_commands = "{database}"\n'
    build = (top / database).parent
    build.mkdir(parents=True)
    source = top / "p" / "src" / "k.cu" if kept == "outside" else top / "src" / "k.cu"
    project = source.parent.parent
    text = f'[{{"directory": "{build}", "file": "{source}", "arguments": ["nvcc", "-DSCALE=2.0f", "-c", "{source}"]}}]'
    (project / database).parent.mkdir(parents=True, exist_ok=True)
    (project / database).write_text(text)
    files = {"src/k.cu": CU}
    if kept == "committed":
        files[".gitignore"] = ".kgate-cache/\n"
    _repo(project, files, config)
    same = _diff(project, "HEAD", "--require-identical")
    assert same.code == 0 and "1 identical" in same.stdout, same.stdout + same.stderr
    source.write_text(CU.replace("x[i] * SCALE", "x[i] * SCALE + 1.0f"))
    changed = _diff(project, "HEAD", "--require-identical")
    assert changed.code == 1 and "0 identical, 1 changed" in changed.stdout, changed.stdout + changed.stderr


def _two_kernels(name: str) -> str:
    return TUNED.replace("fill_kernel", name)


def test_renamed_deleted_and_added_kernel_modules(tmp_path: Path) -> None:
    project = _repo(tmp_path / "p", {"ops.py": TUNED, "tune.json": SMALL, "gone.py": _two_kernels("gone_kernel")})
    _git(project, "mv", "ops.py", "renamed.py")  # staged, not committed: a dirty index
    (project / "gone.py").unlink()
    (project / "added.py").write_text(_two_kernels("added_kernel"))
    run = _diff(project, "HEAD")
    assert run.code == 0, run.stdout + run.stderr
    assert "0 identical, 0 changed, 2 new, 2 gone" in run.stdout, run.stdout
    for name in ("renamed:fill_kernel", "added:added_kernel", "ops:fill_kernel", "gone:gone_kernel"):
        assert name in run.stdout


def test_a_base_that_fails_to_import_is_a_failure_on_that_side_only(tmp_path: Path) -> None:
    broken = TUNED.replace("import json\n", "import json\nraise RuntimeError('base is broken')\n")
    project = _repo(tmp_path / "p", {"ops.py": broken, "tune.json": SMALL})
    (project / "ops.py").write_text(TUNED)
    run = _diff(project, "HEAD")
    assert run.code in (0, 1) and "ops:fill_kernel" in run.stdout, run.stdout + run.stderr
    assert "Traceback" not in run.stdout


def test_a_branch_and_its_commit_are_the_same_base(tmp_path: Path) -> None:
    project = _repo(tmp_path / "p", {"ops.py": TUNED, "tune.json": SMALL})
    commit = _git(project, "rev-parse", "HEAD")
    _git(project, "branch", "base-branch")
    (project / "tune.json").write_text(LARGE)
    by_branch, by_commit = _diff(project, "base-branch"), _diff(project, commit)
    assert "0 identical, 1 changed" in by_branch.stdout and "0 identical, 1 changed" in by_commit.stdout
    assert by_branch.stdout.splitlines()[1:-1] == by_commit.stdout.splitlines()[1:-1]
