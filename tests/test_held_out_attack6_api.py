"""`kgate.api.compile_kernel` given fields that describe several variants, and the errors of a registration's
fields, on inputs of a sixth attack.

`compile_kernel(..., variants=[...])` compiled every variant, then raised a plain `ValueError` (no
`api.KgateError`, which docs/api.md promises for every mistake in the arguments). It is refused before anything is
imported or compiled, as an `api.KgateError`. A mistake in the fields was reported as `kgate_compile on NAME`, the
pytest fixture's name, whichever function was called: it names the function now.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kgate import api

OPS = '''\
import os

import triton
import triton.language as tl

open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "imported.flag"), "w").close()


@triton.jit
def add(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + offs, tl.load(x + offs, mask=offs < n) + 1, mask=offs < n)
'''
SIGNATURE = {"x": "*fp32", "y": "*fp32", "n": "i32"}
pytest_plugins = ["pytester"]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\npython-path = ["."]\n')
    (tmp_path / "ops.py").write_text(OPS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "ops", raising=False)
    return tmp_path


@pytest.mark.parametrize("fields", [
    {"constexprs": {"BLOCK": 256}, "variants": [{"BLOCK": 512}]},
    {"constexprs": {"BLOCK": 256}, "args": [{"n": 1024}, {"n": 7}]},
])
def test_several_variants_are_refused_before_anything_is_compiled(project: Path, fields: dict) -> None:
    with pytest.raises(api.KgateError, match=r"^compile_kernel\(\): ops:add: .*use compile_variants"):
        api.compile_kernel("ops:add", signature=SIGNATURE, target="sm_120a", project=project, **fields)
    assert not (project / "imported.flag").exists()  # refused before a worker imported the kernel's module


def test_a_mistake_in_the_fields_names_the_function_called(project: Path) -> None:
    for function in (api.compile_kernel, api.compile_variants):
        with pytest.raises(api.KgateError, match=rf"^{function.__name__}\(\) on ops:add: foo: unknown key"):
            function("ops:add", signature=SIGNATURE, constexprs={"BLOCK": 256}, foo=1, project=project)


FIXTURE_TEST = '''\
import pathlib

from ops import add


def test_another_project(kgate_compile):
    other = pathlib.Path(__file__).parent / "other"
    facts = kgate_compile(add, signature={"x": "*fp32", "y": "*fp32", "n": "i32"}, constexprs={"BLOCK": 256},
                          project=other)
    assert facts.target == "sm_90a"  # the first target of other/kgate.toml, not of the root's
'''


def test_the_fixture_takes_the_project_a_call_names(pytester: pytest.Pytester) -> None:
    """`kgate_compile(..., project=...)` raised `TypeError: compile_kernel() got multiple values for keyword argument
    'project'`: the fixture passed pytest's root folder as well."""
    pytester.makefile(".toml", kgate='targets = ["sm_120a"]\npython-path = ["."]\n')
    (pytester.path / "other").mkdir()
    (pytester.path / "other" / "kgate.toml").write_text('targets = ["sm_90a"]\npython-path = [".."]\n')
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(ops=OPS, test_other=FIXTURE_TEST)
    outcome = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")  # Triton stays out of this process
    outcome.assert_outcomes(passed=1)
