"""`kgate diff` between revisions, beyond tests/test_diff*.py and tests/test_held_out_diff.py: kernel modules
moved, renamed or deleted in commits, python-path changes (folders outside the repository too), submodules
deinitialised, moved, renamed or removed in a linked worktree, bases named by tags and trees, line endings the
base's attributes convert, set-up hooks, files the working tree does not commit, and diffs run at once, stopped
by a signal or killed. Each side is compiled for real; the counts are what a correct diff finds.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import kgate
from test_diff_sides import GIT_ENV, _diff, _git, _left_worktrees, _repo
from test_import_keys import CFG, LARGE, SMALL, TUNED

CFG_SRC = 'targets = ["sm_120a"]\npython-path = ["src"]\n'
READS_ENV = TUNED.replace('json.loads((Path(__file__).parent / "tune.json").read_text())',
                          '[{"BLOCK": int(os.environ.get("FROM_SETUP", "256")), "warps": 4}]').replace(
                              "import json\n", "import json\nimport os\n")
READS_CWD = TUNED.replace('(Path(__file__).parent / "tune.json")', 'Path("tune.json")')
OPTIONAL = TUNED.replace('json.loads((Path(__file__).parent / "tune.json").read_text())',
                         '(json.loads((Path(__file__).parent / "tune.json").read_text()) if '
                         '(Path(__file__).parent / "tune.json").exists() else [{"BLOCK": 256, "warps": 4}])')
OUTSIDE = TUNED.replace('(Path(__file__).parent / "tune.json")', '(Path(__file__).resolve().parent.parent / "shared.json")')
IMPORTS_CONSTS = TUNED.replace('_CONFIGS = json.loads((Path(__file__).parent / "tune.json").read_text())',
                               'import consts\n_CONFIGS = [{"BLOCK": consts.B, "warps": 4}]')
SLOW = TUNED.replace("import json\n", "import json\nimport time\ntime.sleep(3)\n")
# A tile size that sends kgate SIGTERM as kgate reads it from the compile worker's answer: a signal that lands while a
# worker's answer is read, at the same point of every run. kgate is the parent of the workers' fork server.
STOPS_KGATE = TUNED.replace('_CONFIGS = json.loads((Path(__file__).parent / "tune.json").read_text())', '''\
import os
import signal


def _kgate():
    with open(f"/proc/{os.getppid()}/stat") as server:
        return int(server.read().rsplit(")", 1)[1].split()[1])


class _Stops(int):
    def __reduce__(self):
        return os.kill, (_kgate(), signal.SIGTERM)


_CONFIGS = [{"BLOCK": _Stops(256), "warps": 4}]''')
# The module reads its configs while a thread of its own waits inside kgate's import recorder (a path it asks about is
# told only once the configs are read): as a read made while kgate's watcher thread polls its process is.
BESIDE_A_THREAD = TUNED.replace('_CONFIGS = json.loads((Path(__file__).parent / "tune.json").read_text())', '''\
import os
import threading


class _Told:
    def __init__(self):
        self.asked, self.read = threading.Event(), threading.Event()

    def __fspath__(self):
        self.asked.set()
        self.read.wait(60)
        return __file__


_told = _Told()
_looking = threading.Thread(target=os.stat, args=(_told,))
_looking.start()
_told.asked.wait(60)
_CONFIGS = json.loads((Path(__file__).parent / "tune.json").read_text())
_told.read.set()
_looking.join()''')


def _commit(repo: Path, message: str = "next") -> None:
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", message)


def _counts(run: object) -> str:
    out = run.stdout  # type: ignore[attr-defined]
    return next((line for line in out.splitlines() if " identical, " in line), out + run.stderr)  # type: ignore[attr-defined]


def _lib(tmp_path: Path) -> Path:
    return _repo(tmp_path / "lib", {"ops.py": TUNED, "tune.json": SMALL}, 'targets = ["sm_120a"]\n')


def _with_submodule(tmp_path: Path, path: str = "vendor/lib", name: str | None = None) -> Path:
    lib = _lib(tmp_path)
    project = _repo(tmp_path / "p", {"top.py": TUNED.replace("fill_kernel", "top_kernel"), "tune.json": SMALL},
                    f'targets = ["sm_120a"]\npython-path = [".", "{path}"]\n')
    _git(project, "submodule", "add", "-q", *(["--name", name] if name else []), str(lib), path)
    _commit(project, "with the submodule")
    return project


# ---------------------------------------------------------------------------------------------- moved modules

def test_a_kernel_module_moved_into_a_package_in_a_commit(tmp_path: Path) -> None:
    project = _repo(tmp_path / "p", {"ops.py": TUNED, "tune.json": SMALL})
    (project / "pkg").mkdir()
    (project / "pkg" / "__init__.py").write_text("")
    _git(project, "mv", "ops.py", "pkg/ops.py")
    (project / "pkg" / "tune.json").write_text(SMALL)
    _commit(project, "moved")
    run = _diff(project, "HEAD~1")
    assert run.code == 0 and "0 identical, 0 changed, 1 new, 1 gone" in _counts(run), run.stdout + run.stderr
    assert "pkg.ops:fill_kernel" in run.stdout and "ops:fill_kernel" in run.stdout


def test_a_module_moved_with_the_python_path_is_the_same_kernel(tmp_path: Path) -> None:
    project = _repo(tmp_path / "p", {"ops.py": TUNED, "tune.json": SMALL})
    (project / "src").mkdir()
    _git(project, "mv", "ops.py", "src/ops.py")
    _git(project, "mv", "tune.json", "src/tune.json")
    (project / "kgate.toml").write_text(CFG_SRC)
    _commit(project, "into src")
    run = _diff(project, "HEAD~1", "--require-identical")
    assert run.code == 0 and "1 identical, 0 changed, 0 new, 0 gone" in _counts(run), run.stdout + run.stderr


def test_a_helper_moved_to_another_python_path_folder(tmp_path: Path) -> None:
    project = _repo(tmp_path / "p", {"ops.py": IMPORTS_CONSTS, "consts.py": "B = 256\n"})
    (project / "lib").mkdir()
    _git(project, "mv", "consts.py", "lib/consts.py")
    (project / "kgate.toml").write_text('targets = ["sm_120a"]\npython-path = [".", "lib"]\n')
    run = _diff(project, "HEAD", "--require-identical")
    assert run.code == 0 and "1 identical" in _counts(run), run.stdout + run.stderr


def test_a_base_without_kernels_before_the_first_is_added(tmp_path: Path) -> None:
    project = _repo(tmp_path / "p", {"notes.py": "X = 1\n"})
    (project / "ops.py").write_text(TUNED)
    (project / "tune.json").write_text(SMALL)
    run = _diff(project, "HEAD", "--require-identical")
    assert run.code == 1 and "0 identical, 0 changed, 1 new, 0 gone" in _counts(run), run.stdout + run.stderr


def test_a_deleted_kernel_module_selected_by_glob_is_gone(tmp_path: Path) -> None:
    project = _repo(tmp_path / "p", {"ops.py": TUNED, "tune.json": SMALL})
    _git(project, "rm", "-q", "ops.py")
    run = _diff(project, "HEAD", "--kernel", "fill*", "--require-identical")
    assert run.code == 1 and "0 identical, 0 changed, 0 new, 1 gone" in _counts(run), run.stdout + run.stderr


def test_lines_added_above_the_kernel_leave_it_identical(tmp_path: Path) -> None:
    project = _repo(tmp_path / "p", {"ops.py": TUNED, "tune.json": SMALL})
    (project / "ops.py").write_text("# a header\n# of several\n# lines\n\n" + TUNED)
    run = _diff(project, "HEAD", "--require-identical")
    assert run.code == 0 and "1 identical" in _counts(run), run.stdout + run.stderr


def test_a_base_checked_out_with_crlf_line_endings(tmp_path: Path) -> None:
    project = _repo(tmp_path / "p", {"ops.py": TUNED, "tune.json": SMALL, ".gitattributes": "*.py text eol=crlf\n"})
    run = _diff(project, "HEAD", "--require-identical")
    assert run.code == 0 and "1 identical" in _counts(run), run.stdout + run.stderr


# ---------------------------------------------------------------------------------------------- inputs of a side

def test_a_file_only_the_working_tree_has_untracked(tmp_path: Path) -> None:
    project = _repo(tmp_path / "p", {"ops.py": OPTIONAL})
    (project / "tune.json").write_text(LARGE)  # neither committed nor ignored
    run = _diff(project, "HEAD")
    assert run.code == 0 and "0 identical, 1 changed" in _counts(run), run.stdout + run.stderr


def test_a_staged_change_undone_in_the_working_tree(tmp_path: Path) -> None:
    project = _repo(tmp_path / "p", {"ops.py": TUNED, "tune.json": SMALL})
    (project / "tune.json").write_text(LARGE)
    _git(project, "add", "tune.json")
    (project / "tune.json").write_text(SMALL)  # the index has LARGE, the working tree SMALL
    run = _diff(project, "HEAD", "--require-identical")
    assert run.code == 0 and "1 identical" in _counts(run), run.stdout + run.stderr


def test_a_data_file_deleted_since_the_base(tmp_path: Path) -> None:
    project = _repo(tmp_path / "p", {"ops.py": OPTIONAL, "tune.json": LARGE})
    _git(project, "rm", "-q", "tune.json")
    run = _diff(project, "HEAD")
    assert run.code == 0 and "0 identical, 1 changed" in _counts(run), run.stdout + run.stderr


def test_a_read_while_another_thread_of_the_import_is_in_the_recorder(tmp_path: Path) -> None:
    """What the importing thread reads while another thread is inside kgate's import recorder is keyed all the same:
    a read dropped from the key lets one side be served the other's record (the base's configs for the working
    tree's), and the changed kernel reads as identical."""
    project = _repo(tmp_path / "p", {"ops.py": BESIDE_A_THREAD, "tune.json": SMALL})
    same = _diff(project, "HEAD", "--require-identical")
    assert same.code == 0 and "1 identical, 0 changed" in _counts(same), same.stdout + same.stderr
    (project / "tune.json").write_text(LARGE)
    run = _diff(project, "HEAD", "--require-identical")
    assert run.code == 1 and "0 identical, 1 changed" in _counts(run), run.stdout + run.stderr


def test_a_file_outside_the_repository_is_both_sides_input(tmp_path: Path) -> None:
    (tmp_path / "shared.json").write_text(SMALL)
    project = _repo(tmp_path / "p", {"ops.py": OUTSIDE})
    assert "1 identical" in _counts(_diff(project, "HEAD"))
    (tmp_path / "shared.json").write_text(LARGE)  # both sides read it: still the same on both
    run = _diff(project, "HEAD", "--require-identical")
    assert run.code == 0 and "1 identical" in _counts(run), run.stdout + run.stderr
    assert "BLOCK=8192" in kgate("check", "--show-kernels", cwd=project, env={"COLUMNS": "250"}).stdout


def test_a_data_file_linked_to_an_absolute_path_outside_the_repository(tmp_path: Path) -> None:
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "tune.json").write_text(SMALL)
    project = _repo(tmp_path / "p", {"ops.py": TUNED})
    (project / "tune.json").symlink_to(tmp_path / "outside" / "tune.json")
    _commit(project, "a link")
    run = _diff(project, "HEAD", "--require-identical")
    assert run.code == 0 and "1 identical" in _counts(run), run.stdout + run.stderr


def test_a_relative_read_from_a_subfolder_reads_each_sides_own(tmp_path: Path) -> None:
    project = _repo(tmp_path / "p", {"ops.py": READS_CWD, "tune.json": SMALL, "sub/tune.json": SMALL})
    (project / "sub" / "tune.json").write_text(LARGE)  # what the module reads when kgate runs in sub/
    run = kgate("diff", "HEAD", cwd=project / "sub")
    assert run.code == 0 and "0 identical, 1 changed" in _counts(run), run.stdout + run.stderr


def test_each_side_runs_its_own_setup_hook(tmp_path: Path) -> None:
    hook = 'import os\nos.environ["FROM_SETUP"] = "{}"\n'
    project = _repo(tmp_path / "p", {"ops.py": READS_ENV, "kgate_setup.py": hook.format(256)},
                    CFG + 'setup = "kgate_setup.py"\n')
    (project / "kgate_setup.py").write_text(hook.format(8192))
    run = _diff(project, "HEAD")
    assert run.code == 0 and "0 identical, 1 changed" in _counts(run), run.stdout + run.stderr


def test_a_python_path_folder_the_base_does_not_commit(tmp_path: Path) -> None:
    project = _repo(tmp_path / "p", {"ops.py": IMPORTS_CONSTS, ".gitignore": ".kgate-cache/\n__pycache__/\ngen/\n"},
                    'targets = ["sm_120a"]\npython-path = [".", "gen"]\n')
    (project / "gen").mkdir()
    (project / "gen" / "consts.py").write_text("B = 256\n")  # generated, ignored: the base's checkout has none
    run = _diff(project, "HEAD", "--require-identical")
    assert run.code == 1 and "failed" in run.stdout and "cannot import" in run.stdout, run.stdout + run.stderr


def test_a_python_path_folder_outside_the_repository(tmp_path: Path) -> None:
    """Both sides import the one module outside the repository: the same kernel on both, not gone at the base."""
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "ops.py").write_text(TUNED)
    (tmp_path / "shared" / "tune.json").write_text(SMALL)
    project = _repo(tmp_path / "p", {"local.py": TUNED.replace("fill_kernel", "local_kernel"), "tune.json": SMALL},
                    'targets = ["sm_120a"]\npython-path = [".", "../shared"]\n\n[[triton]]\nkernel = "ops:fill_kernel"\n'
                    'signature = { x = "*fp32", y = "*fp32", n = "i32" }\n')
    run = _diff(project, "HEAD", "--require-identical")
    assert run.code == 0 and "2 identical, 0 changed, 0 new, 0 gone" in _counts(run), run.stdout + run.stderr


def test_a_python_path_folder_named_by_its_absolute_path(tmp_path: Path) -> None:
    """An absolute python-path into the repository names, on the base side, the base's own folder."""
    project = _repo(tmp_path / "p", {"ops.py": IMPORTS_CONSTS, "lib/consts.py": "B = 256\n"})
    (project / "kgate.toml").write_text(f'targets = ["sm_120a"]\npython-path = [".", "{project / "lib"}"]\n')
    _commit(project, "an absolute python-path")
    (project / "lib" / "consts.py").write_text("B = 8192\n")
    run = _diff(project, "HEAD")
    assert run.code == 0 and "0 identical, 1 changed" in _counts(run), run.stdout + run.stderr


# ---------------------------------------------------------------------------------------------- naming the base

def test_an_annotated_tag_names_its_commit(tmp_path: Path) -> None:
    project = _repo(tmp_path / "p", {"ops.py": TUNED, "tune.json": SMALL})
    _git(project, "tag", "-a", "v1", "-m", "release")
    (project / "tune.json").write_text(LARGE)
    run = _diff(project, "v1")
    assert run.code == 0 and "0 identical, 1 changed" in _counts(run), run.stdout + run.stderr
    assert "v1 (" in run.stdout


def test_a_tree_is_not_a_base(tmp_path: Path) -> None:
    project = _repo(tmp_path / "p", {"ops.py": TUNED, "tune.json": SMALL})
    run = _diff(project, "HEAD^{tree}")
    assert run.code == 2 and run.stderr.count("\n") == 1 and "not a commit" in run.stderr, run.stderr
    assert not _left_worktrees(project)


# ---------------------------------------------------------------------------------------------- submodules

def test_a_submodule_deinitialised_in_the_working_tree(tmp_path: Path) -> None:
    project = _with_submodule(tmp_path)
    _git(project, "submodule", "deinit", "-q", "-f", "vendor/lib")
    run = _diff(project, "HEAD")
    assert run.code == 0 and "1 identical, 0 changed, 0 new, 1 gone" in _counts(run), run.stdout + run.stderr
    assert not _left_worktrees(project)


def test_a_submodule_moved_since_the_base(tmp_path: Path) -> None:
    project = _with_submodule(tmp_path)
    (project / "third_party").mkdir()
    _git(project, "mv", "vendor/lib", "third_party/lib")
    (project / "kgate.toml").write_text('targets = ["sm_120a"]\npython-path = [".", "third_party/lib"]\n')
    _commit(project, "moved")
    run = _diff(project, "HEAD~1", "--require-identical")
    assert run.code == 0 and "2 identical, 0 changed, 0 new, 0 gone" in _counts(run), run.stdout + run.stderr
    assert not _left_worktrees(project)


def test_a_removed_submodule_named_other_than_its_path(tmp_path: Path) -> None:
    project = _with_submodule(tmp_path, name="the-kernels")
    _git(project, "rm", "-q", "vendor/lib")
    (project / "kgate.toml").write_text(CFG)
    _commit(project, "without it")
    run = _diff(project, "HEAD~1")
    assert run.code == 0 and "1 identical, 0 changed, 0 new, 1 gone" in _counts(run), run.stdout + run.stderr
    assert not _left_worktrees(project)


def test_a_submodule_removed_in_a_linked_worktree(tmp_path: Path) -> None:
    project = _with_submodule(tmp_path)
    linked = tmp_path / "linked"
    _git(project, "worktree", "add", "-q", str(linked), "HEAD")
    _git(linked, "submodule", "update", "-q", "--init")
    _git(linked, "rm", "-q", "vendor/lib")
    (linked / "kgate.toml").write_text(CFG)
    _commit(linked, "without it, in the linked worktree")
    run = _diff(linked, "HEAD~1")
    assert run.code == 0 and "1 identical, 0 changed, 0 new, 1 gone" in _counts(run), run.stdout + run.stderr
    assert len(_git(project, "worktree", "list", "--porcelain").split("\n\n")) == 2  # the project and `linked`


# ---------------------------------------------------------------------------------------------- at once, stopped

@pytest.fixture
def scratch() -> Iterator[Path]:
    """A temporary folder of the test's own for the diffs it runs in processes, short enough to hold the sockets
    of their compile workers (a pytest folder is too deep for a socket's name)."""
    folder = Path(tempfile.mkdtemp(prefix="kgd-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _process(project: Path, scratch: Path, *args: str) -> subprocess.Popen:
    """`kgate diff ARGS` in a process of its own, its temporary folders in `scratch`."""
    env = {**GIT_ENV, "TMPDIR": str(scratch)}
    env.pop("TRITON_INTERPRET", None)
    return subprocess.Popen([sys.executable, "-m", "kgate", "diff", *args], cwd=project, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_diffs_against_different_bases_at_once(tmp_path: Path, scratch: Path) -> None:
    project = _repo(tmp_path / "p", {"ops.py": TUNED, "tune.json": SMALL})
    (project / "tune.json").write_text(LARGE)
    _commit(project, "large")
    (project / "tune.json").write_text(SMALL)
    runs = [_process(project, scratch, "HEAD"), _process(project, scratch, "HEAD~1")]
    outs = [run.communicate(timeout=600) for run in runs]
    assert "0 identical, 1 changed" in outs[0][0], outs[0]
    assert "1 identical, 0 changed" in outs[1][0], outs[1]
    assert not _left_worktrees(project) and not _checkouts_left(scratch)


def _checkouts_left(scratch: Path) -> list[str]:
    return sorted(p.name for p in scratch.iterdir() if p.name.startswith("kgate-base-"))


def _when_checked_out(project: Path, run: subprocess.Popen, limit: float = 120) -> None:
    end = time.monotonic() + limit
    while not _left_worktrees(project):
        assert run.poll() is None and time.monotonic() < end, run.communicate()
        time.sleep(0.1)


def test_a_diff_stopped_by_sigterm_leaves_nothing_and_the_next_is_right(tmp_path: Path, scratch: Path) -> None:
    project = _repo(tmp_path / "p", {"ops.py": SLOW, "tune.json": SMALL})
    (project / "tune.json").write_text(LARGE)
    run = _process(project, scratch, "HEAD")
    _when_checked_out(project, run)
    run.send_signal(signal.SIGTERM)
    run.communicate(timeout=120)
    assert run.returncode != 0 and not _left_worktrees(project) and not _checkouts_left(scratch)
    again = _diff(project, "HEAD")
    assert again.code == 0 and "0 identical, 1 changed" in _counts(again), again.stdout + again.stderr


@pytest.mark.parametrize("command", ["check", "diff"])
def test_a_sigterm_while_kgate_reads_a_workers_answer_stops_it(tmp_path: Path, scratch: Path, command: str) -> None:
    """The signal stops a diff as it stops a check (143, one line, the checkout removed): it is not taken for an
    answer the worker garbled, after which the diff went on to compare and report, and exited 0."""
    project = _repo(tmp_path / "p", {"ops.py": STOPS_KGATE})
    env = {**GIT_ENV, "TMPDIR": str(scratch)}
    env.pop("TRITON_INTERPRET", None)
    run = subprocess.run([sys.executable, "-m", "kgate", command, *(["HEAD"] if command == "diff" else [])],
                         cwd=project, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 143 and run.stderr.splitlines()[-1:] == ["kgate: terminated"], run.stdout + run.stderr
    assert "Traceback" not in run.stderr and not _left_worktrees(project) and not _checkouts_left(scratch)


def test_a_diff_stopped_while_its_checkout_is_made(tmp_path: Path, scratch: Path) -> None:
    """SIGTERM while `git worktree add` still checks out (a slow filter): the half-made checkout, which git
    keeps locked, is removed all the same."""
    project = _repo(tmp_path / "p", {"ops.py": TUNED, "tune.json": SMALL, ".gitattributes": "*.json filter=slow\n"})
    _git(project, "config", "filter.slow.smudge", "sleep 4; cat")
    _git(project, "config", "filter.slow.clean", "cat")
    run = _process(project, scratch, "HEAD")
    _when_checked_out(project, run)
    time.sleep(0.5)
    run.send_signal(signal.SIGTERM)
    run.communicate(timeout=120)
    time.sleep(5)  # what git left running has finished
    assert run.returncode != 0 and not _left_worktrees(project), _git(project, "worktree", "list")
    assert not _checkouts_left(scratch)


def test_a_diff_killed_outright_does_not_stop_the_next(tmp_path: Path, scratch: Path) -> None:
    project = _repo(tmp_path / "p", {"ops.py": SLOW, "tune.json": SMALL})
    (project / "tune.json").write_text(LARGE)
    run = _process(project, scratch, "HEAD")
    _when_checked_out(project, run)
    stale = _left_worktrees(project)
    os.kill(run.pid, signal.SIGKILL)
    run.communicate(timeout=120)
    again = _diff(project, "HEAD")
    assert again.code == 0 and "0 identical, 1 changed" in _counts(again), again.stdout + again.stderr
    assert _left_worktrees(project) == stale  # the killed run's own checkout, and nothing of this one


@pytest.mark.parametrize("base", ["HEAD", "main"])
def test_a_diff_in_a_linked_worktree_of_the_repository(tmp_path: Path, base: str) -> None:
    project = _repo(tmp_path / "p", {"ops.py": TUNED, "tune.json": SMALL})
    linked = tmp_path / "linked"
    _git(project, "worktree", "add", "-q", "--detach", str(linked), "HEAD")
    (linked / "tune.json").write_text(LARGE)
    run = _diff(linked, base)
    assert run.code == 0 and "0 identical, 1 changed" in _counts(run), run.stdout + run.stderr
    assert len(_git(project, "worktree", "list", "--porcelain").split("\n\n")) == 2
