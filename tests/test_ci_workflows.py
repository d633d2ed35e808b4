"""The GitHub Actions workflows of docs/ci.md, as a GitHub-hosted runner would run them: no nvcc, no Triton.

Two kinds of test. The first kind reads the workflows' text and checks what would break them on a runner
without running anything: every `kgate` command parses with kgate's own parser, every action is pinned to a
major version, kgate is installed from its source (not the user's project), after the project's own
requirements, with nvcc from pip; the cache is restored before the gate (not for a tag), saved after it,
under keys a run cannot share; the SARIF file uploaded is the one written, and only when kgate wrote it.

The second kind, with KGATE_TEST_INSTALL=1 (it installs from the package index: Triton, NVIDIA's CUDA
wheels), plays every step of both workflows with tests/actions.py on a copy of fixtures/ci committed as a git
repository, kgate installed from a git copy of this checkout: a push to the default branch, a pull request
that restores its cache, one with a finding, one with a configuration error, a tag; the matrix twice.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from actions import Event, Play, condition_holds
from conftest import FIXTURES, REPO
from workflows import EXPRESSION, workflow

from kgate.cli import build_parser

WORKFLOWS = {"single job": "## GitHub Actions", "matrix": "### A GitHub Actions matrix"}
KGATE_INSTALL = re.compile(r'"kernel-gate(?:\[(?P<extras>[\w,]*)\])? @ \$KGATE_SOURCE"')
TOOLKIT = re.compile(r'"cuda-toolkit\[(?P<parts>[\w,]+)\](?P<pin>[^"]*)"')
PINNED = re.compile(r"^[\w.-]+/[\w.-]+(/[\w./-]+)?@v\d+$")
CACHE_ACTIONS = ("actions/cache", "actions/cache/restore", "actions/cache/save")


@pytest.fixture(params=sorted(WORKFLOWS), scope="module")
def doc(request: pytest.FixtureRequest) -> dict[str, Any]:
    return workflow(WORKFLOWS[request.param])


def first_matrix(job: dict[str, Any]) -> dict[str, Any]:
    matrix = (job.get("strategy") or {}).get("matrix") or {}
    return {name: values[0] for name, values in matrix.items()}


def kgate_commands(job: dict[str, Any]) -> list[tuple[int, list[str]]]:
    """(step index, arguments) of every `kgate` step of a job, with the first matrix values filled in."""
    matrix, out = first_matrix(job), []
    for index, step in enumerate(job["steps"]):
        script = step.get("run", "").strip()
        if script.startswith("kgate "):
            filled = EXPRESSION.sub(lambda m: str(matrix[m.group(1).removeprefix("matrix.")]), script)
            out.append((index, shlex.split(filled)[1:]))
    return out


def installs(job: dict[str, Any]) -> list[tuple[int, str]]:
    return [(index, step["run"]) for index, step in enumerate(job["steps"]) if "pip install" in step.get("run", "")]


def uses(job: dict[str, Any], action: str) -> list[tuple[int, dict[str, Any]]]:
    return [(index, step) for index, step in enumerate(job["steps"]) if step.get("uses", "").split("@")[0] == action]


def gated_jobs(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The jobs that compile: those that run `kgate check`."""
    return {name: job for name, job in doc["jobs"].items()
            if any(args[0] == "check" for _, args in kgate_commands(job))}


def option(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


def test_every_action_is_pinned_to_a_major_version(doc: dict[str, Any]) -> None:
    actions = [step["uses"] for job in doc["jobs"].values() for step in job["steps"] if "uses" in step]
    assert actions and [a for a in actions if not PINNED.match(a)] == []


def test_every_kgate_step_parses_with_kgates_parser(doc: dict[str, Any]) -> None:
    parser = build_parser()
    commands = [args for job in doc["jobs"].values() for _, args in kgate_commands(job)]
    assert commands
    for args in commands:
        try:
            parser.parse_args(args)
        except SystemExit as error:
            pytest.fail(f"kgate {shlex.join(args)}: exit {error.code}")


def test_kgate_comes_from_its_source_after_the_projects_own_environment(doc: dict[str, Any]) -> None:
    assert re.fullmatch(r"git\+https://\S+@v\d+\.\d+\.\d+", doc.get("env", {}).get("KGATE_SOURCE", "")), \
        "KGATE_SOURCE: kgate's repository at a release tag"
    gated = gated_jobs(doc)
    assert gated, "no job runs kgate check"
    for name, job in doc["jobs"].items():
        commands = kgate_commands(job)
        if not commands:
            continue
        steps = installs(job)
        first_kgate = commands[0][0]
        kgate = [(index, m) for index, script in steps for m in KGATE_INSTALL.finditer(script)]
        assert len(kgate) == 1 and kgate[0][0] < first_kgate, f"{name}: kgate is installed once, before it runs"
        assert not [s for _, s in steps if re.search(r"pip install (-e )?\.(\s|$)", s)], \
            f"{name}: `pip install .` installs the project that runs the workflow, not kgate"
        extras = set(filter(None, (kgate[0][1]["extras"] or "").split(",")))
        if name not in gated:
            assert extras == set(), f"{name} compiles nothing: kgate alone"
            continue
        # The project's environment (its Triton) first, then kgate with nvcc from pip, then the toolchain.
        project = [index for index, script in steps if "-r requirements.txt" in script]
        assert project and project[0] < kgate[0][0], f"{name}: the project's requirements come first"
        assert extras == {"cuda"}, f"{name}: the cuda extra brings cuda.pathfinder, which finds pip's nvcc"
        toolkit = [m for index, script in steps for m in TOOLKIT.finditer(script) if index == kgate[0][0]]
        assert toolkit and {"nvcc", "nvvm", "crt", "cudart", "cccl"} <= set(toolkit[0]["parts"].split(",")), \
            f"{name}: NVIDIA's pip toolkit, whole (nvcc alone takes the newest nvvm)"
        # Its release is the project environment's: the one its torch pins (torch 2.15.0 pins cuda-toolkit
        # 13.2.2), or its requirements'. A release named here too conflicts with every other torch.
        assert toolkit[0]["pin"] == "", f"{name}: the toolkit takes the release the project's environment pins"
        doctor = [index for index, args in commands if args[0] == "doctor"]
        check = [index for index, args in commands if args[0] == "check"]
        assert doctor and doctor[0] < check[0], f"{name}: kgate doctor before the first compile"


def test_the_cache_is_restored_before_the_gate_and_saved_after_it(doc: dict[str, Any]) -> None:
    saves = [(name, index, step) for name, job in doc["jobs"].items()
             for action in ("actions/cache", "actions/cache/save") for index, step in uses(job, action)]
    assert saves, "no job saves the cache"
    keys = {step["with"]["key"] for _, _, step in saves}
    for name, job in gated_jobs(doc).items():
        restores = [(index, step) for action in ("actions/cache", "actions/cache/restore")
                    for index, step in uses(job, action)]
        first_check = next(index for index, args in kgate_commands(job) if args[0] == "check")
        assert restores and restores[0][0] < first_check, f"{name}: restore the cache before compiling"
        index, step = restores[0]
        assert step["with"]["path"] == ".kgate-cache"
        when = step.get("if")
        for event in (Event.push(), Event.pull_request(1)):
            assert condition_holds(when, failed=False, outcomes={}, event=event), f"{name}: restore on {event}"
        assert not condition_holds(when, failed=False, outcomes={}, event=Event.tag("v1")), \
            f"{name}: a release (a tag) is gated from an empty cache"
        key = step["with"]["key"]
        assert key in keys, f"{name}: the cache restored is the one a job saves"
        # Cache entries are never replaced: each run saves its own, and the newest is restored by prefix.
        assert "${{ runner.os }}" in key and key.endswith("${{ github.run_id }}")
        assert "hashFiles('requirements.txt')" in key, "the key starts afresh when the environment changes"
        prefixes = [line.strip() for line in step["with"].get("restore-keys", "").splitlines() if line.strip()]
        assert prefixes and all(key.startswith(p) for p in prefixes), prefixes
        assert "${{ github.run_id }}" not in "".join(prefixes)
    for name, index, step in saves:
        assert step["with"]["path"] == ".kgate-cache"
        assert index > max(i for i, _ in kgate_commands(doc["jobs"][name])), f"{name}: save after the gate"
        assert condition_holds(step.get("if"), failed=True, outcomes={}), \
            f"{name}: a run whose gate fails saved its compiles too"


def test_the_sarif_uploaded_is_the_file_kgate_wrote(doc: dict[str, Any]) -> None:
    uploads = [(name, index, step) for name, job in doc["jobs"].items()
               for index, step in uses(job, "github/codeql-action/upload-sarif")]
    assert uploads
    for name, index, upload in uploads:
        job = doc["jobs"][name]
        writers = [(i, args) for i, args in kgate_commands(job)
                   if option(args, "--format") == "sarif" and option(args, "-o") == upload["with"]["sarif_file"]]
        assert len(writers) == 1 and writers[0][0] < index, f"{name}: one step writes {upload['with']['sarif_file']}"
        writer_index, args = writers[0]
        assert "--exit-zero" in args, f"{name}: the SARIF step fails only when kgate could not judge (exit 2)"
        step_id = job["steps"][writer_index].get("id")
        assert step_id, f"{name}: the SARIF step needs an id for the upload's condition"
        when = upload.get("if")
        # The gate failed after the SARIF was written: the findings still reach code scanning.
        assert condition_holds(when, failed=True, outcomes={step_id: "success"}), when
        # kgate exited 2 (no file) or never ran: no upload, which would close every open alert.
        assert not condition_holds(when, failed=True, outcomes={step_id: "failure"}), when
        assert not condition_holds(when, failed=True, outcomes={step_id: "skipped"}), when
        assert upload["with"].get("category")


def test_one_step_of_a_job_is_its_gate(doc: dict[str, Any]) -> None:
    for name, job in doc["jobs"].items():
        verdicts = [args for _, args in kgate_commands(job) if args[0] in ("check", "merge", "lint")]
        if not verdicts or any("--shard" in args for args in verdicts):  # a shard's verdict is the merge's
            continue
        gates = [args for args in verdicts if "--exit-zero" not in args]
        assert len(gates) == 1, f"{name}: one kgate step fails the job on findings: {gates}"


# --- the play ------------------------------------------------------------------------------------------------

needs_install = pytest.mark.skipif(
    os.environ.get("KGATE_TEST_INSTALL") != "1",
    reason="installs Triton and NVIDIA's CUDA wheels from the package index; set KGATE_TEST_INSTALL=1")


def _git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=folder, check=True,
                          capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def kgate_clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git repository of this checkout as it is now (committed), installed as the workflows install kgate."""
    clone = tmp_path_factory.mktemp("kgate-source") / "kgate"
    shutil.copytree(REPO, clone, ignore=shutil.ignore_patterns(".venv*", ".git", "*.egg-info", "__pycache__",
                                                               ".kgate-cache", ".pytest_cache", "build", ".whl"))
    for args in (("init", "-q"), ("add", "-A"), ("commit", "-qm", "kgate")):
        _git(clone, *args)
    return clone


def _rewrite(clone: Path):
    """kgate from the clone, by its path (the clone's distribution name is whatever its pyproject says)."""
    def rewrite(script: str) -> str:
        return KGATE_INSTALL.sub(lambda m: shlex.quote(f"{clone}[{m['extras']}]" if m["extras"] else str(clone)),
                                 script)
    return rewrite


PLANTED_FINDING = ("  return cudaGetLastError();\n", "  return cudaSuccess;\n")  # KG302: a launch not checked
CONFIG_ERROR = "bogus = 1\n"


def _checkout(workspace: Path, event: Event) -> None:
    """fixtures/ci as `actions/checkout` leaves it: a git repository of the commit the event names."""
    shutil.copytree(FIXTURES / "ci", workspace, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__", ".kgate-cache"))
    if event.ref == "refs/pull/2/merge":
        path = workspace / "csrc" / "rmsnorm.cu"
        text = path.read_text()
        assert PLANTED_FINDING[0] in text
        path.write_text(text.replace(*PLANTED_FINDING))
    if event.ref == "refs/pull/3/merge":
        path = workspace / "kgate.toml"
        path.write_text(CONFIG_ERROR + path.read_text())
    for args in (("init", "-q"), ("add", "-A"), ("commit", "-qm", event.ref)):
        _git(workspace, *args)


def _python(job: Any, code: str) -> str:
    proc = subprocess.run(["python", "-c", code], cwd=job.workspace, env=job.env, capture_output=True, text=True,
                          check=True)
    return proc.stdout.strip()


def _compiled(folder: Path) -> set[str]:
    """The cache's records of compiles (not those of lint runs or of a command's run, which name the project's
    folder)."""
    return {str(p.relative_to(folder)) for p in folder.rglob("*")
            if p.is_file() and p.relative_to(folder).parts[:2] not in (("v1", "lint"), ("v1", "runs"))}


def _failures(run: Any) -> list[tuple[str, str, str]]:
    """(job, step, the end of its output) of every step that failed."""
    return [(job.name, step.name, (step.stdout + step.stderr + step.note)[-2000:]) for job in run.jobs
            for step in job.steps if step.outcome == "failure"]


def _outcomes(job: Any) -> dict[str, str]:
    return {step.name: step.outcome for step in job.steps}


def _sarif_results(run: Any) -> list[str]:
    (upload,) = run.sarif
    return sorted(result["ruleId"] for result in upload["doc"]["runs"][0]["results"])


@needs_install
@pytest.mark.slow
def test_the_workflows_run_as_written_on_a_runner_without_nvcc_or_triton(tmp_path: Path, kgate_clone: Path) -> None:
    single = Play(workflow(WORKFLOWS["single job"]), tmp_path / "single", _checkout, _rewrite(kgate_clone))

    # A push to the default branch: a cold cache, every step passes, the SARIF reaches code scanning.
    main = single.run(Event.push())
    assert not _failures(main), _failures(main)
    check, lint = main.job("check"), main.job("lint")
    assert shutil.which("nvcc", path=check.env["PATH"]) is None
    assert _python(check, "import shutil; print(shutil.which('nvcc'))") == "None"
    venv = check.env["pythonLocation"]
    doctor = next(s for s in check.steps if s.name.startswith("Toolchain")).stdout
    tools = {line.split()[0]: line for line in doctor.splitlines() if line and not line.startswith(("config", "CUDA"))}
    assert venv in tools["nvcc"] and "(pip wheel (nvidia-cuda-nvcc))" in tools["nvcc"], doctor
    assert venv in tools["triton"] and venv in tools["cuobjdump"], doctor
    assert "CUDA sources compile with nvcc" in doctor
    # The lint job has kgate alone: no compiler, no CUDA package.
    assert _python(lint, "import importlib.util as u; print(u.find_spec('triton'), u.find_spec('cuda'))") \
        == "None None"
    assert _sarif_results(main) == [] and main.sarif[0]["category"] == "kgate-check"
    gate = next(s for s in check.steps if s.name.startswith("Gate"))
    assert "kgate check: passed" in gate.stdout
    assert (check.workspace / "kgate-junit.xml").is_file()
    assert [entry[:2] for entry in single.cache.entries] == [(check.steps[-1].note.split(": ", 1)[1],
                                                              "refs/heads/main")]

    # A pull request of the same commit restores what the default branch saved and compiles nothing.
    pr = single.run(Event.pull_request(1))
    check = pr.job("check")
    assert not check.failed and not pr.job("lint").failed
    restore = next(s for s in check.steps if s.name.startswith("Restore"))
    assert restore.note == f"Cache restored from key: {single.cache.entries[0][0]} (refs/heads/main)"
    assert _compiled(check.workspace / ".kgate-cache") == _compiled(single.cache.entries[0][2])
    assert next(s for s in check.steps if s.name.startswith("Gate")).stdout == gate.stdout
    assert single.cache.entries[-1][1] == "refs/pull/1/merge"

    # A pull request with a finding: the gate fails, its findings still reach code scanning and the cache is
    # saved; it restores the default branch's cache, never the other pull request's.
    finding = single.run(Event.pull_request(2))
    check, lint = finding.job("check"), finding.job("lint")
    assert lint.failed and "KG302" in lint.steps[-1].stdout
    outcomes = _outcomes(check)
    assert [name for name, outcome in outcomes.items() if outcome != "success"] \
        == ["Gate (annotations on the pull request)"], outcomes
    assert "::error file=csrc/rmsnorm.cu" in check.step("Gate (annotations on the pull request)").stdout
    assert _sarif_results(finding) == ["KG302"]
    restore = next(s for s in check.steps if s.name.startswith("Restore"))
    assert restore.note.endswith("(refs/heads/main)"), restore.note
    assert single.cache.entries[-1][1] == "refs/pull/2/merge"

    # A configuration error: one line at the toolchain step, nothing else judged, no SARIF uploaded.
    broken = single.run(Event.pull_request(3))
    check = broken.job("check")
    doctor = next(s for s in check.steps if s.name.startswith("Toolchain"))
    assert doctor.outcome == "failure" and doctor.note == "exit 2"
    assert doctor.stderr.startswith("kgate: error: kgate.toml") and doctor.stderr.count("\n") == 1, doctor.stderr
    after = check.steps[check.steps.index(doctor) + 1:]
    assert [s.outcome for s in after if not s.name.startswith("Save")] == ["skipped"] * (len(after) - 1)
    assert broken.sarif == []

    # A tag, a release: gated from an empty cache.
    tag = single.run(Event.tag("v1"))
    check = tag.job("check")
    assert not check.failed and next(s for s in check.steps if s.name.startswith("Restore")).outcome == "skipped"
    assert _sarif_results(tag) == []

    # The matrix: the shards' merged report is the single job's, byte for byte; the next run restores the cache
    # the merge job saved, with its timings, in every shard.
    matrix = Play(workflow(WORKFLOWS["matrix"]), tmp_path / "matrix", _checkout, _rewrite(kgate_clone))
    matrix.environments = single.environments  # the same install steps: the same environments
    for event in (Event.push(), Event.pull_request(1)):
        run = matrix.run(event)
        assert not _failures(run), _failures(run)
        merge = run.job("merge")
        assert merge.step("Gate (annotations on the pull request)").stdout == gate.stdout
        assert run.sarif[0]["doc"] == main.sarif[0]["doc"]
        if event.name == "pull_request":
            saved = matrix.cache.entries[0]
            for shard in (job for job in run.jobs if job.name == "shard"):
                restore = next(s for s in shard.steps if s.name.startswith("Restore"))
                assert restore.note == f"Cache restored from key: {saved[0]} (refs/heads/main)"
                assert _compiled(shard.workspace / ".kgate-cache") == _compiled(saved[2])
    assert json.loads((merge.workspace / "kgate.sarif").read_text()) == main.sarif[0]["doc"]


@needs_install
def test_the_install_steps_resolve_beside_the_newest_torch(doc: dict[str, Any], tmp_path: Path) -> None:
    """A project whose requirements hold torch (its CUDA build pins cuda-toolkit) installs, then the gated job's
    kgate step: pip must find one set of versions for both (a toolkit release of the workflow's own cannot)."""
    import sys

    def resolve(report: Path, *wanted: str) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                               "--report", str(report), *wanted], capture_output=True, text=True, timeout=1800)
        installed = json.loads(report.read_text())["install"] if done.returncode == 0 else []
        return done, {item["metadata"]["name"].lower(): item["metadata"]["version"] for item in installed}

    # The torch a project installs today (its requirements pin it, or it is already there): the newest.
    _, alone = resolve(tmp_path / "torch.json", "torch")
    torch = f"torch=={alone['torch']}"
    for name, job in gated_jobs(doc).items():
        (script,) = [s for _, s in installs(job) if KGATE_INSTALL.search(s)]
        line = script.replace("$KGATE_SOURCE", REPO.as_uri()).split("pip install", 1)[1]
        resolved, picked = resolve(tmp_path / f"{name}.json", torch, *shlex.split(line))
        assert resolved.returncode == 0, f"{name}, beside {torch}: {resolved.stderr[-2000:]}"
        assert {"torch", "kernel-gate", "cuda-toolkit", "nvidia-cuda-nvcc", "nvidia-nvvm"} <= set(picked), picked
        # One CUDA release for the compiler and its optimiser (nvcc beside a newer nvvm emits PTX its ptxas rejects).
        assert picked["nvidia-cuda-nvcc"].split(".")[:2] == picked["nvidia-nvvm"].split(".")[:2], picked
