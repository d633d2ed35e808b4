"""Run the bundled kernels' launchers on a GPU, or under Triton's CPU interpreter.

On a GPU the launchers run in this process. Without one they run in a child
process whose environment alone selects the interpreter: the interpreter is
chosen when a kernel is decorated, so switching it on in the test process
would silently turn every later kernel of the session into CPU code. The
child receives the inputs and returns the outputs as a `torch.save` file.

    python -m kgate.kernels.runner CALLS.pt RESULTS.pt    (the child side)
"""

from __future__ import annotations

import importlib
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgate.support import tools

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
    }
    with tempfile.TemporaryDirectory(prefix="kgate-interpret-") as folder:
        calls_file, results_file = Path(folder) / "calls.pt", Path(folder) / "results.pt"
        torch.save(payload, calls_file)
        env = {**os.environ, "TRITON_INTERPRET": "1"}  # the child's environment only
        proc = tools.run([sys.executable, "-m", "kgate.kernels.runner", str(calls_file), str(results_file)],
                         env=env, timeout=CHILD_TIMEOUT, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"the interpreter run failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
        results: list[dict[str, Any]] = torch.load(results_file)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    import torch

    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print("usage: python -m kgate.kernels.runner CALLS.pt RESULTS.pt", file=sys.stderr)
        return 2
    payload = torch.load(args[0])
    for path in reversed(payload["sys_path"]):
        if path not in sys.path:
            sys.path.insert(0, path)
    results = []
    for module, name, kwargs in payload["calls"]:
        fn = getattr(importlib.import_module(module), name)
        results.append({k: v.contiguous() for k, v in fn(**kwargs).items()})
    torch.save(results, args[1])
    return 0


if __name__ == "__main__":
    code = main()
    # The results are written and closed: end without the interpreter's teardown, which with torch loaded
    # costs about a second of CPU per child and releases nothing the parent needs.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
