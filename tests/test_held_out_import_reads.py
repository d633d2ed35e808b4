"""What a kernel module's import reads, beyond tests/test_import_keys.py and tests/test_held_out_keys.py.

Three kinds of input, each a kernel module compiled for real:

- `CASES`: BLOCK comes from something read at import; the change turns it from 256 to 8192 without touching the
  module's text. A warm check must report the new variant, and (where the change is to files) a check after the
  change is undone is served the first record again. Python programs the import runs and processes it forks
  are among them: what they read is what the import read.
- `UNKEYABLE`: the import read something whose value cannot be named (a device, a pipe, a connection, a Python
  program that could not report, a program other than Python that the module ran itself): it is imported again
  on every run, never served a record.
- `KEPT`: the import ran a Python program, looked a library up or read what does not change; a second run is
  served from the cache, so that a module importing torch (whose library look-up runs `ldconfig`) is not
  compiled again on every run.

Values in the change may name `{parent}` (the folder the project is in) and `{PATH}` (the test's own PATH).
"""

from __future__ import annotations

import importlib.util
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import kgate
from test_held_out_keys import ONCE, THREAD, _link, _write
from test_import_keys import HELPERS, _check, _module, _project

GEN = ('import json, os\nprint(json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), '
       '"config.json")))["B"])\n')
FLAG = ('import json, os, sys\nsys.exit(json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), '
        '"config.json")))["B"] > 256)\n')
OUTER = ('import os, subprocess, sys\nprint(subprocess.check_output([sys.executable, os.path.join(os.path.dirname('
         'os.path.abspath(__file__)), "gen.py")], text=True).strip())\n')
REL = 'print(open("config.txt").read())\n'
SMALL_CONFIG, LARGE_CONFIG = '{"B": 256}', '{"B": 8192}'
GENERATED = {"gen.py": GEN, "config.json": SMALL_CONFIG}
RUN_GEN = 'int(subprocess.check_output([sys.executable, os.path.join(HERE, "gen.py")]))'
SUBPROCESS = "import subprocess, sys\n"
CFG_OVER = 'targets = ["sm_120a"]\npython-path = ["."]\n'

FORK = '''
def _forked_read(path):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(w, open(path, "rb").read())
        os._exit(0)
    os.close(w)
    data = os.read(r, 64)
    os.waitpid(pid, 0)
    return int(data)
'''
SPAWN = '''
def _spawned(argv):
    r, w = os.pipe()
    pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=[(os.POSIX_SPAWN_DUP2, w, 1)])
    os.close(w)
    data = os.read(r, 64)
    os.waitpid(pid, 0)
    return int(data)
'''
ASYNC = '''
import asyncio

async def _async_run(argv):
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate()
    return int(out)
'''
IN_FOLDER = '''
def _in_folder(folder, fn):
    was = os.getcwd()
    os.chdir(folder)
    try:
        return fn()
    finally:
        os.chdir(was)
'''


def _executable(text: str) -> Any:
    def make(path: Path) -> None:
        path.write_text(text)
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return make


def _script(text: str) -> Any:
    """A Python script run by its `#!` line (the interpreter of this test run)."""
    return _executable(f"#!{sys.executable}\n{text}")


def _fifo(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.mkfifo(path)


def _tar(member: str, text: str) -> Any:
    def make(path: Path) -> None:
        import io
        import tarfile

        with tarfile.open(path, "w") as archive:
            data = text.encode()
            info = tarfile.TarInfo(member)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return make


def _gzip(text: str) -> Any:
    def make(path: Path) -> None:
        import gzip

        path.write_bytes(gzip.compress(text.encode(), mtime=0))
    return make


# (preamble, BLOCK expression, files, the change, configuration)
CASES: dict[str, tuple[str, str, dict[str, Any], dict[str, Any], str | None]] = {
    # Python programs the import runs, and processes it forks: their reads are the import's.
    "python-child-reads-a-file": (SUBPROCESS, RUN_GEN, GENERATED, {"config.json": LARGE_CONFIG}, None),
    "python-child-through-os-system": (
        SUBPROCESS, '256 * (1 + 31 * (os.system(sys.executable + " " + os.path.join(HERE, "flag.py")) != 0))',
        {"flag.py": FLAG, "config.json": SMALL_CONFIG}, {"config.json": LARGE_CONFIG}, None),
    "python-child-through-a-shell-line": (
        SUBPROCESS, ('int(subprocess.run(["sh", "-c", sys.executable + " " + os.path.join(HERE, "gen.py")], '
                    'capture_output=True, text=True).stdout)'), GENERATED, {"config.json": LARGE_CONFIG}, None),
    "python-child-shell-true": (
        SUBPROCESS, ('int(subprocess.run(sys.executable + " " + os.path.join(HERE, "gen.py"), shell=True, '
                    'capture_output=True, text=True).stdout)'), GENERATED, {"config.json": LARGE_CONFIG}, None),
    "python-child-os-popen": (SUBPROCESS, 'int(os.popen(sys.executable + " " + os.path.join(HERE, "gen.py")).read())',
                              GENERATED, {"config.json": LARGE_CONFIG}, None),
    "python-child-run-as-a-module": (SUBPROCESS, 'int(subprocess.check_output([sys.executable, "-m", "gen"], cwd=HERE))',
                                     GENERATED, {"config.json": LARGE_CONFIG}, None),
    "python-child-reads-relative-to-its-own-folder": (
        SUBPROCESS, ('int(subprocess.check_output([sys.executable, os.path.join(HERE, "rel.py")], '
                    'cwd=os.path.join(HERE, "conf")))'), {"rel.py": REL, "conf/config.txt": "256"},
        {"conf/config.txt": "8192"}, None),
    "python-child-given-an-environment-of-its-own": (
        SUBPROCESS, ('int(subprocess.check_output([sys.executable, os.path.join(HERE, "gen.py")], '
                    'env={"PATH": os.environ.get("PATH", "")}))'), GENERATED, {"config.json": LARGE_CONFIG}, None),
    "python-child-reads-an-inherited-variable": (
        SUBPROCESS, ('int(subprocess.check_output([sys.executable, "-c", '
                    '"import os; print(os.environ.get(\'MYPROJ_BLOCK\', \'256\'))"]))'), {},
        {"env:MYPROJ_BLOCK": "8192"}, None),
    "python-child-iterates-the-environment": (
        SUBPROCESS, ('int(subprocess.check_output([sys.executable, "-c", '
                    '"import os; print(dict(os.environ).get(\'MYPROJ_BLOCK\', \'256\'))"]))'), {},
        {"env:MYPROJ_BLOCK": "8192"}, None),
    "python-grandchild": (SUBPROCESS, 'int(subprocess.check_output([sys.executable, os.path.join(HERE, "outer.py")]))',
                          {**GENERATED, "outer.py": OUTER}, {"config.json": LARGE_CONFIG}, None),
    "python-child-popen-communicate": (
        SUBPROCESS, ('int(subprocess.Popen([sys.executable, os.path.join(HERE, "gen.py")], '
                    'stdout=subprocess.PIPE).communicate()[0])'), GENERATED, {"config.json": LARGE_CONFIG}, None),
    "python-child-of-asyncio": (SUBPROCESS + ASYNC, 'asyncio.run(_async_run([sys.executable, os.path.join(HERE, "gen.py")]))',
                                GENERATED, {"config.json": LARGE_CONFIG}, None),
    "python-child-posix-spawn": (SUBPROCESS + SPAWN, '_spawned([sys.executable, os.path.join(HERE, "gen.py")])',
                                 GENERATED, {"config.json": LARGE_CONFIG}, None),
    "python-script-run-by-its-shebang": (SUBPROCESS, 'int(subprocess.check_output([os.path.join(HERE, "gen.py")]))',
                                         {"gen.py": _script(GEN), "config.json": SMALL_CONFIG},
                                         {"config.json": LARGE_CONFIG}, None),
    "python-child-forks-a-reader": (
        SUBPROCESS, 'int(subprocess.check_output([sys.executable, os.path.join(HERE, "forker.py")]))',
        {"forker.py": FORK + 'import os\nprint(_forked_read(os.path.join(os.path.dirname(os.path.abspath(__file__)), '
                             '"b.txt")))\n', "b.txt": "256"}, {"b.txt": "8192"}, None),
    "python-child-reads-a-variable-the-module-set-from-a-file": (
        SUBPROCESS, '(os.environ.__setitem__("MYPROJ_B", open(os.path.join(HERE, "b.txt")).read()), int('
                    'subprocess.check_output([sys.executable, "-c", "import os; print(os.environ[\'MYPROJ_B\'])"])))[1]',
        {"b.txt": "256"}, {"b.txt": "8192"}, None),
    "python-child-reads-a-variable-the-module-put-with-putenv": (
        SUBPROCESS, '(os.putenv("MYPROJ_B", open(os.path.join(HERE, "b.txt")).read()), int('
                    'subprocess.check_output([sys.executable, "-c", "import os; print(os.environ[\'MYPROJ_B\'])"])))[1]',
        {"b.txt": "256"}, {"b.txt": "8192"}, None),
    "python-child-that-execs-another": (
        SUBPROCESS, 'int(subprocess.check_output([sys.executable, os.path.join(HERE, "reexec.py")]))',
        {**GENERATED, "reexec.py": 'import os, sys\nos.execv(sys.executable, [sys.executable, os.path.join('
                                   'os.path.dirname(os.path.abspath(__file__)), "gen.py")])\n'},
        {"config.json": LARGE_CONFIG}, None),
    "python-child-through-os-spawnv": (
        SUBPROCESS, '256 * (1 + 31 * (os.spawnv(os.P_WAIT, sys.executable, [sys.executable, os.path.join(HERE, '
                    '"flag.py")]) != 0))', {"flag.py": FLAG, "config.json": SMALL_CONFIG}, {"config.json": LARGE_CONFIG},
        None),
    "forked-process-reads-a-file": (FORK, '_forked_read(os.path.join(HERE, "b.txt"))', {"b.txt": "256"},
                                    {"b.txt": "8192"}, None),
    "file-read-in-a-thread": (THREAD, 'int(_in_thread(lambda: open(os.path.join(HERE, "b.txt")).read()))',
                              {"b.txt": "256"}, {"b.txt": "8192"}, None),
    # Files opened for reading and writing, links, paths through the environment, folders on sys.path.
    "open-read-write-mode": ("", 'int(open(os.path.join(HERE, "b.txt"), "r+").read())', {"b.txt": "256"},
                             {"b.txt": "8192"}, None),
    "open-append-and-read": ("", 'int((lambda f: (f.seek(0), f.read())[1])(open(os.path.join(HERE, "b.txt"), "a+")))',
                             {"b.txt": "256"}, {"b.txt": "8192"}, None),
    "os-open-read-write": ("", 'int(os.read(os.open(os.path.join(HERE, "b.txt"), os.O_RDWR), 16))', {"b.txt": "256"},
                           {"b.txt": "8192"}, None),
    "islink-of-a-file-replaced-by-a-link-of-the-same-size": (
        "", '8192 if os.path.islink(os.path.join(HERE, "b.txt")) else 256', {"b.txt": "1", "one.txt": "1"},
        {"b.txt": _link("one.txt")}, None),
    "a-file-replaced-by-a-fifo": (
        "", 'int(os.read(os.open(os.path.join(HERE, "b.txt"), os.O_RDONLY | os.O_NONBLOCK), 16) or b"8192")',
        {"b.txt": "256"}, {"b.txt": _fifo}, None),
    "folder-put-first-on-sys-path-at-import-gains-a-module": (
        ("import sys\nsys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'over'))\n"
        "sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'base'))\n"),
        '__import__("consts").B', {"base/consts.py": "B = 256\n", "over/keep.txt": ""},
        {"over/consts.py": "B = 8192\n"}, None),
    "outside-folder-put-on-sys-path-at-import-gains-a-module": (
        ("import sys\nsys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'over'))\n"
        "sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'base'))\n"),
        '__import__("outconsts").B', {"../base/outconsts.py": "B = 256\n", "../over/keep.txt": ""},
        {"../over/outconsts.py": "B = 8192\n"}, None),
    "expanduser-under-another-home": ("", '_read_or(os.path.expanduser("~/myproj-block.txt"), 256)',
                                      {"../home2/myproj-block.txt": "8192"}, {"env:HOME": "{parent}/home2"}, None),
    "expandvars": ("", '_read_or(os.path.expandvars("$MYPROJ_DIR/b.txt"), 256)', {"../d2/b.txt": "8192"},
                   {"env:MYPROJ_DIR": "{parent}/d2"}, None),
    "shutil-which-on-another-path": ("import shutil\n", '8192 if shutil.which("kg-fast-tool") else 256',
                                     {"../bin/kg-fast-tool": _executable("#!/bin/sh\n")},
                                     {"env:PATH": "{parent}/bin:{PATH}"}, None),
    "getpass-getuser": ("import getpass\n", '8192 if getpass.getuser() == "kgbig" else 256', {},
                        {"env:LOGNAME": "kgbig"}, None),
    "string-template-over-the-environment": (
        "import string\n", ('int(string.Template("${MYPROJ_BLOCK}").safe_substitute(os.environ).replace('
                           '"${MYPROJ_BLOCK}", "256"))'), {}, {"env:MYPROJ_BLOCK": "8192"}, None),
    "file-named-by-a-variable": ("import json\n", ('json.load(open(os.environ.get("MYPROJ_TUNE", os.path.join(HERE, '
                                                  '"t.json"))))["B"]'), {"t.json": '{"B": 256}', "../t2.json": '{"B": 8192}'},
                                 {"env:MYPROJ_TUNE": "{parent}/t2.json"}, None),
    "relative-read-after-chdir": (IN_FOLDER, '_in_folder(os.path.join(HERE, "conf"), lambda: int(open("b.txt").read()))',
                                  {"conf/b.txt": "256"}, {"conf/b.txt": "8192"}, None),
    "glob-with-root-dir": ("import glob\n", '8192 if glob.glob("*.big", root_dir=os.path.join(HERE, "conf")) else 256',
                           {"conf/x.small": ""}, {"conf/x.big": ""}, None),
    "tarfile-member": ("import tarfile\n", 'int(tarfile.open(os.path.join(HERE, "c.tar")).extractfile("b.txt").read())',
                       {"c.tar": _tar("b.txt", "256")}, {"c.tar": _tar("b.txt", "8192")}, None),
    "gzip-file": ("import gzip\n", 'int(gzip.open(os.path.join(HERE, "b.gz")).read())', {"b.gz": _gzip("256")},
                  {"b.gz": _gzip("8192")}, None),
    "pth-file-of-a-site-folder": (
        "import site\nsite.addsitedir(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'sd'))\n",
        '__import__("pthconsts").B', {"sd/x.pth": "../v1\n", "v1/pthconsts.py": "B = 256\n",
                                      "v2/pthconsts.py": "B = 8192\n"}, {"sd/x.pth": "../v2\n"}, None),
    "module-loaded-from-a-file-location": (
        "import importlib.util\n",
        ('(lambda s: (s.loader.exec_module(m := importlib.util.module_from_spec(s)), m.B)[1])('
        'importlib.util.spec_from_file_location("loaded", os.path.join(HERE, "conf", "loaded.txt"), '
        'loader=__import__("importlib.machinery").machinery.SourceFileLoader("loaded", '
        'os.path.join(HERE, "conf", "loaded.txt"))))'), {"conf/loaded.txt": "B = 256\n"},
        {"conf/loaded.txt": "B = 8192\n"}, None),
    "pkgutil-iter-modules": ("import pkgutil\n",
                             ('8192 if any(m.name == "fast" for m in pkgutil.iter_modules([os.path.join(HERE, "plugins")]))'
                             ' else 256'), {"plugins/slow.py": ""}, {"plugins/fast.py": ""}, None),
    "symlinked-folder-outside-the-project": ("", 'int(open(os.path.join(HERE, "ext", "b.txt")).read())',
                                             {"../outside/b.txt": "256", "ext": _link("../outside")},
                                             {"../outside/b.txt": "8192"}, None),
    "project-file-through-a-link-outside-it": ("", 'int(open(os.path.join(HERE, "..", "into", "b.txt")).read())',
                                               {"conf/b.txt": "256", "../into": _link("p/conf")},
                                               {"conf/b.txt": "8192"}, None),
}

# (preamble, BLOCK expression, files): BLOCK is 256 on every run; `_once()` logs each import.
UNKEYABLE: dict[str, tuple[str, str, dict[str, Any]]] = {
    # A program other than Python reads what kgate does not see (ldconfig: its cache of libraries).
    "ldconfig": (SUBPROCESS, '256 if subprocess.run(["ldconfig", "-p"], capture_output=True) and _once() else 1', {}),
    "dev-random": ("", '256 if open("/dev/random", "rb").read(1) and _once() else 1', {}),
    "project-link-to-dev-urandom": ("", '256 if open(os.path.join(HERE, "seed.bin"), "rb").read(1) and _once() else 1',
                                    {"seed.bin": _link("/dev/urandom")}),
    "project-link-to-dev-zero": ("", '256 if len(open(os.path.join(HERE, "z.bin"), "rb").read(4)) == 4 and _once() else 1',
                                 {"z.bin": _link("/dev/zero")}),
    "fifo-in-the-project": ("", ('256 if not os.read(os.open(os.path.join(HERE, "ctl"), os.O_RDONLY | os.O_NONBLOCK), 8)'
                                ' and _once() else 1'), {"ctl": _fifo}),
    "a-connection": ("import socket\n", ('256 if socket.socket(socket.AF_INET, socket.SOCK_DGRAM).connect(("127.0.0.1", 9))'
                                        ' is None and _once() else 1'), {}),
    "python-child-in-isolated-mode": (SUBPROCESS, ('256 if subprocess.check_output([sys.executable, "-I", "-c", '
                                                  '"print(1)"]) and _once() else 1'), {}),
    "python-child-without-site": (SUBPROCESS, ('256 if subprocess.check_output([sys.executable, "-S", "-c", "print(1)"]) '
                                              'and _once() else 1'), {}),
}

# (preamble, BLOCK expression, files): the second run compiles nothing.
KEPT: dict[str, tuple[str, str, dict[str, Any]]] = {
    "ctypes-find-library": ("import ctypes.util\n", '256 if ctypes.util.find_library("c") or True else 1', {}),
    "python-child-that-reads-nothing": (SUBPROCESS, 'int(subprocess.check_output([sys.executable, "-c", "print(256)"]))',
                                        {}),
    "python-child-given-a-variable-by-the-module": (
        SUBPROCESS, ('int(subprocess.check_output([sys.executable, "-c", "import os; print(os.environ[\'MYPROJ_X\'])"], '
                    'env={**os.environ, "MYPROJ_X": "256"}))'), {}),
    "python-child-reading-a-project-file": (SUBPROCESS, RUN_GEN, GENERATED),
    "dev-null-opened-for-reading-and-writing": ("", '256 if os.open(os.devnull, os.O_RDWR) else 1', {}),
    "import-torch": ("import torch\n", "256", {}),
}


def _fill(text: Any, project: Path) -> Any:
    if not isinstance(text, str):
        return text
    return text.replace("{parent}", str(project.parent)).replace("{PATH}", os.environ.get("PATH", ""))


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_read_of_the_import_is_in_the_key(tmp_path: Path, case: str) -> None:
    preamble, expression, files, change, config = CASES[case]
    project = _project(tmp_path / "p", {"ops.py": HELPERS + ONCE + _module(expression, preamble)})
    if config is not None:
        (project / "kgate.toml").write_text(config)
    _write(project, files)
    small = _check(project)
    assert "BLOCK=256," in small[0], small
    env = {name[4:]: _fill(text, project) for name, text in change.items() if name.startswith("env:")}
    _write(project, {name: text for name, text in change.items() if not name.startswith("env:")})
    large = _check(project, env)
    assert "BLOCK=8192," in large[0], large
    if not env:  # and back: the first state serves its record again
        for name in change:
            (project / name).unlink()
        _write(project, {name: text for name, text in files.items() if name in change})
        assert _check(project) == small


@pytest.mark.parametrize("case", sorted(UNKEYABLE))
def test_an_import_that_read_what_cannot_be_keyed_is_imported_every_time(tmp_path: Path, case: str) -> None:
    preamble, expression, files = UNKEYABLE[case]
    project = _project(tmp_path / "p", {"ops.py": HELPERS + ONCE + _module(expression, preamble)})
    (project / "kgate.toml").write_text(CFG_OVER + "timeout = 60\n")
    _write(project, files)
    first = _check(project)
    assert "BLOCK=256," in first[0], first
    assert _check(project) == first
    assert (project / "imports.log").read_text().count("x") >= 2


@pytest.mark.parametrize("case", sorted(KEPT))
def test_an_import_that_did_not_read_what_changes_is_served_from_the_cache(tmp_path: Path, case: str) -> None:
    preamble, expression, files = KEPT[case]
    if "import torch" in preamble and importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed")
    project = _project(tmp_path / "p", {"ops.py": HELPERS + ONCE + _module(expression, preamble)})
    _write(project, files)
    first = kgate("check", "-v", cwd=project)
    assert "1 compiled" in first.stdout + first.stderr, first.stdout + first.stderr
    again = kgate("check", "-v", cwd=project)
    assert "0 compiled, 1 from cache" in again.stdout + again.stderr, again.stdout + again.stderr


def test_no_report_folder_is_left_behind(tmp_path: Path) -> None:
    """The folder the import's programs reported in is removed with the import's end."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    preamble, expression, files, *_ = CASES["python-grandchild"]
    project = _project(tmp_path / "p", {"ops.py": HELPERS + _module(expression, preamble)})
    _write(project, files)
    assert "BLOCK=256," in _check(project, {"TMPDIR": str(scratch)})[0]
    assert not [p.name for p in scratch.iterdir() if p.name.startswith("kgate-reads-")]
