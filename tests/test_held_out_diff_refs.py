"""`kgate diff` between revisions, beyond tests/test_diff*.py, tests/test_held_out_diff*.py and
tests/test_held_out_revision_diff*.py: CUDA changes that leave the code as it was (a comment, a `#define` no kernel
uses, kernels reordered or reformatted, a macro spelled otherwise, `-lineinfo`, a comment of kgate.toml) or change it
(a `#define` a kernel uses, a kernel renamed); bases named by a full or short commit id, a full ref name, a branch's
reflog (`main@{1}`), `@{u}` of a clone, a merge commit and its second parent (`HEAD^2`), a branch named like a file;
repositories holding a committed `.kgate-cache` of junk, a project nested in a subfolder of the repository (run
there and further down), a kernel file made a symlink in the working tree, and a diff run while another process
checks the project. Each side is compiled for real (nvcc); the counts are what a correct diff finds.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import kgate
from test_diff_sides import GIT_ENV, _diff, _git, _repo
from test_held_out_revision_diff import _commit, _counts

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is needed")

CFG = 'targets = ["sm_120a"]\n\n[[cuda]]\nsources = ["k.cu"]\n'
KERNELS = '''#define SCALE 2.f
#define UNUSED 7

__global__ void scale(float* x) { int i = threadIdx.x; x[i] *= SCALE; }

__global__ void shift(float* x) { int i = threadIdx.x; x[i] += 1.f; }
'''
REFORMATTED = '''#define SCALE 2.f
#define UNUSED 7

__global__ void scale(float* x)
{
    int i = threadIdx.x;
    x[i] *= SCALE;
}

__global__ void shift(float* x)
{
    int i = threadIdx.x;
    x[i] += 1.f;
}
'''
REORDERED = '''#define SCALE 2.f
#define UNUSED 7

__global__ void shift(float* x) { int i = threadIdx.x; x[i] += 1.f; }

__global__ void scale(float* x) { int i = threadIdx.x; x[i] *= SCALE; }
'''

# case -> (the working tree's files, the counts line, exit code of `--require-identical`)
EDITS: dict[str, tuple[dict[str, str], str, int]] = {
    "comment_only": ({"k.cu": "// Scales and shifts.\n" + KERNELS.replace("x[i] += 1.f;", "x[i] += 1.f; /* one */")},
                     "2 identical, 0 changed, 0 new, 0 gone", 0),
    "unused_define_changed": ({"k.cu": KERNELS.replace("UNUSED 7", "UNUSED 9")}, "2 identical, 0 changed, 0 new, 0 gone",
                              0),
    "used_define_changed": ({"k.cu": KERNELS.replace("SCALE 2.f", "SCALE 3.f")}, "1 identical, 1 changed, 0 new, 0 gone",
                            1),
    "macro_spelled_otherwise": ({"k.cu": KERNELS.replace("SCALE 2.f", "SCALE (1.f + 1.f)")},
                                "2 identical, 0 changed, 0 new, 0 gone", 0),
    "kernels_reordered": ({"k.cu": REORDERED}, "2 identical, 0 changed, 0 new, 0 gone", 0),
    "kernels_reformatted": ({"k.cu": REFORMATTED}, "2 identical, 0 changed, 0 new, 0 gone", 0),
    "lineinfo_added": ({"kgate.toml": CFG + 'flags = ["-lineinfo"]\n'}, "2 identical, 0 changed, 0 new, 0 gone", 0),
    "configuration_comment": ({"kgate.toml": "# the kernels of k.cu\n" + CFG}, "2 identical, 0 changed, 0 new, 0 gone",
                              0),
    "unused_header_included": ({"k.cu": "#include <cstdint>\n" + KERNELS}, "2 identical, 0 changed, 0 new, 0 gone", 0),
    "static_assert_added": ({"k.cu": KERNELS + "static_assert(sizeof(float) == 4, \"floats\");\n"},
                            "2 identical, 0 changed, 0 new, 0 gone", 0),
    "parameter_renamed": ({"k.cu": KERNELS.replace("void shift(float* x) { int i = threadIdx.x; x[i] += 1.f; }",
                                                   "void shift(float* y) { int i = threadIdx.x; y[i] += 1.f; }")},
                          "2 identical, 0 changed, 0 new, 0 gone", 0),
    "kernel_changed_under_if_0": ({"k.cu": KERNELS + "#if 0\n__global__ void old(float* x) { x[0] = 9.f; }\n#endif\n"},
                                  "2 identical, 0 changed, 0 new, 0 gone", 0),
    "define_continued_over_two_lines": ({"k.cu": KERNELS.replace("#define SCALE 2.f", "#define SCALE \\\n    2.f")},
                                        "2 identical, 0 changed, 0 new, 0 gone", 0),
    "unused_device_function_added": ({"k.cu": KERNELS + "__device__ float unused(float v) { return v * 5.f; }\n"},
                                     "2 identical, 0 changed, 0 new, 0 gone", 0),
    "kernel_added": ({"k.cu": KERNELS + "__global__ void zero(float* x) { x[threadIdx.x] = 0.f; }\n"},
                     "2 identical, 0 changed, 1 new, 0 gone", 1),
    "kernel_deleted": ({"k.cu": KERNELS.replace("__global__ void shift(float* x) { int i = threadIdx.x; x[i] += 1.f; }\n",
                                                "")}, "1 identical, 0 changed, 0 new, 1 gone", 1),
    "kernel_renamed": ({"k.cu": KERNELS.replace("void shift", "void shift_by_one")},
                       "1 identical, 0 changed, 1 new, 1 gone", 1),
}


@pytest.mark.parametrize("case", sorted(EDITS))
def test_what_a_cuda_edit_changes(tmp_path: Path, case: str) -> None:
    files, counts, code = EDITS[case]
    project = _repo(tmp_path / "p", {"k.cu": KERNELS}, CFG)
    for name, text in files.items():
        (project / name).write_text(text)
    run = _diff(project, "HEAD", "--require-identical")
    assert counts in _counts(run) and run.code == code, run.stdout + run.stderr


def _two_commits(tmp_path: Path) -> Path:
    """The kernels committed, then SCALE changed in a second commit; the working tree is the second."""
    project = _repo(tmp_path / "p", {"k.cu": KERNELS}, CFG)
    (project / "k.cu").write_text(KERNELS.replace("SCALE 2.f", "SCALE 3.f"))
    _commit(project, "scale by three")
    return project


def _full_id(project: Path) -> str:
    return _git(project, "rev-parse", "HEAD~1")


# a spelling of the first commit, given the project of `_two_commits`
SPELLINGS: dict[str, Any] = {
    "full_commit_id": _full_id,
    "short_commit_id": lambda project: _full_id(project)[:7],
    "upper_case_commit_id": lambda project: _full_id(project).upper(),
    "full_ref_name_of_a_branch": lambda project: (_git(project, "branch", "first", "HEAD~1"), "refs/heads/first")[1],
    "reflog_of_the_branch": lambda project: "main@{1}",
    "branch_named_like_a_file": lambda project: (_git(project, "branch", "k.cu", "HEAD~1"), "k.cu")[1],
}


@pytest.mark.parametrize("case", sorted(SPELLINGS))
def test_every_name_of_the_first_commit_is_that_commit(tmp_path: Path, case: str) -> None:
    project = _two_commits(tmp_path)
    run = _diff(project, SPELLINGS[case](project))
    assert run.code == 0 and "1 identical, 1 changed, 0 new, 0 gone" in _counts(run), run.stdout + run.stderr
    assert _git(project, "status", "--porcelain") == ""


def test_upstream_of_a_clone_is_its_remote_branch(tmp_path: Path) -> None:
    origin = _repo(tmp_path / "origin", {"k.cu": KERNELS}, CFG)
    clone = tmp_path / "clone"
    _git(tmp_path, "clone", "-q", str(origin), str(clone))
    (clone / "k.cu").write_text(KERNELS.replace("SCALE 2.f", "SCALE 3.f"))
    _commit(clone, "scale by three")
    run = _diff(clone, "@{u}")
    assert run.code == 0 and "1 identical, 1 changed, 0 new, 0 gone" in _counts(run), run.stdout + run.stderr


def _merged(tmp_path: Path) -> Path:
    """main changes SCALE, a side branch changes shift; the side branch is merged into main."""
    project = _repo(tmp_path / "p", {"k.cu": KERNELS}, CFG)
    _git(project, "checkout", "-q", "-b", "side")
    (project / "k.cu").write_text(KERNELS.replace("x[i] += 1.f;", "x[i] += 2.f;"))
    _commit(project, "shift by two")
    _git(project, "checkout", "-q", "main")
    (project / "k.cu").write_text(KERNELS.replace("SCALE 2.f", "SCALE 3.f"))
    _commit(project, "scale by three")
    _git(project, "-c", "user.name=k", "-c", "user.email=k@k", "merge", "-q", "--no-edit", "side")
    assert "x[i] += 2.f;" in (project / "k.cu").read_text() and "SCALE 3.f" in (project / "k.cu").read_text()
    return project


# base -> the counts against the merged working tree
MERGES = {"HEAD": "2 identical, 0 changed", "HEAD^1": "1 identical, 1 changed", "HEAD^2": "1 identical, 1 changed",
          "HEAD~2": "0 identical, 2 changed"}


@pytest.mark.parametrize("base", sorted(MERGES))
def test_a_merge_commit_and_its_parents(tmp_path: Path, base: str) -> None:
    run = _diff(_merged(tmp_path), base)
    assert run.code == 0 and MERGES[base] in _counts(run), run.stdout + run.stderr


def _junk_cache(project: Path) -> None:
    junk = project / ".kgate-cache"
    (junk / "compiled").mkdir(parents=True)
    (junk / "compiled" / ("0" * 3)).write_text("{not json")
    (junk / "README").write_text("committed by mistake\n")
    _git(project, "add", "-f", ".kgate-cache")
    _commit(project, "a cache committed")


def test_a_cache_folder_committed_with_junk_at_the_base_is_not_the_bases_cache(tmp_path: Path) -> None:
    project = _repo(tmp_path / "p", {"k.cu": KERNELS}, CFG)
    _junk_cache(project)
    _git(project, "rm", "-q", "-r", ".kgate-cache")
    (project / "k.cu").write_text(KERNELS.replace("SCALE 2.f", "SCALE 3.f"))
    _commit(project, "the cache removed, SCALE changed")
    run = _diff(project, "HEAD~1")
    assert run.code == 0 and "1 identical, 1 changed, 0 new, 0 gone" in _counts(run), run.stdout + run.stderr
    assert _git(project, "status", "--porcelain") == ""


def test_a_cache_folder_of_junk_in_the_working_tree_is_one_error(tmp_path: Path) -> None:
    project = _repo(tmp_path / "p", {"k.cu": KERNELS}, CFG)
    _junk_cache(project)
    run = _diff(project, "HEAD~1")
    assert run.code == 2 and len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert "holds files kgate did not write" in run.stderr


@pytest.mark.parametrize("where", ["sub/proj", "sub/proj/src"])
def test_a_project_in_a_subfolder_of_the_repository(tmp_path: Path, where: str) -> None:
    repo = _repo(tmp_path / "r", {"sub/proj/k.cu": KERNELS, "sub/proj/kgate.toml": CFG, "sub/proj/src/x.txt": "",
                                  "k.cu": "__global__ void not_this_one(float* x) { x[0] = 0.f; }\n"}, CFG)
    (repo / "kgate.toml").unlink()
    _commit(repo, "the project is the subfolder's")
    (repo / "sub/proj/k.cu").write_text(KERNELS.replace("SCALE 2.f", "SCALE 3.f"))
    run = kgate("diff", "HEAD", cwd=repo / where)
    assert run.code == 0 and "1 identical, 1 changed, 0 new, 0 gone" in _counts(run), run.stdout + run.stderr
    assert "not_this_one" not in run.stdout


def test_a_kernel_file_made_a_symlink_in_the_working_tree(tmp_path: Path) -> None:
    project = _repo(tmp_path / "p", {"k.cu": KERNELS}, CFG)
    (project / "real").mkdir()
    (project / "k.cu").rename(project / "real" / "k.cu")
    (project / "k.cu").symlink_to(Path("real") / "k.cu")
    run = _diff(project, "HEAD", "--require-identical")
    assert run.code == 0 and "2 identical, 0 changed, 0 new, 0 gone" in _counts(run), run.stdout + run.stderr
    (project / "real" / "k.cu").write_text(KERNELS.replace("SCALE 2.f", "SCALE 3.f"))
    run = _diff(project, "HEAD", "--require-identical")
    assert run.code == 1 and "1 identical, 1 changed, 0 new, 0 gone" in _counts(run), run.stdout + run.stderr


def test_a_diff_while_another_process_checks_the_project(tmp_path: Path) -> None:
    project = _repo(tmp_path / "p", {"k.cu": KERNELS}, CFG)
    (project / "k.cu").write_text(KERNELS.replace("SCALE 2.f", "SCALE 3.f"))
    checks = [subprocess.Popen([sys.executable, "-m", "kgate", "check", "--no-cache"], cwd=project,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**GIT_ENV}) for _ in range(2)]
    try:
        run = _diff(project, "HEAD", "--require-identical")
    finally:
        codes = [c.wait(timeout=300) for c in checks]
    assert run.code == 1 and "1 identical, 1 changed, 0 new, 0 gone" in _counts(run), run.stdout + run.stderr
    assert codes == [0, 0]
    again = _diff(project, "HEAD")
    assert "1 identical, 1 changed, 0 new, 0 gone" in _counts(again), again.stdout + again.stderr
