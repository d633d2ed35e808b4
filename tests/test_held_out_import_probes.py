"""What a kernel module's import (or its autotune and heuristics callbacks) reads, beyond the readers of
tests/test_import_keys.py, tests/test_held_out_keys.py and tests/test_held_out_import_reads*.py: a local
distribution's version, a git program asked for the history, a sibling's file found by `find_spec`, a module whose
import sets another module's globals, a folder that appears, the link count of a file, a cache shared by two kernel
modules, and reads made when kgate expands a kernel's variants (a heuristic, `early_config_prune`) rather than at
import. And probes whose answer does not change on one machine (`os.cpu_count`, `platform.machine`,
`sysconfig`, a temporary file written and read back): a second run is served from the cache.

Each case is a project holding one module (`r_<case>.py`, one kernel whose BLOCK comes from the read): a cold check,
the change, a warm check; the warm row must be the new variant (8192), never the record of the old one (256).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import kgate
from test_held_out_keys import _write
from test_import_keys import CFG, HELPERS, _module


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", "-c", "user.name=k", "-c", "user.email=k@k", *args], cwd=cwd, check=True,
                   capture_output=True)


def _commit(message: str) -> Any:
    def make(path: Path) -> None:
        path.write_text(message)
        if not (path.parent / ".git").exists():
            _git("init", "-q", cwd=path.parent)
        _git("add", path.name, cwd=path.parent)
        _git("commit", "-q", "-m", message, cwd=path.parent)
    return make


def _hard_link_of(target: str) -> Any:
    def make(path: Path) -> None:
        os.link(path.parent / target, path)
    return make


def _copy_of(source: str) -> Any:
    """The name made an independent copy of `source`: same text, another file."""
    def make(path: Path) -> None:
        path.unlink()
        shutil.copy(path.parent / source, path)
    return make


def _metadata(version: str) -> str:
    return f"Metadata-Version: 2.1\nName: myproj-tiles\nVersion: {version}\n"


HEURISTIC = '''\
import os

import kgate
import triton
import triton.language as tl

HERE = os.path.dirname(os.path.abspath(__file__))


def _block(args):
    return {expression}


@kgate.register(signature={{"x": "*fp32", "y": "*fp32", "n": "i32"}})
@triton.heuristics({{"BLOCK": _block}})
@triton.jit
def fill_kernel(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs, mask=offs < n)
    tl.store(y + offs, v * 2, mask=offs < n)
'''
PRUNE = '''\
import os

import kgate
import triton
import triton.language as tl

HERE = os.path.dirname(os.path.abspath(__file__))


def _prune(configs, named_args, **kwargs):
    keep = {expression}
    return [c for c in configs if c.kwargs["BLOCK"] == keep]


@kgate.register(signature={{"x": "*fp32", "y": "*fp32", "n": "i32"}})
@triton.autotune(configs=[triton.Config({{"BLOCK": 256}}, num_warps=4), triton.Config({{"BLOCK": 8192}}, num_warps=4)],
                 key=[], prune_configs_by={{"early_config_prune": _prune}})
@triton.jit
def fill_kernel(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs, mask=offs < n)
    tl.store(y + offs, v * 2, mask=offs < n)
'''
TEMP_FILE = '''import tempfile


def _round_trip(text):
    with tempfile.NamedTemporaryFile("w+") as f:
        f.write(text)
        f.flush()
        return int(open(f.name).read())
'''
CACHED_HEURISTIC = '''\
import functools
import os

import kgate
import triton
import triton.language as tl

HERE = os.path.dirname(os.path.abspath(__file__))


@functools.cache
def _tile():
    return int(open(os.path.join(HERE, "d", "b.txt")).read())


@kgate.register(signature={"x": "*fp32", "y": "*fp32", "n": "i32"})
@kgate.register(signature={"x": "*fp16", "y": "*fp16", "n": "i32"})
@triton.heuristics({"BLOCK": lambda args: _tile()})
@triton.jit
def fill_kernel(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs, mask=offs < n)
    tl.store(y + offs, v * 2, mask=offs < n)
'''
DIST = '''import importlib.metadata


def _has_dist(name):
    try:
        return bool(importlib.metadata.version(name))
    except importlib.metadata.PackageNotFoundError:
        return False
'''
READ_B = 'int(open(os.path.join(HERE, "d", "b.txt")).read())'

# case -> (module text, files, the change); `env:NAME` in a change is a variable of the second run.
CASES: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {
    "version_of_a_local_distribution": (
        HELPERS + _module('8192 if importlib.metadata.version("myproj-tiles").startswith("2") else 256',
                          "import importlib.metadata\n"),
        {"myproj_tiles-1.0.dist-info/METADATA": _metadata("1.0")},
        {"myproj_tiles-1.0.dist-info/METADATA": _metadata("2.0")}),
    "git_history_counted_by_git": (
        HELPERS + _module('8192 if int(subprocess.check_output(["git", "rev-list", "--count", "HEAD"], cwd=HERE)) > 1 '
                          "else 256", "import subprocess\n"),
        {"log.txt": _commit("one")}, {"log.txt": _commit("two")}),
    "git_message_of_the_head_commit": (
        HELPERS + _module('8192 if subprocess.check_output(["git", "log", "-1", "--format=%s"], cwd=HERE, '
                          'text=True).strip() == "big" else 256', "import subprocess\n"),
        {"log.txt": _commit("small")}, {"log.txt": _commit("big")}),
    "file_of_a_sibling_found_by_find_spec": (
        HELPERS + _module('int(open(importlib.util.find_spec("sib_b").origin).read().split("=")[1])',
                          "import importlib.util\n"),
        {"sib_b.py": "B = 256\n"}, {"sib_b.py": "B = 8192\n"}),
    "import_sets_another_modules_global": (
        HELPERS + _module("mut_target.B", "import mut_target\nimport mutator  # noqa: F401\n"),
        {"mut_target.py": "B = 1\n", "mutator.py": "import mut_target\nmut_target.B = 256\n"},
        {"mutator.py": "import mut_target\nmut_target.B = 8192\n"}),
    "import_sets_another_modules_global_from_a_file": (
        HELPERS + _module("mut_file_target.B", "import mut_file_target\nimport file_mutator  # noqa: F401\n"),
        {"mut_file_target.py": "B = 1\n", "d/b.txt": "256",
         "file_mutator.py": ('import os\nimport mut_file_target\nmut_file_target.B = int(open(os.path.join('
                             'os.path.dirname(os.path.abspath(__file__)), "d", "b.txt")).read())\n')},
        {"d/b.txt": "8192"}),
    "listing_of_a_folder_that_appears": (
        HELPERS + _module('max([int(n) for n in os.listdir(os.path.join(HERE, "later"))] or [1]) '
                          'if os.path.isdir(os.path.join(HERE, "later")) else 256'),
        {}, {"later/8192": ""}),
    "link_count_of_a_file": (
        HELPERS + _module('8192 if os.stat(os.path.join(HERE, "d", "n.txt")).st_nlink > 1 else 256'),
        {"d/n.txt": "same"}, {"d/n2.txt": _hard_link_of("n.txt")}),
    "samefile_of_two_names": (
        HELPERS + _module('256 if os.path.samefile(os.path.join(HERE, "d", "a"), os.path.join(HERE, "d", "b")) '
                          "else 8192"),
        {"d/a": "x", "d/b": _hard_link_of("a")}, {"d/b": _copy_of("a")}),
    "distribution_removed": (
        HELPERS + _module('256 if _has_dist("myproj-tiles") else 8192', DIST),
        {"myproj_tiles-1.0.dist-info/METADATA": _metadata("1.0")}, {"myproj_tiles-1.0.dist-info/METADATA": None}),
    "heuristic_lists_a_folder": (HEURISTIC.format(expression='max(int(n) for n in os.listdir(os.path.join(HERE, "t")))'),
                                 {"t/256": ""}, {"t/8192": ""}),
    "heuristic_reads_a_file": (HEURISTIC.format(expression=READ_B), {"d/b.txt": "256"}, {"d/b.txt": "8192"}),
    "heuristic_reads_a_variable": (HEURISTIC.format(expression='int(os.environ.get("MYPROJ_HEUR", "256"))'), {},
                                   {"env:MYPROJ_HEUR": "8192"}),
}
# An early prune runs at launch, on the launch's arguments: kgate gates every config the kernel lists, whatever the
# prune would read (the same cases, both variants in both runs).
PRUNED: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {
    "early_prune_reads_a_file": (PRUNE.format(expression=READ_B), {"d/b.txt": "256"}, {"d/b.txt": "8192"}),
    "early_prune_reads_a_variable": (PRUNE.format(expression='int(os.environ.get("MYPROJ_PRUNE", "256"))'), {},
                                     {"env:MYPROJ_PRUNE": "8192"}),
}


# A program other than Python (git) is keyed by its file and the paths its arguments name; what it reads besides
# (the repository's history) is not seen (docs/performance.md): the run says so, every time.
UNSEEN = {"git_history_counted_by_git", "git_message_of_the_head_commit"}


@pytest.mark.parametrize("case", sorted(set(CASES) - UNSEEN))
def test_every_read_of_the_import_and_the_expansion_is_in_the_key(tmp_path: Path, case: str) -> None:
    first, second = _two_runs(tmp_path, case, *CASES[case])
    assert first == {256}, first
    assert second == {8192}, second


@pytest.mark.parametrize("case", sorted(UNSEEN))
def test_a_program_whose_reads_are_not_seen_is_named_in_every_run(tmp_path: Path, case: str) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    text, files, change = CASES[case]
    project = tmp_path / "p"
    project.mkdir()
    (project / "kgate.toml").write_text(CFG)
    (project / f"r_{case}.py").write_text(text)
    _write(project, files)
    said = f"importing r_{case} ran git, whose own reads kgate does not see"
    for _ in range(2):  # compiled, then served (the record, or the replay of the run)
        run = kgate("check", cwd=project)
        assert run.code == 0 and said in run.stdout, run.stdout + run.stderr
    _write(project, change)
    wide = {"COLUMNS": "250"}  # the table's whole variant names, whatever terminal the suite runs under
    assert "BLOCK=8192," in kgate("check", "--show-kernels", "--no-cache", cwd=project, env=wide).stdout


@pytest.mark.parametrize("case", sorted(PRUNED))
def test_every_config_of_a_pruned_autotune_is_gated(tmp_path: Path, case: str) -> None:
    assert _two_runs(tmp_path, case, *PRUNED[case]) == ({256, 8192}, {256, 8192})


def _blocks(project: Path, env: dict[str, str]) -> set[int]:
    run = kgate("check", "--show-kernels", cwd=project, env={"COLUMNS": "250", **env})
    assert run.code in (0, 1), run.stderr
    return {int(m) for m in re.findall(r"^r_\S+\s+BLOCK=(\d+)", run.stdout, re.MULTILINE)}


def _two_runs(tmp_path: Path, case: str, text: str, files: dict[str, Any],
              change: dict[str, Any]) -> tuple[set[int], set[int]]:
    """The BLOCKs a cold check shows, and those a warm check shows after the change."""
    project = tmp_path / "p"
    project.mkdir()
    (project / "kgate.toml").write_text(CFG)
    (project / f"r_{case}.py").write_text(text)
    _write(project, files)
    first = _blocks(project, {})
    _write(project, {name: text for name, text in change.items() if not name.startswith("env:")})
    return first, _blocks(project, {name[4:]: text for name, text in change.items() if name.startswith("env:")})


# (module text, files): probes of what does not change on one machine, and a heuristic over an unchanged file; the
# second run compiles nothing.
KEPT: dict[str, tuple[str, dict[str, Any]]] = {
    "cpu_count": (HELPERS + _module("256 if os.cpu_count() else 1"), {}),
    "platform_machine": (HELPERS + _module("256 if platform.machine() else 1", "import platform\n"), {}),
    "sysconfig_variable": (HELPERS + _module('256 if sysconfig.get_config_var("EXT_SUFFIX") else 1',
                                             "import sysconfig\n"), {}),
    "temporary_file_written_and_read_back": (HELPERS + _module('_round_trip("256")', TEMP_FILE), {}),
    "heuristic_over_an_unchanged_file": (HEURISTIC.format(expression=READ_B), {"d/b.txt": "256"}),
}


@pytest.mark.parametrize("case", sorted(KEPT))
def test_what_does_not_change_is_served_from_the_cache(tmp_path: Path, case: str) -> None:
    text, files = KEPT[case]
    project = tmp_path / "p"
    project.mkdir()
    (project / "kgate.toml").write_text(CFG)
    (project / f"r_{case}.py").write_text(text)
    _write(project, files)
    first = kgate("check", "-v", "--show-kernels", cwd=project, env={"COLUMNS": "250"})
    assert "1 compiled" in first.stderr + first.stdout and "BLOCK=256," in first.stdout, first.stdout + first.stderr
    (project / "unrelated.txt").write_text("a run that cannot be replayed")  # the cache answers, not the replay
    again = kgate("check", "-v", cwd=project)
    assert "0 compiled, 1 from cache" in again.stdout + again.stderr, again.stdout + again.stderr


def test_a_heuristic_that_caches_its_read_keys_every_registration(tmp_path: Path) -> None:
    """Two registrations bound in one worker: the second binding's heuristic reads nothing (its first call cached
    the file), yet its record is keyed on the file as the first one's is."""
    project = tmp_path / "p"
    project.mkdir()
    (project / "kgate.toml").write_text(CFG)
    (project / "r_cached.py").write_text(CACHED_HEURISTIC)
    _write(project, {"d/b.txt": "256"})

    def rows(*args: str) -> list[str]:
        run = kgate("check", "-j", "1", "--show-kernels", *args, cwd=project, env={"COLUMNS": "250"})
        assert run.code == 0, run.stdout + run.stderr
        return sorted(line for line in run.stdout.splitlines() if line.startswith("r_cached:"))

    small = rows()
    _write(project, {"d/b.txt": "8192"})
    warm = rows()
    assert warm == rows("--no-cache") and warm != small, (small, warm)


def test_a_diff_never_serves_one_side_the_others_record_of_an_unseen_program(tmp_path: Path) -> None:
    """The module asks git for the message of the commit it is imported in: the base's checkout says "small", the
    working tree "big". No read of the module tells the sides apart, so neither side may be served a record made
    before the diff (a check's, made before the commit) or by the other side: the variant changed, every time."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    text, _files, _change = CASES["git_message_of_the_head_commit"]
    project = tmp_path / "p"
    project.mkdir()
    (project / "kgate.toml").write_text(CFG)
    (project / "r_git.py").write_text(text)
    (project / ".gitignore").write_text(".kgate-cache/\n__pycache__/\n")
    _git("init", "-q", "-b", "main", cwd=project)
    _git("add", "-A", cwd=project)
    _git("commit", "-q", "-m", "small", cwd=project)
    assert kgate("check", cwd=project).code == 0  # the working tree's record, made before the next commit
    _git("commit", "-q", "--allow-empty", "-m", "big", cwd=project)
    for _ in range(2):
        run = kgate("diff", "HEAD~1", "--require-identical", cwd=project)
        assert run.code == 1 and "0 identical, 1 changed" in run.stdout, run.stdout + run.stderr
        assert "importing r_git ran git, whose own reads kgate does not see" in run.stderr, run.stderr
        assert "compiled afresh for each side of this diff" in run.stderr, run.stderr


# A library looked up by name at import (`ctypes.util.find_library`, which torch's CUDA build runs at its first CUDA
# query) runs `ldconfig -p` (or a compiler) for the standard library's own search: not a program of the project's,
# so not said on every run; the project's own run of the same program still is.
LOOKUPS = {
    "library_found_by_name": ('256 if ctypes.util.find_library("m") else 8192', "import ctypes.util\n", False),
    "ldconfig_run_by_the_module": (
        '256 if subprocess.run(["ldconfig", "-p"], capture_output=True).returncode == 0 else 8192',
        "import subprocess\n", True),
}


@pytest.mark.parametrize("case", sorted(LOOKUPS))
def test_a_library_lookup_is_not_a_program_the_project_ran(tmp_path: Path, case: str) -> None:
    if shutil.which("ldconfig") is None and not os.path.exists("/sbin/ldconfig"):
        pytest.skip("ldconfig is not installed")
    block, preamble, said = LOOKUPS[case]
    project = tmp_path / "p"
    project.mkdir()
    (project / "kgate.toml").write_text(CFG)
    (project / f"r_{case}.py").write_text(HELPERS + _module(block, preamble))
    run = kgate("check", cwd=project)
    assert run.code == 0, run.stdout + run.stderr
    assert ("ran ldconfig, whose own reads kgate does not see" in run.stdout) == said, run.stdout
