"""Held-out configuration cases: a selection that leaves `kgate lint` no rule to run, and a `per-file-ignores`
pattern spelled from the configuration's folder (`./tests/...`). Each is a project run as a user runs it."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import kgate

from kgate import api

INTERPRET = "import os\nos.environ['TRITON_INTERPRET'] = '1'\n"


def _project(root: Path, config: str) -> Path:
    (root / "kgate.toml").write_text(config)
    (root / "tests").mkdir()
    (root / "tests" / "test_a.py").write_text(INTERPRET)
    return root


@pytest.mark.parametrize(("config", "args"), [
    ('ignore = ["KG"]\n', ()),  # every rule by its prefix
    ("", ("--select", "KG101")),  # a compiled rule alone: `kgate check` runs it
    ("", ("--select", "KG102,KG103")),
    ('select = ["KG2"]\n', ("--ignore", "KG2")),
    ("", ("--select", "KG004")),  # what reads every file, and nothing to read it for
])
def test_a_lint_whose_selection_leaves_no_source_rule_is_an_error(tmp_path: Path, config: str,
                                                                  args: tuple[str, ...]) -> None:
    project = _project(tmp_path, config)
    for extra in ((), ("--fix",), ("--add-ignore",)):
        run = kgate("lint", *args, *extra, cwd=project)
        assert run.code == 2, run.stdout + run.stderr
        assert "leaves no source rule" in run.stderr and "passed" not in run.stdout
    assert (project / "tests" / "test_a.py").read_text() == INTERPRET


def test_the_api_lint_refuses_a_selection_that_leaves_no_source_rule(tmp_path: Path) -> None:
    project = _project(tmp_path, "")
    with pytest.raises(api.KgateError, match="leaves no source rule"):
        api.lint(project=project, select=["KG101"])
    assert not api.lint(project=project, select=["KG203"]).passed


def test_a_selection_with_one_source_rule_still_lints(tmp_path: Path) -> None:
    project = _project(tmp_path, 'ignore = ["KG1", "KG3"]\n')
    run = kgate("lint", "--select", "KG2", cwd=project)
    assert run.code == 1 and "KG203" in run.stdout, run.stdout + run.stderr


@pytest.mark.parametrize("pattern", ["./tests/test_a.py", "./tests/*.py", "././tests/", ".//tests/test_a.py"])
def test_a_per_file_ignore_spelled_from_the_configurations_folder_matches(tmp_path: Path, pattern: str) -> None:
    project = _project(tmp_path, f'[per-file-ignores]\n"{pattern}" = ["KG203"]\n')
    run = kgate("lint", cwd=project)
    assert run.code == 0, run.stdout + run.stderr
    (project / "kgate.toml").write_text(f'[per-file-ignores]\n"{pattern.replace("tests", "other")}" = ["KG203"]\n')
    assert kgate("lint", cwd=project).code == 1


@pytest.mark.parametrize(("key", "pattern", "code"), [
    ("extend-exclude", "./tests", 0), ("extend-exclude", "./tests/", 0), ("extend-exclude", "./tests/*.py", 0),
    ("exclude", "./tests", 0),
    # From the folder: a name alone, led by `./`, is the file at the top, not one of that name at any depth.
    ("extend-exclude", "./test_a.py", 1), ("extend-exclude", "test_a.py", 0),
])
def test_an_exclusion_spelled_from_the_configurations_folder_excludes(tmp_path: Path, key: str, pattern: str,
                                                                      code: int) -> None:
    project = _project(tmp_path, f'{key} = ["{pattern}"]\n')
    run = kgate("lint", cwd=project)
    assert run.code == code, run.stdout + run.stderr


def test_a_per_file_ignore_of_a_name_from_the_folder_is_the_file_at_the_top(tmp_path: Path) -> None:
    project = _project(tmp_path, '[per-file-ignores]\n"./test_a.py" = ["KG203"]\n')
    assert kgate("lint", cwd=project).code == 1
    (project / "test_a.py").write_text(INTERPRET)
    run = kgate("lint", cwd=project)
    assert run.code == 1 and "tests/test_a.py" in run.stdout and "\ntest_a.py" not in "\n" + run.stdout


@pytest.mark.parametrize(("tox", "line", "fixed"), [
    ("[testenv]\nsetenv =\n    TRITON_INTERPRET=1\n    OTHER=2\n", 3, "[testenv]\nsetenv =\n    OTHER=2\n"),
    ("[tox]\nenvlist = py312\n[testenv]\nset_env = TRITON_INTERPRET = true\n", 4,
     "[tox]\nenvlist = py312\n[testenv]\nset_env = \n"),
])
def test_tox_running_the_suite_under_the_interpreter_is_reported_and_fixed(tmp_path: Path, tox: str, line: int,
                                                                          fixed: str) -> None:
    """tox's set_env of [testenv] is the environment every tox run of the suite has, as pytest-env's `env` is."""
    (tmp_path / "kgate.toml").write_text("")
    (tmp_path / "tox.ini").write_text(tox)
    run = kgate("lint", cwd=tmp_path)
    assert run.code == 1 and f"tox.ini:{line}:" in run.stdout and "KG203" in run.stdout, run.stdout + run.stderr
    assert kgate("lint", "--fix", "--unsafe-fixes", cwd=tmp_path).code == 0
    assert (tmp_path / "tox.ini").read_text() == fixed


@pytest.mark.parametrize("tox", ["[testenv]\nsetenv =\n    TRITON_INTERPRET=0\n", "[tox]\nsetenv = TRITON_INTERPRET=1\n",
                                 "[testenv]\ndeps = TRITON_INTERPRET=1\n", "[testenv]\n# setenv = TRITON_INTERPRET=1\n",
                                 "[testenv:interp]\nsetenv = TRITON_INTERPRET=1\n"])  # a job of its own
def test_tox_settings_that_leave_the_interpreter_off_pass(tmp_path: Path, tox: str) -> None:
    (tmp_path / "kgate.toml").write_text("")
    (tmp_path / "tox.ini").write_text(tox)
    run = kgate("lint", cwd=tmp_path)
    assert run.code == 0, run.stdout + run.stderr


@pytest.mark.parametrize(("name", "config", "header"), [
    ("kgate.toml", 'targets = ["sm_120a"]\n\n[cuda]\nsources = ["a.cu"]\n', "cuda"),
    ("kgate.toml", 'targets = ["sm_120a"]\n\n[triton]\nkernel = "ops:k"\n', "triton"),
    ("pyproject.toml", '[tool.kgate]\ntargets = ["sm_120a"]\n\n[tool.kgate.cuda]\nsources = ["a.cu"]\n',
     "tool.kgate.cuda"),
])
def test_a_table_written_for_an_array_of_tables_says_how_to_write_it(tmp_path: Path, name: str, config: str,
                                                                     header: str) -> None:
    """`[cuda]` where `[[cuda]]` is meant (the first thing a new user types) names the header to write."""
    (tmp_path / name).write_text(config)
    run = kgate("check", cwd=tmp_path)
    assert run.code == 2, run.stdout + run.stderr
    assert f"must be an array of tables: write [[{header}]], one table each, not [{header}]" in run.stderr, run.stderr
