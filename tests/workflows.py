"""The GitHub Actions workflows of docs/ci.md, read from the page and played on this machine.

GitHub itself is not here: matrix values are substituted, globs expanded, and for the sharded workflow the
cache and artifacts are moved between jobs the way `actions/cache` and `actions/upload-artifact` /
`download-artifact` with `merge-multiple` move them. Used by the workflow tests and by the session fixture
that compiles this repository once (conftest.py: the sharded workflow's first push).
"""

from __future__ import annotations

import glob
import re
import shlex
import shutil
from pathlib import Path
from typing import Any

import yaml
from conftest import REPO, Run, kgate, repository_checkout

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
