"""Ctrl-C and SIGTERM stop kgate promptly and cleanly: exit 128 + N, one line, no traceback, no worker or fork
server left running, no temporary file left, nothing half-written, and the next run is right.

Real processes and real signals. A compile is held in the middle by a ptxas that hangs on the kernel
(tests/fake_tools/ptxas_hang), so that the signal always lands while kgate compiles, however slow the machine.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import FIXTURES, REPO, kgate, session_processes

from kgate.support.tools import bundled_tool

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process table from /proc")

KERNEL = '''\
import triton
import triton.language as tl


@triton.jit
def victim_kernel(x, n, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(x + o, tl.load(x + o, mask=o < n) + 1.0, mask=o < n)
'''
CONFIG = '''\
targets = ["sm_120a"]
python-path = ["."]
timeout = 300

[[triton]]
kernel = "k:victim_kernel"
signature = { x = "*fp32", n = "i32" }
constexprs = { BLOCK = 128 }
'''


def _hang_env() -> dict[str, str]:
    # No progress lines (stderr is a pipe): on a loaded machine the wait for the hang could outlast the interval,
    # and the test counts kgate's lines on stderr.
    return {"TRITON_PTXAS_BLACKWELL_PATH": str(REPO / "tests" / "fake_tools" / "ptxas_hang"),
            "KGATE_TEST_REAL_PTXAS": str(bundled_tool("ptxas-blackwell")), "KGATE_PROGRESS_INTERVAL": "3600"}


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "p"
    project.mkdir()
    (project / "k.py").write_text(KERNEL)
    (project / "kgate.toml").write_text(CONFIG)
    return project


def _start(project: Path, *args: str, env: dict[str, str] | None = None,
           sigint_ignored: bool = False) -> subprocess.Popen[str]:
    """kgate in a session of its own; `sigint_ignored`: started as a script's background job (`kgate check &`
    without job control) starts, with SIGINT ignored, a disposition that survives exec."""
    full = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"} | (env or {})
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if sigint_ignored else None
    try:
        return subprocess.Popen([sys.executable, "-m", "kgate", *args], cwd=project, env=full, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def _wait_for(condition: Callable[[], bool], proc: subprocess.Popen[str], what: str) -> None:
    deadline = time.monotonic() + 120
    while not condition():
        if proc.poll() is not None or time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail(f"{what} never happened: {proc.communicate()}")
        time.sleep(0.05)


def _finish(proc: subprocess.Popen[str], sid: int) -> tuple[str, str]:
    """The output of a kgate that should now stop by itself; then its session must empty within a second or two."""
    try:
        out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail(f"kgate did not stop: {proc.communicate()}")
    deadline = time.monotonic() + 3
    while session_processes(sid) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = session_processes(sid)
    for line in left:
        os.kill(int(line.split()[0]), signal.SIGKILL)
    assert left == []
    return out, err


def _stopped_cleanly(err: str, line: str) -> None:
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert [x for x in err.splitlines() if x.startswith("kgate")] == [line], err


def _temporary_files(project: Path) -> list[Path]:
    return [p for p in project.rglob("*") if p.name.endswith(".tmp")]


def _compiling(sid: int) -> Callable[[], bool]:
    return lambda: any("sleep 600" in p for p in session_processes(sid))  # the fake ptxas is hanging


def _next_check_compiles_and_passes(project: Path) -> None:
    run = kgate("check", "-v", cwd=project)
    assert run.code == 0, run.stdout + run.stderr
    assert "1 compiled, 0 from cache" in run.stdout  # nothing of the interrupted compile was kept as a result


@pytest.mark.parametrize(("command", "sig", "to_group", "line"), [
    # kill -INT PID to a kgate that started with SIGINT ignored, as a script's background job does
    (("check",), signal.SIGINT, False, "kgate: interrupted"),
    (("check",), signal.SIGTERM, False, "kgate: terminated"),
    # Ctrl-C at a terminal: the whole foreground process group gets it
    (("baseline", "update", "--accept-new"), signal.SIGINT, True, "kgate: interrupted"),
    (("audit", "-o", "audit"), signal.SIGINT, True, "kgate: interrupted"),
], ids=["check-sigint", "check-sigterm", "baseline-ctrl-c", "audit-ctrl-c"])
def test_a_signal_mid_compile_stops_kgate_cleanly(tmp_path: Path, command: tuple[str, ...], sig: int,
                                                  to_group: bool, line: str) -> None:
    project = _project(tmp_path)
    baseline = project / "kgate-baseline.toml"
    baseline.write_text("version = 2\n")
    proc = _start(project, *command, env=_hang_env(), sigint_ignored=True)
    sid = os.getsid(proc.pid)
    _wait_for(_compiling(sid), proc, "the compile")
    if to_group:
        os.killpg(proc.pid, sig)
    else:
        proc.send_signal(sig)
    _, err = _finish(proc, sid)
    assert proc.returncode == 128 + sig, err
    _stopped_cleanly(err, line)
    assert _temporary_files(project) == []
    assert baseline.read_text() == "version = 2\n" and not (project / "audit").exists()
    if command == ("check",) and sig == signal.SIGINT:
        _next_check_compiles_and_passes(project)


def _handles(pid: int, sig: int) -> bool:
    """Whether the process has a handler of its own for `sig` (from /proc: its caught-signals mask)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = next(int(x.split()[1], 16) for x in status.splitlines() if x.startswith("SigCgt:"))
    return bool(caught >> (sig - 1) & 1)


def test_a_signal_as_kgate_starts_stops_it_cleanly(tmp_path: Path) -> None:
    """The signal lands the moment kgate's own code runs: while it imports and starts its workers' fork server."""
    project = _project(tmp_path)
    proc = _start(project, "check", "--no-cache", env=_hang_env(), sigint_ignored=True)
    sid = os.getsid(proc.pid)
    _wait_for(lambda: _handles(proc.pid, signal.SIGINT), proc, "kgate's start")
    proc.send_signal(signal.SIGINT)
    _, err = _finish(proc, sid)
    assert proc.returncode == 130, err
    _stopped_cleanly(err, "kgate: interrupted")
    assert _temporary_files(project) == []


@pytest.mark.parametrize("to_group", [True, False], ids=["ctrl-c", "kill-kgate-alone"])
def test_an_interrupted_capture_writes_no_capture_file(tmp_path: Path, to_group: bool) -> None:
    """The command gets Ctrl-C with kgate (or from kgate, when the signal was kgate's alone); kgate waits for it to
    end, then stops without writing what the interrupted run recorded."""
    pytest.importorskip("torch", reason="the captured launchers take torch tensors")
    project = tmp_path / "capture"
    shutil.copytree(FIXTURES / "capture", project, ignore=shutil.ignore_patterns("__pycache__", ".kgate-cache"))
    (project / "run.py").write_text("import pathlib, time, ops\nops.launch_all(4096)\n"
                                    "pathlib.Path('launched').touch()\ntime.sleep(120)\n")
    proc = _start(project, "capture", "--device", "cpu", "--", sys.executable, "run.py")
    sid = os.getsid(proc.pid)
    _wait_for((project / "launched").exists, proc, "the launch")
    if to_group:
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.send_signal(signal.SIGINT)
    _, err = _finish(proc, sid)
    assert proc.returncode == 130, err
    assert err.splitlines()[-1] == "kgate: interrupted", err
    assert not (project / "kgate-capture.toml").exists()
    assert _temporary_files(project) == []


def _run_under_kgate_handlers(body: str) -> subprocess.CompletedProcess[str]:
    """`body` as the command kgate.support.interrupts.run runs, in a process of its own (the handlers are process-wide)."""
    script = ("import os, signal, sys, time\nfrom kgate.support import interrupts\n\n\ndef main():\n"
              + "".join(f"    {line}\n" for line in body.splitlines())
              + "\n\nsys.exit(interrupts.run(main))\n")
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)


def test_an_interrupt_something_swallowed_still_decides_the_exit_code() -> None:
    run = _run_under_kgate_handlers("try:\n    os.kill(os.getpid(), signal.SIGINT)\n    time.sleep(5)\n"
                                    "except BaseException:  # a library's bare except\n    pass\nprint('done')\nreturn 0")
    assert (run.returncode, run.stdout, run.stderr) == (130, "done\n", "kgate: interrupted\n")


def test_an_interrupt_python_wrapped_while_a_module_imports_stops_kgate_cleanly() -> None:
    """A signal that lands while a dataclass is made at import (its fields' `__set_name__`) reaches kgate as the
    RuntimeError Python wraps it in ("Error calling __set_name__ ..."): kgate printed that traceback and exited 1."""
    body = ("class Field:\n    def __set_name__(self, owner, name):\n        os.kill(os.getpid(), signal.SIGINT)\n"
            "        time.sleep(5)\n\nclass Facts:\n    constexprs = Field()\n\nreturn 0")
    run = _run_under_kgate_handlers(body)
    assert (run.returncode, run.stderr) == (130, "kgate: interrupted\n"), run.stderr


def test_a_second_signal_while_kgate_stops_ends_it_at_once() -> None:
    started = time.monotonic()
    run = _run_under_kgate_handlers("print('partial')\ntry:\n    os.kill(os.getpid(), signal.SIGTERM)\n"
                                    "    time.sleep(5)\nfinally:  # a clean-up that hangs\n"
                                    "    os.kill(os.getpid(), signal.SIGINT)\n    time.sleep(60)")
    assert (run.returncode, run.stdout, run.stderr) == (143, "partial\n", "kgate: terminated\n")
    assert time.monotonic() - started < 30
