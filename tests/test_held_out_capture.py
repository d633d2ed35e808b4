"""`kgate capture` under commands that move, strip or race what the recorder relies on: a child that changes
folder, one that starts Python in a mode that skips site or the environment, one that clears the environment
but for a few names, two captures into one file at once, a record folder the command makes read-only or
removes, a kernel launched from the script being run, on a thread pool, after an exec. A correct capture
records every launch it could see and names every process it could not; it never passes with a launch lost.
"""

from __future__ import annotations

import sys
import textwrap
import threading
from pathlib import Path

import pytest
from conftest import kgate
from test_capture_imports import blocks, make_project

pytest.importorskip("torch", reason="the captured launchers take torch tensors (pip install torch, or kgate's extra ulp: kernel-gate[ulp])")

LAUNCH = "import sys; sys.path.insert(0, {here!r}); import ops; ops.launch({block})"
CHILD = "import os, sys; sys.path.insert(0, os.getcwd()); import ops; ops.launch({block})"  # run in the project

# name -> (the script's body, with {here} the project and {block} its BLOCK; whether the launch can be recorded)
CASES: dict[str, tuple[str, bool]] = {
    "changes-folder-before-importing": ("import os\nos.chdir('/')\n" + LAUNCH, True),
    "changes-folder-after-importing": ("import os, sys\nsys.path.insert(0, {here!r})\nimport ops\nos.chdir('/')\n"
                                       "ops.launch({block})", True),
    "launches-on-a-thread-pool": ("import sys\nsys.path.insert(0, {here!r})\nimport ops\n"
                                  "from concurrent.futures import ThreadPoolExecutor\n"
                                  "ThreadPoolExecutor(2).submit(ops.launch, {block}).result()", True),
    "execs-another-python": ("import os, sys\nos.execv(sys.executable, [sys.executable, '-c', " + repr(CHILD) + "])",
                             True),
    "forkserver-child": ("import multiprocessing as mp, sys\nsys.path.insert(0, {here!r})\nimport ops\n"
                         "if __name__ == '__main__':\n    ctx = mp.get_context('forkserver')\n"
                         "    p = ctx.Process(target=ops.launch, args=({block},))\n    p.start()\n    p.join()\n"
                         "    assert p.exitcode == 0", True),
    "child-without-the-environment-but-path-and-pythonpath": (
        "import os, subprocess, sys\nsubprocess.run([sys.executable, '-c', " + repr(CHILD) + "], check=True, "
        "env={{k: v for k, v in os.environ.items() if k in ('PATH', 'PYTHONPATH')}})", False),
    "child-in-isolated-mode": ("import subprocess, sys\nsubprocess.run([sys.executable, '-I', '-c', " + repr(CHILD)
                               + "], check=True)", False),
    "child-without-site": ("import subprocess, sys\nsubprocess.run([sys.executable, '-S', '-c', " + repr(CHILD)
                           + "], check=False)", False),
    "child-ignoring-the-environment": ("import subprocess, sys\nsubprocess.run([sys.executable, '-E', '-c', "
                                       + repr(CHILD) + "], check=False)", False),
}


def _script(project: Path, body: str, block: int) -> Path:
    script = project / "case.py"
    script.write_text(textwrap.dedent(body).format(here=str(project), block=block))
    return script


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_launch_is_recorded_or_its_process_named(tmp_path: Path, case: str) -> None:
    body, recordable = CASES[case]
    project = make_project(tmp_path)
    script = _script(project, body, 64)
    run = kgate("capture", "--device", "cpu", "--", sys.executable, str(script), cwd=project, timeout=300)
    if recordable:  # (a child without the recorder finds no driver offline: that traceback is the child's own)
        assert run.code == 0 and "Traceback" not in run.stderr, run.stderr
        assert blocks(project) == {64}, run.stderr
    else:  # never a pass without the launch
        assert run.code != 0 or 64 in blocks(project), run.stderr
        if run.code != 0:
            assert "kgate" in run.stderr.splitlines()[-1], run.stderr


def test_a_kernel_launched_by_the_script_being_run_is_named_not_recorded(tmp_path: Path) -> None:
    """Importing the script would run it: its kernel is said, and nothing is captured as a pass."""
    project = make_project(tmp_path)
    (project / "main_script.py").write_text(textwrap.dedent('''\
        import torch
        import triton
        import triton.language as tl


        @triton.jit
        def own_kernel(x, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(x + offs, 2.0, mask=offs < n)


        if __name__ == "__main__":
            x = torch.zeros(64)
            own_kernel[(1,)](x, 64, BLOCK=64)
        '''))
    run = kgate("capture", "--device", "cpu", "--", sys.executable, "main_script.py", cwd=project, timeout=300)
    assert run.code == 2 and "Traceback" not in run.stderr, run.stderr
    assert "own_kernel: defined in the script the command ran" in run.stderr
    assert not (project / "kgate-capture.toml").exists()


def test_two_captures_at_once_into_one_file_keep_both(tmp_path: Path) -> None:
    """A capture adds to the file; two at once must not lose either's launches (nor write a file of neither)."""
    project = make_project(tmp_path)
    for block in (32, 128):
        _script(project, LAUNCH, block).rename(project / f"case_{block}.py")
    runs: list = []

    def capture(block: int) -> None:
        # each in a process of its own, as two users' commands are (the in-process runner is one process's state)
        runs.append(kgate("capture", "--device", "cpu", "--", sys.executable, f"case_{block}.py", cwd=project,
                          process=True, timeout=300))

    threads = [threading.Thread(target=capture, args=(b,)) for b in (32, 128)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(run.code == 0 and "Traceback" not in run.stderr for run in runs), [r.stderr for r in runs]
    assert blocks(project) == {32, 128}, (project / "kgate-capture.toml").read_text()


SPOIL = {
    "made-read-only": "os.chmod(os.environ['KGATE_CAPTURE_DIR'], 0o500)",
    "removed": "shutil.rmtree(os.environ['KGATE_CAPTURE_DIR'], ignore_errors=True)",
    "replaced-by-a-file": "shutil.rmtree(os.environ['KGATE_CAPTURE_DIR'], ignore_errors=True); "
                          "open(os.environ['KGATE_CAPTURE_DIR'], 'w').close()",
}


@pytest.mark.parametrize("how", sorted(SPOIL))
def test_a_record_folder_the_command_takes_away_is_an_error_not_a_pass(tmp_path: Path, how: str) -> None:
    project = make_project(tmp_path)
    body = "import os, shutil, subprocess, sys\n" + SPOIL[how] + "\nsubprocess.run([sys.executable, '-c', " + \
        repr(CHILD) + "])"
    script = _script(project, body, 64)
    (project / "kgate-capture.toml").write_text("")
    before = (project / "kgate-capture.toml").read_bytes()
    run = kgate("capture", "--device", "cpu", "--", sys.executable, str(script), cwd=project, timeout=300)
    assert run.code != 0 or 64 in blocks(project), run.stderr
    assert "kgate" in run.stderr.splitlines()[-1], run.stderr
    if run.code != 0:
        assert (project / "kgate-capture.toml").read_bytes() == before
