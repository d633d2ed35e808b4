"""What a kernel module's import reads, beyond tests/test_import_keys.py, tests/test_held_out_keys.py and
tests/test_held_out_import_reads*.py: readers of other spellings (`io.open`, `codecs.open`, `exec` of a file's
text, `importlib.resources`' functions, `importlib.util.find_spec`), variables read inside functions, class bodies
and other modules, a read in the `__init__.py` of a package two imports away, listings that decide the configs
(a file added, renamed, removed), a module that is a link retargeted, a data file hard-linked from outside, a copy
read in place of the file, a `.pth` line, and what the import reads without a Python look-up: the time zone the C
library reads (`TZ`), how the interpreter is started (`PYTHONOPTIMIZE`, `PYTHONWARNINGS`, `PYTHONHASHSEED`: run
as a user runs kgate, in a process of its own) and the command line (`sys.argv`).

Each case is a project holding one module (`r_<case>.py`, one kernel whose BLOCK comes from the read): a cold
check, the change, a warm check; the warm row must be the new variant (8192), never the record of the old one
(256). The variables a change names are the second run's.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import kgate
from test_held_out_keys import ONCE, _link, _write
from test_import_keys import CFG, HELPERS, _module

READ_DELETE = '''
def _read_and_delete(path, default):
    try:
        with open(path) as f:
            found = int(f.read())
    except FileNotFoundError:
        return default
    os.remove(path)
    return found
'''
AS_FILE = '''import importlib.resources


def _as_file(package, name):
    with importlib.resources.as_file(importlib.resources.files(package) / name) as path:
        return int(open(path).read())
'''
COPY = '''import shutil
import tempfile


def _copied(path):
    with tempfile.TemporaryDirectory() as folder:
        return int(open(shutil.copy(path, os.path.join(folder, "c.txt"))).read())
'''
PTH = ("import site\nsite.addsitedir(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'sd_pth'))\n")


def _hard_link(target: str) -> Any:
    def make(path: Path) -> None:
        path.unlink(missing_ok=True)
        os.link(path.parent / target, path)
    return make


def _edit_in_place(text: str) -> Any:
    def make(path: Path) -> None:
        with open(path, "r+") as f:
            f.truncate(0)
            f.write(text)
    return make


def _rename(old: str) -> Any:
    def make(path: Path) -> None:
        (path.parent / old).rename(path)
    return make


# case -> (preamble, BLOCK expression, files, the change); `env:NAME` in a change is a variable of the second run.
@functools.cache
def _parity(seed: str) -> int:
    """hash("kgate-tile") % 2 under a hash seed, in this interpreter (the string hash is a Python release's choice)."""
    said = subprocess.run([sys.executable, "-c", 'print(hash("kgate-tile") % 2)'], capture_output=True, text=True,
                          env={**os.environ, "PYTHONHASHSEED": seed}, check=True)
    return int(said.stdout)


def _other_seed() -> str:
    """A seed under which the parity differs from seed 0's."""
    return next(str(seed) for seed in range(1, 64) if _parity(str(seed)) != _parity("0"))


CASES: dict[str, tuple[str, str, dict[str, Any], dict[str, Any]]] = {
    "io_open": ("import io\n", 'int(io.open(os.path.join(HERE, "d", "io_open.txt")).read())',
                {"d/io_open.txt": "256"}, {"d/io_open.txt": "8192"}),
    "codecs_open": ("import codecs\n", 'int(codecs.open(os.path.join(HERE, "d", "codecs.txt"), "r", "utf-8").read())',
                    {"d/codecs.txt": "256"}, {"d/codecs.txt": "8192"}),
    "exec_of_open_read_in_module_globals": (
        'exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "d", "conf_exec.py")).read())\n',
        "B_EXEC", {"d/conf_exec.py": "B_EXEC = 256\n"}, {"d/conf_exec.py": "B_EXEC = 8192\n"}),
    "environ_get_in_a_function_called_at_import": (
        'def _block():\n    return int(os.environ.get("MYPROJ_FN", "256"))\n', "_block()", {}, {"env:MYPROJ_FN": "8192"}),
    "getenv_with_a_default_in_a_class_body": (
        'class _Tile:\n    B = int(os.getenv("MYPROJ_CLS", "256"))\n', "_Tile.B", {}, {"env:MYPROJ_CLS": "8192"}),
    "environ_get_in_another_module": ("import envhelp\n", "envhelp.block()",
                                      {"envhelp.py": 'import os\n\n\ndef block():\n    return int(os.environ.get('
                                                     '"MYPROJ_MOD", "256"))\n'}, {"env:MYPROJ_MOD": "8192"}),
    "read_in_an_init_two_packages_away": (
        "import outer_pkg.inner\n", "outer_pkg.inner.B",
        {"outer_pkg/__init__.py": "import far_cfg  # noqa: F401\n", "outer_pkg/inner.py": "from far_cfg import B\n",
         "far_cfg/__init__.py": ('import os\nB = int(open(os.path.join(os.path.dirname(__file__), "data", "b.txt"))'
                                 '.read())\n'), "far_cfg/data/b.txt": "256"},
        {"far_cfg/data/b.txt": "8192"}),
    "importlib_resources_read_text": ("import importlib.resources\n",
                                      'int(importlib.resources.read_text("res_legacy", "b.txt"))',
                                      {"res_legacy/__init__.py": "", "res_legacy/b.txt": "256"},
                                      {"res_legacy/b.txt": "8192"}),
    "importlib_resources_as_file": (AS_FILE, '_as_file("res_asfile", "b.txt")',
                                    {"res_asfile/__init__.py": "", "res_asfile/b.txt": "256"},
                                    {"res_asfile/b.txt": "8192"}),
    "pkgutil_get_data_in_a_subfolder": ("import pkgutil\n", 'int(pkgutil.get_data("data_pkg", "sub/b.txt"))',
                                        {"data_pkg/__init__.py": "", "data_pkg/sub/b.txt": "256"},
                                        {"data_pkg/sub/b.txt": "8192"}),
    "relative_import_module": ("import importlib\n", 'importlib.import_module(".vals", "rel_pkg").B',
                               {"rel_pkg/__init__.py": "", "rel_pkg/vals.py": "B = 256\n"},
                               {"rel_pkg/vals.py": "B = 8192\n"}),
    "find_spec_of_a_module_that_appears": ("import importlib.util\n",
                                           '8192 if importlib.util.find_spec("fast_tiles") else 256', {},
                                           {"fast_tiles.py": ""}),
    "listdir_configs_gain_a_file": ("", 'max(int(n.split(".")[0]) for n in os.listdir(os.path.join(HERE, "cfgs_add")))',
                                    {"cfgs_add/256.cfg": ""}, {"cfgs_add/8192.cfg": ""}),
    "listdir_config_renamed": ("", 'max(int(n.split(".")[0]) for n in os.listdir(os.path.join(HERE, "cfgs_mv")))',
                               {"cfgs_mv/256.cfg": "same"}, {"cfgs_mv/8192.cfg": _rename("256.cfg")}),
    "glob_loses_a_file": ("import glob\n", '256 if glob.glob(os.path.join(HERE, "gl_rm", "*.small")) else 8192',
                          {"gl_rm/x.small": "", "gl_rm/keep.txt": ""}, {"gl_rm/x.small": None}),
    "module_link_retargeted": ("import linked_consts\n", "linked_consts.B",
                               {"v1/c.py": "B = 256\n", "v2/c.py": "B = 8192\n", "linked_consts.py": _link("v1/c.py")},
                               {"linked_consts.py": _link("v2/c.py")}),
    "hard_link_to_a_file_outside_edited_there": (
        "", 'int(open(os.path.join(HERE, "d", "hard.txt")).read())', {"../outside_hard.txt": "256",
                                                                       "d/hard.txt": _hard_link("../../outside_hard.txt")},
        {"../outside_hard.txt": _edit_in_place("8192")}),
    "file_copied_then_the_copy_read": (COPY, '_copied(os.path.join(HERE, "d", "copied.txt"))',
                                       {"d/copied.txt": "256"}, {"d/copied.txt": "8192"}),
    "pth_line_that_sets_a_variable": (PTH, 'int(os.environ.get("MYPROJ_PTH", "1"))',
                                      {"sd_pth/x.pth": 'import os; os.environ["MYPROJ_PTH"] = "256"\n'},
                                      {"sd_pth/x.pth": 'import os; os.environ["MYPROJ_PTH"] = "8192"\n'}),
    "time_zone_of_the_c_library": ("import time\n", "8192 if time.localtime(0).tm_hour != 0 else 256", {},
                                   {"env:TZ": "JST-9"}),
    "debug_under_pythonoptimize": ("", "256 if __debug__ else 8192", {}, {"env:PYTHONOPTIMIZE": "1"}),
    "warning_options": ("import sys\n", "8192 if sys.warnoptions else 256", {}, {"env:PYTHONWARNINGS": "default"}),
    "string_hash_seed": ("", f'8192 if hash("kgate-tile") % 2 != {_parity("0")} else 256', {},
                         {"env:PYTHONHASHSEED": _other_seed()}),
    "time_zone_after_tzset": ("import time\ntime.tzset()\n", "8192 if time.localtime(0).tm_hour != 0 else 256", {},
                              {"env:TZ": "JST-9"}),
}
# Read once by the import, which deletes it: the second run finds no file, and the module's default.
ONCE_READ = '_read_and_delete(os.path.join(HERE, "d", "once.txt"), 8192)'
ONE_SHOT = {"file_read_then_deleted_by_the_import": (READ_DELETE, ONCE_READ, {"d/once.txt": "256"}, {})}
CASES.update(ONE_SHOT)
INTERPRETER = {"debug_under_pythonoptimize", "warning_options", "string_hash_seed"}  # read as kgate starts
FIRST_ENV = {"TZ": "UTC0", "PYTHONHASHSEED": "0"}


def _rows(project: Path, env: dict[str, str], *args: str, process: bool = False) -> dict[str, str]:
    run = kgate("check", "--show-kernels", *args, cwd=project, env={"COLUMNS": "250", **env}, process=process)
    assert run.code in (0, 1), run.stderr
    return {line.split(":", 1)[0][2:]: line for line in run.stdout.splitlines() if line.startswith("r_")}


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_read_of_the_import_is_in_the_key(tmp_path: Path, case: str) -> None:
    """Each case in a project of its own: a compile worker keys each import on every read it has made, so a module
    imported beside another would be keyed on that one's reads too."""
    preamble, expression, files, change = CASES[case]
    project = tmp_path / "p"
    project.mkdir()
    (project / "kgate.toml").write_text(CFG)
    (project / f"r_{case}.py").write_text(HELPERS + _module(expression, preamble))
    _write(project, files)
    first = _rows(project, FIRST_ENV, process=case in INTERPRETER)[case]
    if case not in ONE_SHOT:  # a module that deletes what it read may be imported twice in the first run
        assert "BLOCK=256," in first, first
    env = {**FIRST_ENV, **{name[4:]: text for name, text in change.items() if name.startswith("env:")}}
    _write(project, {name: text for name, text in change.items() if not name.startswith("env:")})
    second = _rows(project, env, process=case in INTERPRETER)[case]
    assert "BLOCK=8192," in second, second
    if case in INTERPRETER:  # and once more: the record of that state serves
        assert _rows(project, env, process=True)[case] == second


def test_the_command_line_is_not_the_imports_input(tmp_path: Path) -> None:
    """A module that reads sys.argv at import sees the same command line whatever kgate was asked: the variant
    of `kgate check --show-kernels` is the one a cold run of it compiles, after a run with other arguments."""
    project = tmp_path / "p"
    project.mkdir()
    (project / "kgate.toml").write_text(CFG)
    (project / "r_argv.py").write_text(HELPERS + _module("256 * (1 + 31 * any('--show-kernels' in a for a in sys.argv))",
                                                         "import sys\n"))
    assert kgate("check", "--format", "json", cwd=project).code == 0
    warm = _rows(project, {})["argv"]
    assert warm == _rows(project, {}, "--no-cache")["argv"]
    assert "BLOCK=256," in warm


def test_a_time_zone_left_as_it_was_imports_nothing(tmp_path: Path) -> None:
    """The variables the C library reads are keyed by value: a second run in the same zone is served the record
    (`_once()` logs each import)."""
    project = tmp_path / "p"
    project.mkdir()
    (project / "kgate.toml").write_text(CFG)
    (project / "r_tz.py").write_text(HELPERS + ONCE + _module(
        "(8192 if time.localtime(0).tm_hour != 0 else 256) if _once() else 1", "import time\n"))
    assert "BLOCK=8192," in _rows(project, {"TZ": "JST-9"})["tz"]
    assert "BLOCK=8192," in _rows(project, {"TZ": "JST-9"})["tz"]
    assert (project / "imports.log").read_text().count("x") == 1


def test_what_no_read_shows_keeps_the_first_variant(tmp_path: Path) -> None:
    """The clock and an unseeded `random` are no input kgate can see (docs/performance.md): the variant the first
    run compiled is the one every warm run shows, never one run's and then another's."""
    project = tmp_path / "p"
    project.mkdir()
    (project / "kgate.toml").write_text(CFG)
    (project / "r_clock.py").write_text(HELPERS + _module("256 if int(time.time() * 1000) % 2 else 8192",
                                                          "import time\n"))
    (project / "r_random.py").write_text(HELPERS + _module("random.choice([256, 8192])", "import random\n"))
    first = _rows(project, {})
    assert set(first) == {"clock", "random"}
    assert _rows(project, {}) == first == _rows(project, {})
