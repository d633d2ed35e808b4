"""Command-line arguments given twice or out of range: what the gate does with them."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
from pathlib import Path

import pytest
from conftest import kgate

from kgate.cli import COMMANDS

CU = "__global__ void inc(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] += 1.0f; }\n"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_a_target_named_twice_is_gated_once(tmp_path: Path) -> None:
    (tmp_path / "t.cu").write_text(CU)
    (tmp_path / "kgate.toml").write_text('[[cuda]]\nsources = ["t.cu"]\n')
    once = kgate("check", "--target", "sm_120a", "--format", "json", cwd=tmp_path)
    twice = kgate("check", "--target", "sm_120a", "--target", "sm_120a", "--format", "json", cwd=tmp_path)
    assert once.code == twice.code == 0, once.stdout + once.stderr + twice.stderr
    rows = [(k["kernel"], k["target"]) for k in twice.json()["kernels"]]
    assert rows == [(k["kernel"], k["target"]) for k in once.json()["kernels"]] == [("inc", "sm_120a")]


LAUNCH = "__global__ void k(float* x) { x[0] = 1; }\nvoid launch(float* x) {\n  k<<<1, 1>>>(x);\n}\n"


def _lint_project(folder: Path) -> Path:
    """A project with one source finding (an unchecked launch, KG302): nothing to compile."""
    (folder / "kgate.toml").write_text('python-path = ["."]\n')
    (folder / "a.cu").write_text(LAUNCH)
    return folder


def test_output_through_a_symlink_writes_its_target_and_keeps_the_link(tmp_path: Path) -> None:
    project = _lint_project(tmp_path)
    (project / "reports").mkdir()
    (project / "lint.json").symlink_to("reports/lint.json")
    for _ in range(2):  # the second run is the unchanged-run replay
        run = kgate("lint", "--format", "json", "-o", "lint.json", cwd=project)
        assert run.code == 1, run.stderr
        assert (project / "lint.json").is_symlink()
        assert "KG302" in (project / "reports" / "lint.json").read_text()


def test_output_to_dev_stdout_reaches_stdout(tmp_path: Path) -> None:
    project = _lint_project(tmp_path)
    (project / "out.json").symlink_to("/proc/self/fd/1")  # what /dev/stdout is
    for _ in range(2):
        # A process of its own: its stdout is a pipe, as a user's is (in the test process it is a file).
        run = kgate("lint", "--format", "json", "-o", "out.json", cwd=project, timeout=60, process=True)
        assert run.code == 1, run.stderr
        assert json.loads(run.stdout)["findings"][0]["code"] == "KG302"
        assert (project / "out.json").is_symlink()


def test_output_to_a_named_pipe_streams_to_its_reader(tmp_path: Path) -> None:
    project = _lint_project(tmp_path)
    os.mkfifo(project / "pipe")
    reader = os.open(project / "pipe", os.O_RDONLY | os.O_NONBLOCK)  # a reader is there: opening to write won't wait
    try:
        run = kgate("lint", "--format", "json", "-o", "pipe", cwd=project, timeout=60)
        got = os.read(reader, 1 << 16).decode()
    finally:
        os.close(reader)
    assert run.code == 1, run.stderr
    assert json.loads(got)["findings"][0]["code"] == "KG302"
    assert stat.S_ISFIFO(os.lstat(project / "pipe").st_mode)


def test_a_symlinked_baseline_is_updated_through_the_link(tmp_path: Path) -> None:
    project = _lint_project(tmp_path)
    (project / "pins").mkdir()
    (project / "pins" / "main.toml").write_text("version = 2\n")
    (project / "kgate-baseline.toml").symlink_to("pins/main.toml")
    update = kgate("baseline", "update", "--accept-new", cwd=project)
    assert update.code == 0, update.stderr
    assert (project / "kgate-baseline.toml").is_symlink()
    assert '"KG302|a.cu|launch|k" = 1' in (project / "pins" / "main.toml").read_text()
    assert kgate("lint", cwd=project).code == 0


def test_a_baseline_symlinked_out_of_the_project_is_refused(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    project = _lint_project(tmp_path / "project")
    (tmp_path / "elsewhere.toml").write_text("version = 2\n")
    (project / "kgate-baseline.toml").symlink_to(tmp_path / "elsewhere.toml")
    update = kgate("baseline", "update", "--accept-new", cwd=project)
    assert update.code == 2
    assert "baseline: 'kgate-baseline.toml' is outside the project" in update.stderr
    assert (tmp_path / "elsewhere.toml").read_text() == "version = 2\n"


# --------------------------------------------------------------------------- one format vocabulary

# The commands whose output has no format to choose: a new command that prints a report takes `--format`.
NO_FORMAT = {"baseline", "doctor", "ulp", "audit", "capture", "completion"}


def _format_action(name: str) -> argparse.Action | None:
    from kgate.cli import build_parser

    child = build_parser(name).parse_args([name] + _required(name)).subparsers[name]
    return next((a for a in child._actions if "--format" in a.option_strings), None)


def _required(name: str) -> list[str]:
    """Positional arguments a command cannot parse without."""
    return {"explain": ["KG201"], "merge": ["shard.json"], "baseline": ["show"], "completion": ["bash"]}.get(name, [])


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_command_names_its_formats_alike_and_takes_output_format(name: str) -> None:
    from kgate.cli import build_parser

    action = _format_action(name)
    if name in NO_FORMAT:
        assert action is None, f"{name} has a --format: take it out of NO_FORMAT"
        return
    assert action is not None, name
    assert action.option_strings == ["--format", "--output-format"], name
    assert action.choices is not None and "text" in action.choices and "terminal" not in action.choices, name
    assert action.default == "text", name
    for given in ("text", "terminal", "json"):
        for flag in action.option_strings:
            args = build_parser(name).parse_args([name, *_required(name), flag, given])
            assert args.format == ("text" if given == "terminal" else given), (name, flag, given)


def test_the_formats_work_under_either_flag_and_either_name(tmp_path: Path) -> None:
    rules = kgate("rules", "--output-format", "json", cwd=tmp_path)
    assert rules.code == 0 and [r["code"] for r in json.loads(rules.stdout)][:1] == ["KG001"], rules.stderr
    explained = kgate("explain", "KG204", "--output-format", "json", cwd=tmp_path)
    assert explained.code == 0 and json.loads(explained.stdout)["code"] == "KG204", explained.stderr
    assert kgate("explain", "KG204", "--format", "terminal", cwd=tmp_path).stdout.startswith("# KG204 device-print")
    _lint_project(tmp_path)
    texts = {fmt: kgate("lint", "--no-cache", "--format", fmt, cwd=tmp_path) for fmt in ("text", "terminal")}
    assert texts["text"].code == texts["terminal"].code == 1 and texts["text"].stdout == texts["terminal"].stdout
    assert "KG302 error launch-guard" in texts["text"].stdout
    wrong = kgate("rules", "--format", "xml", cwd=tmp_path)
    assert wrong.code == 2 and "invalid choice: 'xml'" in wrong.stderr and "Traceback" not in wrong.stderr
