"""Held-out cases for KG301 on a CMake setting whose architectures stand on the lines after the one that names it
(`set(CMAKE_CUDA_ARCHITECTURES <newline> 90 <newline> 120)`, a property's value on its own line, a quoted list broken
over lines): the rule read the line that names `CUDA_ARCHITECTURES` only, and a bare `120` one line down built
block-scaled MMA code for the portable target without a word. An argument list goes on to its `)`, as long as its
lines hold architectures only."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import kgate

FEATURE = "__global__ void k2(float* o) {\n#if defined(__CUDA_ARCH_FEAT_SM120_ALL)\n  o[0] = 1.f;\n#endif\n}\n"


def _lint(root: Path, build: str, *args: str) -> tuple[int, list[tuple[int, int, str]]]:
    (root / "kgate.toml").write_text('targets = ["sm_120a"]\n')
    (root / "f.cu").write_text(FEATURE)
    (root / "CMakeLists.txt").write_text("add_library(k STATIC f.cu)\n" + build)
    run = kgate("lint", "--no-cache", "--format", "json", *args, cwd=root)
    assert run.code in (0, 1) and "Traceback" not in run.stderr, run.stderr
    return run.code, sorted((f["line"], f["col"], f["code"]) for f in run.json()["findings"])


@pytest.mark.parametrize("build, line, col", [
    ("set(CMAKE_CUDA_ARCHITECTURES\n  90\n  120\n)\n", 4, 3),
    ("set_target_properties(k PROPERTIES\n  CUDA_ARCHITECTURES\n    \"120\")\n", 4, 6),
    ("set(CMAKE_CUDA_ARCHITECTURES \"90;\n120\")\n", 3, 1),
    ("set_property(TARGET k PROPERTY CUDA_ARCHITECTURES 90\n  120-real)\n", 3, 3),
    ("set(CMAKE_CUDA_ARCHITECTURES ${EXTRA}\n  120  # the consumer cards\n)\n", 3, 3),
])
def test_a_bare_architecture_on_a_later_line_of_the_setting_is_reported(tmp_path: Path, build: str, line: int,
                                                                         col: int) -> None:
    assert _lint(tmp_path, build) == (1, [(line, col, "KG301")])


@pytest.mark.parametrize("build", [
    "set(CMAKE_CUDA_ARCHITECTURES\n  90\n  120a\n)\n",  # the `a` target
    "set_target_properties(k PROPERTIES CUDA_ARCHITECTURES\n  120a\n  SOVERSION 120)\n",  # another property's number
    "set(CMAKE_CUDA_ARCHITECTURES 120a)\nset(OTHER\n  120\n)\n",  # closed on its line: the next command is not it
    "set(CMAKE_CUDA_ARCHITECTURES\n  # 120 once\n  120a\n)\n",  # a comment between the values
])
def test_the_good_twins_pass(tmp_path: Path, build: str) -> None:
    assert _lint(tmp_path, build) == (0, [])


def test_the_fix_edits_the_value_on_its_own_line(tmp_path: Path) -> None:
    _lint(tmp_path, "set(CMAKE_CUDA_ARCHITECTURES\n  90\n  120\n)\n", "--fix", "--unsafe-fixes")
    assert (tmp_path / "CMakeLists.txt").read_text() == \
        "add_library(k STATIC f.cu)\nset(CMAKE_CUDA_ARCHITECTURES\n  90\n  120a\n)\n"
