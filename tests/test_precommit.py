"""kgate's pre-commit hooks (.pre-commit-hooks.yaml) on a sample kernel repository.

Two ways of running them:

- The default tests run the real `pre-commit` program on a temporary git
  repository, with the hook definitions taken verbatim from
  .pre-commit-hooks.yaml and only two keys changed: `language: system`
  and an `entry` that names this environment's `kgate`. Everything else
  (types_or filtering, pass_filenames, stages, require_serial, splitting the
  files into parallel batches) is pre-commit's own. A second test splits the
  file list with pre-commit's own `xargs.partition` into more batches than
  the machine has cores, to show the verdict does not depend on the split.
- `test_the_hooks_install_from_the_repository` runs `pre-commit` on a
  configuration that names a git copy of this checkout: a fresh virtual
  environment and `pip install` of kgate for the lint hook, with its
  dependencies (no Triton, torch or CUDA package: lint loads no compiler).
  It needs a package index, so it runs only with KGATE_TEST_INSTALL=1 (the
  CI script sets it). It is the test that catches packaging mistakes, such
  as a subpackage missing from pyproject's package list.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO, copy_project, kgate
from identify.identify import tags_from_filename, tags_from_path
from pre_commit.clientlib import load_manifest
from pre_commit.xargs import partition

from kgate import rules as registry

HOOKS = REPO / ".pre-commit-hooks.yaml"
BIN = Path(sys.executable).parent


def hooks() -> dict[str, dict]:
    return {hook["id"]: hook for hook in yaml.safe_load(HOOKS.read_text())}


def test_hooks_file_is_a_valid_pre_commit_manifest() -> None:
    manifest = {hook["id"]: hook for hook in load_manifest(str(HOOKS))}
    assert sorted(manifest) == ["kgate-check", "kgate-lint"]
    lint, check = manifest["kgate-lint"], manifest["kgate-check"]
    assert (lint["language"], lint["entry"], lint["pass_filenames"]) == ("python", "kgate lint --force-exclude", True)
    assert lint["require_serial"] is True  # one process, one summary
    # Commit time only (and on demand): a push after `pre-commit install --hook-type pre-push` does not lint again.
    assert lint["stages"] == ["pre-commit", "pre-merge-commit", "manual"]
    # The check runs in the project's own environment, with its Triton; always, with no file names.
    # `system`, the name every pre-commit since 3.2 knows; recent releases call it `unsupported` when they load it.
    assert check["language"] in ("system", "unsupported") and hooks()["kgate-check"]["language"] == "system"
    assert (check["entry"], check["pass_filenames"]) == ("kgate check", False)
    assert check["stages"] == ["pre-push", "manual"] and check["require_serial"] is True and check["always_run"]
    assert all(hook["minimum_pre_commit_version"] == "3.2.0" for hook in manifest.values())


def _sample_name(glob: str) -> str:
    return glob.replace("*", "x").replace("?", "x")


@pytest.mark.parametrize("code", [c for c in registry.codes() if registry.load(c).files])
def test_lint_hook_types_reach_every_source_rule(code: str) -> None:
    """A rule whose files pre-commit never passes to the hook would never run at commit time."""
    types = set(hooks()["kgate-lint"]["types_or"])
    for glob in registry.load(code).files:
        name = _sample_name(glob.rsplit("/", 1)[-1])
        assert tags_from_filename(name) & types, f"{code}: pre-commit would not pass {name!r} to kgate-lint"


def _repository(tmp_path: Path) -> Path:
    repo = copy_project("precommit", tmp_path)
    local = []
    for hook in hooks().values():
        hook = dict(hook, language="system", entry=f"{BIN}/{hook['entry']}")
        local.append(hook)
    config = {"repos": [{"repo": "local", "hooks": local}]}
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    return repo


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def _pre_commit(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PRE_COMMIT_HOME": str(repo.parent / "pre-commit-home"), "PRE_COMMIT_COLOR": "never"}
    env.pop("PRE_COMMIT_NO_CONCURRENCY", None)
    return subprocess.run([str(BIN / "pre-commit"), "run", *args], cwd=repo, env=env, capture_output=True,
                          text=True, timeout=900)


def _findings(output: str) -> set[str]:
    return {line for line in output.splitlines() if ": KG" in line and (" error " in line or " warning " in line)}


def test_lint_hook_on_a_kernel_repository(tmp_path: Path) -> None:
    repo = _repository(tmp_path)
    run = _pre_commit(repo, "--all-files")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "kgate check" not in run.stdout  # a pre-push hook stays out of the commit stage
    assert _findings(run.stdout) == {
        ("kernels/norm.py:9:40: KG201 error runtime-autotune: autotune key of `rmsnorm`: 'n_tokens' (by its name) "
         "changes with the token count or batch: every new value benchmarks all configs again"),
        ("tests/conftest.py:3:1: KG203 error interpret-in-tests: TRITON_INTERPRET switched on in conftest.py: every "
         "kernel decorated afterwards runs on the CPU interpreter"),
    }
    # pre-commit passed the excluded fixture (types_or matches it); --force-exclude kept it out.
    assert "fixtures/bad_on_purpose.py" not in run.stdout

    norm = repo / "kernels/norm.py"
    norm.write_text(norm.read_text().replace('key=["n_tokens", "D"]', 'key=["D"]'))
    (repo / "tests/conftest.py").write_text("import os\n")
    _git(repo, "add", "-A")
    fixed = _pre_commit(repo, "--all-files")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "kgate lint" in fixed.stdout and "Passed" in fixed.stdout


def test_lint_verdict_does_not_depend_on_how_the_files_are_split(tmp_path: Path) -> None:
    repo = _repository(tmp_path)
    lint = hooks()["kgate-lint"]
    types = set(lint["types_or"])
    files = subprocess.run(["git", "ls-files"], cwd=repo, capture_output=True, text=True, check=True).stdout.split()
    passed = [f for f in files if tags_from_path(str(repo / f)) & types]
    assert "README.md" not in passed and "csrc/copy.cu" in passed and "fixtures/bad_on_purpose.py" in passed
    entry = lint["entry"].split()
    whole = kgate(*entry[1:], *passed, cwd=repo)
    batches = partition(entry, passed, target_concurrency=4)
    assert len(batches) >= 3
    outputs = [kgate(*batch[1:], cwd=repo) for batch in batches]
    assert set().union(*(_findings(o.stdout) for o in outputs)) == _findings(whole.stdout)
    assert max(o.code for o in outputs) == whole.code == 1
    assert sum(o.stdout.count("kgate lint:") for o in outputs) == len(batches)


def test_check_hook_runs_before_a_push(tmp_path: Path) -> None:
    repo = _repository(tmp_path)
    run = _pre_commit(repo, "--hook-stage", "pre-push", "kgate-check", "--all-files", "--verbose")
    # The whole gate: it compiled the registered kernel for the configured target (clean), and ran the
    # source rules over the repository, which fail on the two mistakes the sample keeps for the lint hook.
    assert run.returncode == 1, run.stdout + run.stderr
    assert "kgate check" in run.stdout and "Failed" in run.stdout
    # The table shows only rows with findings: the clean kernel is the one row left out.
    assert "1 of 1 kernel variant(s) without findings not shown" in run.stdout
    assert "kgate check: FAILED: 1 kernel variant(s)" in run.stdout
    assert "kernels/norm.py:9:40: KG201" in run.stdout and "tests/conftest.py:3:1: KG203" in run.stdout
    assert "kgate check: FAILED: 1 kernel variant(s) and" in run.stdout
    # The manual stage runs it too, without --all-files (it takes no file names, so it always runs).
    manual = _pre_commit(repo, "--hook-stage", "manual", "kgate-check", "--verbose")
    assert manual.returncode == 1 and "(no files to check)" not in manual.stdout
    assert "kgate check: FAILED: 1 kernel variant(s) and" in manual.stdout


def test_one_lint_hook_run_prints_one_summary(tmp_path: Path) -> None:
    repo = _repository(tmp_path)
    for index in range(60):  # more files than pre-commit would hand one process on a many-core machine
        (repo / "kernels" / f"extra_{index}.py").write_text("x = 1\n")
    _git(repo, "add", "-A")
    run = _pre_commit(repo, "--all-files", "--verbose", "kgate-lint")
    assert run.stdout.count("kgate lint:") == 1, run.stdout


@pytest.mark.skipif(os.environ.get("KGATE_TEST_INSTALL") != "1",
                    reason="pip-installs kgate into a fresh environment from a package index; set KGATE_TEST_INSTALL=1")
def test_the_hooks_install_from_the_repository(tmp_path: Path) -> None:
    checkout = tmp_path / "kgate"
    # pre-commit installs from a git repository: a copy of this checkout, committed as it is now.
    shutil.copytree(REPO, checkout, ignore=shutil.ignore_patterns(".venv*", ".git", "*.egg-info", "__pycache__",
                                                                  ".kgate-cache", ".pytest_cache", "build", ".whl"))
    for args in (("init", "-q"), ("add", "-A"), ("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")):
        _git(checkout, *args)
    rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=checkout, capture_output=True, text=True,
                         check=True).stdout.strip()
    repo = copy_project("precommit", tmp_path)
    config = {"repos": [{"repo": str(checkout), "rev": rev, "hooks": [{"id": "kgate-lint"}, {"id": "kgate-check"}]}]}
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "home"), "PRE_COMMIT_COLOR": "never"}
    run = subprocess.run([str(BIN / "pre-commit"), "run", "kgate-lint", "--all-files"],
                         cwd=repo, env=env, capture_output=True, text=True, timeout=1800)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "kernels/norm.py:9:40: KG201" in run.stdout and "tests/conftest.py:3:1: KG203" in run.stdout
    assert "bad_on_purpose" not in run.stdout
    # The lint hook's environment holds kgate and nothing heavy: no compiler, no torch, no CUDA package.
    (site,) = (tmp_path / "home").glob("repo*/py_env-*/lib/python*/site-packages")
    installed = {p.name.split("-")[0].lower() for p in site.glob("*.dist-info")}
    assert "kernel_gate" in installed and not installed & {"triton", "torch", "cuda_python", "nvidia_cuda_nvrtc"}
    # The check hook builds no environment at all: it runs the project's own kgate (here, this one's).
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    check = subprocess.run([str(BIN / "pre-commit"), "run", "--hook-stage", "manual", "kgate-check"],
                           cwd=repo, env=env, capture_output=True, text=True, timeout=1800)
    assert "kgate check: FAILED: 1 kernel variant(s)" in check.stdout, check.stdout + check.stderr
    assert len(list((tmp_path / "home").glob("repo*/py_env-*"))) == 1


def _documented_revisions() -> dict[str, list[str]]:
    """Every kgate revision a page tells users to install: `rev:` of a pre-commit configuration, `@rev` of a
    git URL of kgate's repository. Revision -> the pages that name it."""
    import re

    found: dict[str, list[str]] = {}
    pages = [REPO / "README.md", REPO / ".pre-commit-hooks.yaml", *sorted((REPO / "docs").glob("*.md"))]
    for page in pages:
        text = page.read_text()
        for rev in re.findall(r"^\s*#?\s*rev:\s*['\"]?([^\s'\"#]+)", text, re.MULTILINE) + \
                re.findall(r"git\+https://github\.com/OWNER/kgate@([^\s'\"#)`]+)", text):
            found.setdefault(rev, []).append(page.name)
    return found


def test_every_revision_the_docs_name_exists_with_the_hooks() -> None:
    """`pre-commit install-hooks` fails (exit 3) on a `rev:` the repository does not have; pip on a missing tag."""
    revisions = _documented_revisions()
    assert revisions and all(rev.startswith("v") for rev in revisions), revisions
    tags = subprocess.run(["git", "tag", "-l"], cwd=REPO, capture_output=True, text=True).stdout.split()
    if not tags:
        pytest.skip("this clone has no tags (a shallow or tag-less clone): nothing to resolve the docs' revisions in")
    for rev, pages in revisions.items():
        assert rev in tags, f"{', '.join(sorted(set(pages)))} name {rev}, which is not a tag of this repository"
        manifest = subprocess.run(["git", "show", f"{rev}:.pre-commit-hooks.yaml"], cwd=REPO, capture_output=True,
                                  text=True, check=True).stdout
        assert {hook["id"] for hook in yaml.safe_load(manifest)} == {"kgate-lint", "kgate-check"}
        pyproject = subprocess.run(["git", "show", f"{rev}:pyproject.toml"], cwd=REPO, capture_output=True,
                                   text=True, check=True).stdout
        assert f'\nversion = "{rev[1:]}"\n' in pyproject and '\nname = "kernel-gate"\n' in pyproject, rev
