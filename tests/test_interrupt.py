"""Ctrl-C at any point of a run is one line and exit 130, never a traceback."""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator

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


@pytest.mark.parametrize(("where", "argv"), [
    ("kgate.pipeline.fastpath.replay", ["check"]),  # while an unchanged run is replayed
    ("kgate.compile.pool.start_server", ["check"]),  # while the workers' fork server starts
    ("kgate.cli.build_parser", ["lint"]),  # while the command line is parsed
])
def test_an_interrupt_during_start_up_is_one_line(where: str, argv: list[str], monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    module, _, name = where.rpartition(".")
    monkeypatch.setattr(sys.modules.get(module) or __import__(module, fromlist=[name]), name, _interrupt)
    monkeypatch.setattr(sys, "argv", ["kgate", *argv])
    assert entry.main() == 130
    assert capsys.readouterr().err == "kgate: interrupted\n"
