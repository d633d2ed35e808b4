"""Run the bundled kernels' launchers on a GPU, or under Triton's CPU interpreter.

On a GPU the launchers run in this process. Without one they run in a child
process whose environment alone selects the interpreter: the interpreter is
chosen when a kernel is decorated, so switching it on in the test process
would silently turn every later kernel of the session into CPU code. The
child receives the inputs and returns the outputs as `torch.save` files.

The child serves every interpreted run of the process (a test session's kernel modules): starting one
imports torch and Triton, about three seconds of CPU. It is replaced whenever it could differ from a new
one: the environment changed, or a module it imported is now another file or a changed one.

    python -m kgate.kernels.runner CALLS.pt RESULTS.pt    (one run, then exit)
    python -m kgate.kernels.runner --serve                (the child: one run per line on stdin)
"""

from __future__ import annotations

import atexit
import importlib
import os
import select
import sys
import tempfile
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgate.support import tools
from kgate.support.filestat import FileState, path_state

DEVICE_ENV = "KGATE_ULP_DEVICE"  # auto | cpu | gpu, set by `kgate ulp --device`
DEVICES = ("auto", "cpu", "gpu")
CHILD_TIMEOUT = 900.0

Call = tuple[Callable[..., dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Backend:
    """Where the kernels run: `interpreted` on the CPU, or natively on the GPU named by `where`."""

    interpreted: bool
    where: str

    def run(self, calls: Sequence[Call]) -> list[dict[str, Any]]:
        """The outputs of each launcher call, as CPU tensors."""
        return _run_interpreted(calls) if self.interpreted else _run_on_gpu(calls)


def backend_for(device: str) -> Backend:
    """The backend for `auto` (a GPU when torch sees one), `cpu` (the interpreter) or `gpu`."""
    import torch

    if device not in DEVICES:
        raise ValueError(f"{DEVICE_ENV}={device!r}: expected one of {', '.join(DEVICES)}")
    has_gpu = torch.cuda.is_available()
    if device == "gpu" and not has_gpu:
        raise RuntimeError(f"{DEVICE_ENV}=gpu but torch sees no CUDA device")
    if device == "cpu" or not has_gpu:
        return Backend(True, "interpreter")
    return Backend(False, torch.cuda.get_device_name())


def _run_on_gpu(calls: Sequence[Call]) -> list[dict[str, Any]]:
    import torch

    results = []
    for fn, kwargs in calls:
        moved = {k: v.cuda() if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
        out = fn(**moved)
        torch.cuda.synchronize()
        results.append({k: v.cpu() for k, v in out.items()})
    return results


def _run_interpreted(calls: Sequence[Call]) -> list[dict[str, Any]]:
    import torch

    payload = {
        "sys_path": [p for p in sys.path if p],
        "calls": [(fn.__module__, fn.__name__, kwargs) for fn, kwargs in calls],
        # The files this process took the launchers' modules from: the child's must be the same.
        "files": {fn.__module__: getattr(sys.modules.get(fn.__module__), "__file__", None) for fn, _kwargs in calls},
    }
    with tempfile.TemporaryDirectory(prefix="kgate-interpret-") as folder:
        calls_file, results_file = Path(folder) / "calls.pt", Path(folder) / "results.pt"
        torch.save(payload, calls_file)
        _CHILD.run(calls_file, results_file, Path(folder) / "output.txt")
        results: list[dict[str, Any]] = torch.load(results_file)
    return results


# The child's answer when a module it imported is not what a new child would import: it ends, and the run
# goes to a new one.
STALE = "stale"


class _Child:
    """The interpreter child of this process, started with its first interpreted run."""

    def __init__(self) -> None:
        self.process: Any = None
        self.env: dict[str, str] = {}
        self.errors: Any = None

    def run(self, calls: Path, results: Path, output: Path) -> None:
        env = {**os.environ, "TRITON_INTERPRET": "1"}  # the child's environment only
        for _attempt in range(2):
            if self.process is not None and (self.process.poll() is not None or _conditions(env) != self.env):
                self.stop()
            if self.process is None:
                self.errors = tempfile.TemporaryFile()
                self.process = tools.start_service([sys.executable, "-m", "kgate.kernels.runner", "--serve"], env,
                                                   self.errors)
                self.env = _conditions(env)
            reply = self._ask(f"{calls}\t{results}\t{output}", output)
            if reply != STALE:
                break
            self.stop()
        if reply == "0":
            return
        if reply is None:  # the child ended
            code = self.process.wait()
            self.errors.seek(0)
            started = self.errors.read().decode(errors="replace")
            self.stop()
            raise RuntimeError(f"the interpreter run failed (exit {code}):\n{(started + _tail(output))[-4000:]}")
        raise RuntimeError(f"the interpreter run failed:\n{_tail(output)}")

    def _ask(self, request: str, output: Path) -> str | None:
        """The child's one-line answer to `request`; None when it ended instead."""
        try:
            self.process.stdin.write(request.encode() + b"\n")
            self.process.stdin.flush()
            ready, _, _ = select.select([self.process.stdout], [], [], CHILD_TIMEOUT)
            if not ready:
                self.stop()
                raise RuntimeError(f"the interpreter run timed out after {CHILD_TIMEOUT:g} s:\n{_tail(output)}")
            reply = self.process.stdout.readline()
        except OSError:  # a broken pipe: the child ended
            return None
        return reply.decode().strip() or None

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None:
            tools.stop_service(process)
        if self.errors is not None:
            self.errors.close()
            self.errors = None


def _conditions(env: dict[str, str]) -> dict[str, str]:
    """What of an environment a child runs under: all of it but pytest's name of the test it is in, which
    changes with every test and which no launcher reads."""
    return {k: v for k, v in env.items() if k != "PYTEST_CURRENT_TEST"}


_CHILD = _Child()
atexit.register(_CHILD.stop)


def _tail(output: Path) -> str:
    try:
        return output.read_bytes()[-4000:].decode(errors="replace")
    except OSError:
        return ""


def main(argv: Sequence[str] | None = None) -> int:
    import torch

    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["--serve"]:
        return _serve()
    if len(args) != 2:
        print("usage: python -m kgate.kernels.runner CALLS.pt RESULTS.pt | --serve", file=sys.stderr)
        return 2
    _run(torch.load(args[0]), args[1])
    return 0


def _run(payload: dict[str, Any], results_file: str) -> None:
    import torch

    for path in reversed(payload["sys_path"]):
        if path not in sys.path:
            sys.path.insert(0, path)
    results = []
    for module, name, kwargs in payload["calls"]:
        fn = getattr(importlib.import_module(module), name)
        results.append({k: v.contiguous() for k, v in fn(**kwargs).items()})
    torch.save(results, results_file)


def _serve() -> int:
    """One run per line of stdin (`CALLS RESULTS OUTPUT`, tab-separated), its exit status back on a line of
    stdout; what the run prints goes to OUTPUT, so nothing a kernel prints can be taken for a reply. Before a
    run, the answer is STALE (and the child ends) when a module it imported is another file than the parent's
    or has changed on disk since: a new child would import something else."""
    import torch

    replies = os.fdopen(os.dup(1), "w")
    imported: dict[str, tuple[str, FileState | None]] = {}
    for line in sys.stdin:
        calls, results, output = line.rstrip("\n").split("\t")
        payload = torch.load(calls)
        if _stale(payload["files"], imported):
            replies.write(f"{STALE}\n")
            replies.flush()
            return 0
        with open(output, "wb") as out:
            os.dup2(out.fileno(), 1)
            os.dup2(out.fileno(), 2)
            try:
                _run(payload, results)
                code = 0
            except BaseException:  # noqa: BLE001 - the parent reads it from OUTPUT
                traceback.print_exc()
                code = 1
            sys.stdout.flush()
            sys.stderr.flush()
        imported = _project_modules()
        replies.write(f"{code}\n")
        replies.flush()
    return 0


_INSTALLED = tuple({sys.prefix, sys.base_prefix, sys.exec_prefix})


def _project_modules() -> dict[str, tuple[str, FileState | None]]:
    """The loaded modules that are not part of Python or an installed package: name -> (file, its state)."""
    found = {}
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if not path or os.path.abspath(path).startswith(_INSTALLED):
            continue
        found[name] = (path, path_state(path))
    return found


def _stale(files: dict[str, str | None], imported: dict[str, tuple[str, FileState | None]]) -> bool:
    for name, path in files.items():
        module = sys.modules.get(name)
        if module is not None and path and getattr(module, "__file__", None) != path:
            return True
    return any(path_state(path) != state for path, state in imported.values())


if __name__ == "__main__":
    code = main()
    # The results are written and closed: end without the interpreter's teardown, which with torch loaded
    # costs about a second of CPU per child and releases nothing the parent needs.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
