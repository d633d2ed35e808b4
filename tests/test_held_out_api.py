"""Held-out cases for kgate.api's argument table: what is taken (empty lists, tuples, PurePaths, None for a
default) and what is refused before anything runs (generators, bytes paths, numpy integers, bools as counts,
keywords one letter off), each with the function, the argument and what it takes."""

from __future__ import annotations

import pathlib
from pathlib import Path
from typing import Any

import pytest

from kgate import api
from kgate.api import arguments


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\n')
    (tmp_path / "ops.py").write_text("x = 1\n")
    return tmp_path


REFUSED: list[tuple[str, dict[str, Any], str]] = [
    ("check", {"targets": (t for t in ["sm_120a"])}, "targets: must be a list of targets such as 'sm_120a', not generator"),
    ("check", {"kernels": iter(["k*"])}, "kernels: must be a list of kernel globs"),
    ("check", {"kernels": [" "]}, "kernels: must be a list of kernel globs such as 'matmul*'; str ' ' is not one"),
    ("check", {"targets": [b"sm_120a"]}, "targets: must be a list of targets such as 'sm_120a'; bytes"),
    ("check", {"jobs": False}, "jobs: must be a positive integer, not False"),
    ("check", {"jobs": 1.5}, "jobs: must be a positive integer"),
    ("check", {"jobs": "all"}, "jobs: must be a positive integer"),
    ("check", {"select": True}, "select: must be a list of rule codes, not bool True"),
    ("check", {"select": {"KG1": 1}}, "select: must be a list of rule codes, not dict"),
    ("check", {"fail_on": 2}, "fail_on: must be one of 'error', 'warning', 'note' or None, not 2"),
    ("check", {"fail_on": "warn"}, "fail_on: must be one of"),
    ("check", {"language": "CUDA"}, "did you mean 'cuda'?"),
    ("check", {"progress": 3}, "progress: must be a function"),
    ("check", {"ignor": ["KG1"]}, "unexpected keyword argument 'ignor'; did you mean 'ignore'?"),
    ("check", {"extend_selct": ["KG1"]}, "did you mean 'extend_select'?"),
    ("check", {"progres": None}, "did you mean 'progress'?"),
    ("check", {"kernel": "ops:k"}, "unexpected keyword argument 'kernel'; did you mean 'kernels'?"),
    ("lint", {"project": b"/"}, "project: must be a folder (a str or a Path), not bytes"),
    ("lint", {"paths": [b"ops.py"]}, "paths: must be a list of files or folders; bytes b'ops.py' is not one"),
    ("lint", {"paths": pathlib.PurePosixPath("ops.py")}, "paths: must be a list of files or folders, not the single"),
    ("lint", {"paths": {"ops.py"}}, "paths: must be a list of files or folders, not set"),
    ("lint", {"config": b"kgate.toml"}, "config: must be a path (a str or a Path), not bytes"),
    ("lint", {"cache": "false"}, "cache: must be True or False, not 'false'"),
    ("lint", {"targets": ["sm_120a"]}, "unexpected keyword argument 'targets'"),
    ("compile_kernel", {"kernel": "ops:k", "target": ""}, "target: must be a target such as 'sm_120a'"),
    ("compile_kernel", {"kernel": 3.0}, None),
]


@pytest.mark.parametrize(("function", "kwargs", "words"), REFUSED,
                         ids=[f"{f}-{'-'.join(map(str, k))}-{i}" for i, (f, k, _w) in enumerate(REFUSED)])
def test_refused_before_anything_runs(project: Path, monkeypatch: pytest.MonkeyPatch, function: str,
                                      kwargs: dict[str, Any], words: str | None) -> None:
    monkeypatch.chdir(project)
    with pytest.raises(api.KgateError) as raised:
        getattr(api, function)(**kwargs)
    assert str(raised.value).startswith(f"{function}(): ") or words is None
    if words is not None:
        assert words in str(raised.value)


def test_a_numpy_integer_is_not_a_count_of_workers() -> None:
    numpy = pytest.importorskip("numpy")
    assert "jobs: must be a positive integer" in str(arguments.refusal("check", "jobs", numpy.int64(2)))


@pytest.mark.parametrize(("name", "value"), [
    ("targets", ()), ("kernels", []), ("targets", None), ("fail_on", None), ("fail_on", api.Severity.NOTE),
    ("jobs", 10**6), ("jobs", 1), ("paths", [pathlib.PurePosixPath("ops.py")]), ("select", "KG1, KG2"),
    ("ignore", ()), ("language", None), ("progress", print), ("target", None),
])
def test_taken(name: str, value: Any) -> None:
    assert arguments.refusal("check", name, value) is None


def test_a_pure_path_project_and_paths_lint_as_the_same_strings_do(project: Path) -> None:
    as_pure = api.lint([pathlib.PurePosixPath("ops.py")], project=pathlib.PurePosixPath(project), cache=False)
    as_text = api.lint(["ops.py"], project=str(project), cache=False)
    assert as_pure.passed and as_pure.files == as_text.files == 1


def test_empty_select_strings_are_a_run_of_no_rule(project: Path) -> None:
    for value in ("", ",", " ", []):
        with pytest.raises(api.KgateError, match="names no rule"):
            api.lint(project=project, select=value, cache=False)
