"""The GitHub Actions workflows of docs/ci.md, read from the page, their `kgate` steps played on this repository.

Each workflow is checked for its shape (its YAML, every step a `uses` or a
`run`, `needs` naming real jobs, the shard count agreeing with the matrix) and
then its `kgate` steps run in this environment, in a copy of this repository's
kernels, with the runner's part done by hand: matrix
values substituted, globs expanded, and for the sharded workflow the cache
and artifacts moved between jobs the way `actions/cache` and
`actions/upload-artifact` / `download-artifact` with `merge-multiple` move
them (tests/workflows.py). The matrix is played twice: a first run with no
cache, then a second that restores the joined cache the merge job saved, as
the next push would. The first push is the session's one cold compile of this
repository (conftest.py's `repository_first_push`), which the other tests of
this repository's gate share. tests/test_ci_workflows.py plays every step of them,
installs included, as a runner without nvcc or Triton would.
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import REPOSITORY_FIRST_CHECK, Run, copy_repository
from report_helpers import parse_command, validate_sarif
from workflows import check_shape, kgate_steps, play, run_matrix, workflow


def test_the_single_job_workflow(tmp_path: Path, repository_checked: tuple[Path, Run]) -> None:
    doc = workflow("## GitHub Actions")
    check_shape(doc)
    job = doc["jobs"]["check"]
    steps = kgate_steps(job, {})
    assert [args[0] for args in steps] == ["doctor", "check", "check", "check"]
    # The gate step is the session's check of this repository (the same command on the same files, on the
    # cache the sharded first push compiled: a warm run gives a cold run's bytes, tests/test_determinism.py);
    # the other steps run in a copy of its folder, in the job's order.
    assert REPOSITORY_FIRST_CHECK in map(tuple, steps), "the gate step changed: update the fixture"
    checkout = copy_repository(repository_checked, tmp_path)
    runs = [repository_checked[1] if tuple(args) == REPOSITORY_FIRST_CHECK else play(args, checkout)
            for args in steps]
    assert [run.code for run in runs] == [0, 0, 0, 0], [run.stdout + run.stderr for run in runs]
    gate = runs[[tuple(args) for args in steps].index(REPOSITORY_FIRST_CHECK)]
    annotations = [parse_command(line) for line in gate.stdout.splitlines() if line.startswith("::")]
    assert annotations and all(command in ("notice", "warning", "error") for command, _, _ in annotations)
    upload = next(step for step in job["steps"] if "upload-sarif" in step.get("uses", ""))
    sarif = json.loads((checkout / upload["with"]["sarif_file"]).read_text())
    assert sarif["runs"][0]["tool"]["driver"]["name"] == "kgate"
    validate_sarif(sarif)
    assert (checkout / "kgate-junit.xml").read_text().startswith("<?xml")
    (lint,) = kgate_steps(doc["jobs"]["lint"], {})
    run = play(lint, checkout)
    assert run.code == 0, run.stdout + run.stderr


def test_the_sharded_workflow(tmp_path: Path, repository_first_push: tuple[Path, list[Run]],
                              repository_checked: tuple[Path, Run]) -> None:
    doc = workflow("### A GitHub Actions matrix")
    check_shape(doc)
    shards = doc["jobs"]["shard"]["strategy"]["matrix"]["shard"]
    (gate,) = [args for args in kgate_steps(doc["jobs"]["shard"], {"shard": 1}) if "--shard" in args]
    assert gate[gate.index("--shard") + 1] == f"1/{len(shards)}"

    # The first push, with no cache: every shard compiles its slice cold (the session's fixture).
    first, first_runs = repository_first_push
    assert [run.code for run in first_runs] == [0, 0], [run.stdout + run.stderr for run in first_runs]
    sarif = json.loads((first / "kgate.sarif").read_text())
    validate_sarif(sarif)
    # The unsharded run of the same checkout: the session's `kgate check --format github` of this repository.
    unsharded = repository_checked[1]
    assert first_runs[1].stdout == unsharded.stdout

    # The next push restores what the merge job saved: the joined cache, with timings.
    second, second_runs = run_matrix(doc, tmp_path / "push-2", restored=first / ".kgate-cache")
    assert [run.code for run in second_runs] == [0, 0], [run.stdout + run.stderr for run in second_runs]
    assert second_runs[1].stdout == first_runs[1].stdout
    assert json.loads((second / "kgate.sarif").read_text()) == sarif

