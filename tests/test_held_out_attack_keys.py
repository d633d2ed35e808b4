"""Held-out cache-key cases beyond tests/test_held_out_import_reads*.py and tests/test_held_out_keys.py: a module that
acts on a file's time (`os.path.getmtime`, `Path.stat().st_mtime`, `os.stat(...)[8]`, a link's own time), which a
stat that tests a path only (`os.path.exists`) does not key; and what differs from one run to the next that no
key can hold, read by other spellings than `time.time` and `random`'s shared generator (the process's id, the
clocks of `time.clock_gettime`, `os.times`, the load average, `os.getrandom`, `random.SystemRandom`, `secrets`, a
generator made without a seed, `uuid.uuid1`): the run must say so, as for the clock.

Each project holds one module (`r_<case>.py`, one kernel whose BLOCK comes from the read): a cold check, the change,
a warm check; the warm row must be the new variant (8192), as `--no-cache` has it, never the record of the old one.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import kgate
from test_held_out_keys import ONCE, _write
from test_import_keys import CFG, HELPERS, _module

OLD, NEW = 1_000_000_000, 3_000_000_000  # 2001 and 2065: the stamp's time before and after the change


def _stamped(when: int, link: bool = False) -> Any:
    def make(path: Path) -> None:
        if link:
            if not path.is_symlink():
                (path.parent / "target.txt").write_text("t")
                path.symlink_to("target.txt")
            os.utime(path, (when, when), follow_symlinks=False)
            os.utime(path.parent / "target.txt", (OLD, OLD))
            return
        if not path.exists():
            path.write_text("s")
        os.utime(path, (when, when))
    return make


STAMP = 'os.path.join(HERE, "stamp")'
TIMES: dict[str, tuple[str, str]] = {
    "getmtime": ("", f"8192 if os.path.getmtime({STAMP}) > 2e9 else 256"),
    "path_stat_st_mtime": ("", f"8192 if Path({STAMP}).stat().st_mtime > 2e9 else 256"),
    "os_stat_st_mtime_ns": ("", f"8192 if os.stat({STAMP}).st_mtime_ns > 2e18 else 256"),
    "os_stat_index_of_the_time": ("import stat\n", f"8192 if os.stat({STAMP})[stat.ST_MTIME] > 2e9 else 256"),
    "os_stat_unpacked": ("", f"8192 if tuple(os.stat({STAMP}))[8] > 2e9 else 256"),
    "lstat_of_a_link": ("", f"8192 if os.lstat({STAMP}).st_mtime > 2e9 else 256"),
    "two_stamps_compared": ("", f'8192 if os.path.getmtime({STAMP}) > os.path.getmtime(os.path.join(HERE, "old"))'
                                ' else 256'),
}


def _rows(project: Path, *args: str) -> tuple[dict[str, str], str]:
    run = kgate("check", "--show-kernels", *args, cwd=project, env={"COLUMNS": "250"})
    assert run.code in (0, 1), run.stderr
    return ({line.split(":", 1)[0][2:]: line for line in run.stdout.splitlines() if line.startswith("r_")},
            run.stdout + run.stderr)


def _project(tmp_path: Path, case: str, preamble: str, expression: str) -> Path:
    project = tmp_path / "p"
    project.mkdir()
    (project / "kgate.toml").write_text(CFG)
    (project / f"r_{case}.py").write_text(HELPERS + _module(expression, preamble))
    return project


@pytest.mark.parametrize("case", sorted(TIMES))
def test_a_time_the_import_reads_is_in_the_key(tmp_path: Path, case: str) -> None:
    project = _project(tmp_path, case, *TIMES[case])
    link = case == "lstat_of_a_link"
    _write(project, {"stamp": _stamped(OLD, link), "old": _stamped(2_000_000_000)})
    assert "BLOCK=256," in _rows(project)[0][case]
    _write(project, {"stamp": _stamped(NEW, link)})
    rows, said = _rows(project)
    assert case in rows, said
    warm = rows[case]
    assert "BLOCK=8192," in warm, warm
    assert warm == _rows(project, "--no-cache")[0][case]


@pytest.mark.parametrize("test", ["os.path.exists", "os.path.isfile", "Path.is_file", "os.path.getsize",
                                  "os.stat(p).st_size"])
def test_a_stat_that_reads_no_time_is_served_after_a_touch(tmp_path: Path, test: str) -> None:
    """A path tested for what a checkout keeps (there, a file, its size) is not keyed by its times: a touch, as
    every checkout makes, imports nothing again (`_once()` logs each import)."""
    expression = {"os.path.exists": f"os.path.exists({STAMP})", "os.path.isfile": f"os.path.isfile({STAMP})",
                  "Path.is_file": f"Path({STAMP}).is_file()", "os.path.getsize": f"os.path.getsize({STAMP}) == 1",
                  "os.stat(p).st_size": f"os.stat({STAMP}).st_size == 1"}[test]
    project = _project(tmp_path, "touch", ONCE, f"(8192 if {expression} else 256) if _once() else 1")
    _write(project, {"stamp": _stamped(OLD)})
    assert "BLOCK=8192," in _rows(project)[0]["touch"]
    _write(project, {"stamp": _stamped(NEW)})
    assert "BLOCK=8192," in _rows(project)[0]["touch"]
    assert (project / "imports.log").read_text().count("x") == 1


PER_RUN: dict[str, tuple[str, str, str]] = {
    "getpid": ("", "256 if os.getpid() % 2 else 8192", "the process's id"),
    "getppid": ("", "256 if os.getppid() % 2 else 8192", "the process's id"),
    "clock_gettime": ("import time\n", "256 if int(time.clock_gettime(time.CLOCK_REALTIME)) % 2 else 8192",
                      "the clock"),
    "clock_gettime_ns": ("import time\n", "256 if time.clock_gettime_ns(time.CLOCK_MONOTONIC) % 2 else 8192",
                         "the clock"),
    "os_times": ("", "256 if int(os.times().elapsed * 100) % 2 else 8192", "the clock"),
    "getrusage": ("import resource\n", "256 if resource.getrusage(resource.RUSAGE_SELF).ru_maxrss % 2 else 8192",
                  "the clock"),
    "getloadavg": ("", "256 if os.getloadavg()[0] > 0.5 else 8192", "the machine's load"),
    "getrandom": ("", "256 if os.getrandom(1)[0] % 2 else 8192", "random numbers"),
    "system_random": ("import random\n", "random.SystemRandom().choice([256, 8192])", "random numbers"),
    "secrets": ("import secrets\n", "secrets.choice([256, 8192])", "random numbers"),
    "generator_without_a_seed": ("import random\n", "random.Random().choice([256, 8192])", "random numbers"),
    "generator_seeded_again_without_one": ("import random\n_g = random.Random(1)\n_g.seed()\n",
                                           "_g.choice([256, 8192])", "random numbers"),
    "uuid1": ("import uuid\n", "256 if uuid.uuid1().int % 2 else 8192", "the clock"),
    "uuid1_imported_by_name": ("from uuid import uuid1\n", "256 if uuid1().int % 2 else 8192", "the clock"),
}


@pytest.mark.parametrize("case", sorted(PER_RUN))
def test_what_differs_from_run_to_run_is_said(tmp_path: Path, case: str) -> None:
    preamble, expression, what = PER_RUN[case]
    project = _project(tmp_path, case, preamble, expression)
    first, said = _rows(project)
    assert f"importing r_{case} read {what}, which no key can hold" in said, said
    again, said = _rows(project)
    assert again == first and f"read {what}" in said


@pytest.mark.parametrize(("case", "preamble", "expression"), [
    ("seeded_generator", "import random\n", "random.Random(42).choice([256, 8192])"),
    ("logging_at_import", "import logging\nlogging.getLogger('r').warning('tile')\n", "256"),
    ("temporary_folder", "import tempfile\n_d = tempfile.TemporaryDirectory()\n", "256"),
])
def test_what_the_standard_library_reads_for_its_own_use_is_not_said(tmp_path: Path, case: str, preamble: str,
                                                                       expression: str) -> None:
    """logging stamps its records with the process's id and the time, tempfile names its folders at random: not
    the project's reads; nor what a generator seeded with a value draws."""
    project = _project(tmp_path, case, preamble, expression)
    rows, said = _rows(project)
    assert case in rows and "no key can hold" not in said, said


def test_a_diff_whose_sides_differ_by_a_time_the_import_reads_is_not_identical(tmp_path: Path) -> None:
    """The base's checkout has the stamp as git writes it (now); the working tree's is in 2065: the kernel module
    compiles another variant on each side, and no side is served the other's record."""
    project = _project(tmp_path, "stamp", "", f"8192 if os.path.getmtime({STAMP}) > 2e9 else 256")
    (project / "stamp").write_text("s")
    env = {**os.environ, "GIT_AUTHOR_NAME": "k", "GIT_AUTHOR_EMAIL": "k@k", "GIT_COMMITTER_NAME": "k",
           "GIT_COMMITTER_EMAIL": "k@k"}
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "base"]):
        subprocess.run(["git", *command], cwd=project, env=env, check=True, capture_output=True)
    _write(project, {"stamp": _stamped(NEW)})
    run = kgate("diff", "HEAD", "--require-identical", cwd=project)
    assert run.code == 1 and "1 changed" in run.stdout, run.stdout + run.stderr
