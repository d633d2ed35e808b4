"""`kgate diff` between revisions, beyond tests/test_diff*.py and tests/test_held_out*diff*.py: a capture file that
differs between the sides (an entry changed, added, the file deleted), a baseline changed between them, a working
tree whose kgate.toml does not validate or whose kernel module fails to import, revision ranges and revisions git
has no commit for, tags of tags and of blobs, a kernel staged with one change and edited with another, branch
names outside ASCII, a project reached through a linked folder, a bare repository's linked worktree, a sparse
checkout, a base of an unrelated history, an unborn branch with nothing staged, python-path spelled otherwise, a
module renamed by case, a header included by a header, `ORIG_HEAD` and full reference names. Each side is
compiled for real; the counts are what a correct diff finds.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from test_diff_sides import _diff, _git, _repo
from test_held_out_revision_diff import _commit, _counts
from test_import_keys import CFG, LARGE, SMALL, TUNED

from kgate.collect.specialization import Specialization

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")

PLAIN = '''import triton
import triton.language as tl


@triton.jit
def good(x, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x + offs, tl.load(x + offs, mask=offs < n) + 1, mask=offs < n)
'''
SPEC = '''
[[specialization]]
kernel = "k:good"
variant = "{variant}"
signature = {{ n = "i32", x = "*fp32" }}
constexprs = {{ BLOCK = {block} }}
divisible = ["n", "x"]
options = {{ num_stages = 3, num_warps = 4 }}
captured = ["cpu sm_120a"]
'''
CAPTURE = "# kgate capture\nversion = 1\n"
MEDIUM = '[{"BLOCK": 1024, "warps": 4}]'
CUDA_CFG = 'targets = ["sm_120a"]\n\n[[cuda]]\nsources = ["*.cu"]\nflags = ["-O3"]\n'
CUDA_KERNEL = '''#include "outer.h"
__global__ void scale(float* x, int n) {
  int i = blockIdx.x * blockDim.x * TILE + threadIdx.x;
  for (int k = 0; k < TILE; ++k) if (i + k < n) x[i + k] *= 2.f;
}
'''


def _spec(block: int) -> str:
    fields = {"kernel": "k:good", "signature": {"n": "i32", "x": "*fp32"}, "constexprs": {"BLOCK": block},
              "divisible": ["n", "x"], "options": {"num_stages": 3, "num_warps": 4}}
    return SPEC.format(block=block, variant=Specialization.from_record(fields).variant)


def _tuned(tmp: Path, config: str = CFG, **files: str) -> Path:
    return _repo(tmp / "p", {"ops.py": TUNED, "tune.json": SMALL, **files}, config)


def _captured(tmp: Path, *blocks: int) -> Path:
    return _repo(tmp / "p", {"k.py": PLAIN, "kgate-capture.toml": CAPTURE + "".join(_spec(b) for b in blocks)})


# ---- each case: a project and the diff's arguments; then the exit code and the counts (or the one error line)

def capture_entry_changed(tmp: Path) -> tuple[Path, list[str]]:
    project = _captured(tmp, 128)
    (project / "kgate-capture.toml").write_text(CAPTURE + _spec(256))
    return project, ["HEAD"]


def capture_entry_added(tmp: Path) -> tuple[Path, list[str]]:
    project = _captured(tmp, 128)
    (project / "kgate-capture.toml").write_text(CAPTURE + _spec(128) + _spec(512))
    return project, ["HEAD"]


def capture_file_deleted(tmp: Path) -> tuple[Path, list[str]]:
    project = _captured(tmp, 128, 256)
    (project / "kgate-capture.toml").unlink()
    return project, ["HEAD"]


def capture_file_committed_since_the_base(tmp: Path) -> tuple[Path, list[str]]:
    project = _repo(tmp / "p", {"k.py": PLAIN})
    (project / "kgate-capture.toml").write_text(CAPTURE + _spec(128))
    _commit(project)
    return project, ["HEAD~1"]


def baseline_changed_between_the_sides(tmp: Path) -> tuple[Path, list[str]]:
    project = _tuned(tmp, **{"kgate-baseline.toml": "# kgate baseline\n"})
    (project / "kgate-baseline.toml").write_text("this is not = = toml\n")
    return project, ["HEAD", "--require-identical"]


def working_tree_kgate_toml_invalid(tmp: Path) -> tuple[Path, list[str]]:
    project = _tuned(tmp)
    (project / "kgate.toml").write_text(CFG + "targets = [\n")
    return project, ["HEAD"]


def working_tree_module_fails_to_import(tmp: Path) -> tuple[Path, list[str]]:
    project = _tuned(tmp)
    (project / "ops.py").write_text("import no_such_module_anywhere\n" + TUNED)
    return project, ["HEAD", "--require-identical"]


def _error(rev: str) -> Callable[[Path], tuple[Path, list[str]]]:
    def make(tmp: Path) -> tuple[Path, list[str]]:
        project = _tuned(tmp)
        _git(project, "commit", "-q", "--allow-empty", "-m", "second")
        return project, [rev]
    return make


def lightweight_tag_of_an_older_commit(tmp: Path) -> tuple[Path, list[str]]:
    project = _tuned(tmp)
    _git(project, "tag", "v1")
    (project / "tune.json").write_text(LARGE)
    _commit(project)
    return project, ["v1"]


def annotated_tag_of_an_annotated_tag(tmp: Path) -> tuple[Path, list[str]]:
    project = _tuned(tmp)
    _git(project, "tag", "-a", "-m", "inner", "inner")
    _git(project, "tag", "-a", "-m", "outer", "outer", "inner")
    (project / "tune.json").write_text(LARGE)
    return project, ["outer"]


def tag_of_a_blob(tmp: Path) -> tuple[Path, list[str]]:
    project = _tuned(tmp)
    _git(project, "tag", "blobtag", _git(project, "rev-parse", "HEAD:tune.json"))
    return project, ["blobtag"]


def staged_and_unstaged_changes_to_one_file(tmp: Path) -> tuple[Path, list[str]]:
    project = _tuned(tmp)
    (project / "tune.json").write_text(LARGE)
    _git(project, "add", "tune.json")
    (project / "tune.json").write_text(MEDIUM)
    return project, ["HEAD"]


def branch_named_outside_ascii(tmp: Path) -> tuple[Path, list[str]]:
    project = _tuned(tmp)
    _git(project, "branch", "feat/grüße")
    (project / "tune.json").write_text(LARGE)
    return project, ["feat/grüße"]


def project_reached_through_a_linked_folder(tmp: Path) -> tuple[Path, list[str]]:
    project = _tuned(tmp)
    (project / "tune.json").write_text(LARGE)
    (tmp / "via").symlink_to(project)
    return tmp / "via", ["HEAD"]


def linked_worktree_of_a_bare_repository(tmp: Path) -> tuple[Path, list[str]]:
    project = _tuned(tmp)
    (project / "tune.json").write_text(LARGE)
    _commit(project)
    _git(tmp, "clone", "-q", "--bare", str(project), str(tmp / "bare.git"))
    _git(tmp / "bare.git", "worktree", "add", "-q", str(tmp / "wt"), "main")
    return tmp / "wt", ["HEAD~1"]


def sparse_checkout_of_the_project_folder(tmp: Path) -> tuple[Path, list[str]]:
    repo = _repo(tmp / "repo", {"proj/ops.py": TUNED, "proj/tune.json": SMALL, "proj/kgate.toml": CFG,
                                "other/big.txt": "x\n"})
    _git(repo, "sparse-checkout", "set", "--cone", "proj")
    (repo / "proj" / "tune.json").write_text(LARGE)
    return repo / "proj", ["HEAD"]


def base_of_an_unrelated_history(tmp: Path) -> tuple[Path, list[str]]:
    project = _tuned(tmp)
    _git(project, "checkout", "-q", "--orphan", "plain")
    _git(project, "rm", "-q", "-r", "--cached", ".")
    for name in ("ops.py", "tune.json"):
        (project / name).unlink()
    (project / "k.py").write_text(PLAIN)
    (project / "kgate-capture.toml").write_text(CAPTURE + _spec(128))
    _commit(project, "another project")
    _git(project, "checkout", "-q", "main")
    return project, ["plain"]


def unborn_branch_with_nothing_staged(tmp: Path) -> tuple[Path, list[str]]:
    project = _tuned(tmp)
    _git(project, "checkout", "-q", "--orphan", "fresh")
    _git(project, "rm", "-q", "-r", "--cached", ".")
    return project, ["main", "--require-identical"]


def python_path_spelled_otherwise(tmp: Path) -> tuple[Path, list[str]]:
    project = _tuned(tmp, 'targets = ["sm_120a"]\npython-path = ["src"]\n', **{"src/ops.py": TUNED, "src/tune.json": SMALL})
    (project / "ops.py").unlink()
    (project / "tune.json").unlink()
    _commit(project)
    (project / "kgate.toml").write_text('targets = ["sm_120a"]\npython-path = ["./src/"]\n')
    return project, ["HEAD", "--require-identical"]


def module_renamed_by_case(tmp: Path) -> tuple[Path, list[str]]:
    project = _tuned(tmp)
    (project / "ops.py").rename(project / "Ops.py")
    return project, ["HEAD"]


def nested_header_changed_alone(tmp: Path) -> tuple[Path, list[str]]:
    project = _repo(tmp / "p", {"k.cu": CUDA_KERNEL, "outer.h": '#pragma once\n#include "inner.h"\n',
                                "inner.h": "#define TILE 4\n"}, CUDA_CFG)
    (project / "inner.h").write_text("#define TILE 8\n")
    return project, ["HEAD"]


def orig_head_after_a_reset(tmp: Path) -> tuple[Path, list[str]]:
    project = _tuned(tmp)
    (project / "tune.json").write_text(LARGE)
    _commit(project)
    _git(project, "reset", "-q", "--hard", "HEAD~1")
    return project, ["ORIG_HEAD"]


def full_reference_name(tmp: Path) -> tuple[Path, list[str]]:
    project = _tuned(tmp)
    (project / "tune.json").write_text(LARGE)
    return project, ["refs/heads/main"]


def commit_peeled_twice(tmp: Path) -> tuple[Path, list[str]]:
    project = _tuned(tmp)
    return project, ["HEAD~0^0^{commit}", "--require-identical"]


NO_COMMIT = "not a commit of this repository"
CASES: dict[str, tuple[Callable[[Path], tuple[Path, list[str]]], int, str]] = {
    "capture_entry_changed": (capture_entry_changed, 0, "0 identical, 1 changed, 0 new, 0 gone"),
    "capture_entry_added": (capture_entry_added, 0, "1 identical, 0 changed, 1 new, 0 gone"),
    "capture_file_deleted": (capture_file_deleted, 0, "0 identical, 0 changed, 0 new, 2 gone"),
    "capture_file_committed_since_the_base": (capture_file_committed_since_the_base, 0,
                                              "0 identical, 0 changed, 1 new, 0 gone"),
    "baseline_changed_between_the_sides": (baseline_changed_between_the_sides, 0, "1 identical, 0 changed"),
    "working_tree_kgate_toml_invalid": (working_tree_kgate_toml_invalid, 2, "kgate.toml"),
    "working_tree_module_fails_to_import": (working_tree_module_fails_to_import, 1, "no_such_module_anywhere"),
    "symmetric_difference": (_error("HEAD~1...HEAD"), 2, NO_COMMIT),
    "open_range": (_error("HEAD~1.."), 2, NO_COMMIT),
    "range_from_nothing": (_error("..HEAD"), 2, NO_COMMIT),
    "absent_full_hash": (_error("0123456789abcdef0123456789abcdef01234567"), 2, NO_COMMIT),
    "absent_branch": (_error("no-such-branch"), 2, NO_COMMIT),
    "revision_with_a_trailing_space": (_error("HEAD "), 2, NO_COMMIT),
    "empty_revision": (_error(""), 2, "argument BASE: must not be empty"),
    "lightweight_tag_of_an_older_commit": (lightweight_tag_of_an_older_commit, 0, "0 identical, 1 changed"),
    "annotated_tag_of_an_annotated_tag": (annotated_tag_of_an_annotated_tag, 0, "0 identical, 1 changed"),
    "tag_of_a_blob": (tag_of_a_blob, 2, NO_COMMIT),
    "staged_and_unstaged_changes_to_one_file": (staged_and_unstaged_changes_to_one_file, 0, "BLOCK=1024"),
    "branch_named_outside_ascii": (branch_named_outside_ascii, 0, "0 identical, 1 changed"),
    "project_reached_through_a_linked_folder": (project_reached_through_a_linked_folder, 0, "0 identical, 1 changed"),
    "linked_worktree_of_a_bare_repository": (linked_worktree_of_a_bare_repository, 0, "0 identical, 1 changed"),
    "sparse_checkout_of_the_project_folder": (sparse_checkout_of_the_project_folder, 0, "0 identical, 1 changed"),
    "base_of_an_unrelated_history": (base_of_an_unrelated_history, 0, "0 identical, 0 changed, 1 new, 1 gone"),
    "unborn_branch_with_nothing_staged": (unborn_branch_with_nothing_staged, 0, "1 identical, 0 changed"),
    "python_path_spelled_otherwise": (python_path_spelled_otherwise, 0, "1 identical, 0 changed"),
    "module_renamed_by_case": (module_renamed_by_case, 0, "0 identical, 0 changed, 1 new, 1 gone"),
    "nested_header_changed_alone": (nested_header_changed_alone, 0, "0 identical, 1 changed"),
    "orig_head_after_a_reset": (orig_head_after_a_reset, 0, "0 identical, 1 changed"),
    "full_reference_name": (full_reference_name, 0, "0 identical, 1 changed"),
    "commit_peeled_twice": (commit_peeled_twice, 0, "1 identical, 0 changed"),
}
CUDA = {"nested_header_changed_alone"}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_side_is_what_its_revision_holds(tmp_path: Path, case: str) -> None:
    if case in CUDA and shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed")
    make, code, expected = CASES[case]
    project, args = make(tmp_path)
    run = _diff(project, *args)
    said = run.stdout + run.stderr
    if code == 2:
        last = run.stderr.strip().splitlines()[-1:]
        assert run.code == 2 and last and expected in last[0] and "Traceback" not in said, said
    else:
        assert run.code == code and expected in (said if expected.startswith("BLOCK") or code else _counts(run)), said
    assert _git(project, "worktree", "list", "--porcelain").count("worktree ") == 1 + (case.startswith("linked")), said
