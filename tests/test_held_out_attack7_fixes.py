"""Comment edits in a Makefile's make text, where the spacing before a comment is part of the line.

GNU make keeps the whitespace that precedes a comment in a variable's value: `NV := -arch=sm_120  # note` gives
`NV` the value `-arch=sm_120` and two spaces. `kgate lint --add-ignore` wrote its pin two spaces after the code,
so every pinned assignment gained two trailing spaces (`$(NV)/x` became `-arch=sm_120  /x`), and KG002's fix took
the spaces before a removed directive along with it. The file's text outside comments was compared with the
spacing before comments and at lines' ends dropped, so neither change was seen. A pin in make text now follows
the value with no space, a removed directive leaves the spacing, and the comparison keeps what make keeps;
recipes, which make hands to the shell (where `#` starts a comment only at a word's start), are as before.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import kgate

from kgate.support.comments import code_only, same_code

needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
BLOCK_SCALED = '__global__ void k(float* x) { asm volatile("setmaxnreg.inc.sync.aligned.u32 240;"); }\n'
MAKEFILE = (
    "NV := -arch=sm_120\n"
    "NV2 = -gencode arch=compute_120,code=sm_120\n"
    "NV3 := -arch=sm_120   \n"  # the value ends in three spaces already
    "export NV4 = -arch=sm_120\n"
    "build:\n"
    "\tnvcc -arch=sm_120 -c k.cu\n"
    "show:\n"
    "\t@echo \"[$(NV)][$(NV2)][$(NV3)][$(NV4)]\"\n"
)


def _values(project: Path) -> str:
    return subprocess.run(["make", "-s", "show"], cwd=project, capture_output=True, text=True, check=True).stdout


def _project(tmp_path: Path, makefile: str) -> Path:
    project = tmp_path / "p"
    project.mkdir()
    (project / "kgate.toml").write_text('targets = ["sm_120a"]\n')
    (project / "k.cu").write_text(BLOCK_SCALED)
    (project / "Makefile").write_text(makefile)
    return project


@needs_make
def test_pins_leave_every_variable_as_it_was(tmp_path: Path) -> None:
    project = _project(tmp_path, MAKEFILE)
    before = _values(project)
    run = kgate("lint", "--add-ignore", cwd=project)
    assert run.code == 0, run.stdout + run.stderr
    text = (project / "Makefile").read_text()
    assert "NV := -arch=sm_120# kgate: ignore[KG301] TODO: give the reason\n" in text, text
    assert "NV3 := -arch=sm_120   # kgate: ignore[KG301]" in text, text
    assert "\tnvcc -arch=sm_120 -c k.cu  # kgate: ignore[KG301]" in text, text  # the shell's comment
    assert _values(project) == before
    after = kgate("lint", cwd=project)
    assert "KG301" not in after.stdout.replace("ignore[KG301]", ""), after.stdout  # every pin reads back


@needs_make
def test_a_stale_pin_removed_leaves_the_value(tmp_path: Path) -> None:
    project = _project(tmp_path, "X := -O3  # kgate: ignore[KG301] an old reason\n"
                                 "Y := -O2# kgate: ignore[KG301] an old reason\n"
                                 "show:\n\t@echo \"[$(X)][$(Y)]\"\n")
    before = _values(project)
    assert before == "[-O3  ][-O2]\n"
    run = kgate("lint", "--fix", cwd=project)
    assert run.code == 0 and "fixed 2 finding(s)" in run.stderr, run.stdout + run.stderr
    assert "kgate:" not in (project / "Makefile").read_text()
    assert _values(project) == before


@pytest.mark.parametrize(("before", "after", "same"), [
    ("NV := x\n", "NV := x  # c\n", False),  # two spaces more in the value
    ("NV := x\n", "NV := x# c\n", True),
    ("B := x   \n", "B := x   # c\n", True),
    ("X := a  # c\n", "X := a\n", False),
    ("all:\n\tcmd\n", "all:\n\tcmd  # c\n", True),  # a recipe: the shell's spacing
    ("# c\nA = 1\n", "A = 1\n", True),
])
def test_make_text_reads_its_spacing(before: str, after: str, same: bool) -> None:
    assert same_code("Makefile", before, after) is same, (code_only(before, "make"), code_only(after, "make"))
