"""The corpus of bad inputs under fixtures/bad/: each case's exact diagnostic, exit code, no traceback.

A case is a folder with its input files and a case.toml (see fixtures/bad/README.md). What cannot
be committed (a 50 MB file, a symlink loop, a FIFO, a file without read permission) is made in the
case's copy at test time from keys of case.toml.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, Run, kgate

from kgate.support.tools import bundled_tool

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CORPUS = FIXTURES / "bad"
TOOLS = Path(__file__).resolve().parent / "fake_tools"
CASES = sorted(p.name for p in CORPUS.iterdir() if (p / "case.toml").is_file())
KEYS = {"description", "command", "exit", "diagnostic", "diagnostic_match", "checked", "also", "env", "generate",
        "symlinks", "fifos", "unreadable", "readonly", "requires", "python"}
# Root reads files whatever their mode: its kgate runs without the capabilities that allow that.
WITHOUT_DAC_OVERRIDE = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]


def load_case(name: str) -> dict:
    return tomllib.loads((CORPUS / name / "case.toml").read_text())


def test_the_corpus_is_large_and_every_case_is_well_formed() -> None:
    assert len(CASES) >= 50
    # The README says every folder there is a case that runs: a folder without its case.toml would be skipped.
    assert [p.name for p in CORPUS.iterdir() if p.is_dir() and p.name not in CASES] == []
    for name in CASES:
        case = load_case(name)
        assert set(case) <= KEYS, (name, set(case) - KEYS)
        assert {"description", "command", "exit"} <= set(case), name
        assert ("diagnostic" in case) != ("diagnostic_match" in case), name
        assert case["exit"] in (0, 1, 2), name


def test_the_docs_never_state_a_size_of_the_corpus_that_is_not_its_size() -> None:
    """A count of the cases written in prose goes stale with the next case; any that is written must be right."""
    for doc in (FIXTURES.parent / "README.md", CORPUS / "README.md"):
        text = " ".join(doc.read_text().split())
        for number in re.findall(r"\b(\d+) (?:bad inputs|bad-input cases)\b", text):
            assert int(number) == len(CASES), f"{doc.name} says {number} bad inputs; fixtures/bad has {len(CASES)}"


def make_generated(project: Path, case: dict) -> None:
    """Files too large to commit: `head`, then `line` repeated up to `size` bytes, then `tail`."""
    for item in case.get("generate", []):
        head, line, tail = item.get("head", ""), item["line"], item.get("tail", "")
        count = max(0, -(-(item["size"] - len(head) - len(tail)) // len(line)))
        path = project / item["path"]
        path.parent.mkdir(parents=True, exist_ok=True)  # a folder git does not keep empty (build/ is ignored)
        with open(path, "w", encoding="utf-8", newline="") as handle:
            handle.writelines([head, *(line * min(10_000, count - start) for start in range(0, count, 10_000)), tail])
    for link, target in case.get("symlinks", {}).items():
        (project / link).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, project / link)
    for fifo in case.get("fifos", []):
        (project / fifo).parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(project / fifo)


def unreadable_prefix(project: Path, case: dict) -> list[str]:
    """chmod the case's unreadable (000) and read-only (555) paths; the command prefix under which the
    permissions really hold."""
    restricted = [(rel, 0) for rel in case.get("unreadable", [])] + [(rel, 0o555) for rel in case.get("readonly", [])]
    if not restricted:
        return []
    for rel, mode in restricted:
        (project / rel).chmod(mode)
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root, where file permissions do not hold, and setpriv (util-linux) is missing")
    first = project / restricted[0][0]
    # Both a folder of mode 000 and one of 555 refuse a new file; a file of mode 000 refuses reading.
    attempt = ["touch", str(first / "probe")] if first.is_dir() else ["cat", str(first)]
    probe = subprocess.run([*WITHOUT_DAC_OVERRIDE, *attempt], capture_output=True, check=False)
    if probe.returncode == 0:
        pytest.skip("running as root without the right to drop CAP_DAC_OVERRIDE: file permissions do not hold")
    return WITHOUT_DAC_OVERRIDE


def verdict(row: str, lines: list[str]) -> str:
    """A kernel table row's verdict: its text under the header's `verdict` (a captured row ends with its capture)."""
    header = next(line for line in lines if line.startswith("kernel ") and " verdict" in line)
    start = header.index(" verdict") + 1
    end = header.index(" captured") + 1 if " captured" in header else None
    return row[start:end].strip()


def run_case(name: str, case: dict, project: Path) -> Run:
    env = {key: value.replace("{tools}", str(TOOLS)).replace("{path}", os.environ.get("PATH", ""))
           for key, value in case.get("env", {}).items()}
    env["KGATE_TEST_REAL_PTXAS"] = str(bundled_tool("ptxas-blackwell"))
    env["KGATE_TEST_REAL_NVCC"] = shutil.which("nvcc") or "nvcc"
    prefix = unreadable_prefix(project, case)
    command = list(case["command"])
    if case.get("checked") and command[0] == "check":  # the rows of the clean kernels, to find them in the table
        command.append("--show-kernels")
    if not prefix:
        return kgate(*command, cwd=project, env=env, timeout=300)
    full_env = {**os.environ, **env}
    full_env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run([*prefix, sys.executable, "-m", "kgate", *command], cwd=project, env=full_env,
                          capture_output=True, text=True, timeout=300, check=False)
    return Run(proc.returncode, proc.stdout, proc.stderr)


@pytest.mark.parametrize("name", CASES)
def test_bad_input(name: str, tmp_path: Path) -> None:
    case = load_case(name)
    for tool in case.get("requires", []):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")
    if "python" in case:  # the oldest Python for which the input is a bad one
        wanted = tuple(int(part) for part in case["python"].split("."))
        if sys.version_info < wanted:
            pytest.skip(f"Python {'.'.join(map(str, sys.version_info[:2]))} reads this input without trouble; "
                        f"the case is about Python {case['python']} and later")
    project = tmp_path / name
    shutil.copytree(CORPUS / name, project, symlinks=True, ignore=shutil.ignore_patterns("case.toml"))
    make_generated(project, case)
    try:
        run = run_case(name, case, project)
    finally:
        for rel in case.get("unreadable", []) + case.get("readonly", []):  # let pytest remove the folder
            (project / rel).chmod(stat.S_IRWXU)
    output = run.stdout + run.stderr
    assert "Traceback" not in output, output
    assert run.code == case["exit"], output
    lines = output.splitlines()
    if "diagnostic" in case:
        assert case["diagnostic"] in lines, output
        matches = case["diagnostic"].__eq__
    else:
        pattern = re.compile(case["diagnostic_match"])
        assert any(pattern.fullmatch(line) for line in lines), output
        matches = pattern.fullmatch
    if case["exit"] == 2:
        # One line says what is wrong, and nothing else claims to be the error.
        assert [line for line in run.stderr.splitlines() if line.startswith("kgate: error:")] == \
            [line for line in run.stderr.splitlines() if matches(line)], output
    for line in case.get("also", []):  # the other inputs were still checked: their findings are there
        assert line in lines, output
    for kernel in case.get("checked", []):
        assert any(line.startswith(kernel + " ") and verdict(line, lines) == "ok" for line in lines), output
