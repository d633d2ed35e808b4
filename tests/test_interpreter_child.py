"""The precision tests' interpreter child (`kgate.kernels.runner`): one child serves every interpreted run of a
process, and is replaced whenever a new child would run something else.

Each child imports torch and Triton, about three seconds of CPU, so a session's kernel modules share one.
What a shared child must never do is run stale code: a module edited on disk since the child imported it, or
a module of the same name taken from another folder, gets a new child and the new code's results.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from kgate.kernels import runner  # noqa: E402 - after the skip: it needs torch
from kgate.kernels.common import interpreter_incompatibility  # noqa: E402

if interpreter_incompatibility():
    pytest.skip(interpreter_incompatibility() or "", allow_module_level=True)

LAUNCHER = """\
import torch
import triton
import triton.language as tl


@triton.jit
def _scaled(x, y, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(y + i, tl.load(x + i, mask=i < n) * FACTOR, mask=i < n)


def launch(x):
    print("1")  # what a launcher prints is the run's output, never taken for the child's reply
    y = torch.empty_like(x)
    _scaled[(1,)](x, y, x.numel(), BLOCK=64)
    return {"y": y}
"""


def _module(folder: Path, factor: float, monkeypatch: pytest.MonkeyPatch) -> object:
    """`scaled` from `folder`, multiplying by `factor`, imported in this process as the tests import theirs."""
    folder.mkdir(exist_ok=True)
    path = folder / "scaled.py"
    old = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(LAUNCHER.replace("FACTOR", repr(factor)))
    os.utime(path, ns=(old + 10**9, old + 10**9))  # an edit within the clock's resolution still shows
    monkeypatch.syspath_prepend(str(folder))
    sys.modules.pop("scaled", None)
    return importlib.import_module("scaled")


def test_one_child_serves_the_runs_until_a_module_it_imported_changes(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "scaled", raising=False)
    backend = runner.Backend(True, "interpreter")
    x = torch.arange(8, dtype=torch.float32)

    def run(module: object) -> tuple[torch.Tensor, int]:
        (out,) = backend.run([(module.launch, {"x": x})])  # type: ignore[attr-defined]
        assert runner._CHILD.process is not None
        return out["y"], runner._CHILD.process.pid

    first, child = run(_module(tmp_path / "a", 2.0, monkeypatch))
    assert torch.equal(first, x * 2)
    again, same = run(sys.modules["scaled"])
    assert torch.equal(again, x * 2) and same == child  # no new child, no second import of torch

    edited, after_edit = run(_module(tmp_path / "a", 3.0, monkeypatch))  # the file changed on disk
    assert torch.equal(edited, x * 3) and after_edit != child

    other, elsewhere = run(_module(tmp_path / "b", 5.0, monkeypatch))  # the same name, another file
    assert torch.equal(other, x * 5) and elsewhere != after_edit

    # A run that fails says why, and the child goes on serving.
    with pytest.raises(RuntimeError, match="the interpreter run failed") as failure:
        backend.run([(sys.modules["scaled"].launch, {"x": "not a tensor"})])  # type: ignore[attr-defined]
    assert "Traceback" in str(failure.value) and "launch" in str(failure.value)
    after_failure, same_child = run(sys.modules["scaled"])
    assert torch.equal(after_failure, x * 5) and same_child == elsewhere

