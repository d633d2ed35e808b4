"""Held-out warm runs against the artifact plan: the rule selection changed between runs (select and ignore in the
configuration and on the command line, per-file-ignores, a severity, KG110), `--sass`, the audit after a check, a
cache whose SASS or cubin was removed, emptied, damaged or swapped with another target's, and two runs at once.
Each run's findings and the SASS its report holds are those of the same run without the cache. Real compiles
(nvcc)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import copy_project, kgate

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")

LOCAL = "rules/KG109"  # histogram_local's loop reads and writes local memory (KG109, read from the SASS)


def report(project: Path, *args: str) -> tuple[set[tuple[str, str]], dict[tuple[str, str], str | None], int]:
    """(findings by code and kernel, each variant's SASS as JSON text or None, exit code) of one check."""
    run = kgate("check", "--format", "json", *args, cwd=project)
    assert run.code in (0, 1), run.stderr
    data = run.json()
    return ({(f["code"], f.get("kernel") or "") for f in data["findings"]},
            {(k["kernel"], k["target"]): None if k["sass"] is None else json.dumps(k["sass"], sort_keys=True)
             for k in data["kernels"]}, run.code)


Report = tuple[set[tuple[str, str]], dict[tuple[str, str], str | None], int]
_COLD: dict[tuple[bytes, tuple[str, ...]], Report] = {}


def same_as_cold(project: Path, *args: str) -> tuple[set[tuple[str, str]], dict[tuple[str, str], str | None], int]:
    """A warm run's report, which must be the report of the same run without the cache. That one depends only on
    the project's files and the arguments, so it is made once for each in a module's run."""
    warm = report(project, *args)
    key = (b"".join(path.relative_to(project).as_posix().encode() + b"\0" + path.read_bytes()
                    for path in sorted(project.rglob("*"))
                    if path.is_file() and ".kgate-cache" not in path.relative_to(project).parts), args)
    if key not in _COLD:
        _COLD[key] = report(project, *args, "--no-cache")
    assert warm == _COLD[key]
    return warm


def cache_files(project: Path, prefix: str) -> list[Path]:
    return sorted(p for p in (project / ".kgate-cache").rglob(prefix + "*") if p.is_file())


def damage(prefix: str, how: Callable[[Path], None]) -> Callable[[Path], None]:
    return lambda project: [how(path) for path in cache_files(project, prefix)]


def swapped(prefix: str) -> Callable[[Path], None]:
    """The two targets' files of a kind exchanged: each named by the other's content hash."""
    def swap(project: Path) -> None:
        first, second = [p for p in cache_files(project, prefix) if "." in p.name[len(prefix):]][:2]
        data = first.read_bytes()
        first.write_bytes(second.read_bytes())
        second.write_bytes(data)
    return swap


def config(text: str) -> Callable[[Path], None]:
    def write(project: Path) -> None:
        (project / "kgate.toml").write_text('targets = ["sm_120a", "sm_90a"]\n' + text
                                            + '\n[[cuda]]\nsources = ["local_memory_in_loop.cu"]\n')
    return write


def nothing(_project: Path) -> None:
    pass


# (name, the first run's arguments, what changes between the runs, the warm run's arguments, the code it must find)
CASES: list[tuple[str, list[str], Callable[[Path], None], list[str], str | None]] = [
    ("cubin-deleted-then-selected", ["--select", "KG103"], damage("kernel.cubin", Path.unlink),
     ["--select", "KG103,KG109"], "KG109"),
    ("cubin-emptied-then-selected", ["--select", "KG103"], damage("kernel.cubin", lambda p: p.write_bytes(b"")),
     ["--select", "KG103,KG109"], "KG109"),
    ("cubin-garbage-then-selected", ["--select", "KG103"],
     damage("kernel.cubin", lambda p: p.write_bytes(b"\x7fELF" + b"\0" * 60)), ["--select", "KG103,KG109"], "KG109"),
    ("cubins-swapped-then-selected", ["--select", "KG103"], swapped("kernel.cubin"), ["--select", "KG103,KG109"],
     "KG109"),
    ("sass-deleted", [], damage("kernel.sass", Path.unlink), ["--select", "local-memory-in-loop"], "KG109"),
    ("sass-emptied", [], damage("kernel.sass", lambda p: p.write_bytes(b"")), ["--select", "local-memory-in-loop"],
     "KG109"),
    ("sass-garbage", [], damage("kernel.sass", lambda p: p.write_text("garbage\n")),
     ["--select", "local-memory-in-loop"], "KG109"),
    ("sass-of-no-loop", [], damage("kernel.sass", lambda p: p.write_text(
        p.read_text().replace("LDL", "LDG").replace("STL", "STG"))), ["--select", "local-memory-in-loop"], "KG109"),
    ("sass-swapped", [], swapped("kernel.sass"), ["--select", "local-memory-in-loop"], "KG109"),
    ("ptx-deleted-sass-kept", [], damage("kernel.ptx", Path.unlink), ["--select", "local-memory-in-loop"], "KG109"),
    ("records-deleted-artifacts-kept", ["--select", "KG103"],
     lambda project: shutil.rmtree(project / ".kgate-cache" / "v1" / "cuda"), ["--select", "KG109"], "KG109"),
    ("facts-deleted", [], lambda project: shutil.rmtree(project / ".kgate-cache" / "v1" / "facts"),
     ["--select", "local-memory-in-loop"], "KG109"),
    ("ignored-in-config-then-not", [], config('select = ["ALL"]\nignore = ["KG109"]'), [], None),
    ("ignored-then-unignored", [], lambda project: (config('select = ["ALL"]\nignore = ["KG109"]')(project),
                                                    report(project), config('select = ["ALL"]')(project)), [],
     "KG109"),
    ("per-file-ignore-then-removed", [], lambda project: (
        config('select = ["KG109"]\n[per-file-ignores]\n"*.cu" = ["KG109"]')(project), report(project),
        config('select = ["KG109"]')(project)), [], "KG109"),
    ("extend-select-on-cli", [], config('select = ["KG103"]'), ["--extend-select", "KG109"], "KG109"),
    ("ignore-on-cli", [], nothing, ["--ignore", "KG109", "--extend-select", "KG103"], None),
    ("severity-raised", [], config('select = ["KG109"]\n[severity]\nKG109 = "error"'), [], "KG109"),
    ("sass-then-not", ["--sass", "--select", "KG103"], nothing, ["--select", "KG103"], None),
    ("not-then-sass", ["--select", "KG103"], nothing, ["--sass", "--select", "KG103"], None),
    ("sass-selected-by-name", ["--select", "spill"], nothing, ["--select", "spill,local-memory-in-loop"], "KG109"),
    ("one-target-then-both", ["--select", "KG103", "--target", "sm_90a"], nothing, ["--select", "KG109"], "KG109"),
]


@pytest.mark.parametrize("first,change,warm,finds", [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_a_warm_run_reads_what_its_selection_reads(tmp_path: Path, first: list[str], change: Callable[[Path], None],
                                                   warm: list[str], finds: str | None) -> None:
    project = copy_project(LOCAL, tmp_path)
    report(project, *first)
    change(project)
    findings, sass, _code = same_as_cold(project, *warm)
    if finds is not None:
        assert (finds, "histogram_local") in {(code, kernel.split(":")[-1]) for code, kernel in findings}
        assert sass[("histogram_local", "sm_120a")] is not None


def test_the_audit_after_a_check_that_read_no_sass(tmp_path: Path) -> None:
    """An audit after a check that selected no SASS rule: the audit shows every kernel's SASS all the same."""
    project = copy_project(LOCAL, tmp_path)
    report(project, "--select", "KG103")
    run = kgate("audit", "-o", str(tmp_path / "audit"), cwd=project)
    assert run.code == 0, run.stderr
    text = (tmp_path / "audit" / "report.md").read_text()
    assert "LDL" in text and "histogram_shared" in text


def test_two_checks_at_once_with_different_selections(tmp_path: Path) -> None:
    """Two processes on a cold cache, one selecting no SASS rule and one local-memory-in-loop: each reports what a
    run of its own without the cache does, and a warm run after them too."""
    project = copy_project(LOCAL, tmp_path)
    args = [["--select", "KG103"], ["--select", "KG109"]]
    runs = [subprocess.Popen([sys.executable, "-m", "kgate", "check", "--format", "json", *a], cwd=project,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for a in args]
    outputs = [run.communicate(timeout=600)[0] for run in runs]
    for out, a in zip(outputs, args):
        data = json.loads(out)
        cold = report(project, *a, "--no-cache")
        assert {(f["code"], f.get("kernel") or "") for f in data["findings"]} == cold[0]
        assert {(k["kernel"], k["target"]): k["sass"] is not None for k in data["kernels"]} == {
            key: value is not None for key, value in cold[1].items()}
    same_as_cold(project, "--select", "KG109,KG103")


def test_load_width_selected_on_a_warm_cache(tmp_path: Path) -> None:
    """KG110 selected on a cache that a run without it filled (the Triton and CUDA kernels of its folder)."""
    project = copy_project("rules/KG110", tmp_path)
    report(project, "--select", "KG103")
    findings, _sass, _code = same_as_cold(project, "--select", "KG110")
    assert {code for code, _kernel in findings} == {"KG110"}


def _git(repo: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com"}
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)


@pytest.mark.parametrize("how", [lambda p: p.write_bytes(b"garbage"), lambda p: p.write_bytes(b""), Path.unlink],
                         ids=["garbage", "emptied", "deleted"])
def test_a_diff_after_the_base_cubins_were_damaged(tmp_path: Path, how: Callable[[Path], None]) -> None:
    """The base's cubins in the cache damaged after a check, then a comment added to the source: `kgate diff HEAD
    --require-identical` compiles the base again rather than call every variant unknown on every run."""
    project = copy_project(LOCAL, tmp_path)
    (project / ".gitignore").write_text(".kgate-cache/\n")
    _git(project, "init", "-q")
    _git(project, "add", "-A")
    _git(project, "commit", "-q", "-m", "kernels")
    report(project, "--select", "KG103")
    damage("kernel.cubin.", how)(project)
    with (project / "local_memory_in_loop.cu").open("a") as source:
        source.write("// the same code\n")
    for _run in range(2):
        run = kgate("diff", "HEAD", "--require-identical", cwd=project)
        assert run.code == 0 and "SASS identical" in run.stdout, run.stdout + run.stderr
