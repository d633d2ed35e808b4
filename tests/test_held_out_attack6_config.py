"""Held-out cases for the path patterns of the configuration (`exclude`, `extend-exclude`, `per-file-ignores`, a
rule's file globs): a `**/` stands for any number of folders, none included, as git, ruff and `Path.glob` read it.
Read as `fnmatch` reads it, `**/gen/*.cu` needed a `/` before `gen`: the top-level `gen/` folder was neither
excluded nor exempted, and a project whose generated kernels live there failed on them."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import kgate

from kgate.collect.files import Exclusions, glob_matcher
from kgate.core.selection import _path_matches

LAUNCH = "__global__ void k(float* x) {}\nvoid a(float* x) {\n  k<<<1, 1>>>(x);\n}\n"


@pytest.mark.parametrize("pattern, path, matched", [
    ("**/gen/*.cu", "gen/k.cu", True),
    ("**/gen/*.cu", "a/b/gen/k.cu", True),
    ("src/**/k.cu", "src/k.cu", True),
    ("src/**/k.cu", "src/a/k.cu", True),
    ("**/gen/**/k.cu", "gen/k.cu", True),
    ("**/gen/*.cu", "xgen/k.cu", False),  # the folder's name is whole
    ("**/gen/*.cu", "gen.cu", False),
])
def test_a_leading_or_inner_globstar_matches_no_folder_too(pattern: str, path: str, matched: bool) -> None:
    assert glob_matcher([pattern])(path) is matched
    assert _path_matches(path, pattern) is matched
    assert Exclusions([pattern])(path) is matched


@pytest.mark.parametrize("setting", ['exclude = ["**/gen"]', 'extend-exclude = ["**/gen/*.cu"]',
                                     '[per-file-ignores]\n"**/gen/*.cu" = ["KG302"]'])
def test_the_top_level_folder_of_a_globstar_pattern_is_covered(tmp_path: Path, setting: str) -> None:
    (tmp_path / "kgate.toml").write_text(f'targets = ["sm_120a"]\n{setting}\n')
    for folder in ("gen", "lib/gen"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "k.cu").write_text(LAUNCH)
    (tmp_path / "xgen").mkdir()
    (tmp_path / "xgen" / "k.cu").write_text(LAUNCH)
    run = kgate("lint", "--no-cache", "--format", "json", cwd=tmp_path)
    assert run.code == 1, run.stdout + run.stderr
    assert sorted(f["path"] for f in run.json()["findings"]) == ["xgen/k.cu"]


def test_a_kgate_toml_linked_to_a_shared_one_configures_the_folder_it_stands_in(tmp_path: Path) -> None:
    """`kgate.toml -> ../shared/kgate.toml`: the configuration was read as the shared folder's, so its patterns named
    paths there (`per-file-ignores` matched nothing, `[[cuda]] sources` no file). The link's folder is the project."""
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "kgate.toml").write_text('targets = ["sm_120a"]\n[per-file-ignores]\n"gen/*" = ["KG302"]\n')
    project = tmp_path / "p"
    (project / "gen").mkdir(parents=True)
    (project / "gen" / "k.cu").write_text(LAUNCH)
    (project / "k.cu").write_text(LAUNCH)
    (project / "kgate.toml").symlink_to("../shared/kgate.toml")
    run = kgate("lint", "--no-cache", "--format", "json", cwd=project)
    assert run.code == 1, run.stdout + run.stderr
    assert [f["path"] for f in run.json()["findings"]] == ["k.cu"]
    settings = kgate("lint", "--show-settings", cwd=project)
    assert f'"root": "{project}"' in settings.stdout, settings.stdout


def test_a_file_outside_the_configurations_folder_is_read_as_its_own_folders(tmp_path: Path) -> None:
    """`kgate lint --config ../shared/kgate.toml` in a sibling folder: its files are outside the project, named by
    absolute path, and the launch rule took the root of the file system for their project and walked all of it (a
    lint of one file ran for minutes and grew to a gigabyte). Such a file's own folder stands for its project."""
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "kgate.toml").write_text('targets = ["sm_120a"]\n')
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "k.cu").write_text(LAUNCH)
    (tmp_path / "p" / "ops.py").write_text("import triton\n\n\n@triton.autotune(configs=[], key=['n'])\n@triton.jit\n"
                                         "def k(x, n):\n    pass\n")
    run = kgate("lint", "--no-cache", "--format", "json", "--config", "../shared/kgate.toml", cwd=tmp_path / "p",
                timeout=60, process=True)
    assert run.code == 1, run.stdout + run.stderr
    assert [f["code"] for f in run.json()["findings"]] == ["KG302"]
