"""The replay of an unchanged `kgate check`: same bytes, same exit code, nothing else loaded; any change runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import copy_project, kgate

from kgate import fastpath

PROBE = ("import sys; from kgate.entry import main; sys.argv = ['kgate'] + sys.argv[1:]; code = main(); "
         "ran = 'kgate.pipeline' in sys.modules or 'kgate.lint.pipeline' in sys.modules; "
         "print('RAN' if ran else 'REPLAYED', file=sys.stderr); sys.exit(code)")


def probe(project: Path, *args: str, env: dict[str, str] | None = None, command: str = "check") -> tuple[int, str, bool]:
    """(exit code, stdout, whether it was a replay) of `kgate check ARGS` in a fresh process."""
    proc = subprocess.run([sys.executable, "-c", PROBE, command, *args], cwd=project, capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, timeout=600, check=False)
    lines = proc.stderr.strip().splitlines()
    return proc.returncode, proc.stdout, bool(lines) and lines[-1] == "REPLAYED"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = copy_project("ratchet", tmp_path_factory.mktemp("fastpath"))
    return root


def test_an_unchanged_run_is_replayed_byte_for_byte(project: Path) -> None:
    first = probe(project, "-q")
    second = probe(project, "-q")
    assert first[2] is False and second[2] is True
    assert first[:2] == second[:2]
    assert first[0] == 1  # the fixture's row_scale is over its lowered register threshold


def test_formats_and_flags_are_recorded_separately(project: Path) -> None:
    probe(project, "--format", "json")
    code, out, replayed = probe(project, "--format", "json")
    assert replayed and out.startswith("{")
    assert probe(project, "-q", "--select", "KG105")[2] is False


def test_editing_a_kernel_runs_again(project: Path) -> None:
    probe(project, "-q")
    path = project / "rows.py"
    original = path.read_text()
    try:
        path.write_text(original.replace("1e-6", "1e-5"))
        code, out, replayed = probe(project, "-q")
        assert not replayed
        assert probe(project, "-q")[2] is True
    finally:
        path.write_text(original)


def test_a_new_file_a_touched_file_and_the_environment_run_again(project: Path) -> None:
    probe(project, "-q")
    (project / "sub").mkdir(exist_ok=True)
    assert probe(project, "-q")[2] is False
    (project / "sub" / "new_kernel.py").write_text("x = 1\n")
    assert probe(project, "-q")[2] is False
    assert probe(project, "-q")[2] is True
    time.sleep(0.01)
    os.utime(project / "kgate.toml")
    assert probe(project, "-q")[2] is False
    assert probe(project, "-q", env={"TRITON_PTXAS_BLACKWELL_PATH": "/nonexistent/ptxas"})[2] is False


def test_verbose_and_no_cache_are_never_replayed(project: Path) -> None:
    probe(project, "-q", "-v")
    assert probe(project, "-q", "-v")[2] is False
    assert probe(project, "-q", "--no-cache")[2] is False


def test_a_replay_writes_a_missing_output_file_again(project: Path) -> None:
    out = project / "report.json"
    probe(project, "--format", "json", "-o", str(out))
    content = out.read_text()
    out.unlink()
    code, _stdout, replayed = probe(project, "--format", "json", "-o", str(out))
    assert replayed and out.read_text() == content


def test_an_input_changed_during_the_run_is_not_recorded(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    snapshot = fastpath.Snapshot.take(str(tmp_path), (), (), [])
    assert snapshot.still_holds()
    time.sleep(0.01)
    (tmp_path / "a.py").write_text("x = 2\n")
    assert not snapshot.still_holds()


def test_replay_output_matches_the_cli(project: Path) -> None:
    full = kgate("check", "-q", "--no-cache", cwd=project)
    replayed = probe(project, "-q")
    assert (replayed[0], replayed[1]) == (full.code, full.stdout)


def test_an_unchanged_lint_is_replayed_and_an_edit_runs_it_again(project: Path) -> None:
    (project / "tuned.py").write_text(
        "import triton\n\n\n@triton.autotune(configs=[], key=['n_tokens'])\n@triton.jit\n"
        "def k(x, n_tokens):\n    pass\n")
    try:
        first = probe(project, command="lint")
        second = probe(project, command="lint")
        assert first[0] == 1 and "KG201" in first[1]
        assert second[2] is True and second[:2] == first[:2]
        (project / "tuned.py").write_text("x = 1\n")
        third = probe(project, command="lint")
        assert third[2] is False and third[0] == 0
    finally:
        (project / "tuned.py").unlink()


def test_old_records_are_pruned(tmp_path: Path) -> None:
    for i in range(70):
        (tmp_path / f"{i:03d}.json").write_text("{}")
        os.utime(tmp_path / f"{i:03d}.json", ns=(i * 10**9, i * 10**9))
    fastpath._prune(str(tmp_path))
    left = sorted(p.name for p in tmp_path.iterdir())
    assert len(left) == 64 and left[0] == "006.json"


def test_a_run_record_edited_to_pass_is_not_replayed(project: Path) -> None:
    """A record carries a hash of its content: an edited output or exit code runs the command again."""
    first = probe(project, "-q")
    assert first[0] == 1 and probe(project, "-q")[2] is True
    records = (project / ".kgate-cache" / "v1" / "runs").glob("*.json")
    record, data = next((p, d) for p in records if (d := json.loads(p.read_text()))["argv"] == ["check", "-q"])
    assert data["exit"] == 1
    data.update(exit=0, stdout="")
    record.write_text(json.dumps(data))
    again = probe(project, "-q")
    assert again == (first[0], first[1], False)
