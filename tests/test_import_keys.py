"""What a kernel module reads as it is imported is part of the key of every record made from it.

A module that builds its autotune configs from a `tune.json` beside it, from a module it imports with
`importlib`, or from an environment variable compiles something else when that input changes, with its own text
unchanged: a warm check must compile the new variant (never show the old one), and `kgate diff` must compare the
two. The variant's registers are read from the table, never written here: the test compares the two runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import textwrap
import threading
from pathlib import Path

import pytest
from conftest import kgate

CFG = 'targets = ["sm_120a"]\npython-path = ["."]\n'

TUNED = '''\
import json
from pathlib import Path

import kgate
import triton
import triton.language as tl

_CONFIGS = json.loads((Path(__file__).parent / "tune.json").read_text())


@kgate.register(signature={"x": "*fp32", "y": "*fp32", "n": "i32"})
@triton.autotune(configs=[triton.Config({"BLOCK": c["BLOCK"]}, num_warps=c["warps"]) for c in _CONFIGS], key=[])
@triton.jit
def fill_kernel(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs, mask=offs < n)
    tl.store(y + offs, v * 2, mask=offs < n)
'''


def _module(block_from: str, preamble: str = "") -> str:
    """A kernel module whose one autotune config takes its BLOCK from `block_from` (an expression at import)."""
    return textwrap.dedent(preamble) + TUNED.replace(
        '_CONFIGS = json.loads((Path(__file__).parent / "tune.json").read_text())',
        f'_CONFIGS = [{{"BLOCK": {block_from}, "warps": 4}}]')


SMALL, LARGE = '[{"BLOCK": 256, "warps": 4}]', '[{"BLOCK": 8192, "warps": 1}]'


def _rows(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("ops:fill_kernel")]


def _project(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kgate.toml").write_text(CFG)
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


def _check(folder: Path, env: dict[str, str] | None = None) -> list[str]:
    run = kgate("check", "--show-kernels", cwd=folder, env={"COLUMNS": "250", **(env or {})})  # whole rows
    assert run.code in (0, 1), run.stderr
    rows = _rows(run.stdout)
    assert len(rows) == 1, run.stdout
    return rows


def test_a_file_the_module_reads_at_import_is_in_the_key(tmp_path: Path) -> None:
    project = _project(tmp_path / "p", {"ops.py": TUNED, "tune.json": SMALL})
    small = _check(project)
    (project / "tune.json").write_text(LARGE)
    large = _check(project)
    assert "BLOCK=8192" in large[0] and large != small
    assert _check(project, {"KGATE_X": "1"}) == large  # another run key, same record: the cache, not the replay
    (project / "tune.json").write_text(SMALL)
    assert _check(project) == small


def test_a_module_imported_with_importlib_is_in_the_key(tmp_path: Path) -> None:
    ops = _module('256 * importlib.import_module("consts").SCALE', "import importlib\n")
    project = _project(tmp_path / "p", {"ops.py": ops, "consts.py": "SCALE = 1\n"})
    small = _check(project)
    (project / "consts.py").write_text("SCALE = 32\n")
    large = _check(project)
    assert "BLOCK=8192" in large[0] and large != small


def test_an_environment_variable_the_module_reads_is_in_the_key(tmp_path: Path) -> None:
    ops = _module('int(os.environ.get("MYPROJ_BLOCK", "256"))', "import os\n")
    project = _project(tmp_path / "p", {"ops.py": ops})
    small = _check(project)
    large = _check(project, {"MYPROJ_BLOCK": "8192"})
    assert "BLOCK=8192" in large[0] and large != small
    assert _check(project) == small
    getenv = _module('int(os.getenv("MYPROJ_BLOCK") or 256)', "import os\n")
    (project / "ops.py").write_text(getenv)
    assert "BLOCK=256" in _check(project)[0]
    assert "BLOCK=8192" in _check(project, {"MYPROJ_BLOCK": "8192"})[0]


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def _committed(folder: Path, files: dict[str, str]) -> Path:
    project = _project(folder, files)
    (project / ".gitignore").write_text(".kgate-cache/\n__pycache__/\n")
    _git(project, "init", "-q", "-b", "main")
    _git(project, "add", "-A")
    _git(project, "commit", "-q", "-m", "base")
    return project


@pytest.mark.parametrize("changed", ["tune.json", "consts.py"])
def test_diff_compares_what_each_side_imported(tmp_path: Path, changed: str) -> None:
    ops = TUNED if changed == "tune.json" else _module('256 * importlib.import_module("consts").SCALE',
                                                        "import importlib\n")
    files = {"ops.py": ops, "tune.json": SMALL} if changed == "tune.json" else {"ops.py": ops, "consts.py": "SCALE = 1\n"}
    project = _committed(tmp_path / "p", files)
    (project / changed).write_text(LARGE if changed == "tune.json" else "SCALE = 32\n")
    run = kgate("diff", "HEAD", "--require-identical", cwd=project)  # an empty cache: both sides compiled here
    assert run.code == 1, run.stdout + run.stderr
    assert "0 identical, 1 changed" in run.stdout, run.stdout
    again = kgate("diff", "HEAD", "--require-identical", cwd=project)  # a warm cache: each side its own record
    assert again.code == 1 and "0 identical, 1 changed" in again.stdout and "(0 compiled, 2 from cache)" in again.stdout


def test_a_project_in_a_temporary_folder_named_like_kgates_own_is_replayed_only_while_unchanged() -> None:
    """kgate's own temporary folders are the ones this run made, not any folder named `kgate-*` there."""
    folder = Path(tempfile.mkdtemp(prefix="kgate-work-"))
    try:
        project = _project(folder / "p", {"build/ops.py": TUNED, "build/tune.json": SMALL})
        (project / "kgate.toml").write_text(
            'targets = ["sm_120a"]\npython-path = ["build"]\nextend-exclude = ["build"]\n\n[[triton]]\n'
            'kernel = "ops:fill_kernel"\nsignature = { x = "*fp32", y = "*fp32", n = "i32" }\n')
        small = _check(project)
        (project / "build" / "tune.json").write_text(LARGE)
        (project / "build" / "ops.py").write_text(TUNED + "\n# edited\n")
        large = _check(project)
        assert "BLOCK=8192" in large[0] and large != small
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# Each way a module can read an input at import: (preamble, BLOCK expression, files, the change). The change
# turns BLOCK from 256 to 8192 without touching ops.py; `env` changes are environment variables of the second run.
READS = {
    "open": ("", 'int(open(os.path.join(HERE, "b.txt")).read())', {"b.txt": "256"}, {"b.txt": "8192"}),
    "open-binary": ("", 'int(open(os.path.join(HERE, "b.txt"), "rb").read())', {"b.txt": "256"}, {"b.txt": "8192"}),
    "path-read-bytes": ("", 'int((Path(HERE) / "b.txt").read_bytes())', {"b.txt": "256"}, {"b.txt": "8192"}),
    "os-open": ("", 'int(os.read(os.open(os.path.join(HERE, "b.txt"), os.O_RDONLY), 16))', {"b.txt": "256"},
                {"b.txt": "8192"}),
    "io-open-code": ("import io\n", 'int(io.open_code(os.path.join(HERE, "b.txt")).read())', {"b.txt": "256"},
                     {"b.txt": "8192"}),
    "getenv": ("", 'int(os.getenv("MYPROJ_BLOCK", "256"))', {}, {"env:MYPROJ_BLOCK": "8192"}),
    "environ-subscript": ("", 'int(os.environ["MYPROJ_BLOCK"]) if "MYPROJ_BLOCK" in os.environ else 256', {},
                          {"env:MYPROJ_BLOCK": "8192"}),
    "environ-copy": ("", 'int(dict(os.environ).get("MYPROJ_BLOCK", "256"))', {}, {"env:MYPROJ_BLOCK": "8192"}),
    "environ-items": ("", 'int(next((v for k, v in os.environ.items() if k == "MYPROJ_BLOCK"), "256"))', {},
                      {"env:MYPROJ_BLOCK": "8192"}),
    "environb": ("", 'int(os.environb.get(b"MYPROJ_BLOCK", b"256"))', {}, {"env:MYPROJ_BLOCK": "8192"}),
    "import-module": ("import importlib\n", 'importlib.import_module("consts").B', {"consts.py": "B = 256\n"},
                      {"consts.py": "B = 8192\n"}),
    "dunder-import": ("", '__import__("consts").B', {"consts.py": "B = 256\n"}, {"consts.py": "B = 8192\n"}),
    "package-init-reads": ("import cfgpkg\n", "cfgpkg.B",
                           {"cfgpkg/__init__.py": 'import os\nB = int(open(os.path.join(os.path.dirname(__file__), '
                                                  '"b.txt")).read())\n', "cfgpkg/b.txt": "256"},
                           {"cfgpkg/b.txt": "8192"}),
    "submodule-of-package": ("import cfgpkg.values\n", "cfgpkg.values.B",
                             {"cfgpkg/__init__.py": "", "cfgpkg/values.py": "B = 256\n"},
                             {"cfgpkg/values.py": "B = 8192\n"}),
    "exec-of-a-file": ("", '_exec_file(os.path.join(HERE, "conf.py"))', {"conf.py": "B = 256\n"},
                       {"conf.py": "B = 8192\n"}),
    "runpy": ("import runpy\n", 'runpy.run_path(os.path.join(HERE, "conf.py"))["B"]', {"conf.py": "B = 256\n"},
              {"conf.py": "B = 8192\n"}),
    "pkgutil-get-data": ("import pkgutil\n", 'int(pkgutil.get_data("cfgpkg", "b.txt"))',
                         {"cfgpkg/__init__.py": "", "cfgpkg/b.txt": "256"}, {"cfgpkg/b.txt": "8192"}),
    "importlib-resources": ("import importlib.resources\n",
                            'int(importlib.resources.files("cfgpkg").joinpath("b.txt").read_text())',
                            {"cfgpkg/__init__.py": "", "cfgpkg/b.txt": "256"}, {"cfgpkg/b.txt": "8192"}),
    "glob": ("import glob\n", '256 * (1 + 31 * len(glob.glob(os.path.join(HERE, "big.*"))))', {"small.flag": ""},
             {"big.flag": ""}),
    "listdir": ("", '8192 if "big.flag" in os.listdir(HERE) else 256', {}, {"big.flag": ""}),
    "scandir": ("", '8192 if any(e.name == "big.flag" for e in os.scandir(HERE)) else 256', {}, {"big.flag": ""}),
    "path-exists": ("", '8192 if os.path.exists(os.path.join(HERE, "big.flag")) else 256', {}, {"big.flag": ""}),
    "pathlib-is-file": ("", '8192 if (Path(HERE) / "big.flag").is_file() else 256', {}, {"big.flag": ""}),
    "file-deleted": ("", '256 if os.path.exists(os.path.join(HERE, "small.flag")) else 8192', {"small.flag": ""},
                     {"small.flag": None}),
    "optional-module-appears": ("", '_optional("fastconsts", 256)', {}, {"fastconsts.py": "B = 8192\n"}),
    "json-load": ("import json\n", 'json.load(open(os.path.join(HERE, "t.json")))["B"]', {"t.json": '{"B": 256}'},
                  {"t.json": '{"B": 8192}'}),
    "config-in-subfolder": ("", 'int(open(os.path.join(HERE, "conf", "deep", "b.txt")).read())',
                            {"conf/deep/b.txt": "256"}, {"conf/deep/b.txt": "8192"}),
    "file-created": ("", '_read_or(os.path.join(HERE, "b.txt"), 256)', {}, {"b.txt": "8192"}),
    "configparser": ("import configparser\n",
                     '_ini(os.path.join(HERE, "k.ini"))', {"k.ini": "[k]\nblock = 256\n"}, {"k.ini": "[k]\nblock = 8192\n"}),
    "tomllib": (("try:\n    import tomllib\nexcept ModuleNotFoundError:  # Python 3.10: kgate's own dependency\n"
                "    import tomli as tomllib\n"), 'tomllib.load(open(os.path.join(HERE, "k.toml"), "rb"))["block"]',
                {"k.toml": "block = 256\n"}, {"k.toml": "block = 8192\n"}),
    "outside-the-project": ("", 'int(open(os.path.join(HERE, "..", "outside.txt")).read())', {"../outside.txt": "256"},
                            {"../outside.txt": "8192"}),
    "subprocess-of-a-script": ("import subprocess, sys\n",
                               'int(subprocess.check_output([sys.executable, os.path.join(HERE, "gen.py")]))',
                               {"gen.py": "print(256)\n"}, {"gen.py": "print(8192)\n"}),
    "setup-hook-env": ("", 'int(os.environ.get("FROM_SETUP", "256"))', {}, {"env:MYPROJ_BLOCK": "8192"}),
}

HELPERS = '''\
import os
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))


def _exec_file(path):
    scope = {}
    exec(compile(open(path).read(), path, "exec"), scope)
    return scope["B"]


def _read_or(path, default):
    try:
        return int(open(path).read())
    except FileNotFoundError:
        return default


def _ini(path):
    import configparser

    parser = configparser.ConfigParser()
    parser.read(path)
    return parser.getint("k", "block")


def _optional(name, default):
    try:
        return __import__(name).B
    except ImportError:
        return default

'''


@pytest.mark.parametrize("case", sorted(READS))
def test_every_way_of_reading_at_import_is_in_the_key(tmp_path: Path, case: str) -> None:
    preamble, expression, files, change = READS[case]
    ops = HELPERS + _module(expression, preamble)
    project = _project(tmp_path / "p", {"ops.py": ops, **files})
    env: dict[str, str] = {}
    if case == "setup-hook-env":  # the project's set-up hook sets what the module reads
        (project / "kgate_setup.py").write_text('import os\nos.environ["FROM_SETUP"] = os.environ.get("MYPROJ_BLOCK", "256")\n')
        (project / "kgate.toml").write_text(CFG + 'setup = "kgate_setup.py"\n')
    small = _check(project)
    assert "BLOCK=256," in small[0], small
    for name, text in change.items():
        if name.startswith("env:"):
            env[name[4:]] = text
        elif text is None:
            (project / name).unlink()
        else:
            (project / name).write_text(text)
    large = _check(project, env)
    assert "BLOCK=8192," in large[0], large
    if not env:  # and back: the first record serves again (no compile), never the second's
        for name, text in files.items():
            (project / name).write_text(text)
        for name, text in change.items():
            if name not in files and (project / name).exists():
                (project / name).unlink()
        assert _check(project) == small


def test_the_run_skips_the_temporary_folders_it_made_not_those_named_like_them() -> None:
    from kgate.support import reads, scratch

    named = Path(tempfile.mkdtemp(prefix="kgate-"))
    made = scratch.make("kgate-")
    try:
        log = reads.Log([])
        assert log.wanted(str(named / "compile_commands.json"))
        assert not log.wanted(str(made / "kernel.cubin"))
    finally:
        scratch.forget(made)
        shutil.rmtree(made, ignore_errors=True)
        shutil.rmtree(named, ignore_errors=True)
    assert reads.Log([]).wanted(str(made / "kernel.cubin"))  # once removed, it is no longer the run's


class _Told:
    """A path told only when `read` is set: a thread that asks for it waits there."""

    def __init__(self, path: Path) -> None:
        self.path, self.asked, self.read = path, threading.Event(), threading.Event()

    def __fspath__(self) -> str:
        self.asked.set()
        self.read.wait(60)
        return str(self.path)


@pytest.mark.parametrize("kind", ["a run's", "an import's"])
def test_a_read_while_another_thread_is_in_the_hook_is_recorded(tmp_path: Path, kind: str,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The hooks that record what a run (`kgate.support.reads`) or a kernel module's import
    (`kgate.compile.import_recorder`) reads stay out of their own way per thread: a read of one thread while another
    thread is inside the hook (kgate's watcher of its process, polling /proc) is recorded, not taken for the hook's
    own."""
    from kgate.compile import import_recorder
    from kgate.support import reads

    (tmp_path / "other.txt").write_text("other\n")
    (tmp_path / "tune.json").write_text(SMALL)
    told = _Told(tmp_path / "other.txt")
    if kind == "a run's":
        log = reads.Log([])
        monkeypatch.setattr(reads, "_LOG", log)
        hook, recorded = reads._hook, lambda: str(tmp_path / "tune.json") in log.files
    else:
        rec = import_recorder.Recorder(())
        rec.where = import_recorder.View(str(tmp_path), (str(tmp_path),), {}, str(tmp_path))
        monkeypatch.setattr(import_recorder, "_RECORDER", rec)
        hook, recorded = import_recorder._hook, lambda: "file:./tune.json" in rec.reads
    try:
        inside = threading.Thread(target=hook, args=("open", (told, "r", os.O_RDONLY)))
        inside.start()
        assert told.asked.wait(60)  # the other thread is in the hook now
        hook("open", (str(tmp_path / "tune.json"), "r", os.O_RDONLY))  # as the audit event of a read in this thread
        told.read.set()
        inside.join(60)
    finally:
        told.read.set()
    assert recorded()


def test_an_unrelated_file_added_beside_the_module_compiles_nothing(tmp_path: Path) -> None:
    """The import system and importlib.metadata look every folder of sys.path over (the project's too): a
    new file there is not an input unless it is a module looked for or a distribution's metadata."""
    preamble = "import importlib.metadata\nimport importlib.util\n"
    ops = _module('256 if importlib.util.find_spec("not_there") is None else 1', preamble).replace(
        "_CONFIGS = [", '_VERSION = importlib.metadata.version("triton")\n_CONFIGS = [')
    project = _project(tmp_path / "p", {"ops.py": ops})
    first = kgate("check", "-v", cwd=project)
    assert "1 compiled" in first.stderr + first.stdout, first.stderr
    (project / "notes.txt").write_text("unrelated\n")
    again = kgate("check", "-v", cwd=project)
    assert "0 compiled, 1 from cache" in again.stderr + again.stdout, again.stderr
    (project / "not_there.py").write_text("")  # the module it looked for and did not find: now it is found
    assert "BLOCK=1," in _check(project)[0]


def test_editing_another_kernel_of_the_module_recompiles_only_that_kernel(tmp_path: Path) -> None:
    two = TUNED + "\n\n" + TUNED[TUNED.index("@kgate.register"):].replace("fill_kernel", "other_kernel")
    project = _project(tmp_path / "p", {"ops.py": two, "tune.json": SMALL})
    assert "2 compiled" in kgate("check", "-v", cwd=project).stdout
    (project / "ops.py").write_text(two.replace("v * 2, mask=offs < n)\n\n\n@kgate", "v * 3, mask=offs < n)\n\n\n@kgate"))
    again = kgate("check", "-v", cwd=project)
    assert "1 compiled, 1 from cache" in again.stdout, again.stdout
