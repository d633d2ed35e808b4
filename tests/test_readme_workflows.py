"""The GitHub Actions workflows of docs/ci.md, read from the page and played step by step on this machine.

GitHub itself is not here, so each workflow is checked for what would break it
there (its YAML, every step a `uses` or a `run`, `needs` naming real jobs, the
shard count agreeing with the matrix) and then its `kgate` steps run in a copy
of this repository's kernels, with the runner's part done by hand: matrix
values substituted, globs expanded, and for the sharded workflow the cache
and artifacts moved between jobs the way `actions/cache` and
`actions/upload-artifact` / `download-artifact` with `merge-multiple` move
them. The matrix is played twice: a first run with no cache, then a second
that restores the joined cache the merge job saved, as the next push would.
"""

from __future__ import annotations

import glob
import json
import re
import shlex
import shutil
from pathlib import Path
from typing import Any

import yaml
from conftest import REPO, REPOSITORY_FIRST_CHECK, Run, copy_repository, kgate, repository_checkout
from report_helpers import parse_command, validate_sarif

EXPRESSION = re.compile(r"\$\{\{\s*([^}]*?)\s*\}\}")


def workflow(heading: str) -> dict[str, Any]:
    """The YAML block that follows `heading` in docs/ci.md, parsed."""
    text = (REPO / "docs" / "ci.md").read_text(encoding="utf-8")
    start = text.index(f"\n{heading}\n")
    block = re.search(r"```yaml\n(.*?)```", text[start:], re.S)
    assert block, f"no yaml block after {heading!r}"
    loaded = yaml.safe_load(block.group(1))
    assert isinstance(loaded, dict)
    return loaded


def check_shape(doc: dict[str, Any]) -> None:
    # PyYAML reads the key `on` as True (YAML 1.1); GitHub reads it as "on".
    assert doc.get("on", doc.get(True)), "no trigger"
    jobs = doc["jobs"]
    for name, job in jobs.items():
        assert job["runs-on"], name
        for need in [job["needs"]] if isinstance(job.get("needs"), str) else job.get("needs", []):
            assert need in jobs, f"{name} needs an unknown job {need!r}"
        for step in job["steps"]:
            assert ("uses" in step) != ("run" in step), step


def kgate_steps(job: dict[str, Any], matrix: dict[str, Any]) -> list[list[str]]:
    """The argument lists of a job's `kgate` commands, with `${{ matrix.X }}` filled in."""
    commands = []
    for step in job["steps"]:
        command = step.get("run", "")
        if not command.startswith("kgate "):
            continue
        filled = EXPRESSION.sub(lambda m: str(matrix[m.group(1).removeprefix("matrix.")]), command)
        commands.append(shlex.split(filled)[1:])
    return commands


def play(args: list[str], cwd: Path) -> Run:
    """One `run:` step as bash would run it: globs expanded in the working directory."""
    expanded: list[str] = []
    for arg in args:
        matches = sorted(glob.glob(arg, root_dir=cwd)) if glob.has_magic(arg) else []
        expanded += matches or [arg]
    return kgate(*expanded, cwd=cwd)


def project(dest: Path) -> Path:
    """A checkout as `actions/checkout` gives it: the configuration, the baseline, the capture and the kernels."""
    return repository_checkout(dest)


def join(source: Path, dest: Path) -> None:
    """`download-artifact` with `merge-multiple`: files of the same name are overwritten."""
    shutil.copytree(source, dest, dirs_exist_ok=True)


def test_the_single_job_workflow(tmp_path: Path, repository_cold: tuple[Path, Run]) -> None:
    doc = workflow("## GitHub Actions")
    check_shape(doc)
    (job,) = doc["jobs"].values()
    steps = kgate_steps(job, {})
    assert [args[0] for args in steps] == ["check", "check", "check"]
    # The first step on a fresh checkout is the session's cold check of this repository (the same command on
    # the same files); the later steps run after it in a copy of its folder, as they would in the job.
    assert tuple(steps[0]) == REPOSITORY_FIRST_CHECK, "the README's first step changed: update the fixture"
    checkout = copy_repository(repository_cold, tmp_path)
    runs = [repository_cold[1], *(play(args, checkout) for args in steps[1:])]
    assert [run.code for run in runs] == [0, 0, 0], [run.stdout + run.stderr for run in runs]
    annotations = [parse_command(line) for line in runs[0].stdout.splitlines() if line.startswith("::")]
    assert annotations and all(command in ("notice", "warning", "error") for command, _, _ in annotations)
    upload = next(step for step in job["steps"] if "upload-sarif" in step.get("uses", ""))
    sarif = json.loads((checkout / upload["with"]["sarif_file"]).read_text())
    assert sarif["runs"][0]["tool"]["driver"]["name"] == "kgate"
    validate_sarif(sarif)
    assert (checkout / "kgate-junit.xml").read_text().startswith("<?xml")


def run_matrix(doc: dict[str, Any], root: Path, restored: Path | None) -> tuple[Path, list[Run]]:
    """One push: every shard job, then the merge job; returns the merge checkout and its runs."""
    shard_job, merge_job = doc["jobs"]["shard"], doc["jobs"]["merge"]
    artifacts = root / "artifacts"
    artifacts.mkdir(parents=True)
    for value in shard_job["strategy"]["matrix"]["shard"]:
        checkout = project(root / f"shard-{value}")
        if restored is not None:
            shutil.copytree(restored, checkout / ".kgate-cache")
        for args in kgate_steps(shard_job, {"shard": value}):
            run = play(args, checkout)
            assert run.code == 0, run.stdout + run.stderr
        shutil.copy(checkout / f"shard-{value}.json", artifacts)
        join(checkout / ".kgate-cache", root / "cache-artifacts")
    checkout = project(root / "merge")
    for path in artifacts.iterdir():
        shutil.copy(path, checkout)
    join(root / "cache-artifacts", checkout / ".kgate-cache")
    return checkout, [play(args, checkout) for args in kgate_steps(merge_job, {})]


def test_the_sharded_workflow(tmp_path: Path, repository_cold: tuple[Path, Run]) -> None:
    doc = workflow("### A GitHub Actions matrix")
    check_shape(doc)
    shards = doc["jobs"]["shard"]["strategy"]["matrix"]["shard"]
    (gate,) = [args for args in kgate_steps(doc["jobs"]["shard"], {"shard": 1}) if "--shard" in args]
    assert gate[gate.index("--shard") + 1] == f"1/{len(shards)}"

    first, first_runs = run_matrix(doc, tmp_path / "push-1", restored=None)
    assert [run.code for run in first_runs] == [0, 0], [run.stdout + run.stderr for run in first_runs]
    sarif = json.loads((first / "kgate.sarif").read_text())
    validate_sarif(sarif)
    # The unsharded run of the same checkout: the session's cold `kgate check --format github` of this repository.
    unsharded = repository_cold[1]
    assert first_runs[1].stdout == unsharded.stdout

    # The next push restores what the merge job saved: the joined cache, with timings.
    second, second_runs = run_matrix(doc, tmp_path / "push-2", restored=first / ".kgate-cache")
    assert [run.code for run in second_runs] == [0, 0], [run.stdout + run.stderr for run in second_runs]
    assert second_runs[1].stdout == first_runs[1].stdout
    assert json.loads((second / "kgate.sarif").read_text()) == sarif

