"""What the rules read of a whole project is read once per run, before the files are split over forked workers.

The import index of the project's Python files (KG108 and KG201 follow launchers into the modules that import them)
and the reading of its C++ files for the macros and functions that read the last error (KG302) were read by every
worker for itself; they are read by the run before it forks, and the workers share them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_lint_cache import lint, project, verdict

from kgate.collect import cuda_project, pyimports
from kgate.evaluate import source as engine

# The check macro is the project's own, defined in a header: a launch file's own text does not settle its launch.
MACRO = "#define MY_CHECK() do { if (cudaGetLastError() != cudaSuccess) abort(); } while (0)\n"
LAUNCH = "__global__ void k{index}(float* x) {{}}\nvoid run{index}(float* x) {{\n  k{index}<<<1, 32>>>(x);\n  MY_CHECK();\n}}\n"


def _tree(root: Path) -> Path:
    project(root, files=engine.PARALLEL_MIN_FILES)
    (root / "csrc").mkdir()
    (root / "csrc" / "check.h").write_text(MACRO)
    for index in range(engine.PARALLEL_MIN_FILES // 2):
        (root / "csrc" / f"launch{index}.cu").write_text(LAUNCH.format(index=index))
    return root


def test_a_forked_run_reads_the_projects_import_index_and_cpp_files_once(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    root = _tree(tmp_path)
    serial = lint(root, use_cache=False, jobs=1)
    monkeypatch.delenv("PRE_COMMIT", raising=False)
    reads = tmp_path / "reads.txt"  # the workers' reads, by process: a forked worker cannot hand back a list

    def noted(what: str, real):  # type: ignore[no-untyped-def]
        def read(*args):  # type: ignore[no-untyped-def]
            with open(reads, "a") as out:
                out.write(f"{what} {os.getpid()}\n")
            return real(*args)
        return read

    monkeypatch.setattr(pyimports.Index, "_read", noted("index", pyimports.Index._read))
    monkeypatch.setattr(cuda_project.Project, "_readers", noted("cpp", cuda_project.Project._readers))
    forks = []
    real_fork = os.fork
    monkeypatch.setattr(os, "fork", lambda: forks.append(1) or real_fork())
    parallel = lint(root, use_cache=False, jobs=2)
    assert len(forks) == 1
    assert verdict(parallel) == verdict(serial)
    assert sorted(reads.read_text().splitlines()) == [f"cpp {os.getpid()}", f"index {os.getpid()}"]
