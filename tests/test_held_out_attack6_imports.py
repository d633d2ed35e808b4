"""A kernel module whose import runs a program other than Python: what that program reads (a variable of the
environment, a repository's history, a file a shell glob finds) is not seen, so no key can hold the import. A warm
check after a change to what the program read must give the new verdict, as `--no-cache` does, and every run names
the program (docs/performance.md).

Each case is a project holding one module (`r_<case>.py`, one autotuned kernel whose BLOCK comes from the program's
answer): a cold check, the change, a warm check; the warm row must be the new variant (8192), never the old (256).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import kgate
from test_held_out_import_probes import _commit, _two_runs
from test_import_keys import CFG, HELPERS, _module

# (module text, files before, change): env:NAME in a change is a variable set for the warm check.
PROGRAMS: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {
    "printenv_of_a_variable": (
        HELPERS + _module('int(subprocess.run(["printenv", "MYPROJ_A6_P"], capture_output=True, text=True)'
                          '.stdout.strip() or "256")', "import subprocess\n"),
        {}, {"env:MYPROJ_A6_P": "8192"}),
    "popen_of_a_shell_echo": (
        HELPERS + _module('int(os.popen("echo ${MYPROJ_A6_E:-256}").read().strip())'),
        {}, {"env:MYPROJ_A6_E": "8192"}),
    "shell_line_through_check_output": (
        HELPERS + _module('8192 if subprocess.check_output("git log -1 --format=%s", shell=True, cwd=HERE, '
                          'text=True).strip() == "big" else 256', "import subprocess\n"),
        {"log.txt": _commit("small")}, {"log.txt": _commit("big")}),
    "cat_of_a_shell_glob": (
        HELPERS + _module('int(subprocess.run("cat d/*.txt", shell=True, cwd=HERE, capture_output=True, '
                          'text=True).stdout.strip())', "import subprocess\n"),
        {"d/b.txt": "256"}, {"d/b.txt": "8192"}),
}


@pytest.mark.parametrize("case", sorted(PROGRAMS))
def test_a_warm_check_after_a_change_to_what_a_program_read_gives_the_new_variant(tmp_path: Path, case: str) -> None:
    if case.startswith("shell_line") and shutil.which("git") is None:
        pytest.skip("git is not installed")
    first, second = _two_runs(tmp_path, case, *PROGRAMS[case])
    assert first == {256}, first
    assert second == {8192}, second


def test_the_run_names_the_program_and_says_nothing_is_kept(tmp_path: Path) -> None:
    text, files, _change = PROGRAMS["printenv_of_a_variable"]
    project = tmp_path / "p"
    project.mkdir()
    (project / "kgate.toml").write_text(CFG)
    (project / "r_p.py").write_text(text)
    for _ in range(2):
        run = kgate("check", "-v", cwd=project)
        assert run.code == 0, run.stdout + run.stderr
        assert "importing r_p ran printenv, whose own reads kgate does not see, so nothing made from its import " \
               "is kept" in run.stdout, run.stdout
        assert "1 compiled, 0 from cache" in run.stdout + run.stderr, run.stdout + run.stderr
