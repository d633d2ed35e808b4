"""`kgate diff` stopped by SIGTERM (a cancelled CI job): the signal stops the run as it stops every other command,
never as an error of the run that the pipeline's handling of errors could take for a kernel's failure, a base that
cannot be configured or anything else, and the base's checkout is removed on the way out."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_diff_sides import _git, _left_worktrees, _repo
from test_held_out_revision_diff import SLOW, _checkouts_left, _process, _when_checked_out
from test_held_out_revision_diff import scratch as scratch  # noqa: F401 - the fixture, used by name
from test_import_keys import LARGE, SMALL

from kgate.collect import revision
from kgate.core.errors import KgateError


@pytest.fixture
def default_sigterm() -> Iterator[None]:
    """SIGTERM as a program that handles no signal has it (the API's callers): the checkout's own handling decides."""
    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_sigterm_during_a_checkout_is_no_error_that_the_run_may_catch(tmp_path: Path, default_sigterm: None) -> None:
    project = _repo(tmp_path / "p", {"ops.py": "X = 1\n"})
    commit = _git(project, "rev-parse", "HEAD")
    caught: list[BaseException] = []
    with pytest.raises(KeyboardInterrupt):
        with revision.checkout(project, commit):
            try:  # as the pipeline's handlers do: a compiler's failure, a record that does not parse, ...
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)
            except (KgateError, Exception) as exc:  # noqa: BLE001 - what such a handler would take
                caught.append(exc)
    assert not caught and not _left_worktrees(project)
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_a_diff_stopped_by_sigterm_says_so_as_every_command_does(tmp_path: Path, scratch: Path) -> None:  # noqa: F811
    project = _repo(tmp_path / "p", {"ops.py": SLOW, "tune.json": SMALL})
    (project / "tune.json").write_text(LARGE)
    run = _process(project, scratch, "HEAD")
    _when_checked_out(project, run)
    run.send_signal(signal.SIGTERM)
    _out, err = run.communicate(timeout=120)
    assert run.returncode == 143 and err.splitlines()[-1:] == ["kgate: terminated"], err
    assert not _left_worktrees(project) and not _checkouts_left(scratch)
