"""`kgate diff` between revisions of a CUDA project, beyond tests/test_diff*.py and tests/test_held_out*diff*.py:
a change in an included header alone (beside the source, in a folder named by `-I`, in another folder of the
repository, outside it, behind a link), a `-D` flag changed in kgate.toml, CRLF line endings on one side, a
header change the preprocessor drops, a kernel removed from its file or added in a new one, a file renamed, a
base without a kgate.toml or with one that does not validate, a working tree without one, a header git ignores,
a base that does not compile, bases named by a branch with slashes and by a lightweight tag, staged files, a
header renamed, and an orphan branch's default base; and a Triton module reading a data file of another folder of
the repository. Each side is compiled for real; the counts are what a correct diff finds. A file of the repository
outside the project's folder is each side's own: never a record of the other side's file.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from test_diff_sides import _diff, _git, _repo
from test_held_out_revision_diff import _commit, _counts
from test_import_keys import CFG, LARGE, SMALL, TUNED

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")

CONFIG = 'targets = ["sm_120a"]\n\n[[cuda]]\nsources = ["*.cu"]\nflags = ["-O3"{flags}]\n'
KERNEL = '''#include "{header}"
__global__ void scale(float* x, int n) {{
  int i = blockIdx.x * blockDim.x * TILE + threadIdx.x;
  for (int k = 0; k < TILE; ++k) if (i + k < n) x[i + k] *= 2.f;
}}
'''
OTHER = '__global__ void other(float* x) { x[threadIdx.x] += 1.f; }\n'
TILE4, TILE8 = "#define TILE 4\n", "#define TILE 8\n"


def _project(root: Path, header: str = "tile.h", flags: str = "", files: dict[str, str] | None = None) -> Path:
    """A committed project: k.cu, which includes `header` (TILE 4)."""
    return _repo(root, {"k.cu": KERNEL.format(header=header), **({header: TILE4} if files is None else files)},
                 CONFIG.format(flags=flags))


def _write(project: Path, name: str, text: str) -> None:
    (project / name).parent.mkdir(parents=True, exist_ok=True)
    (project / name).write_bytes(text.encode())


def header_changed(tmp: Path) -> tuple[Path, list[str]]:
    project = _project(tmp / "p")
    _write(project, "tile.h", TILE8)
    return project, ["HEAD"]


def header_changed_in_a_commit(tmp: Path) -> tuple[Path, list[str]]:
    project = _project(tmp / "p")
    _write(project, "tile.h", TILE8)
    _commit(project)
    return project, ["HEAD~1"]


def header_in_an_include_folder(tmp: Path) -> tuple[Path, list[str]]:
    project = _project(tmp / "p", flags=', "-Iinc"', files={"inc/tile.h": TILE4})
    _write(project, "inc/tile.h", TILE8)
    return project, ["HEAD"]


def header_in_another_folder_of_the_repository(tmp: Path) -> tuple[Path, list[str]]:
    repo = tmp / "repo"
    _repo(repo, {"common/tile.h": TILE4, "proj/k.cu": KERNEL.format(header="../common/tile.h"),
                 "proj/kgate.toml": CONFIG.format(flags="")})
    _write(repo, "common/tile.h", TILE8)
    return repo / "proj", ["HEAD"]


def triton_data_file_in_another_folder_of_the_repository(tmp: Path) -> tuple[Path, list[str]]:
    repo = tmp / "repo"
    ops = TUNED.replace('(Path(__file__).parent / "tune.json")', '(Path(__file__).parent.parent / "common" / "tune.json")')
    _repo(repo, {"common/tune.json": SMALL, "proj/ops.py": ops, "proj/kgate.toml": CFG})
    _write(repo, "common/tune.json", LARGE)
    return repo / "proj", ["HEAD"]


def header_outside_the_repository(tmp: Path) -> tuple[Path, list[str]]:
    outside = tmp / "outside"
    outside.mkdir()
    (outside / "tile.h").write_text(TILE4)
    project = _project(tmp / "p", flags=f', "-I{outside}"', files={})
    (outside / "tile.h").write_text(TILE8)  # both sides read it: the same input on each
    return project, ["HEAD", "--require-identical"]


def header_link_retargeted(tmp: Path) -> tuple[Path, list[str]]:
    project = _project(tmp / "p", files={"t4.h": TILE4, "t8.h": TILE8})
    (project / "tile.h").symlink_to("t4.h")
    _commit(project)
    (project / "tile.h").unlink()
    (project / "tile.h").symlink_to("t8.h")
    return project, ["HEAD"]


def define_flag_changed(tmp: Path) -> tuple[Path, list[str]]:
    project = _project(tmp / "p", header="none.h", flags=', "-DTILE=4"', files={"none.h": ""})
    _write(project, "kgate.toml", CONFIG.format(flags=', "-DTILE=8"'))
    return project, ["HEAD"]


def crlf_source_in_the_working_tree(tmp: Path) -> tuple[Path, list[str]]:
    project = _project(tmp / "p")
    _write(project, "k.cu", KERNEL.format(header="tile.h").replace("\n", "\r\n"))
    return project, ["HEAD", "--require-identical"]


def crlf_header_in_the_working_tree(tmp: Path) -> tuple[Path, list[str]]:
    project = _project(tmp / "p")
    _write(project, "tile.h", TILE4.replace("\n", "\r\n"))
    return project, ["HEAD", "--require-identical"]


def crlf_source_at_the_base(tmp: Path) -> tuple[Path, list[str]]:
    project = _project(tmp / "p", files={"tile.h": TILE4.replace("\n", "\r\n")})
    _write(project, "k.cu", KERNEL.format(header="tile.h").replace("\n", "\r\n"))
    _commit(project)
    _write(project, "k.cu", KERNEL.format(header="tile.h"))
    _write(project, "tile.h", TILE4)
    return project, ["HEAD", "--require-identical"]


def header_comment_changed(tmp: Path) -> tuple[Path, list[str]]:
    project = _project(tmp / "p")
    _write(project, "tile.h", "// the tile: four elements a thread\n" + TILE4)
    return project, ["HEAD", "--require-identical"]


def header_change_under_if_0(tmp: Path) -> tuple[Path, list[str]]:
    project = _project(tmp / "p", files={"tile.h": TILE4 + "#if 0\n#define UNUSED 1\n#endif\n"})
    _write(project, "tile.h", TILE4 + "#if 0\n#undef TILE\n#define TILE 8\n#endif\n")
    return project, ["HEAD", "--require-identical"]


def kernel_removed_from_its_file(tmp: Path) -> tuple[Path, list[str]]:
    project = _project(tmp / "p")
    _write(project, "k.cu", KERNEL.format(header="tile.h") + OTHER)
    _commit(project)
    _write(project, "k.cu", KERNEL.format(header="tile.h"))
    return project, ["HEAD"]


def kernel_added_in_a_new_file(tmp: Path) -> tuple[Path, list[str]]:
    project = _project(tmp / "p")
    _write(project, "o.cu", OTHER)
    return project, ["HEAD"]


def source_file_renamed(tmp: Path) -> tuple[Path, list[str]]:
    project = _project(tmp / "p")
    _git(project, "mv", "k.cu", "k2.cu")
    return project, ["HEAD"]


def header_renamed(tmp: Path) -> tuple[Path, list[str]]:
    project = _project(tmp / "p")
    _git(project, "mv", "tile.h", "tile2.h")
    _write(project, "k.cu", KERNEL.format(header="tile2.h"))
    return project, ["HEAD", "--require-identical"]


def base_without_a_configuration(tmp: Path) -> tuple[Path, list[str]]:
    project = _project(tmp / "p")
    _git(project, "rm", "-q", "--cached", "kgate.toml")
    _git(project, "commit", "-q", "--amend", "-m", "base")
    _commit(project, "configured")
    return project, ["HEAD~1", "--require-identical"]


def base_configuration_that_does_not_validate(tmp: Path) -> tuple[Path, list[str]]:
    project = _project(tmp / "p")
    _write(project, "kgate.toml", 'targets = "sm_120a"\n')
    _commit(project, "broken")
    _write(project, "kgate.toml", CONFIG.format(flags=""))
    _commit(project, "fixed")
    return project, ["HEAD~1"]


def working_tree_without_a_configuration(tmp: Path) -> tuple[Path, list[str]]:
    project = _project(tmp / "p")
    (project / "kgate.toml").unlink()
    return project, ["HEAD"]


def header_git_ignores(tmp: Path) -> tuple[Path, list[str]]:
    project = _project(tmp / "p")
    _write(project, ".gitignore", ".kgate-cache/\ntile.h\n")
    _git(project, "rm", "-q", "--cached", "tile.h")
    _commit(project, "generated header")
    return project, ["HEAD", "--require-identical"]


def base_that_does_not_compile(tmp: Path) -> tuple[Path, list[str]]:
    project = _project(tmp / "p")
    _write(project, "k.cu", KERNEL.format(header="tile.h") + "garbage(\n")
    _commit(project, "broken")
    _write(project, "k.cu", KERNEL.format(header="tile.h"))
    return project, ["HEAD", "--require-identical"]


def branch_named_with_slashes(tmp: Path) -> tuple[Path, list[str]]:
    project = _project(tmp / "p")
    _git(project, "branch", "feature/tiles/x")
    _write(project, "tile.h", TILE8)
    return project, ["feature/tiles/x"]


def lightweight_tag(tmp: Path) -> tuple[Path, list[str]]:
    project = _project(tmp / "p")
    _git(project, "tag", "v1.0")
    _write(project, "tile.h", TILE8)
    _commit(project)
    return project, ["v1.0"]


def staged_files_not_committed(tmp: Path) -> tuple[Path, list[str]]:
    project = _project(tmp / "p")
    _write(project, "wide.h", TILE8)
    _write(project, "k.cu", KERNEL.format(header="wide.h"))
    _git(project, "add", "wide.h", "k.cu")
    return project, ["HEAD"]


def unstaged_header_change_against_an_older_commit(tmp: Path) -> tuple[Path, list[str]]:
    project = _project(tmp / "p")
    _write(project, "o.cu", OTHER)
    _commit(project)
    _write(project, "tile.h", TILE8)
    return project, ["HEAD~1"]


def orphan_branch_default_base(tmp: Path) -> tuple[Path, list[str]]:
    project = _project(tmp / "p")
    _git(project, "checkout", "-q", "--orphan", "other")
    _commit(project, "other")
    return project, []


# case -> (how it is made, the exit code, the counts line or the error's words)
CASES: dict[str, tuple[Callable[[Path], tuple[Path, list[str]]], int, str]] = {
    "header_changed": (header_changed, 0, "0 identical, 1 changed, 0 new, 0 gone"),
    "header_changed_in_a_commit": (header_changed_in_a_commit, 0, "0 identical, 1 changed, 0 new, 0 gone"),
    "header_in_an_include_folder": (header_in_an_include_folder, 0, "0 identical, 1 changed, 0 new, 0 gone"),
    "header_in_another_folder_of_the_repository": (header_in_another_folder_of_the_repository, 0,
                                                   "0 identical, 1 changed, 0 new, 0 gone"),
    "triton_data_file_in_another_folder_of_the_repository": (triton_data_file_in_another_folder_of_the_repository, 0,
                                                             "0 identical, 1 changed, 0 new, 0 gone"),
    "header_outside_the_repository": (header_outside_the_repository, 0, "1 identical, 0 changed, 0 new, 0 gone"),
    "header_link_retargeted": (header_link_retargeted, 0, "0 identical, 1 changed, 0 new, 0 gone"),
    "define_flag_changed": (define_flag_changed, 0, "0 identical, 1 changed, 0 new, 0 gone"),
    "crlf_source_in_the_working_tree": (crlf_source_in_the_working_tree, 0, "1 identical, 0 changed, 0 new, 0 gone"),
    "crlf_header_in_the_working_tree": (crlf_header_in_the_working_tree, 0, "1 identical, 0 changed, 0 new, 0 gone"),
    "crlf_source_at_the_base": (crlf_source_at_the_base, 0, "1 identical, 0 changed, 0 new, 0 gone"),
    "header_comment_changed": (header_comment_changed, 0, "1 identical, 0 changed, 0 new, 0 gone"),
    "header_change_under_if_0": (header_change_under_if_0, 0, "1 identical, 0 changed, 0 new, 0 gone"),
    "kernel_removed_from_its_file": (kernel_removed_from_its_file, 0, "1 identical, 0 changed, 0 new, 1 gone"),
    "kernel_added_in_a_new_file": (kernel_added_in_a_new_file, 0, "1 identical, 0 changed, 1 new, 0 gone"),
    # a CUDA kernel whose file alone changed is paired with the variant it replaces
    "source_file_renamed": (source_file_renamed, 0, "1 identical, 0 changed, 0 new, 0 gone"),
    "header_renamed": (header_renamed, 0, "1 identical, 0 changed, 0 new, 0 gone"),
    "base_without_a_configuration": (base_without_a_configuration, 1, "0 identical, 0 changed, 1 new, 0 gone"),
    "base_configuration_that_does_not_validate": (base_configuration_that_does_not_validate, 2,
                                                  "targets: must be a list of strings"),
    "working_tree_without_a_configuration": (working_tree_without_a_configuration, 0,
                                             "0 identical, 0 changed, 0 new, 1 gone"),
    "header_git_ignores": (header_git_ignores, 1, "0 identical, 0 changed, 1 new, 0 gone, 1 failed"),
    "base_that_does_not_compile": (base_that_does_not_compile, 1, "0 identical, 0 changed, 1 new, 0 gone, 1 failed"),
    "branch_named_with_slashes": (branch_named_with_slashes, 0, "0 identical, 1 changed, 0 new, 0 gone"),
    "lightweight_tag": (lightweight_tag, 0, "0 identical, 1 changed, 0 new, 0 gone"),
    "staged_files_not_committed": (staged_files_not_committed, 0, "0 identical, 1 changed, 0 new, 0 gone"),
    "unstaged_header_change_against_an_older_commit": (unstaged_header_change_against_an_older_commit, 0,
                                                       "0 identical, 1 changed, 1 new, 0 gone"),
    "orphan_branch_default_base": (orphan_branch_default_base, 2, "not a commit of this repository"),
}


@pytest.mark.parametrize("case", [pytest.param(c, marks=[] if c.startswith("triton_") else [needs_nvcc])
                                  for c in sorted(CASES)])
def test_each_side_is_its_own_revisions_project(tmp_path: Path, case: str) -> None:
    make, code, expected = CASES[case]
    project, args = make(tmp_path)
    run = _diff(project, *args)
    shown = run.stdout + run.stderr
    assert run.code == code, shown
    if code == 2:
        assert expected in run.stderr and len(run.stderr.strip().splitlines()) == 1, shown
        assert "kgate: error:" in run.stderr and not _git(project, "worktree", "list", "--porcelain").count("\nworktree ")
    else:
        assert _counts(run) == expected, shown


def test_a_data_file_of_another_folder_is_read_from_the_cache_on_both_sides_the_second_time(tmp_path: Path) -> None:
    """The base's checkout is made afresh by every run: its copy of a file outside the project's folder is known by
    its content, so an unchanged diff compiles nothing the second time."""
    project, args = triton_data_file_in_another_folder_of_the_repository(tmp_path)
    _diff(project, *args)
    run = _diff(project, *args)
    assert "(0 compiled, 2 from cache)" in run.stdout and _counts(run) == "0 identical, 1 changed, 0 new, 0 gone", \
        run.stdout + run.stderr
