"""Held-out cases for fixes of settings: KG203's removal from `pyproject.toml` (a dotted `tool.kgate` key, CRLF,
literal strings, the only entry, comments around the setting), KG301 on shell lines that print
(an `echo` of a command substitution runs the command: its flags are settings; what `echo` only prints is not),
and how a run treats the file as a whole: a pin, a fix and a pin again; a read-only file; a Python file over the
size kgate parses; an f-string with nested quotes (Python 3.12 on)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import kgate

CONFIG = '[tool.kgate]\ntargets = ["sm_120a"]\n'
FIX = ("lint", "--fix", "--unsafe-fixes")
PIN = ("lint", "--add-ignore")
PLACEHOLDER = "TODO: give the reason"
BLOCK_SCALED = ('__device__ void mma() {\n  asm volatile("mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale'
                '.scale_vec::1X.f32.e4m3.e4m3.f32.ue8m0 {};");\n}\n__global__ void k() {}\n')
SET = 'os.environ["TRITON_INTERPRET"] = "1"'
ENV = '[tool.pytest.ini_options]\nenv = ["TRITON_INTERPRET=1", "X=2"]\n'
PYTEST = "[tool.pytest.ini_options]\n"


def write(root: Path, files: dict[str, str]) -> Path:
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.encode())
    return root


# pyproject.toml -> what it holds after `--fix --unsafe-fixes`: its data less the setting. The comment that follows
# the entry on its line is the entry's and goes with it (as `test_held_out_fix_edits` has it); other comments stay.
TOML = {
    "dotted-kgate-key": ('tool.kgate.targets = ["sm_120a"]\n' + ENV,
                         'tool.kgate.targets = ["sm_120a"]\n' + PYTEST + 'env = ["X=2"]\n'),
    "crlf": ((CONFIG + ENV).replace("\n", "\r\n"), (CONFIG + PYTEST + 'env = ["X=2"]\n').replace("\n", "\r\n")),
    "the-only-entry": (CONFIG + PYTEST + 'env = ["TRITON_INTERPRET=1"]\n', CONFIG + PYTEST + "env = []\n"),
    "literal-strings": (CONFIG + PYTEST + "env = ['TRITON_INTERPRET=1', 'X=2']\n", CONFIG + PYTEST + "env = ['X=2']\n"),
    "a-comment-after-the-entry": (CONFIG + PYTEST + 'env = ["TRITON_INTERPRET=1",  # cpu\n  "X=2"]  # more\n',
                                  CONFIG + PYTEST + 'env = [\n  "X=2"]  # more\n'),
    "a-comment-on-the-entrys-own-line": (CONFIG + PYTEST + 'env = [\n  "TRITON_INTERPRET=1",  # cpu job\n  "X=2",\n]\n',
                                         CONFIG + PYTEST + 'env = [\n  "X=2",\n]\n'),
    "a-comment-after-a-key": (CONFIG + '[tool.pytest_env]\nTRITON_INTERPRET = "1"  # cpu job\nX = "2"\n',
                              CONFIG + '[tool.pytest_env]\nX = "2"\n'),
    "a-comment-after-the-last-entry": (CONFIG + PYTEST + 'env = ["X=2", "TRITON_INTERPRET=1"]  # cpu\n',
                                       CONFIG + PYTEST + 'env = ["X=2"]  # cpu\n'),
    "a-comment-and-nothing-else-left": (CONFIG + PYTEST + 'env = [\n  "TRITON_INTERPRET=1", # cpu\n]\n',
                                        CONFIG + PYTEST + 'env = [\n]\n'),
    "a-comment-right-after-the-entry": (CONFIG + PYTEST + 'env = ["X=2", "TRITON_INTERPRET=1"# cpu\n]\n',
                                        CONFIG + PYTEST + 'env = ["X=2"# cpu\n]\n'),
    "an-unused-suppression-after-a-dotted-key": ('tool.kgate.targets = ["sm_120a"]  # kgate: ignore[KG203] old\n',
                                                 'tool.kgate.targets = ["sm_120a"]\n'),
}


@pytest.mark.parametrize("name", sorted(TOML))
def test_pytests_env_setting_goes_and_nothing_else_changes(tmp_path: Path, name: str) -> None:
    before, after = TOML[name]
    root = write(tmp_path, {"pyproject.toml": before})
    run = kgate(*FIX, cwd=root)
    assert (root / "pyproject.toml").read_bytes() == after.encode(), run.stderr
    assert "0 remaining" in run.stderr, run.stderr


@pytest.mark.parametrize("name", ["dotted-kgate-key", "crlf", "the-only-entry", "literal-strings",
                                  "a-comment-after-the-entry"])
def test_pytests_env_setting_is_pinned_on_its_line(tmp_path: Path, name: str) -> None:
    before = TOML[name][0]
    root = write(tmp_path, {"pyproject.toml": before})
    run = kgate(*PIN, cwd=root)
    assert "pinned 1 finding(s) in 1 file" in run.stderr, run.stderr
    newline = "\r\n" if "\r\n" in before else "\n"
    line = next(line for line in before.split(newline) if "TRITON_INTERPRET" in line)
    pinned = before.replace(line, f"{line}  # kgate: ignore[KG203] {PLACEHOLDER}")
    assert (root / "pyproject.toml").read_bytes() == pinned.encode()


# A shell line -> whether it names an architecture nvcc builds for (what echo or printf only print is words).
SHELL = {
    "echo-of-a-substitution": ("echo $(nvcc -arch=sm_120 k.cu)", True),
    "echo-of-a-quoted-substitution": ('echo "$(nvcc -arch=sm_120 k.cu)"', True),
    "echo-of-a-backquoted-command": ('echo "building" `nvcc -arch=sm_120 k.cu`', True),
    "a-substitution-of-echo-then-a-flag": ('FLAGS="$(echo -O3) -arch=sm_120"', True),
    "a-command-after-a-substitution-of-echo": ("X=$(echo -O3) nvcc -arch=sm_120 k.cu", True),
    "nested-substitutions": ("X=$(echo $(nvcc -arch=sm_120 k.cu))", True),
    "echo-of-words": ('echo "use -arch=sm_120"', False),
    "echo-of-single-quoted-words": ("echo 'use $(x) -arch=sm_120'", False),
    "echo-of-arithmetic-then-words": ("echo $((1+2)) -arch=sm_120", False),
    "printf-then-a-build": ('printf "%s" -arch=sm_120; nvcc -arch=sm_120 k.cu', True),
}


def test_what_an_echo_runs_is_a_setting_and_what_it_prints_is_not(tmp_path: Path) -> None:
    files = {"pyproject.toml": CONFIG}
    for name, (line, _named) in SHELL.items():
        files[f"{name}/mma.cu"] = BLOCK_SCALED
        files[f"{name}/build.sh"] = f"#!/bin/sh\n{line}\n"
    root = write(tmp_path, files)
    run = kgate("lint", cwd=root)
    reported = {line.split("/")[0] for line in run.stdout.splitlines() if ": KG301 " in line}
    assert reported == {name for name, (_line, named) in SHELL.items() if named}, run.stdout
    fixed = kgate(*FIX, cwd=root)
    assert "0 remaining" in fixed.stderr, fixed.stderr
    for name, (line, named) in SHELL.items():
        text = (root / name / "build.sh").read_text()
        assert ("sm_120a" in text) == named, (name, text)


def test_a_pin_then_a_fix_then_a_pin_again(tmp_path: Path) -> None:
    """The fix removes the stale suppression and keeps the new pin; the second pin finds nothing new."""
    root = write(tmp_path, {"pyproject.toml": CONFIG,
                            "tests/test_a.py": "import os\n" + SET + "\nx = 1  # kgate: ignore[KG203] old\n"})
    assert "pinned 1 finding(s) in 1 file" in kgate(*PIN, cwd=root).stderr
    fixed = kgate(*FIX, cwd=root)
    assert "fixed 1 finding(s) in 1 file, 1 remaining" in fixed.stderr, fixed.stderr
    assert "pinned 0 finding(s) in 0 files" in kgate(*PIN, cwd=root).stderr
    assert (root / "tests/test_a.py").read_text() == (
        f"import os\n{SET}  # kgate: ignore[KG203] {PLACEHOLDER}\nx = 1\n")


@pytest.mark.parametrize("command,said", [(FIX, "fixes not written: it is read-only"),
                                          (PIN, "pins not written: it is read-only")], ids=["fix", "pin"])
def test_a_read_only_file_is_left_and_said(tmp_path: Path, command: tuple[str, ...], said: str) -> None:
    root = write(tmp_path, {"pyproject.toml": CONFIG, "tests/test_a.py": "import os\n" + SET + "\n"})
    target = root / "tests/test_a.py"
    target.chmod(0o444)
    run = kgate(*command, cwd=root)
    assert f"kgate: tests/test_a.py: {said}" in run.stderr, run.stderr
    assert target.read_text() == "import os\n" + SET + "\n"


def test_a_python_file_over_the_size_kgate_parses_is_reported_not_edited(tmp_path: Path) -> None:
    text = "import os\n" + SET + "\n" + "x = 1\n" * (1 << 20)
    root = write(tmp_path, {"pyproject.toml": CONFIG, "tests/test_a.py": text})
    run = kgate(*FIX, cwd=root)
    assert "fixed 0 finding(s) in 0 files, 1 remaining" in run.stderr, run.stderr
    assert "KG004" in run.stdout and "too large to parse" in run.stdout, run.stdout
    assert (root / "tests/test_a.py").read_text() == text


def test_an_f_string_with_nested_quotes_is_fixed_where_python_reads_it(tmp_path: Path) -> None:
    """Python 3.12 reads `f"{"a"}"`; before, it is a syntax error, reported, and the file is left as it was."""
    text = 'import os\n' + SET + '\nx = f"{"a" + f"{1}"}"\n'
    root = write(tmp_path, {"pyproject.toml": CONFIG, "tests/test_a.py": text})
    run = kgate(*FIX, cwd=root)
    if sys.version_info >= (3, 12):
        assert (root / "tests/test_a.py").read_text() == 'import os\nx = f"{"a" + f"{1}"}"\n', run.stderr
    else:
        assert "KG004" in run.stdout, run.stdout
        assert (root / "tests/test_a.py").read_text() == text


# Another file that sets the variable -> what it holds after `--fix --unsafe-fixes` (None: left, the finding remains).
OTHER_FILES = {
    "pytest.toml": ('[pytest]\nenv = ["TRITON_INTERPRET=1", "A=1"]  # cpu\n', '[pytest]\nenv = ["A=1"]  # cpu\n'),
    ".pytest.toml": ('[pytest]\nenv = [\n  "TRITON_INTERPRET=1",\n]\n', '[pytest]\nenv = [\n]\n'),
    "tox.ini": ("[pytest]\r\nenv =\r\n    TRITON_INTERPRET=1\r\n    A=1\r\n", "[pytest]\r\nenv =\r\n    A=1\r\n"),
    "tests/conftest.py-async": ('import os\nasync def f():\n    ' + SET + '\n', "import os\nasync def f():\n    pass\n"),
    "tests/conftest.py-with": ('import os\nwith open(__file__): ' + SET + '\n', "import os\nwith open(__file__): pass\n"),
    "tests/conftest.py-for-else": ('import os\nfor i in []:\n    pass\nelse:\n    ' + SET + '\n',
                                   "import os\nfor i in []:\n    pass\nelse:\n    pass\n"),
    "tests/conftest.py-class-body": ('import os\nclass C:\n    ' + SET + '\n', "import os\nclass C:\n    pass\n"),
    "tests/conftest.py-walrus": ('import os\nif (v := os.environ.setdefault("TRITON_INTERPRET", "1")):\n    pass\n', None),
    "tests/conftest.py-lambda": ('import os\nf = lambda: os.environ.update(TRITON_INTERPRET="1")\n', None),
}


@pytest.mark.parametrize("name", sorted(OTHER_FILES))
def test_the_setting_goes_from_every_file_that_holds_it_or_the_file_stays(tmp_path: Path, name: str) -> None:
    before, after = OTHER_FILES[name]
    rel = name.split("-")[0] if name.startswith("tests/") else name
    root = write(tmp_path, {"pyproject.toml": CONFIG, rel: before})
    run = kgate(*FIX, cwd=root)
    assert (root / rel).read_bytes() == (before if after is None else after).encode(), run.stderr
    assert ("1 remaining" if after is None else "fixed 1 finding(s) in 1 file, 0 remaining") in run.stderr, run.stderr
