"""Every external program kgate runs is started here: tools through `run()`, the user's own command
(`kgate capture -- COMMAND`) through `run_user_command()`, and a helper of kgate's that serves requests
(the precision tests' interpreter child) through `start_service()`.

Argument lists only (never a shell), a timeout, and a typed error that shows
the command line to reproduce it, its exit status and the end of its output.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgate.core.errors import ToolchainError
from kgate.support import filestat, interrupts

DEFAULT_TIMEOUT = 300.0


@dataclass(frozen=True)
class Completed:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


class ToolFailed(ToolchainError):
    """A tool ran and failed (non-zero exit, signal, or timeout)."""

    def __init__(self, argv: list[str] | tuple[str, ...], detail: str, output: str = "") -> None:
        tail = output.strip().splitlines()[-12:]
        message = f"{Path(argv[0]).name} {detail}"
        super().__init__(message)
        self.argv = tuple(argv)
        self.output = "\n".join(tail)
        self.repro = shlex.join(argv)


def run(argv: list[str], *, timeout: float = DEFAULT_TIMEOUT, cwd: str | Path | None = None,
        env: dict[str, str] | None = None, check: bool = True, input_bytes: bytes | None = None) -> Completed:
    """Run a program; raise ToolFailed on a non-zero exit, a signal or a timeout."""
    try:
        proc = subprocess.run(
            argv, cwd=cwd, env=env, input=input_bytes, capture_output=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode(errors="replace") + (exc.stderr or b"").decode(errors="replace")
        raise ToolFailed(argv, f"timed out after {timeout:g} s", out) from None
    except OSError as exc:
        raise ToolFailed(argv, f"could not be started: {exc.strerror or exc}") from None
    stdout = proc.stdout.decode(errors="replace")
    stderr = proc.stderr.decode(errors="replace")
    if check and proc.returncode != 0:
        if proc.returncode < 0:
            detail = f"was killed by signal {-proc.returncode}"
        else:
            detail = f"exited with status {proc.returncode}"
        raise ToolFailed(argv, detail, stdout + "\n" + stderr)
    return Completed(tuple(argv), proc.returncode, stdout, stderr)


def run_user_command(argv: list[str], env: dict[str, str]) -> int:
    """Run the user's own command in the foreground (`kgate capture -- COMMAND`): its output goes to the
    terminal and its exit status comes back (128 + N when a signal N killed it, as a shell says). No timeout:
    it is the user's test run, not a tool of kgate's.

    An interrupt (SIGINT, SIGTERM: kgate.support.interrupts) stops kgate once the command has ended, and goes on from
    here: kgate records nothing of an interrupted run. Ctrl-C at the terminal, or a signal to the whole
    process group, reached the command too; one sent to kgate alone is passed on to it after FORWARD_AFTER s.
    """
    try:
        process = subprocess.Popen(argv, env=env)
    except FileNotFoundError:
        raise ToolchainError(f"cannot run {argv[0]!r}: no such command") from None
    except OSError as exc:
        raise ToolchainError(f"cannot run {argv[0]!r}: {exc.strerror or exc}") from None
    try:
        code = process.wait()
    except KeyboardInterrupt as exc:
        _until_ended(process, interrupts.signal_of(exc))
        raise
    return 128 - code if code < 0 else code  # killed by signal N: 128 + N, as a shell reports it


def start_service(argv: list[str], env: dict[str, str], errors: Any) -> subprocess.Popen[bytes]:
    """Start a helper of kgate's own that serves requests over its standard input and output (one line each),
    its stderr to the file `errors`. The caller bounds each request's wait and kills the helper past it."""
    try:
        return subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors)
    except OSError as exc:
        raise ToolFailed(argv, f"could not be started: {exc.strerror or exc}") from None


def stop_service(process: subprocess.Popen[bytes]) -> None:
    """End a helper started by `start_service`: its input closed, it exits; one that does not is killed."""
    for stream in (process.stdin, process.stdout):
        with contextlib.suppress(OSError):
            if stream is not None:
                stream.close()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


# Seconds a command kgate runs for the user has to end on its own after an interrupt before kgate passes the
# signal on: time for a test runner to print what it has and exit.
FORWARD_AFTER = 2.0


def _until_ended(process: subprocess.Popen[bytes], signum: int) -> None:
    deadline: float | None = time.monotonic() + FORWARD_AFTER
    while process.poll() is None:
        if deadline is not None and time.monotonic() >= deadline:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signum)
            deadline = None
        time.sleep(0.05)


def alive(pid: int) -> bool:
    """Whether process `pid` is running (one killed but not yet reaped is not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] != b"Z"  # killed, not yet reaped: gone
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel whether the pid exists
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True


def triton_bin_dir() -> Path | None:
    """The folder of binary tools shipped inside the Triton wheel, without importing Triton."""
    spec = importlib.util.find_spec("triton")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "backends" / "nvidia" / "bin"
    return folder if folder.is_dir() else None


def bundled_tool(name: str) -> Path | None:
    """ptxas, ptxas-blackwell, cuobjdump or nvdisasm from the Triton wheel, or from PATH."""
    folder = triton_bin_dir()
    if folder is not None and (folder / name).is_file():
        return folder / name
    found = shutil.which(name)
    return Path(found) if found else None


def require_tool(name: str) -> Path:
    path = bundled_tool(name)
    if path is None:
        raise ToolchainError(f"{name} not found: install triton (it ships {name}) or put it on PATH")
    return path


def file_identity(path: Path) -> str:
    """A cheap identity for a binary: its path and its state (`kgate.support.filestat`)."""
    return filestat.identity(path)


@functools.cache
def tool_version(path: str) -> str:
    """The version of an NVIDIA tool from its `--version` output, e.g. '13.4.59'."""
    import re

    out = run([path, "--version"], timeout=30).stdout
    match = re.search(r"\bV(\d+\.\d+\.\d+)", out) or re.search(r"release (\d+\.\d+)", out)
    if match:
        return match.group(1)
    lines = [line for line in out.splitlines() if line.strip()]
    return lines[-1].strip() if lines else "unknown"


def package_version(name: str) -> str | None:
    """An installed distribution's version: read from its dist-info folder beside the package when it
    is there (a directory listing), else through importlib.metadata (which scans every path entry)."""
    spec = importlib.util.find_spec(name)
    if spec is not None and spec.origin:
        site = Path(spec.origin).parent.parent
        prefix = name.replace("-", "_") + "-"
        try:
            found = [d for d in os.listdir(site) if d.startswith(prefix) and d.endswith(".dist-info")]
        except OSError:
            found = []
        if len(found) == 1:
            return found[0][len(prefix): -len(".dist-info")]
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def env_flag(name: str) -> str:
    return os.environ.get(name, "")
