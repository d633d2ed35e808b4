"""Ctrl-C at any point of a run is one line and exit 130, never a traceback."""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kgate import entry


def _interrupt(*_args: object, **_kwargs: object) -> None:
    raise KeyboardInterrupt


@pytest.fixture(autouse=True)
def own_handlers() -> Iterator[None]:
    """kgate installs its SIGINT and SIGTERM handlers in the process that runs it: give pytest's back."""
    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


KERNEL = """\
import triton
import triton.language as tl

import kgate


@kgate.register(signature={"x": "*fp32"}, constexprs={"BLOCK": 64})
@triton.jit
def fill(x, BLOCK: tl.constexpr):
    tl.store(x + tl.arange(0, BLOCK), 1.0)
"""


@pytest.mark.parametrize(("where", "argv"), [
    ("kgate.pipeline.fastpath.replay", ["check"]),  # while an unchanged run is replayed
    ("kgate.compile.pool.start_server", ["check"]),  # while the workers' fork server starts (its first worker)
    ("kgate.cli.build_parser", ["lint"]),  # while the command line is parsed
])
def test_an_interrupt_during_start_up_is_one_line(where: str, argv: list[str], monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "k.py").write_text(KERNEL)  # a project with a kernel to compile: the run needs a worker
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\npython-path = ["."]\n')
    monkeypatch.chdir(tmp_path)
    module, _, name = where.rpartition(".")
    monkeypatch.setattr(sys.modules.get(module) or __import__(module, fromlist=[name]), name, _interrupt)
    monkeypatch.setattr(sys, "argv", ["kgate", *argv])
    assert entry.main() == 130
    assert capsys.readouterr().err == "kgate: interrupted\n"
