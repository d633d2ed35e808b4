"""What a kernel module's import reads, beyond tests/test_import_keys.py, tests/test_held_out_keys.py and
tests/test_held_out_import_*.py: the environment read as a copy (`dict(os.environ)`, `{**os.environ}`, its raw
mapping), through `functools.partial`, as a default argument, sorted; a second configuration file that appears;
`importlib.resources` paths joined and listed; a glob in a folder that appears; a file that becomes a folder and
a folder that becomes a file; other readers (`io.FileIO`, an `opener`, `filecmp`, `xml.etree`, `plistlib`); a
data file in a linked folder edited there; a namespace package split over two python-path folders; and what the
interpreter read as it started (`PYTHONDONTWRITEBYTECODE`, `PYTHONPYCACHEPREFIX`, `PYTHONNOUSERSITE`,
`PYTHONSAFEPATH`, `PYTHONUSERBASE`: run as a user runs kgate, in a process of its own).

Each case is a project holding one module (`r_<case>.py`, one kernel whose BLOCK comes from the read): a cold
check, the change, a warm check; the warm row must be the new variant (8192), never the record of the old one
(256). Then reads whose outcome is no fixed value (a heuristic that reads a file on its second call, a config's
`pre_hook`, a relative read from a subfolder, a `.pth` file in a python-path folder): after the change, the warm
run shows what a cold run shows. And what cannot be keyed (the clock, `random`, `uuid4`) is said in the run.
"""

from __future__ import annotations

import plistlib
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import kgate
from test_held_out_keys import _link, _write
from test_import_keys import CFG, HELPERS, _module

CFG_AB = 'targets = ["sm_120a"]\npython-path = [".", "a", "b"]\n'


def _becomes_folder(path: Path) -> None:
    path.unlink()
    path.mkdir()


def _becomes_file(path: Path) -> None:
    shutil.rmtree(path)
    path.write_text("")


def _plist(value: int) -> bytes:
    return plistlib.dumps({"B": value})


CP = '''import configparser


def _ini(*names):
    cp = configparser.ConfigParser()
    cp.read([os.path.join(HERE, n) for n in names])
    return cp.getint("tile", "b")
'''
FILECMP = "import filecmp\n"
# case -> (preamble, BLOCK expression, files, the change); `env:NAME` in a change is a variable of the second run.
CASES: dict[str, tuple[str, str, dict[str, Any], dict[str, Any]]] = {
    "dict_of_the_environment": ("", 'int(dict(os.environ).get("MYPROJ_DICT", "256"))', {}, {"env:MYPROJ_DICT": "8192"}),
    "environment_unpacked": ("", 'int({**os.environ}.get("MYPROJ_UNP", "256"))', {}, {"env:MYPROJ_UNP": "8192"}),
    "environment_raw_mapping": ("", 'int(os.environ._data.get(b"MYPROJ_RAW", b"256"))', {}, {"env:MYPROJ_RAW": "8192"}),
    "posix_environ_read_alone": ("import posix\n", 'int(posix.environ.get(b"MYPROJ_PX", b"256"))', {},
                                 {"env:MYPROJ_PX": "8192"}),
    "environ_get_through_partial": ("import functools\n", 'int(functools.partial(os.environ.get, "MYPROJ_PART", "256")())',
                                    {}, {"env:MYPROJ_PART": "8192"}),
    "default_argument_from_the_environment": ('def _b(v=os.environ.get("MYPROJ_DEF", "256")):\n    return int(v)\n',
                                              "_b()", {}, {"env:MYPROJ_DEF": "8192"}),
    "environment_names_sorted": ("", '8192 if "MYPROJ_SORT" in sorted(os.environ) else 256', {},
                                 {"env:MYPROJ_SORT": "1"}),
    "getenv_in_a_dataclass_default_factory": (
        ("import dataclasses\n\n\n@dataclasses.dataclass\nclass _T:\n    b: int = dataclasses.field(default_factory="
        'lambda: int(os.getenv("MYPROJ_DC", "256")))\n'), "_T().b", {}, {"env:MYPROJ_DC": "8192"}),
    "configparser_second_file_appears": (CP, '_ini("a.ini", "b.ini")', {"a.ini": "[tile]\nb = 256\n"},
                                         {"b.ini": "[tile]\nb = 8192\n"}),
    "resources_files_joined_then_read_bytes": (
        "import importlib.resources\n", ('int(importlib.resources.files("rj_pkg").joinpath("sub").joinpath("b.txt")'
        '.read_bytes())'), {"rj_pkg/__init__.py": "", "rj_pkg/sub/b.txt": "256"}, {"rj_pkg/sub/b.txt": "8192"}),
    "resources_files_listed": (
        "import importlib.resources\n", ('max(int(p.name.split(".")[0]) for p in importlib.resources.files("rl_pkg")'
        '.iterdir() if p.name.endswith(".cfg"))'), {"rl_pkg/__init__.py": "", "rl_pkg/256.cfg": ""},
        {"rl_pkg/8192.cfg": ""}),
    "glob_in_a_folder_that_appears": ("import glob\n", '8192 if glob.glob(os.path.join(HERE, "late", "*.cfg")) else 256',
                                      {}, {"late/x.cfg": ""}),
    "isfile_of_a_file_that_becomes_a_folder": ("", '256 if os.path.isfile(os.path.join(HERE, "slot")) else 8192',
                                               {"slot": ""}, {"slot": _becomes_folder}),
    "isdir_of_a_folder_that_becomes_a_file": ("", '256 if os.path.isdir(os.path.join(HERE, "room")) else 8192',
                                              {"room/keep": ""}, {"room": _becomes_file}),
    "file_io_read": ("import io\n", 'int(io.FileIO(os.path.join(HERE, "fio.txt")).read())', {"fio.txt": "256"},
                     {"fio.txt": "8192"}),
    "open_with_an_opener": ("", 'int(open(os.path.join(HERE, "op.txt"), opener=lambda p, f: os.open(p, f)).read())',
                            {"op.txt": "256"}, {"op.txt": "8192"}),
    "filecmp_of_two_files": (FILECMP, ('256 if filecmp.cmp(os.path.join(HERE, "fa"), os.path.join(HERE, "fb"), '
                                      'shallow=False) else 8192'), {"fa": "same", "fb": "same"}, {"fb": "diff"}),
    "xml_tree_parsed": ("import xml.etree.ElementTree as ET\n",
                        'int(ET.parse(os.path.join(HERE, "t.xml")).getroot().get("b"))', {"t.xml": '<t b="256"/>'},
                        {"t.xml": '<t b="8192"/>'}),
    "plist_loaded": ("import plistlib\n", 'plistlib.load(open(os.path.join(HERE, "t.plist"), "rb"))["B"]',
                     {"t.plist": _plist(256)}, {"t.plist": _plist(8192)}),
    "json_in_a_linked_folder_edited_there": (
        "import json\n", 'json.load(open(os.path.join(HERE, "cfglink", "t.json")))["B"]',
        {"cfg_real/t.json": '{"B": 256}', "cfglink": _link("cfg_real")}, {"cfg_real/t.json": '{"B": 8192}'}),
    "namespace_package_over_two_python_path_folders": (
        "", '__import__("nsx.two", fromlist=["B"]).B',
        {"a/nsx/one.py": "B = 1\n", "b/nsx/two.py": "B = 256\n"}, {"b/nsx/two.py": "B = 8192\n"}),
    "bytecode_writing_turned_off": ("import sys\n", "8192 if sys.dont_write_bytecode else 256", {},
                                    {"env:PYTHONDONTWRITEBYTECODE": "1"}),
    "bytecode_cache_prefix": ("import sys\n", "8192 if sys.pycache_prefix else 256", {},
                              {"env:PYTHONPYCACHEPREFIX": "pyc"}),
    "user_site_turned_off": ("import sys\n", "8192 if sys.flags.no_user_site else 256", {},
                             {"env:PYTHONNOUSERSITE": "1"}),
    "safe_path": ("import sys\n", "8192 if sys.flags.safe_path else 256", {}, {"env:PYTHONSAFEPATH": "1"}),
    "file_of_the_user_base": ("import site\n", 'int(open(os.path.join(site.getuserbase(), "b.txt")).read())',
                              {"ub1/b.txt": "256", "ub2/b.txt": "8192"}, {"env:PYTHONUSERBASE": "ub2"}),
}
NEEDS = {"namespace_package_over_two_python_path_folders": CFG_AB}
# Read as the interpreter starts: run as a user runs kgate, in a process of its own.
INTERPRETER = {"bytecode_writing_turned_off", "bytecode_cache_prefix", "user_site_turned_off", "safe_path",
               "file_of_the_user_base"}
# The first run's: none of the interpreter's variables set (an empty one is unset), the user base of ub1.
SINCE = {"safe_path": (3, 11)}  # the Python release that has what the case reads
FIRST_ENV = {"PYTHONUSERBASE": "ub1", "PYTHONDONTWRITEBYTECODE": "", "PYTHONPYCACHEPREFIX": "", "PYTHONNOUSERSITE": "",
             "PYTHONSAFEPATH": ""}


def _rows(project: Path, env: dict[str, str], *args: str, process: bool = False, cwd: Path | None = None) -> dict[str, str]:
    run = kgate("check", "--show-kernels", *args, cwd=cwd or project, env={"COLUMNS": "250", **env}, process=process)
    assert run.code in (0, 1), run.stdout + run.stderr
    return {line.split(":", 1)[0][2:]: line for line in run.stdout.splitlines() if line.startswith("r_")}


def _project(tmp_path: Path, case: str, module: str, config: str = CFG) -> Path:
    project = tmp_path / "p"
    project.mkdir()
    (project / "kgate.toml").write_text(config)
    (project / f"r_{case}.py").write_text(module)
    return project


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_read_of_the_import_is_in_the_key(tmp_path: Path, case: str) -> None:
    if sys.version_info < SINCE.get(case, (3,)):
        pytest.skip(f"Python {sys.version_info[:2]} has no {case}")
    preamble, expression, files, change = CASES[case]
    project = _project(tmp_path, case, HELPERS + _module(expression, preamble), NEEDS.get(case, CFG))
    _write(project, files)
    process = case in INTERPRETER
    first = _rows(project, FIRST_ENV, process=process)[case]
    assert "BLOCK=256," in first, first
    env = {**FIRST_ENV, **{name[4:]: text for name, text in change.items() if name.startswith("env:")}}
    _write(project, {name: text for name, text in change.items() if not name.startswith("env:")})
    second = _rows(project, env, process=process)[case]
    assert "BLOCK=8192," in second, second


# ---- reads whose outcome is no fixed value: after the change, a warm run shows what a cold run shows

HEURISTIC = '''import os

import kgate
import triton
import triton.language as tl

HERE = os.path.dirname(os.path.abspath(__file__))
_CALLS = [0]


def _block(args):
    _CALLS[0] += 1
    if _CALLS[0] < 2:
        return 256
    return int(open(os.path.join(HERE, "second.txt")).read())


@kgate.register(signature={"x": "*fp32", "y": "*fp32", "n": "i32"})
@triton.heuristics({"BLOCK": _block})
@triton.jit
def fill_kernel(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + offs, tl.load(x + offs, mask=offs < n) * 2, mask=offs < n)
'''
PRE_HOOK = HELPERS + _module("256").replace(
    'num_warps=c["warps"])', 'num_warps=c["warps"], pre_hook=lambda nargs: open(os.path.join(HERE, "hook.txt")).read())')
RELATIVE = HELPERS + _module('int(Path("b.txt").read_bytes())')
PTH = HELPERS + _module('int(os.environ.get("MYPROJ_PTHX", "256"))')
# case -> (module, files, the change, the folder kgate runs in, relative to the project)
SAME_AS_COLD: dict[str, tuple[str, dict[str, Any], dict[str, Any], str]] = {
    "heuristic_reads_a_file_on_its_second_call": (HEURISTIC, {"second.txt": "512"}, {"second.txt": "8192"}, "."),
    "pre_hook_of_a_config_reads_a_file": (PRE_HOOK, {"hook.txt": "a"}, {"hook.txt": None}, "."),
    "relative_read_bytes_from_a_subfolder": (RELATIVE, {"b.txt": "256", "sub/b.txt": "1024"}, {"sub/b.txt": "8192"},
                                             "sub"),
    "pth_file_in_a_python_path_folder": (PTH, {"x.pth": 'import os; os.environ["MYPROJ_PTHX"] = "1024"\n'},
                                         {"x.pth": 'import os; os.environ["MYPROJ_PTHX"] = "8192"\n'}, "."),
}


@pytest.mark.parametrize("case", sorted(SAME_AS_COLD))
def test_after_a_change_a_warm_run_shows_what_a_cold_run_shows(tmp_path: Path, case: str) -> None:
    module, files, change, where = SAME_AS_COLD[case]
    project = _project(tmp_path, case, module)
    _write(project, files)
    (project / "sub").mkdir(exist_ok=True)
    _rows(project, {}, cwd=project / where)
    _write(project, change)
    warm = _rows(project, {}, cwd=project / where)
    assert warm == _rows(project, {}, "--no-cache", cwd=project / where), warm
    assert case in warm, warm


# ---- what no key can hold is said in the run

# case -> (preamble, BLOCK expression, what the run names: None for nothing)
CHANCE: dict[str, tuple[str, str, str | None]] = {
    "time_time": ("import time\n", "256 if int(time.time()) % 2 else 8192", "the clock"),
    "time_ns_through_a_helper": ("import time\n\n\ndef _now():\n    return time.time_ns()\n",
                                 "256 if _now() % 2 else 8192", "the clock"),
    "localtime_of_now": ("import time\n", "256 if time.localtime().tm_sec % 2 else 8192", "the clock"),
    "localtime_of_a_given_time": ("import time\n", "256 if time.localtime(0).tm_year > 1900 else 8192", None),
    "perf_counter_around_a_probe": ("import time\n", "256 if time.perf_counter() >= 0 else 8192", "the clock"),
    "random_unseeded": ("import random\n", "random.choice([256, 8192])", "random numbers"),
    "random_seeded_by_the_module": ("import random\nrandom.seed(7)\n", "random.choice([256, 256])", None),
    "random_reseeded_from_the_system": ("import random\nrandom.seed()\n", "random.choice([256, 256])",
                                        "random numbers"),
    "uuid4": ("import uuid\n", "256 if uuid.uuid4().int % 2 else 8192", "random numbers"),
    "urandom": ("", "256 if os.urandom(1)[0] % 2 else 8192", "random numbers"),
    "nothing_of_either": ("", "256", None),
}


@pytest.mark.parametrize("case", sorted(CHANCE))
def test_what_no_key_can_hold_is_said_in_every_run(tmp_path: Path, case: str) -> None:
    preamble, expression, named = CHANCE[case]
    project = _project(tmp_path, case, HELPERS + _module(expression, preamble))
    for _ in range(2):  # cold, then served from the records
        run = kgate("check", cwd=project, env={"COLUMNS": "250"})
        said = [line for line in (run.stdout + run.stderr).splitlines() if "no key can hold" in line]
        assert run.code == 0 and said == ([] if named is None else [
            (f"importing r_{case} read {named}, which no key can hold: its kernels are the ones the run that first "
            "compiled them made; run with --no-cache to compile them again")]), run.stdout + run.stderr


def test_a_diff_compiles_what_read_the_clock_afresh_on_each_side(tmp_path: Path) -> None:
    from test_diff_sides import _diff, _repo

    project = _repo(tmp_path / "p", {"r_clock.py": HELPERS + _module("256 + 0 * int(time.time())", "import time\n")})
    run = _diff(project, "HEAD", "--require-identical")
    assert run.code == 0 and "1 identical, 0 changed" in run.stdout, run.stdout + run.stderr
    assert ("importing r_clock read the clock, which no key can hold: so its kernels were compiled afresh for each "
            "side of this diff") in run.stderr, run.stderr
