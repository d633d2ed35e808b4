"""Inputs read at import that the key must hold, beyond the ways tests/test_import_keys.py covers.

Each case is a kernel module whose one autotune config takes BLOCK from something read while it is imported; the
change turns BLOCK from 256 to 8192 without touching the module's text. A warm check after the change must
report the new variant (never the cached one), and a check after the change is undone is served the first
record again. Files given as bytes are written as bytes; a callable makes the file itself (a database, an array).
"""

from __future__ import annotations

import os
import sqlite3
import zipfile
from pathlib import Path
from typing import Any

import pytest
from test_import_keys import HELPERS, _check, _module, _project

CFG_AB = 'targets = ["sm_120a"]\npython-path = [".", "a", "b"]\n'


def _db(value: int) -> Any:
    def make(path: Path) -> None:
        path.unlink(missing_ok=True)
        with sqlite3.connect(path) as db:
            db.execute("create table t (b integer)")
            db.execute("insert into t values (?)", (value,))
        db.close()
    return make


def _zip(member: str, text: str) -> Any:
    def make(path: Path) -> None:
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr(member, text)
    return make


def _npy(value: int) -> Any:
    def make(path: Path) -> None:
        import numpy as np

        np.save(path, np.array([value], dtype=np.int64))
    return make


def _pickle(value: int) -> Any:
    def make(path: Path) -> None:
        import pickle

        path.write_bytes(pickle.dumps({"B": value}))
    return make


def _shelf(value: int) -> Any:
    def make(path: Path) -> None:
        import glob
        import shelve

        for old in glob.glob(str(path) + "*"):
            os.unlink(old)
        with shelve.open(str(path)) as shelf:
            shelf["B"] = value
    return make


def _link(target: str) -> Any:
    def make(path: Path) -> None:
        path.unlink(missing_ok=True)
        path.symlink_to(target)
    return make


def _same_size_and_time(text: str) -> Any:
    """Replaced by a new file moved over it, with the old one's size and modification time."""
    def make(path: Path) -> None:
        if not path.exists():
            path.write_text(text)
            return
        old = path.stat()
        new = path.with_name(path.name + ".new")
        new.write_text(text)
        os.utime(new, ns=(old.st_atime_ns, old.st_mtime_ns))
        os.replace(new, path)
    return make


def _in_place_same_time(text: str) -> Any:
    """Rewritten in place, its modification time put back (as a tool that keeps times does)."""
    def make(path: Path) -> None:
        if not path.exists():
            path.write_text(text)
            return
        old = path.stat()
        path.write_text(text)
        os.utime(path, ns=(old.st_atime_ns, old.st_mtime_ns))
    return make


THREAD = '''
def _in_thread(fn):
    import threading
    box = []
    t = threading.Thread(target=lambda: box.append(fn()))
    t.start()
    t.join()
    return box[0]
'''

# (preamble, BLOCK expression, files, the change, configuration); `env:NAME` in the change: a variable of the
# second run; a file None in the change: deleted.
CASES: dict[str, tuple[str, str, dict[str, Any], dict[str, Any], str | None]] = {
    "sqlite-file": ("import sqlite3\n", 'sqlite3.connect(os.path.join(HERE, "t.db")).execute("select b from t").fetchone()[0]',
                    {"t.db": _db(256)}, {"t.db": _db(8192)}, None),
    "sqlite-relative-to-cwd": ("import sqlite3\n", 'sqlite3.connect("t.db").execute("select b from t").fetchone()[0]',
                               {"t.db": _db(256)}, {"t.db": _db(8192)}, None),
    "sqlite-uri-read-only": ("import sqlite3\n",
                             'sqlite3.connect("file:" + os.path.join(HERE, "t.db") + "?mode=ro", uri=True)'
                             '.execute("select b from t").fetchone()[0]', {"t.db": _db(256)}, {"t.db": _db(8192)}, None),
    "sqlite-memory-then-file": ("import sqlite3\n",
                                '(sqlite3.connect(":memory:"), sqlite3.connect(os.path.join(HERE, "t.db"))'
                                '.execute("select b from t").fetchone()[0])[1]', {"t.db": _db(256)}, {"t.db": _db(8192)},
                                None),
    "shelve": ("import shelve\n", 'shelve.open(os.path.join(HERE, "s"), "r")["B"]', {"s": _shelf(256)},
               {"s": _shelf(8192)}, None),
    "zipfile-member": ("import zipfile\n", 'int(zipfile.ZipFile(os.path.join(HERE, "c.zip")).read("b.txt"))',
                       {"c.zip": _zip("b.txt", "256")}, {"c.zip": _zip("b.txt", "8192")}, None),
    "zipimport-of-a-project-zip": ("import sys\nsys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'lib.zip'))\n",
                                   '__import__("zconsts").B', {"lib.zip": _zip("zconsts.py", "B = 256\n")},
                                   {"lib.zip": _zip("zconsts.py", "B = 8192\n")}, None),
    "numpy-load": ("import numpy as np\n", 'int(np.load(os.path.join(HERE, "b.npy"))[0])', {"b.npy": _npy(256)},
                   {"b.npy": _npy(8192)}, None),
    "numpy-loadtxt": ("import numpy as np\n", 'int(np.loadtxt(os.path.join(HERE, "b.csv"))[0])',
                      {"b.csv": "256\n1\n"}, {"b.csv": "8192\n1\n"}, None),
    "numpy-fromfile": ("import numpy as np\n", 'int(np.fromfile(os.path.join(HERE, "b.txt"), sep=" ")[0])',
                       {"b.txt": "256 1"}, {"b.txt": "8192 1"}, None),
    "pickle-load": ("import pickle\n", 'pickle.load(open(os.path.join(HERE, "b.pkl"), "rb"))["B"]',
                    {"b.pkl": _pickle(256)}, {"b.pkl": _pickle(8192)}, None),
    "linecache": ("import linecache\n", 'int(linecache.getline(os.path.join(HERE, "b.txt"), 2))',
                  {"b.txt": "x\n256\n"}, {"b.txt": "x\n8192\n"}, None),
    "inspect-getsource": ("import inspect, consts\n", '8192 if "BIG" in inspect.getsource(consts.f) else 256',
                          {"consts.py": "def f():\n    return 'SMALL'\n"}, {"consts.py": "def f():\n    return 'BIG'\n"},
                          None),
    "open-relative-to-cwd": ("", 'int(open("b.txt").read())', {"b.txt": "256"}, {"b.txt": "8192"}, None),
    "pathlib-cwd-relative": ("", 'int(Path("conf/b.txt").read_text())', {"conf/b.txt": "256"}, {"conf/b.txt": "8192"},
                             None),
    "symlink-retargeted": ("", 'int(open(os.path.join(HERE, "b.txt")).read())',
                           {"small.txt": "256", "big.txt": "8192", "b.txt": _link("small.txt")},
                           {"b.txt": _link("big.txt")}, None),
    "symlink-target-edited": ("", 'int(open(os.path.join(HERE, "b.txt")).read())',
                              {"data/v.txt": "256", "b.txt": _link("data/v.txt")}, {"data/v.txt": "8192"}, None),
    "symlinked-folder-retargeted": ("", 'int(open(os.path.join(HERE, "cur", "b.txt")).read())',
                                    {"s/b.txt": "256", "l/b.txt": "8192", "cur": _link("s")}, {"cur": _link("l")}, None),
    "replaced-atomically-same-size-and-time": ("", 'int(open(os.path.join(HERE, "b.txt")).read()) * 256',
                                               {"b.txt": _same_size_and_time("01")}, {"b.txt": _same_size_and_time("32")},
                                               None),
    "outside-replaced-atomically-same-size-and-time": (
        "", 'int(open(os.path.join(HERE, "..", "o.txt")).read()) * 256', {"../o.txt": _same_size_and_time("01")},
        {"../o.txt": _same_size_and_time("32")}, None),
    "outside-edited-in-place-same-time": (
        "", 'int(open(os.path.join(HERE, "..", "o.txt")).read()) * 256', {"../o.txt": _in_place_same_time("01")},
        {"../o.txt": _in_place_same_time("32")}, None),
    "module-getattr": ("import consts\n", "consts.BLOCK",
                       {"consts.py": 'import os\n\ndef __getattr__(name):\n    return int(open(os.path.join('
                                     'os.path.dirname(__file__), "b.txt")).read())\n', "b.txt": "256"},
                       {"b.txt": "8192"}, None),
    "importlib-reload": ("import importlib, consts\n", "importlib.reload(consts).B", {"consts.py": "B = 256\n"},
                         {"consts.py": "B = 8192\n"}, None),
    "module-shadowed-on-python-path": ("", '__import__("consts").B', {"b/consts.py": "B = 256\n"},
                                       {"a/consts.py": "B = 8192\n"}, CFG_AB),
    "package-beside-a-module-of-its-name": ("", '__import__("consts").B', {"consts.py": "B = 256\n"},
                                            {"consts/__init__.py": "B = 8192\n"}, None),
    "namespace-package-gains-a-portion": ("", '__import__("nsp.vals", fromlist=["B"]).B',
                                          {"b/nsp/vals.py": "B = 256\n"}, {"a/nsp/vals.py": "B = 8192\n"}, CFG_AB),
    "namespace-package-gains-a-module": ("import importlib.util\n",
                                         '8192 if importlib.util.find_spec("nsp.fast") else 256',
                                         {"b/nsp/vals.py": "B = 256\n"}, {"a/nsp/fast.py": ""}, CFG_AB),
    "package-shadowed-on-python-path": ("", '__import__("cfgp").B', {"b/cfgp/__init__.py": "B = 256\n"},
                                        {"a/cfgp.py": "B = 8192\n"}, CFG_AB),
    "getenvb": ("", 'int(os.getenvb(b"MYPROJ_BLOCK", b"256"))', {}, {"env:MYPROJ_BLOCK": "8192"}, None),
    "environ-setdefault": ("", 'int(os.environ.setdefault("MYPROJ_BLOCK", "256"))', {}, {"env:MYPROJ_BLOCK": "8192"},
                           None),
    "environ-pop": ("", 'int(os.environ.pop("MYPROJ_BLOCK", "256"))', {}, {"env:MYPROJ_BLOCK": "8192"}, None),
    "environ-copy-in-a-thread": (THREAD, 'int(_in_thread(lambda: os.environ.copy()).get("MYPROJ_BLOCK", "256"))',
                                 {}, {"env:MYPROJ_BLOCK": "8192"}, None),
    "environ-get-in-a-thread": (THREAD, 'int(_in_thread(lambda: os.environ.get("MYPROJ_BLOCK", "256")))', {},
                                {"env:MYPROJ_BLOCK": "8192"}, None),
    "environ-keys-membership": ("", '8192 if "MYPROJ_BLOCK" in os.environ.keys() else 256', {},
                                {"env:MYPROJ_BLOCK": "1"}, None),
    "environ-set-after-read": ("", '(int(os.environ.get("MYPROJ_BLOCK", "256")), os.environ.__setitem__("MYPROJ_BLOCK", "1"))[0]',
                               {}, {"env:MYPROJ_BLOCK": "8192"}, None),
    "posix-environ": ("import posix\n", 'int(posix.environ.get(b"MYPROJ_BLOCK", b"256"))', {},
                      {"env:MYPROJ_BLOCK": "8192"}, None),
    "program-reads-the-environment": ("import subprocess\n",
                                      'int(subprocess.run(["sh", "-c", "echo ${MYPROJ_BLOCK:-256}"], capture_output=True,'
                                      ' text=True).stdout)', {}, {"env:MYPROJ_BLOCK": "8192"}, None),
    "program-reads-a-file-it-was-not-given": ("import subprocess\n",
                                              'int(subprocess.run(["cat"], stdin=open(os.path.join(HERE, "b.txt")), '
                                              'capture_output=True, text=True).stdout)', {"b.txt": "256"},
                                              {"b.txt": "8192"}, None),
    "os-system": ("", '256 * (1 + 31 * (os.system("test -e " + os.path.join(HERE, "big.flag")) == 0))', {},
                  {"big.flag": ""}, None),
    "os-path-getsize": ("", '8192 if os.path.getsize(os.path.join(HERE, "b.txt")) > 3 else 256', {"b.txt": "1"},
                        {"b.txt": "11111"}, None),
    "os-access": ("", '8192 if os.access(os.path.join(HERE, "big.flag"), os.F_OK) else 256', {}, {"big.flag": ""}, None),
    "os-walk": ("", '8192 if any("big.flag" in f for _, _, f in os.walk(os.path.join(HERE, "conf"))) else 256',
                {"conf/deep/x": ""}, {"conf/deep/big.flag": ""}, None),
    "os-readlink": ("", '8192 if os.readlink(os.path.join(HERE, "lnk")).endswith("big") else 256',
                    {"lnk": _link("small")}, {"lnk": _link("big")}, None),
    "fnmatch-of-pathlib-glob": ("", '8192 if list(Path(HERE).glob("conf/*.big")) else 256', {"conf/x.small": ""},
                                {"conf/x.big": ""}, None),
    "mmap": ("import mmap\n", 'int(mmap.mmap(os.open(os.path.join(HERE, "b.txt"), os.O_RDONLY), 0, prot=mmap.PROT_READ)[:].strip())',
             {"b.txt": "0256"}, {"b.txt": "8192"}, None),
    "fileinput": ("import fileinput\n", 'int(next(iter(fileinput.input(os.path.join(HERE, "b.txt")))))',
                  {"b.txt": "256\n"}, {"b.txt": "8192\n"}, None),
    "csv": ("import csv\n", 'int(next(csv.reader(open(os.path.join(HERE, "b.csv"))))[0])', {"b.csv": "256,1\n"},
            {"b.csv": "8192,1\n"}, None),
    "dev-urandom-read": ("", '256 if open("/dev/urandom", "rb").read(1)[0] < 256 and _once() else 8192', {}, {}, None),
}
ONCE = '''
def _once():
    with open(os.path.join(HERE, "imports.log"), "a") as log:
        log.write("x\\n")
    return True
_was = "MYPROJ_BLOCK" in os.environ
'''
XFAIL: dict[str, str] = {}


def _write(project: Path, files: dict[str, Any]) -> None:
    for name, text in files.items():
        path = project / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if text is None:
            path.unlink()
        elif callable(text):
            text(path)
        elif isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text)


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.xfail(strict=True, reason=XFAIL[c]))
                                  if c in XFAIL else c for c in sorted(CASES) if c != "dev-urandom-read"])
def test_every_held_out_read_is_in_the_key(tmp_path: Path, case: str) -> None:
    preamble, expression, files, change, config = CASES[case]
    project = _project(tmp_path / "p", {"ops.py": HELPERS + ONCE + _module(expression, preamble)})
    if config is not None:
        (project / "kgate.toml").write_text(config)
    for folder in ("a", "b"):
        (project / folder).mkdir(exist_ok=True)
    _write(project, files)
    small = _check(project)
    assert "BLOCK=256," in small[0], small
    env = {name[4:]: text for name, text in change.items() if name.startswith("env:")}
    _write(project, {name: text for name, text in change.items() if not name.startswith("env:")})
    large = _check(project, env)
    assert "BLOCK=8192," in large[0], large
    if not env:  # and back: the first state serves its record again
        for name in change:
            if name not in files and (project / name).is_file() or (project / name).is_symlink():
                if name not in files:
                    (project / name).unlink()
        _write(project, files)
        assert _check(project) == small


def test_an_import_that_read_a_random_device_is_imported_again(tmp_path: Path) -> None:
    """What /dev/urandom gave cannot be named: the record of such an import is never served to a later run."""
    preamble, expression, *_ = CASES["dev-urandom-read"]
    project = _project(tmp_path / "p", {"ops.py": HELPERS + ONCE + _module(expression, preamble)})
    _check(project)
    _check(project)
    assert (project / "imports.log").read_text().count("x") >= 2
