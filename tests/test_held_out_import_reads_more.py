"""What a kernel module's import reads, beyond tests/test_import_keys.py, tests/test_held_out_keys.py and
tests/test_held_out_import_reads.py: each case is a kernel module compiled for real whose BLOCK comes from
something its import reads, and a change that turns it from 256 to 8192. A warm check after the change must report
the new variant, never the record of the old one.

- Programs the import runs: a shell line handed to a shell by `subprocess` (`shell=True`, `sh -c`, `bash -lc`,
  `os.popen`, `subprocess.getoutput`) is read for its words as `os.system`'s is; a relative path is read from the
  folder the program starts in (`cwd=`); a Python program behind `env -i` or `timeout` must report or the import is
  not keyable; multiprocessing's fork, spawn and forkserver starts (in a compile worker too).
- The module's own code that runs at import: a helper that builds the configs, a class whose attribute a constant
  reads, a decorator's helper, the module's text read as data.
- What else names an input: a permission bit, the folder the import runs in, a module that appears as bytecode or as
  an extension built in place, a library found through LD_LIBRARY_PATH, a database attached by SQL, a file read
  through /proc/self/cwd, the PYTHONPATH a module is found on.

`{parent}` in a change names the folder the project is in.
"""

from __future__ import annotations

import os
import py_compile
import shutil
import subprocess
import sysconfig
from pathlib import Path
from typing import Any

import pytest
from conftest import kgate
from test_held_out_keys import ONCE, _db, _link, _write
from test_import_keys import HELPERS, _check, _module, _project

GCC = shutil.which("gcc")
SUBPROCESS = "import subprocess, sys\n"
GEN = 'import os\nprint(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "b.txt")).read())\n'
MULTIPROCESSING = '''
import concurrent.futures
import multiprocessing
import pathlib


def _forked_process_read(path):
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    process = ctx.Process(target=lambda: queue.put(int(open(path).read())))
    process.start()
    value = queue.get()
    process.join()
    return value


def _pool_read(method, path):
    with multiprocessing.get_context(method).Pool(1) as pool:
        return int(pool.apply(pathlib.Path.read_text, (pathlib.Path(path),)))


def _pool_variable(method, name):
    with multiprocessing.get_context(method).Pool(1) as pool:
        return int(pool.apply(os.getenv, (name, "256")))
'''
TILE = r'int(re.search(r"# TILE=(\d+)", {}).group(1))'  # the module's own comment, read as data by {}
ASYNC_SHELL = '''import asyncio


async def _shell(line):
    process = await asyncio.create_subprocess_shell(line, stdout=asyncio.subprocess.PIPE)
    return (await process.communicate())[0]
'''
PLUGIN = "myplug-1.0.dist-info/"


def _edit(old: str, new: str) -> Any:
    """ops.py with `old` replaced by `new` (the module's own text changed where no kernel is)."""
    def make(path: Path) -> None:
        text = path.read_text()
        assert old in text, old
        path.write_text(text.replace(old, new))
    return make


def _mode(mode: int) -> Any:
    def make(path: Path) -> None:
        if not path.exists():
            path.write_text("#!/bin/sh\n")
        path.chmod(mode)
    return make


def _pyc(value: int) -> Any:
    """A module as bytecode alone (Python imports a .pyc that stands where its source would)."""
    def make(path: Path) -> None:
        source = path.with_name(path.stem + "_src.py")
        source.write_text(f"B = {value}\n")
        py_compile.compile(str(source), cfile=str(path), doraise=True)
        source.unlink()
    return make


def _extension(value: int) -> Any:
    """An extension module built in place (`python setup.py build_ext --inplace`), whose B is `value`."""
    def make(path: Path) -> None:
        name = path.name.split(".")[0]
        source = path.with_name(f"{name}_{value}.c")
        source.write_text('#include <Python.h>\n'
                          f'static struct PyModuleDef m = {{PyModuleDef_HEAD_INIT, "{name}", 0, -1, 0}};\n'
                          f'PyMODINIT_FUNC PyInit_{name}(void) {{ PyObject *o = PyModule_Create(&m); '
                          f'PyModule_AddIntConstant(o, "B", {value}); return o; }}\n')
        subprocess.run([str(GCC), "-shared", "-fPIC", "-I", sysconfig.get_paths()["include"], str(source), "-o",
                        str(path)], check=True)
        source.unlink()
    return make


def _to_folder(path: Path) -> None:
    path.unlink()
    path.mkdir()


def _library(value: int) -> Any:
    def make(path: Path) -> None:
        source = path.with_name(f"lib{value}.c")
        source.write_text(f"int block(void) {{ return {value}; }}\n")
        subprocess.run([str(GCC), "-shared", "-fPIC", str(source), "-o", str(path)], check=True)
        source.unlink()
    return make


EXTENSION = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
# (preamble, BLOCK expression, files, the change); in the change, `env:NAME` is a variable of the second run and
# `cwd:` the folder (in the project) the second run is started in.
CASES: dict[str, tuple[str, str, dict[str, Any], dict[str, Any]]] = {
    # A shell line is read for its words wherever it is handed to a shell; a path from the folder a program starts in.
    "shell-true-cat": (SUBPROCESS, ('int(subprocess.run("cat " + os.path.join(HERE, "b.txt"), shell=True, '
                                   'capture_output=True, text=True).stdout)'), {"b.txt": "256"}, {"b.txt": "8192"}),
    "sh-c-cat": (SUBPROCESS, ('int(subprocess.run(["sh", "-c", "cat " + os.path.join(HERE, "b.txt")], '
                             'capture_output=True, text=True).stdout)'), {"b.txt": "256"}, {"b.txt": "8192"}),
    "bash-lc-cat": (SUBPROCESS, ('int(subprocess.run(["bash", "-lc", "cat " + os.path.join(HERE, "b.txt")], '
                                'capture_output=True, text=True).stdout)'), {"b.txt": "256"}, {"b.txt": "8192"}),
    "os-popen-cat": ("", 'int(os.popen("cat " + os.path.join(HERE, "b.txt")).read())', {"b.txt": "256"},
                     {"b.txt": "8192"}),
    "getoutput-cat": (SUBPROCESS, 'int(subprocess.getoutput("cat " + os.path.join(HERE, "b.txt")))', {"b.txt": "256"},
                      {"b.txt": "8192"}),
    "cat-relative-to-its-cwd": (SUBPROCESS, ('int(subprocess.run(["cat", "b.txt"], cwd=os.path.join(HERE, "conf"), '
                                            'capture_output=True, text=True).stdout)'), {"conf/b.txt": "256"},
                                {"conf/b.txt": "8192"}),
    "cat-absolute": (SUBPROCESS, ('int(subprocess.run(["cat", os.path.join(HERE, "b.txt")], capture_output=True, '
                                 'text=True).stdout)'), {"b.txt": "256"}, {"b.txt": "8192"}),
    "sed-after-double-dash": (SUBPROCESS, ('int(subprocess.run(["sed", "-n", "1p", "--", os.path.join(HERE, '
                                          '"b.txt")], capture_output=True, text=True).stdout)'), {"b.txt": "256"},
                              {"b.txt": "8192"}),
    "python-behind-env-i": (SUBPROCESS, ('int(subprocess.run(["env", "-i", sys.executable, os.path.join(HERE, '
                                        '"gen.py")], capture_output=True, text=True).stdout)'), {"gen.py": GEN, "b.txt": "256"},
                            {"b.txt": "8192"}),
    "python-behind-timeout": (SUBPROCESS, ('int(subprocess.run(["timeout", "60", sys.executable, os.path.join(HERE, '
                                          '"gen.py")], capture_output=True, text=True).stdout)'),
                              {"gen.py": GEN, "b.txt": "256"}, {"b.txt": "8192"}),
    # multiprocessing as the module's import uses it, in a compile worker as anywhere.
    "multiprocessing-fork-process": (MULTIPROCESSING, '_forked_process_read(os.path.join(HERE, "b.txt"))',
                                     {"b.txt": "256"}, {"b.txt": "8192"}),
    "multiprocessing-spawn-pool": (MULTIPROCESSING, '_pool_read("spawn", os.path.join(HERE, "b.txt"))',
                                   {"b.txt": "256"}, {"b.txt": "8192"}),
    "multiprocessing-forkserver-pool": (MULTIPROCESSING, '_pool_read("forkserver", os.path.join(HERE, "b.txt"))',
                                        {"b.txt": "256"}, {"b.txt": "8192"}),
    "process-pool-executor": (MULTIPROCESSING, ('int(concurrent.futures.ProcessPoolExecutor(1, mp_context='
                                                'multiprocessing.get_context("fork")).submit(pathlib.Path.read_text, '
                                                'pathlib.Path(HERE, "b.txt")).result())'), {"b.txt": "256"},
                              {"b.txt": "8192"}),
    # The module's own code that runs while it is imported, wherever it stands in the module.
    "helper-function-edited": ("def _block():\n    return 256\n", "_block()", {},
                               {"ops.py": _edit("return 256", "return 8192")}),
    "helper-default-argument": ("def _pick(b=256):\n    return b\n", "_pick()", {},
                                {"ops.py": _edit("b=256", "b=8192")}),
    "helper-called-through-map": ("def _twice(x):\n    return x * 2\n", "list(map(_twice, [128]))[0]", {},
                                  {"ops.py": _edit("x * 2", "x * 64")}),
    "helper-cached-by-lru-cache": ("import functools\n\n\n@functools.lru_cache\ndef _b():\n    return 256\n", "_b()",
                                   {}, {"ops.py": _edit("return 256", "return 8192")}),
    "global-set-by-an-init-function": ("B = 1\n\n\ndef _init():\n    global B\n    B = 256\n\n\n_init()\n", "B", {},
                                       {"ops.py": _edit("    B = 256", "    B = 8192")}),
    "class-attribute": ("class _Cfg:\n    B = 256\n", "_Cfg.B", {}, {"ops.py": _edit("B = 256", "B = 8192")}),
    "static-method": ("class _Cfg:\n    @staticmethod\n    def make():\n        return 256\n", "_Cfg.make()", {},
                      {"ops.py": _edit("return 256", "return 8192")}),
    "docstring-of-a-helper": ('def _doc():\n    """256"""\n', "int(_doc.__doc__)", {},
                              {"ops.py": _edit('"""256"""', '"""8192"""')}),
    "source-of-a-helper": ('import inspect\n\n\ndef _marker():\n    return "SMALL"\n',
                           '8192 if "BIG" in inspect.getsource(_marker) else 256', {},
                           {"ops.py": _edit('"SMALL"', '"BIG"')}),
    "comment-of-the-module-read-as-text": ("import re\n# TILE=256\n",
                                           'int(re.search(r"# TILE=(\\d+)", open(__file__).read()).group(1))', {},
                                           {"ops.py": _edit("# TILE=256", "# TILE=8192")}),
    # What else names an input.
    "executable-bit": ("", '8192 if os.access(os.path.join(HERE, "tool"), os.X_OK) else 256', {"tool": _mode(0o644)},
                       {"tool": _mode(0o755)}),
    "folder-it-runs-in": ("", '8192 if os.path.basename(os.getcwd()) == "big" else 256', {"big/keep": ""},
                          {"cwd:": "big"}),
    "module-appears-as-bytecode": ("", '_optional("fastconsts", 256)', {}, {"fastconsts.pyc": _pyc(8192)}),
    "sqlite-database-attached": ("import sqlite3\n",
                                 ('sqlite3.connect(":memory:").execute("attach database ? as o", (os.path.join(HERE, '
                                 '"t.db"),)).execute("select b from o.t").fetchone()[0]'), {"t.db": _db(256)},
                                 {"t.db": _db(8192)}),
    "read-through-proc-self-cwd": ("", 'int(open("/proc/self/cwd/b.txt").read())', {"b.txt": "256"}, {"b.txt": "8192"}),
    "module-found-on-pythonpath": ("", '__import__("envconsts").B', {"../x/envconsts.py": "B = 256\n",
                                                                     "../y/envconsts.py": "B = 8192\n"},
                                   {"env:PYTHONPATH": "{parent}/y"}),
    "file-opened-by-url": ("import urllib.request\n",
                           'int(urllib.request.urlopen("file://" + os.path.join(HERE, "b.txt")).read())',
                           {"b.txt": "256"}, {"b.txt": "8192"}),
    "file-opened-relative-to-a-folder-descriptor": (
        "", 'int(os.read(os.open("b.txt", os.O_RDONLY, dir_fd=os.open(os.path.join(HERE, "conf"), os.O_RDONLY)), 16))',
        {"conf/b.txt": "256"}, {"conf/b.txt": "8192"}),
    "variable-in-proc-self-environ": ("", ('8192 if b"MYPROJ_BLOCK=8192" in open("/proc/self/environ", "rb").read() '
                                          'else 256'), {}, {"env:MYPROJ_BLOCK": "8192"}),
}
NEEDS_GCC = {
    "module-appears-as-an-extension": ("", '_optional("fastconsts", 256)', {},
                                       {f"fastconsts{EXTENSION}": _extension(8192)}),
    "extension-rebuilt": ("", '_optional("fastconsts", 1)', {f"fastconsts{EXTENSION}": _extension(256)},
                          {f"fastconsts{EXTENSION}": _extension(8192)}),
    "library-found-on-ld-library-path": ("import ctypes\n", 'ctypes.CDLL("libkgblock.so").block()',
                                         {"lib/libkgblock.so": _library(256)}, {"lib/libkgblock.so": _library(8192)}),
}
CASES.update(NEEDS_GCC)
# Variables of both runs; and the cases whose variables are read as a process starts (the search path, the loader's
# folders, /proc/self/environ), run in processes of their own.
BOTH_RUNS = {"library-found-on-ld-library-path": {"LD_LIBRARY_PATH": "{project}/lib"},
             "module-found-on-pythonpath": {"PYTHONPATH": "{parent}/x"}}
PROCESS = {"library-found-on-ld-library-path", "module-found-on-pythonpath", "variable-in-proc-self-environ",
           "variable-read-in-a-spawned-process"}
CASES.update({
    # The module's own text read as data through the readers that also read it for the import and for Triton.
    "own-comment-read-by-tokenize-open": ("import re\nimport tokenize\n# TILE=256\n",
                                          TILE.format("tokenize.open(__file__).read()"), {},
                                          {"ops.py": _edit("# TILE=256", "# TILE=8192")}),
    "own-comment-read-by-linecache-after-a-jit-function": (
        "import linecache\nimport re\nimport triton\n\n\n@triton.jit\ndef _first(x):\n    pass\n\n\n# TILE=256\n",
        TILE.format('"".join(linecache.getlines(__file__))'), {}, {"ops.py": _edit("# TILE=256", "# TILE=8192")}),
    "own-source-read-by-inspect": ("import inspect\nimport re\nimport sys\n# TILE=256\n",
                                   TILE.format("inspect.getsource(sys.modules[__name__])"), {},
                                   {"ops.py": _edit("# TILE=256", "# TILE=8192")}),
    "own-source-read-by-pkgutil-get-data": ("import pkgutil\nimport re\n# TILE=256\n",
                                            TILE.format('pkgutil.get_data(__name__, "ops.py").decode()'), {},
                                            {"ops.py": _edit("# TILE=256", "# TILE=8192")}),
    # What a listing tells of each entry, and listings made for the module by the library it calls.
    "kind-of-a-listed-entry": ("", '8192 if any(e.is_dir() for e in os.scandir(os.path.join(HERE, "conf"))) else 256',
                               {"conf/x": ""}, {"conf/x": _to_folder}),
    "size-of-a-listed-entry": ("", ('8192 if any(e.stat().st_size > 3 for e in os.scandir(os.path.join(HERE, "conf"))) '
                                   'else 256'), {"conf/b.txt": "1"}, {"conf/b.txt": "11111"}),
    "recursive-glob-gains-a-deep-file": ("import glob\n", ('256 * (1 + 31 * len(glob.glob(os.path.join(HERE, "conf", '
                                                          '"**", "*.json"), recursive=True)))'),
                                         {"conf/a/b/keep.txt": ""}, {"conf/a/b/t.json": "{}"}),
    "realpath-of-a-retargeted-link": ("", '8192 if os.path.realpath(os.path.join(HERE, "cur")).endswith("big") else 256',
                                      {"big/keep": "", "small/keep": "", "cur": _link("small")}, {"cur": _link("big")}),
    "entry-point-of-a-local-distribution": (
        "import importlib.metadata\n",
        '8192 if any(e.name == "big" for e in importlib.metadata.entry_points(group="myproj.tiles")) else 256',
        {PLUGIN + "METADATA": "Metadata-Version: 2.1\nName: myplug\nVersion: 1.0\n",
         PLUGIN + "entry_points.txt": "[myproj.tiles]\nsmall = os:sep\n"},
        {PLUGIN + "entry_points.txt": "[myproj.tiles]\nbig = os:sep\n"}),
    # Programs and processes.
    "shell-line-relative-to-its-cwd": (SUBPROCESS, ('int(subprocess.run("cat b.txt", shell=True, cwd=os.path.join(HERE, '
                                                   '"conf"), capture_output=True, text=True).stdout)'),
                                       {"conf/b.txt": "256"}, {"conf/b.txt": "8192"}),
    "asyncio-shell-line": (ASYNC_SHELL, 'int(asyncio.run(_shell("cat " + os.path.join(HERE, "b.txt"))))',
                           {"b.txt": "256"}, {"b.txt": "8192"}),
    "variable-read-in-a-spawned-process": (MULTIPROCESSING, '_pool_variable("spawn", "MYPROJ_BLOCK")', {},
                                           {"env:MYPROJ_BLOCK": "8192"}),
})
# A file's time the module reads is keyed by that time (a path only tested is not: a checkout changes its times with
# its content kept; docs/performance.md).
XFAIL: dict[str, str] = {}
CASES.update({
    "file-modification-time": ("", '8192 if os.path.getmtime(os.path.join(HERE, "b.txt")) > 2000000000 else 256',
                               {"b.txt": "1"}, {"b.txt": lambda path: os.utime(path, (2100000000, 2100000000))}),
})


def _fill(text: str, project: Path) -> str:
    return text.replace("{parent}", str(project.parent)).replace("{project}", str(project))


def _param(case: str) -> Any:
    marks = []
    if case in NEEDS_GCC:
        marks.append(pytest.mark.skipif(GCC is None, reason="gcc builds the library"))
    if case in XFAIL:
        marks.append(pytest.mark.xfail(strict=True, reason=XFAIL[case]))
    return pytest.param(case, marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in sorted(CASES)])
def test_every_read_of_the_import_is_in_the_key(tmp_path: Path, case: str) -> None:
    preamble, expression, files, change = CASES[case]
    project = _project(tmp_path / "p", {"ops.py": HELPERS + ONCE + _module(expression, preamble)})
    _write(project, files)
    both = {name: _fill(text, project) for name, text in BOTH_RUNS.get(case, {}).items()}
    small = _rows(project, both, process=case in PROCESS)
    assert "BLOCK=256," in small[0], small
    env = {**both, **{name[4:]: _fill(text, project) for name, text in change.items() if name.startswith("env:")}}
    _write(project, {name: text for name, text in change.items() if ":" not in name})
    large = _rows(project, env, change.get("cwd:", ""), process=case in PROCESS)
    assert "BLOCK=8192," in large[0], large


def _rows(project: Path, env: dict[str, str], folder: str = "", process: bool = False) -> list[str]:
    run = kgate("check", "--show-kernels", cwd=project / folder, env={"COLUMNS": "250", **env}, process=process)
    assert run.code in (0, 1), run.stdout + run.stderr
    rows = [line for line in run.stdout.splitlines() if line.startswith("ops:fill_kernel")]
    assert len(rows) == 1, run.stdout + run.stderr
    return rows


def _compiled(project: Path, folder: str = "") -> str:
    run = kgate("check", "-v", cwd=project / folder)
    return next((line for line in (run.stdout + run.stderr).splitlines() if " compiled, " in line), run.stderr)


@pytest.mark.parametrize("case", ["multiprocessing-spawn-pool", "cat-relative-to-its-cwd", "shell-true-cat"])
def test_an_unchanged_import_that_ran_programs_is_served_from_the_cache_where_they_are_python(
        tmp_path: Path, case: str) -> None:
    """Python processes report what they read: an unchanged import is served. Any other program (`cat`) reads
    what kgate does not see: its import is compiled on every run (docs/performance.md)."""
    preamble, expression, files, _change = CASES[case]
    project = _project(tmp_path / "p", {"ops.py": HELPERS + _module(expression, preamble)})
    _write(project, files)
    assert "1 compiled" in _compiled(project)
    again = "0 compiled, 1 from cache" if case.startswith("multiprocessing") else "1 compiled, 0 from cache"
    assert again in _compiled(project)


def test_a_module_that_does_not_read_the_folder_it_runs_in_is_served_there_too(tmp_path: Path) -> None:
    """os.getcwd() is read where the module reads it: a module that does not is the same in every folder."""
    project = _project(tmp_path / "p", {"ops.py": HELPERS + _module("256")})
    (project / "sub").mkdir()
    assert "1 compiled" in _compiled(project)
    assert "0 compiled, 1 from cache" in _compiled(project, "sub")


def test_editing_a_kernel_beside_a_config_helper_recompiles_that_kernel_only(tmp_path: Path) -> None:
    """What the module runs at import is in every kernel's key; another kernel's body is not."""
    two = _module("_block()", "def _block():\n    return 256\n")
    two += "\n\n" + two[two.index("@kgate.register"):].replace("fill_kernel", "other_kernel")
    project = _project(tmp_path / "p", {"ops.py": HELPERS + two})
    assert "2 compiled" in _compiled(project)
    (project / "ops.py").write_text(HELPERS + two.replace("v * 2, mask=offs < n)\n\n\n@kgate",
                                                          "v * 3, mask=offs < n)\n\n\n@kgate"))
    assert "1 compiled, 1 from cache" in _compiled(project)


def test_a_decorator_that_calls_a_helper_is_keyed_as_before(tmp_path: Path) -> None:
    ops = _module("256").replace('[triton.Config({"BLOCK": c["BLOCK"]}, num_warps=c["warps"]) for c in _CONFIGS]',
                                 "_configs()").replace("_CONFIGS = [", 'def _configs():\n    return [triton.Config({'
                                                       '"BLOCK": 256}, num_warps=4)]\n\n\n_UNUSED = [')
    project = _project(tmp_path / "p", {"ops.py": HELPERS + ops})
    assert "BLOCK=256," in _check(project)[0]
    (project / "ops.py").write_text(HELPERS + ops.replace('"BLOCK": 256}, num_warps=4', '"BLOCK": 8192}, num_warps=1'))
    assert "BLOCK=8192," in _check(project)[0]


@pytest.mark.parametrize("layout", ["package-init-imports-the-module", "module-warns-at-import"])
def test_the_module_read_to_import_it_or_to_show_a_line_keys_each_kernel_apart(tmp_path: Path, layout: str) -> None:
    """The import system reading a kernel module that its package imports, and a warning showing one of its lines,
    read no text as data: editing one kernel recompiles that kernel only."""
    preamble = 'import warnings\nwarnings.warn("tile chosen at import")\n' if layout == "module-warns-at-import" else ""
    two = _module("256", preamble)
    two += "\n\n" + two[two.index("@kgate.register"):].replace("fill_kernel", "other_kernel")
    project = _project(tmp_path / "p", {"pkg/__init__.py": "from .ops import *  # noqa: F403\n",
                                         "pkg/ops.py": HELPERS + two})
    assert "2 compiled" in _compiled(project)
    (project / "pkg" / "ops.py").write_text(HELPERS + two.replace("v * 2, mask=offs < n)\n\n\n@kgate",
                                                                  "v * 3, mask=offs < n)\n\n\n@kgate"))
    assert "1 compiled, 1 from cache" in _compiled(project)
