"""Deliberately wrong kernels (fixtures/ulp) fail their precision tests, and the failure is readable.

The fixture's tests run in a pytest child process, as a user's would, with
kgate's plugin recording each check; the kernels run under Triton's
interpreter in the runner's own child process (or natively on a GPU).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from conftest import copy_project
from test_numerics_plugin import empty_config

from kgate.numerics import spacing

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    from kgate.kernels.common import interpreter_incompatibility

    if interpreter_incompatibility():
        pytest.skip(interpreter_incompatibility() or "", allow_module_level=True)

MESSAGE = re.compile(r"element \[(\d+), (\d+)\]: got (\S+), reference (\S+), ([\d.]+) ULP of fp16 "
                     r"\(one ULP at the reference = (\S+)\)")


@pytest.fixture(scope="module")
def failed_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], list[dict]]:
    project = copy_project("ulp", tmp_path_factory.mktemp("bad"))
    record = project / "record.jsonl"
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    proc = subprocess.run([sys.executable, "-m", "pytest", str(project), "-p", "kgate.pytest_plugin",
                           f"--kgate-ulp-record={record}", "-q", "-p", "no:cacheprovider", "-c",
                           str(empty_config(project)), f"--rootdir={project}"], cwd=project, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    rows = [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []
    return proc, rows


def test_both_wrong_kernels_fail(failed_run: tuple[subprocess.CompletedProcess[str], list[dict]]) -> None:
    proc, rows = failed_run
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "2 failed" in proc.stdout
    assert sorted((r["kernel"], r["passed"]) for r in rows) == [("rmsnorm_bf16_sum", False),
                                                               ("softmax_no_max", False)]


def test_precision_failure_names_element_value_reference_and_ulp(
        failed_run: tuple[subprocess.CompletedProcess[str], list[dict]]) -> None:
    proc, rows = failed_run
    line = next(line for line in proc.stdout.splitlines() if "rmsnorm_bf16_sum forward y fp16" in line
                and "UlpMismatch" in line)
    assert "> 0.6 allowed" in line
    match = MESSAGE.search(line)
    assert match, line
    got, ref, ulps, one = (float(match.group(i)) for i in (3, 4, 5, 6))
    # The numbers in the message are consistent with each other and with the definition.
    assert one == float(spacing(ref, "fp16"))
    assert ulps == pytest.approx(abs(got - ref) / one, rel=1e-3)
    assert ulps > 10  # a bf16 running sum is far off, not marginally
    recorded = next(r for r in rows if r["kernel"] == "rmsnorm_bf16_sum")
    assert recorded["ulp"] == pytest.approx(ulps, rel=1e-3) and recorded["max_ulp"] == 0.6


def test_nan_failure_names_element_and_finite_reference(
        failed_run: tuple[subprocess.CompletedProcess[str], list[dict]]) -> None:
    proc, rows = failed_run
    line = next(line for line in proc.stdout.splitlines() if "softmax_no_max forward y fp16" in line
                and "UlpMismatch" in line)
    assert re.search(r"element \[\d+, \d+\]: got nan where the reference is [0-9.e+-]+", line), line
    assert next(r for r in rows if r["kernel"] == "softmax_no_max")["ulp"] == "inf"  # not finite: strict JSON spells it


def test_the_failing_line_is_the_test_not_the_helper(
        failed_run: tuple[subprocess.CompletedProcess[str], list[dict]]) -> None:
    proc, _rows = failed_run
    assert "test_bad_kernels.py:" in proc.stdout
    assert "pytest_plugin.py:" not in proc.stdout
