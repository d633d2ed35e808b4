"""Held-out calls of kgate.api and the `kgate_compile` fixture as a program makes them: values the argument table
passes but the run refuses (an empty selection, unknown codes and targets, a glob that matches nothing, a language
with nothing to gate, a progress function of the wrong shape, registration fields of the wrong type or missing a
constexpr), calls in a thread, from a script with no main guard, with the project as a `Path`, a `str` or a
relative path while the working folder is another project. Each is a result or an `api.KgateError` that says what
is wrong, before anything runs where it can be; never a wrong message, a traceback or another project's verdict."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from kgate import api

OPS = '''\
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + offs, tl.load(x + offs, mask=offs < n), mask=offs < n)
'''
SIGNATURE = {"x": "*fp32", "y": "*fp32", "n": "i32"}
REGISTERED = ('\n[[triton]]\nkernel = "ops:copy_kernel"\nsignature = { x = "*fp32", y = "*fp32", n = "i32" }\n'
              'constexprs = { BLOCK = 128 }\n')


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "ops.py").write_text(OPS)
    (root / "kgate.toml").write_text('targets = ["sm_120a"]\npython-path = ["."]\n' + REGISTERED)
    (root / "other").mkdir()
    (root / "other" / "kgate.toml").write_text('targets = ["sm_90a"]\n')
    return root


# (function, keywords; "{p}" is the project) -> the words of the KgateError
REFUSED: list[tuple[str, dict[str, Any], str]] = [
    ("lint", {"config": ""}, "config: must be a path (a str or a Path), not str ''"),
    ("check", {"config": ""}, "config: must be a path (a str or a Path), not str ''"),
    ("lint", {"config": "{p}/missing.toml"}, "configuration file not found"),
    ("lint", {"config": "{p}"}, "is a folder: name its kgate.toml or pyproject.toml"),
    ("lint", {"select": ""}, "names no rule"),
    ("lint", {"select": ",,"}, "names no rule"),
    ("lint", {"select": ["KG999"]}, "unknown rule 'KG999'"),
    ("lint", {"ignore": ["KGX"]}, "unknown rule 'KGX'"),
    ("lint", {"paths": ["missing.py"]}, "missing.py: no such file or directory"),
    ("check", {"targets": ["sm_999"]}, "sm_999: unknown target"),
    ("check", {"kernels": ["nomatch*"]}, "'nomatch*': no kernel of the project matches"),
    ("check", {"language": "cute"}, "nothing to gate: no CuTe DSL kernel is registered or captured"),
    ("check", {"language": "cuda"}, "nothing to gate: the configuration lists no CUDA sources"),
    # A progress function kgate cannot call with (done, total, label): refused before anything compiles, not a
    # TypeError once the first variant is done.
    ("check", {"progress": lambda: None}, "progress: must be a function (done, total, label), not one that cannot"),
    ("check", {"progress": lambda done, total: None}, "progress: must be a function (done, total, label)"),
    ("check", {"progress": len}, "progress: must be a function (done, total, label)"),
]


@pytest.mark.parametrize("function,keywords,words", REFUSED, ids=[f"{i}-{f}" for i, (f, _k, _w) in enumerate(REFUSED)])
def test_values_the_run_refuses_are_a_kgate_error(project: Path, function: str, keywords: dict[str, Any],
                                                    words: str) -> None:
    given = {k: v.replace("{p}", str(project)) if isinstance(v, str) else v for k, v in keywords.items()}
    with pytest.raises(api.KgateError, match=None) as raised:
        getattr(api, function)(project=str(project), **given)
    assert words in str(raised.value), raised.value


@pytest.mark.parametrize("progress", [lambda *a: None, lambda done, total, label, more=1: None, print])
def test_a_progress_function_that_takes_three_arguments_is_taken(project: Path, progress: Any) -> None:
    assert api.check(project=project, progress=progress, jobs=1).passed


# compile_kernel's fields -> the words of the KgateError (a mistake in the fields, not a compile error)
FIELDS: list[tuple[dict[str, Any], str]] = [
    ({"signature": "x", "constexprs": {"BLOCK": 64}}, "signature: must be a table, not a string"),
    ({"signature": SIGNATURE, "constexprs": {"BLOCK": 64}, "num_warps": "4"}, "num_warps: must be a positive integer"),
    ({"signature": SIGNATURE, "constexprs": [64]}, "constexprs: must be a table, not an array"),
    ({"signatur": SIGNATURE}, "signatur: unknown key (did you mean 'signature'?)"),
    ({"signature": SIGNATURE, "constexprs": {"BLOCK": 64}, "target": "sm_999"}, "sm_999: unknown target"),
    # No value for a constexpr: said as such, not "nothing compiled (its registration names other targets)".
    ({"signature": SIGNATURE}, "ops:copy_kernel: constexpr parameter(s) without a value: BLOCK"),
    ({"signature": SIGNATURE, "variants": [{"num_warps": 4}, {"num_warps": 8}]},  # compile_kernel's one variant
     "the fields describe several variants"),
]


@pytest.mark.parametrize("fields,words", FIELDS, ids=[str(i) for i in range(len(FIELDS))])
def test_compile_kernel_fields_of_the_wrong_kind_are_a_kgate_error(project: Path, fields: dict[str, Any],
                                                                  words: str) -> None:
    with pytest.raises(api.KgateError) as raised:
        api.compile_kernel("ops:copy_kernel", project=project, **fields)
    assert words in str(raised.value) and not isinstance(raised.value, api.CompileError), raised.value
    assert "names other targets" not in str(raised.value)


def test_compile_kernel_with_another_configuration_compiles_for_its_first_target(project: Path) -> None:
    config = project / "other" / "kgate.toml"
    with pytest.raises(api.KgateError, match="cannot find module ops under python-path") as raised:
        api.compile_kernel("ops:copy_kernel", project=project, config=config, signature=SIGNATURE,
                           constexprs={"BLOCK": 64})  # its folder is `other`: no ops.py there
    assert "names other targets" not in str(raised.value)
    (project / "other" / "ops.py").write_text(OPS)
    facts = api.compile_kernel("ops:copy_kernel", project=project, config=config, signature=SIGNATURE,
                               constexprs={"BLOCK": 64})
    assert facts.target == "sm_90a" and facts.spills == 0


def test_the_project_as_path_str_or_relative_from_another_project_gives_one_verdict(project: Path,
                                                                                   monkeypatch: pytest.MonkeyPatch
                                                                                   ) -> None:
    monkeypatch.chdir(project / "other")  # a project of its own, for sm_90a only
    results = [api.check(project=given, jobs=1) for given in (project, str(project), "..")]
    assert {tuple((k.kernel, k.target) for k in r.kernels) for r in results} == {(("ops:copy_kernel", "sm_120a"),)}
    assert all(r.passed for r in results)
    monkeypatch.chdir(project)
    assert api.lint(project="other").files == api.lint(project=project / "other").files


def test_check_and_lint_in_threads(project: Path) -> None:
    found: dict[str, Any] = {}

    def call(name: str) -> None:
        try:
            found[name] = getattr(api, name)(project=project, **({"jobs": 1} if name == "check" else {}))
        except BaseException as exc:  # noqa: BLE001 - what the thread raised is the test's result
            found[name] = exc

    threads = [threading.Thread(target=call, args=(name,)) for name in ("check", "lint")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    assert isinstance(found["check"], api.CheckResult) and found["check"].passed, found
    assert isinstance(found["lint"], api.LintResult) and found["lint"].passed, found


def test_a_progress_function_that_raises_stops_the_run_with_its_own_error(project: Path) -> None:
    def fail(done: int, total: int, label: str) -> None:
        raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        api.check(project=project, progress=fail, cache=False, jobs=1)


def test_a_script_without_a_main_guard_is_not_run_again_in_the_compile_workers(project: Path) -> None:
    """multiprocessing runs the main module again in each child: kgate's compile workers start without it, so a
    build script that calls the API at its top level gets the verdict of its kernels, not a worker that died."""
    script = project / "gate.py"
    script.write_text(textwrap.dedent(f'''\
        from kgate import api
        print("RAN")
        result = api.check(project={str(project)!r}, cache=False, jobs=2)
        print("RESULT", result.exit_code, [f.code for f in result.findings])
    '''))
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    run = subprocess.run([sys.executable, str(script)], check=False, cwd=project, env=env, capture_output=True, text=True,
                         timeout=600)
    assert "RESULT 0 []" in run.stdout and run.stdout.count("RAN") == 1, run.stdout + run.stderr
    assert "bootstrapping phase" not in run.stderr, run.stderr


FIXTURE_TESTS = '''\
import pytest
from kgate import api
import ops

SIGNATURE = {"x": "*fp32", "y": "*fp32", "n": "i32"}


def test_compiles(kgate_compile):
    facts = kgate_compile(ops.copy_kernel, signature=SIGNATURE, constexprs={"BLOCK": 64}, target="sm_120a")
    assert facts.spills == 0 and facts.kernel == "ops:copy_kernel"


def test_by_name(kgate_compile):
    assert kgate_compile("ops:copy_kernel", signature=SIGNATURE, constexprs={"BLOCK": 32}).target == "sm_120a"


def test_missing_constexpr(kgate_compile):
    with pytest.raises(api.KgateError, match="without a value: BLOCK"):
        kgate_compile(ops.copy_kernel, signature=SIGNATURE)


def test_wrong_type(kgate_compile):
    with pytest.raises(api.KgateError, match="num_stages: must be"):
        kgate_compile(ops.copy_kernel, signature=SIGNATURE, constexprs={"BLOCK": 64}, num_stages=[2])
'''


def test_the_pytest_fixture_compiles_and_refuses_as_the_api_does(project: Path) -> None:
    (project / "tests").mkdir()
    (project / "tests" / "test_k.py").write_text(FIXTURE_TESTS)
    (project / "conftest.py").write_text("import sys, pathlib\nsys.path.insert(0, str(pathlib.Path(__file__).parent))\n")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                          "tests/test_k.py"], check=False, cwd=project, env=env, capture_output=True, text=True,
                         timeout=600)
    assert "4 passed" in run.stdout, run.stdout + run.stderr


@pytest.mark.parametrize("function", ["lint", "check"])
def test_a_call_from_a_working_folder_that_was_deleted_is_a_kgate_error(project: Path, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch,
                                                                      function: str) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    with pytest.raises(api.KgateError, match="the working folder cannot be read"):
        getattr(api, function)(project=project)


@pytest.mark.parametrize("command", ["lint", "check --config {p}/kgate.toml", "capture -- true"])
def test_the_command_line_in_a_working_folder_that_was_deleted_says_so(project: Path, tmp_path: Path,
                                                                       command: str) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    line = f"cd {gone} && rmdir {gone} && {sys.executable} -m kgate {command.format(p=project)}"
    run = subprocess.run(["sh", "-c", line], check=False, capture_output=True, text=True, timeout=300)
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert run.stderr.startswith("kgate: error: the working folder cannot be read"), run.stderr


def test_a_project_reached_through_a_link_is_the_project(project: Path, tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(project)
    result = api.check(project=link, jobs=1)
    assert result.passed and [k.kernel for k in result.kernels] == ["ops:copy_kernel"]


@pytest.mark.parametrize("name,text,words", [
    ("pyproject.toml", "[project]\nname = 'x'\n", "no [tool.kgate] table"),
    ("settings.toml", "[project]\nname = 'x'\n", "project: unknown key"),
])
def test_a_configuration_file_that_is_not_kgates_is_a_kgate_error(project: Path, name: str, text: str,
                                                                 words: str) -> None:
    (project / "other" / name).write_text(text)
    with pytest.raises(api.KgateError, match=words.replace("[", r"\[").replace("]", r"\]")):
        api.lint(project=project, config=project / "other" / name)


def test_compile_kernel_from_three_threads_at_once(project: Path) -> None:
    found: list[Any] = []

    def compile_one(block: int) -> None:
        try:
            found.append(api.compile_kernel("ops:copy_kernel", project=project, signature=SIGNATURE,
                                            constexprs={"BLOCK": block}, cache=False).constexprs["BLOCK"])
        except BaseException as exc:  # noqa: BLE001 - what the thread raised is the test's result
            found.append(exc)

    threads = [threading.Thread(target=compile_one, args=(block,)) for block in (32, 64, 128)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    assert sorted(found) == [32, 64, 128], found
