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
