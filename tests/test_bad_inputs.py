"""The corpus of bad inputs under fixtures/bad/: each case's exact diagnostic, exit code, no traceback.

A case is a folder with its input files and a case.toml (see fixtures/bad/README.md).
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, kgate

from kgate.tools import bundled_tool

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CORPUS = FIXTURES / "bad"
TOOLS = Path(__file__).resolve().parent / "fake_tools"
CASES = sorted(p.name for p in CORPUS.iterdir() if (p / "case.toml").is_file())


def load_case(name: str) -> dict:
    return tomllib.loads((CORPUS / name / "case.toml").read_text())


def test_the_corpus_is_not_empty() -> None:
    assert len(CASES) >= 20


@pytest.mark.parametrize("name", CASES)
def test_bad_input(name: str, tmp_path: Path) -> None:
    case = load_case(name)
    project = tmp_path / name
    shutil.copytree(CORPUS / name, project, symlinks=True, ignore=shutil.ignore_patterns("case.toml"))
    real_ptxas = bundled_tool("ptxas-blackwell")
    env = {key: value.replace("{tools}", str(TOOLS)) for key, value in case.get("env", {}).items()}
    env["KGATE_TEST_REAL_PTXAS"] = str(real_ptxas)
    run = kgate(*case["command"], cwd=project, env=env)
    output = run.stdout + run.stderr
    assert "Traceback" not in output, output
    assert run.code == case["exit"], output
    lines = output.splitlines()
    if "diagnostic" in case:
        assert case["diagnostic"] in lines, output
    else:
        pattern = re.compile(case["diagnostic_match"])
        assert any(pattern.fullmatch(line) for line in lines), output
    for kernel in case.get("checked", []):
        assert any(line.startswith(kernel + " ") and line.rstrip().endswith("ok") for line in lines), output
