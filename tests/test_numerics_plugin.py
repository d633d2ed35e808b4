"""The `ulp` pytest fixture (kgate.pytest_plugin) and `kgate ulp`, which builds its table from the fixture's records."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import kgate

from kgate.commands.ulp import Check, render

TESTS = '''
import pytest

def test_within(ulp):
    ulp([1.0 + 2.0**-11], [1.0], "fp16", 0.5, kernel="k", direction="forward", output="y", where="here")

def test_beyond(ulp):
    ulp([[1.0, 1.5]], [[1.0, 1.0]], "bf16", 1.0, mode="rms", kernel="k", direction="backward", output="dx")

def test_not_here():
    pytest.skip("needs a GPU")
'''


def empty_config(folder: Path) -> Path:
    """A pytest configuration of our own: nothing of the surrounding project's leaks in."""
    config = folder / "pytest.ini"
    config.write_text("[pytest]\n")
    return config


def run_pytest(folder: Path, *extra: str, autoload: bool = False) -> subprocess.CompletedProcess[str]:
    env = {**os.environ}
    if not autoload:
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        extra = ("-p", "kgate.pytest_plugin", *extra)
    return subprocess.run([sys.executable, "-m", "pytest", str(folder), "-q", "-p", "no:cacheprovider", "-c",
                           str(empty_config(folder)), f"--rootdir={folder}", *extra], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "test_precision.py").write_text(TESTS)
    return tmp_path


def test_fixture_asserts_and_records_every_check_and_skip(project: Path) -> None:
    record = project / "record.jsonl"
    proc = run_pytest(project, f"--kgate-ulp-record={record}")
    assert proc.returncode == 1 and "1 failed, 1 passed, 1 skipped" in proc.stdout, proc.stdout
    rows = [json.loads(line) for line in record.read_text().splitlines()]
    checks = sorted((r for r in rows if "skipped" not in r), key=lambda r: r["test"])
    assert [(r["test"].split("::")[1], r["ulp"], r["max_ulp"], r["passed"], r["shape"], r["mode"]) for r in checks] == [
        ("test_beyond", 64.0, 1.0, False, "1x2", "rms"),  # 0.5 / spacing(rms 1.0) = 0.5 / 2^-7
        ("test_within", 0.5, 0.5, True, "1", "elementwise"),
    ]
    assert checks[1]["where"] == "here" and checks[1]["floor"] == 0.0
    assert [r["skipped"] for r in rows if "skipped" in r] == ["needs a GPU"]
    assert "k backward dx bf16: ULP check (bf16, rms) failed: 64 ULP > 1 allowed" in proc.stdout


def test_record_file_from_the_environment(project: Path) -> None:
    record = project / "from-env.jsonl"
    env = {**os.environ, "KGATE_ULP_RECORD": str(record)}
    env_run = subprocess.run([sys.executable, "-m", "pytest", str(project), "-q", "-p", "no:cacheprovider",
                              "-c", str(empty_config(project)), f"--rootdir={project}", "-k", "within"], cwd=project,
                             env=env, capture_output=True, text=True, timeout=300, check=False)
    assert env_run.returncode == 0, env_run.stdout
    assert len(record.read_text().splitlines()) == 1


def test_the_fixture_comes_from_the_installed_entry_point(project: Path) -> None:
    proc = run_pytest(project, "-k", "within", autoload=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_without_a_record_file_nothing_is_written(project: Path) -> None:
    proc = run_pytest(project, "-k", "within")
    assert proc.returncode == 0
    assert sorted(p.name for p in project.iterdir() if p.suffix == ".jsonl") == []


def test_table_rows_sorted_with_reasons_failures_and_skips() -> None:
    def check(kernel: str, direction: str, dtype: str, ulp: float, passed: bool, reason: str = "") -> Check:
        return Check(kernel, dtype, direction, "y", "64x64", "rms", ulp, 2.4, 1.9, "interpreter", reason, passed)

    lines = render([check("softmax", "backward", "fp16", 2.0, True), check("gemm", "forward", "fp16", 3.1, False),
                    check("softmax", "forward", "bf16", 1.0, True, reason="why it is wider")],
                   [("kernels/test_x.py::test_a[fp16]", "needs a GPU")])
    assert lines[0].split() == ["kernel", "direction", "output", "dtype", "shape", "mode", "worst", "ULP",
                                "threshold", "floor", "ran", "on", "verdict"]
    body = [line.split() for line in lines[2:5]]
    assert [(row[0], row[1], row[6], row[7], row[-1]) for row in body] == [
        ("gemm", "forward", "3.100", "2.400", "FAIL"),
        ("softmax", "forward", "1.000", "2.400*", "ok"),
        ("softmax", "backward", "2.000", "2.400", "ok"),
    ]
    assert lines[-2:] == ["* why it is wider", "skipped 1: needs a GPU (test_x.py::test_a[fp16])"]


def test_kgate_ulp_on_the_interpreter(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="kgate ulp runs the precision tests: they need torch (the ulp extra)")
    run = kgate("ulp", "--device", "cpu", "-k", "swiglu and forward", cwd=tmp_path)
    assert run.code == 0, run.stdout + run.stderr
    rows = [line.split() for line in run.stdout.splitlines() if line.startswith("swiglu")]
    assert [(r[0], r[1], r[2], r[3], r[-2], r[-1]) for r in rows] == [
        ("swiglu", "forward", "y", "bf16", "interpreter", "ok"), ("swiglu", "forward", "y", "fp16", "interpreter", "ok")]
    bf16, fp16 = rows
    assert float(fp16[6]) <= 0.6 and fp16[7] == "0.600"
    assert bf16[7] == "1.600*"  # the interpreter's bf16 allowance, marked and explained
    assert "* interpreter: fp32->bf16 truncates instead of rounding" in run.stdout
    assert "kgate ulp: passed: 2 of 2 checks" in run.stdout


def test_kgate_ulp_beside_a_folder_named_kgate(tmp_path: Path) -> None:
    # Run from a checkout of kgate itself (or any project with a `kgate/` folder):
    # the tests must still be the installed ones, not whatever the working
    # directory holds under that name.
    pytest.importorskip("torch", reason="kgate ulp runs the precision tests: they need torch (the ulp extra)")
    (tmp_path / "kgate").mkdir()
    (tmp_path / "kgate" / "__init__.py").write_text("")
    script = Path(sys.executable).with_name("kgate")
    proc = subprocess.run([str(script), "ulp", "--device", "cpu", "-k", "swiglu and forward and fp16"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=900,
                          env={k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "kgate ulp: passed: 1 of 1 checks" in proc.stdout


def test_kgate_ulp_usage_errors(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch", reason="kgate ulp runs the precision tests: they need torch (the ulp extra)")
    run = kgate("ulp", "--device", "cpu", "-k", "no_such_kernel", cwd=tmp_path)
    assert (run.code, run.stderr.strip()) == (2, "kgate: error: no precision test matches -k 'no_such_kernel'")
    if not torch.cuda.is_available():
        run = kgate("ulp", "--device", "gpu", cwd=tmp_path)
        assert run.code == 2 and "--device gpu: torch sees no CUDA device" in run.stderr


def test_kgate_ulp_names_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from kgate.commands import ulp
    from kgate.core.errors import KgateError

    real = importlib.util.find_spec
    present = {"torch", "numpy"}  # whether or not this environment has them: the message names what is missing
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "pytest" else object() if name in present else real(name, *a))
    with pytest.raises(KgateError, match=r"^kgate ulp needs pytest: pip install 'pytest>=8' \(kgate's extra ulp: kernel-gate\[ulp\]\)$"):
        ulp._require_packages("cpu")
    present.clear()
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in ("torch", "pytest") else
                        object())
    with pytest.raises(KgateError, match=r"^kgate ulp needs torch, pytest: pip install 'torch>=2.4' 'pytest>=8' \(kgate's extra ulp: kernel-gate\[ulp\]\)$"):
        ulp._require_packages("cpu")


def strict(line: str) -> dict:
    """A JSON line as a strict parser reads it: NaN and Infinity are not JSON."""
    def refuse(name: str) -> None:
        raise ValueError(f"not JSON: {name}")

    return json.loads(line, parse_constant=refuse)


def test_records_are_strict_json_and_read_back(tmp_path: Path) -> None:
    """A threshold left open (inf), a result that overflowed (inf ULP) and a NaN measurement are written as the
    strings JSON can hold, never a bare NaN or Infinity, and `kgate ulp` reads them back as the numbers they were."""
    import math

    from kgate.commands.ulp import read_records
    from kgate.pytest_plugin import append_record

    (tmp_path / "test_open.py").write_text(
        'import math\n\n'
        'def test_open(ulp):\n'
        '    ulp([1.0], [1.0], "fp16", math.inf, kernel="k", output="open")\n\n'
        'def test_overflow(ulp):\n'
        '    ulp([65504.0], [math.inf], "fp16", 0.5, kernel="k", output="overflow")\n')
    record = tmp_path / "record.jsonl"
    proc = run_pytest(tmp_path, f"--kgate-ulp-record={record}")
    assert "1 failed, 1 passed" in proc.stdout, proc.stdout
    append_record(str(record), {"test": "t", "kernel": "k", "dtype": "bf16", "direction": "", "output": "nan",
                                "shape": "1", "mode": "rms", "ulp": math.nan, "max_ulp": 1.0, "floor": -math.inf,
                                "where": "", "reason": "", "passed": False})
    rows = [strict(line) for line in record.read_text().splitlines()]
    assert sorted((r["output"], r["ulp"], r["max_ulp"]) for r in rows) == [
        ("nan", "nan", 1.0), ("open", 0.0, "inf"), ("overflow", "inf", 0.5)]
    checks, _skipped = read_records(record)
    by_output = {c.output: c for c in checks}
    assert by_output["open"].max_ulp == math.inf and by_output["overflow"].ulp == math.inf
    assert math.isnan(by_output["nan"].ulp) and by_output["nan"].floor == -math.inf
