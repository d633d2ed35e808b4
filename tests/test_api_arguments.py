"""kgate.api refuses an argument the command line's parser would refuse, as `api.KgateError`, before anything runs:
a run that gated something other than what was asked (the enclosing project, every kernel, no rule) never
passes. Every case here is refused before a configuration is read or a compiler starts."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest

from kgate import api
from kgate.api import arguments
from kgate.cli import build_parser

PROJECT = 'targets = ["sm_120a"]\npython-path = ["."]\n'


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "kgate.toml").write_text(PROJECT)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "file.txt").write_text("")
    return tmp_path


# (function, positional arguments, keyword arguments, the message's words); {p} is the project folder.
CASES: list[tuple[str, tuple[Any, ...], dict[str, Any], str]] = [
    ("check", (), {"language": "Triton"}, "language: must be one of 'triton', 'cute', 'cuda' or None, not 'Triton'; "
                                         "did you mean 'triton'?"),
    ("check", (), {"language": ""}, "language: must be one of"),
    ("check", (), {"project": "{p}/missing"}, "project: {p}/missing: no such folder"),
    ("check", (), {"project": "{p}/sub/file.txt"}, "project: {p}/sub/file.txt: not a folder"),
    ("check", ("{p}/missing",), {}, "project: {p}/missing: no such folder"),
    ("check", (), {"project": 3}, "project: must be a folder (a str or a Path), not int 3"),
    ("check", (), {"project": ""}, "project: must be a folder"),
    ("check", (), {"jobs": "2"}, "jobs: must be a positive integer, not '2'"),
    ("check", (), {"jobs": -3}, "jobs: must be a positive integer, not -3"),
    ("check", (), {"jobs": 0}, "jobs: must be a positive integer, not 0"),
    ("check", (), {"jobs": True}, "jobs: must be a positive integer, not True"),
    ("check", (), {"jobs": 2.0}, "jobs: must be a positive integer, not 2.0"),
    ("check", (), {"fail_on": "bogus"}, "fail_on: must be one of 'error', 'warning', 'note' or None, not 'bogus'"),
    ("check", (), {"fail_on": "off"}, "fail_on: must be one of"),
    ("check", (), {"targets": "sm_120a"}, "targets: must be a list of targets such as 'sm_120a', not the single "
                                          "str 'sm_120a' (give ['sm_120a'])"),
    ("check", (), {"targets": [120]}, "targets: must be a list of targets such as 'sm_120a'; int 120 is not one"),
    ("check", (), {"targets": [""]}, "targets: must be a list of targets"),
    ("check", (), {"targets": {"sm_120a"}}, "targets: must be a list of targets such as 'sm_120a', not set"),
    ("check", (), {"kernels": "mul*"}, "kernels: must be a list of kernel globs such as 'matmul*', not the single "
                                       "str 'mul*'"),
    ("check", (), {"kernels": [None]}, "kernels: must be a list of kernel globs such as 'matmul*'; None None"),
    ("check", (), {"select": [1]}, "select: must be a list of rule codes; int 1 is not one"),
    ("check", (), {"ignore": 7}, "ignore: must be a list of rule codes, not int 7"),
    ("check", (), {"sass": "yes"}, "sass: must be True or False, not 'yes'"),
    ("check", (), {"cache": None}, "cache: must be True or False, not None"),
    ("check", (), {"baseline": 1}, "baseline: must be True or False, not 1"),
    ("check", (), {"progress": "bar"}, "progress: must be a function (done, total, label), not 'bar'"),
    ("check", (), {"config": 3}, "config: must be a path (a str or a Path), not int 3"),
    ("check", (), {"target": ["sm_120a"]}, "unexpected keyword argument 'target'; did you mean 'targets'?"),
    ("check", ("{p}", "extra"), {}, "too many positional arguments"),
    ("lint", ("tests/test_a.py",), {}, "paths: must be a list of files or folders, not the single str "
                                       "'tests/test_a.py'"),
    ("lint", (Path("tests/test_a.py"),), {}, "paths: must be a list of files or folders, not the single PosixPath"),
    ("lint", ([None],), {}, "paths: must be a list of files or folders; None None is not one"),
    ("lint", ([""],), {}, "paths: must be a list of files or folders; str '' is not one"),
    ("lint", (), {"project": "{p}/missing"}, "project: {p}/missing: no such folder"),
    ("lint", (), {"fail_on": "Error"}, "fail_on: must be one of 'error', 'warning', 'note' or None, not 'Error'; "
                                       "did you mean 'error'?"),
    ("lint", (), {"force_exclude": "no"}, "force_exclude: must be True or False, not 'no'"),
    ("lint", (), {"baseline": None}, "baseline: must be True or False, not None"),
    ("lint", (), {"selct": ["KG1"]}, "unexpected keyword argument 'selct'; did you mean 'select'?"),
    ("lint", (), {"jobs": 2}, "unexpected keyword argument 'jobs'"),
    ("compile_kernel", (None,), {}, "kernel: must be the @triton.jit function or 'package.module:function', not None"),
    ("compile_kernel", ("ops",), {}, "kernel: must be the kernel itself or its name as 'package.module:function', "
                                     "not 'ops'"),
    ("compile_kernel", ("ops:k",), {"target": ["sm_120a"]}, "target: must be a target such as 'sm_120a'"),
    ("compile_kernel", ("ops:k",), {"project": "{p}/missing"}, "project: {p}/missing: no such folder"),
    ("compile_kernel", ("ops:k",), {"sass": "true"}, "sass: must be True or False, not 'true'"),
    ("compile_variants", ("ops:k",), {"cache": 0}, "cache: must be True or False, not 0"),
    ("compile_variants", (), {}, "missing a required argument: 'kernel'"),
]


def _filled(value: Any, root: Path) -> Any:
    return value.replace("{p}", str(root)) if isinstance(value, str) else value


@pytest.mark.parametrize(("function", "args", "kwargs", "words"), CASES,
                         ids=[f"{c[0]}-{'-'.join(map(str, [*c[1], *c[2].items()]))}"[:60] for c in CASES])
def test_an_argument_the_cli_would_refuse_raises_kgate_error(project: Path, monkeypatch: pytest.MonkeyPatch,
                                                            function: str, args: tuple[Any, ...],
                                                            kwargs: dict[str, Any], words: str) -> None:
    monkeypatch.chdir(project)
    called = [_filled(a, project) for a in args]
    named = {k: _filled(v, project) for k, v in kwargs.items()}
    with pytest.raises(api.KgateError) as raised:
        getattr(api, function)(*called, **named)
    assert str(raised.value).startswith(f"{function}(): ")
    assert _filled(words, project) in str(raised.value)
    # Python code that expects a bad argument to be a TypeError or a ValueError still catches it.
    assert isinstance(raised.value, (TypeError, ValueError))


def test_every_argument_of_every_api_function_has_a_rule() -> None:
    functions = [api.check, api.lint, api.compile_kernel, api.compile_variants]
    for function in functions:
        for name in inspect.signature(function).parameters:
            assert name in arguments.ACCEPTS or name in arguments.CHECKED_DOWNSTREAM, (function.__name__, name)


def test_the_api_takes_the_cli_parsers_choices() -> None:
    check = build_parser("check")._subparsers._group_actions[0].choices["check"]  # type: ignore[union-attr]
    choices = {action.dest: tuple(action.choices) for action in check._actions if action.choices}
    assert choices["language"] == ("triton", "cute", "cuda") and choices["fail_on"] == ("error", "warning", "note")
    for name in ("language", "fail_on"):
        for value in choices[name]:
            assert arguments.refusal("check", name, value) is None
        assert arguments.refusal("check", name, choices[name][0].upper()) is not None


@pytest.mark.parametrize("value", [(), [], ("sm_120a",), ["sm_120a", "sm_100a"]])
def test_lists_and_tuples_and_empty_ones_are_taken(value: Any) -> None:
    assert arguments.refusal("check", "targets", value) is None
    assert arguments.refusal("check", "kernels", value) is None


def test_paths_as_str_or_path_and_codes_as_the_clis_comma_string_are_taken(project: Path) -> None:
    assert arguments.refusal("lint", "paths", [Path("a.py"), "b.py"]) is None
    assert arguments.refusal("lint", "project", Path(project)) is None
    assert arguments.refusal("lint", "select", "KG1,spill") is None
    assert arguments.refusal("check", "fail_on", api.Severity.WARNING) is None


def test_none_for_a_list_is_its_default(project: Path) -> None:
    (project / "ops.py").write_text("x = 1\n")
    result = api.lint(None, project=project, cache=False)
    assert result.passed and result.files
    # Nothing registered: the check is refused as a check of nothing, not a TypeError on None.
    with pytest.raises(api.KgateError, match="nothing to gate|no kernel|register"):
        api.check(project, targets=None, kernels=None, cache=False)


def test_the_api_page_says_what_every_argument_accepts() -> None:
    from conftest import REPO

    page = (REPO / "docs" / "api.md").read_text()
    table = page[page.index("| argument | accepts |"):]
    for name in arguments.ACCEPTS:
        assert f"`{name}`" in table.split("\n\n", 1)[0], name


@pytest.mark.parametrize(("argument", "value"), [("select", b"KG201"), ("paths", b"pkg/ops.py")])
def test_a_single_value_that_no_list_would_take_is_not_advised_in_one(argument: str, value: Any) -> None:
    refused = arguments.refusal("lint", argument, value)
    assert refused is not None and "give [" not in str(refused)
    assert arguments.refusal("lint", argument, [value]) is not None  # what the advice would have given


def test_a_single_value_that_a_list_would_take_is_advised_in_one() -> None:
    refused = arguments.refusal("check", "targets", "sm_120a")
    assert refused is not None and "(give ['sm_120a'])" in str(refused)
    assert arguments.refusal("check", "targets", ["sm_120a"]) is None
