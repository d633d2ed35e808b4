"""Held-out cases for the edits kgate makes to a project's files: `--add-ignore`'s comments, KG002's removal of a
stale suppression and KG203's removal of the interpreter setting, on every kind of file they edit (Python, C++,
CMake, shell, Makefiles, TOML, INI), with BOMs, CRLF, tabs, form feeds, no final newline and other encodings.
Each edit changes exactly what it says, or the file is left as it was and the run says why."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import pytest
from conftest import kgate

from kgate.core.findings import Finding, Severity
from kgate.core.fix import Applicability, Edit, Fix
from kgate.core.suppress import parse_directives
from kgate.pipeline.fix import apply_fixes, toml_parser
from kgate.pipeline.pin import add_ignores
from kgate.support.comments import language, same_code

PLACEHOLDER = "TODO: give the reason"
CONFIG = '[tool.kgate]\ntargets = ["sm_120a"]\n'


def finding(path: str, line: int, code: str) -> Finding:
    return Finding(path=path, line=line, col=1, code=code, name="", severity=Severity.ERROR, message="")


def pin(rel: str, data: bytes, line: int, code: str = "KG301") -> tuple[bytes | None, list[str]]:
    """The file's bytes after pinning `code` on `line` (None when unchanged), and why lines were left."""
    folder = tempfile.mkdtemp()
    path = os.path.join(folder, rel.replace("/", "_"))
    with open(path, "wb") as handle:
        handle.write(data)
    run = add_ignores([finding(rel, line, code)], {rel: path})
    change = run.changes.get(rel)
    return (change.after if change else None), [why for _p, _l, _c, why in run.left]


def directive_lines(rel: str, data: bytes) -> list[tuple[int, tuple[str, ...]]]:
    text = data.decode("utf-8-sig")
    return [(d.line, d.codes) for d in parse_directives(text, language(rel)) if not d.file_level]


# --------------------------------------------------------------------------- --add-ignore: one behaviour

# A placeholder directive right after the code (no space before its marker): the new code joins it, in every
# language, as it always did in Python.
PLACEHOLDER_LINES = [
    ("k.py", 'x = 1# kgate: ignore[KG201] TODO: give the reason\n', "#"),
    ("k.cu", "add<<<1, 32>>>(x);// kgate: ignore[KG201] TODO: give the reason\n", "//"),
    ("k.cu", "add<<<1, 32>>>(x); /* c */// kgate: ignore[KG201] TODO: give the reason\n", "//"),
    ("CMakeLists.txt", "set(X 120)# kgate: ignore[KG201] TODO: give the reason\n", "#"),
    ("build.sh", "nvcc -arch=sm_120;# kgate: ignore[KG201] TODO: give the reason\n", "#"),
    ("Makefile", "X = 120# kgate: ignore[KG201] TODO: give the reason\n", "#"),
    ("pyproject.toml", "x = 1# kgate: ignore[KG201] TODO: give the reason\n", "#"),
]


@pytest.mark.parametrize("rel,text,marker", PLACEHOLDER_LINES,
                         ids=[f"{i}-{r}" for i, (r, _t, _m) in enumerate(PLACEHOLDER_LINES)])
def test_a_placeholder_right_after_code_takes_the_new_code_in_every_language(rel: str, text: str,
                                                                             marker: str) -> None:
    after, left = pin(rel, text.encode(), 1)
    assert left == [] and after == text.replace("ignore[KG201]", "ignore[KG201, KG301]").encode()


def test_add_ignore_next_to_a_placeholder_is_one_directive_in_cpp_as_in_python(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(CONFIG)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "conftest.py").write_text(
        'import os\nos.environ["TRITON_INTERPRET"] = "1"# kgate: ignore[KG201] TODO: give the reason\n')
    (tmp_path / "k.cu").write_text("__global__ void add(float* x) {}\nvoid run(float* x) {\n"
                                   "  add<<<1, 32>>>(x);// kgate: ignore[KG301] TODO: give the reason\n}\n")
    run = kgate("lint", "--add-ignore", cwd=tmp_path)
    assert "pinned 2 finding(s) in 2 files" in run.stderr, run.stderr
    assert "= \"1\"# kgate: ignore[KG201, KG203] TODO: give the reason\n" in \
        (tmp_path / "tests" / "conftest.py").read_text()
    assert "  add<<<1, 32>>>(x);// kgate: ignore[KG301, KG302] TODO: give the reason\n" in \
        (tmp_path / "k.cu").read_text()


# (file, text, line, what the line becomes): pins at the end of the line, as the language reads it
PINNED = [
    # A string that holds directive text is the string's: the new directive goes after the code.
    ("k.cu", 'puts("// kgate: ignore[KG201] TODO: give the reason"); k<<<1, 1>>>(x);\n', 1,
     ('puts("// kgate: ignore[KG201] TODO: give the reason"); k<<<1, 1>>>(x);  // kgate: ignore[KG301] '
     'TODO: give the reason\n')),
    ("k.py", "x = '# kgate: ignore[KG201] TODO: give the reason'\n", 1,
     "x = '# kgate: ignore[KG201] TODO: give the reason'  # kgate: ignore[KG301] TODO: give the reason\n"),
    # Python: a form feed stays (libcst drops one that starts a statement's line).
    ("k.py", "\x0cx = 1\n", 1, "\x0cx = 1  # kgate: ignore[KG301] TODO: give the reason\n"),
    ("k.py", "x = 1\n\x0cdef f():\n    pass\n", 2,
     "x = 1\n\x0cdef f():  # kgate: ignore[KG301] TODO: give the reason\n    pass\n"),
    # Python: decorators, their inner lines, type comments, tabs, a one-line block, a trailing semicolon.
    ("k.py", '@triton.autotune(configs=[], key=["n"])\n@triton.jit\ndef k(n):\n    pass\n', 1,
     ('@triton.autotune(configs=[], key=["n"])  # kgate: ignore[KG301] TODO: give the reason\n@triton.jit\n'
     'def k(n):\n    pass\n')),
    ("k.py", '@triton.autotune(\n    configs=[],\n    key=["n"],\n)\ndef k(n):\n    pass\n', 3,
     ('@triton.autotune(\n    configs=[],\n    key=["n"],  # kgate: ignore[KG301] TODO: give the reason\n)\n'
     'def k(n):\n    pass\n')),
    ("k.py", "x = []  # type: list[int]\n", 1,
     "x = []  # type: list[int]  # kgate: ignore[KG301] TODO: give the reason\n"),
    ("k.py", "if x:\n\ty = 2\t# note\n", 2, "if x:\n\ty = 2\t# note  # kgate: ignore[KG301] TODO: give the reason\n"),
    ("k.py", "class A: x = 1;\n", 1, "class A: x = 1;  # kgate: ignore[KG301] TODO: give the reason\n"),
    ("k.py", 'x = """a\nb"""; y = 1\n', 2, 'x = """a\nb"""; y = 1  # kgate: ignore[KG301] TODO: give the reason\n'),
    # A comment that ends in a backslash: the backslash is the comment's text (Python, shell, CMake, TOML).
    ("k.py", "x = 1  # C:\\\n", 1, "x = 1  # C:\\  # kgate: ignore[KG301] TODO: give the reason\n"),
    ("build.sh", "nvcc -arch=sm_120  # C:\\\necho\n", 1,
     "nvcc -arch=sm_120  # C:\\  # kgate: ignore[KG301] TODO: give the reason\necho\n"),
    ("CMakeLists.txt", "set(A 120)  # C:\\\n", 1, "set(A 120)  # C:\\  # kgate: ignore[KG301] TODO: give the reason\n"),
    # CRLF, no final newline.
    ("k.py", "x = 1\r\ny = 2\r\n", 2, "x = 1\r\ny = 2  # kgate: ignore[KG301] TODO: give the reason\r\n"),
    ("CMakeLists.txt", "set(A 1)\r\nset(B 120)", 2,
     "set(A 1)\r\nset(B 120)  # kgate: ignore[KG301] TODO: give the reason"),
    # C++: a header-name, the last line of a macro, a block comment that ends on the line.
    ("k.cu", "#include <a//b>\n", 1, "#include <a//b>  // kgate: ignore[KG301] TODO: give the reason\n"),
    ("k.cu", "#define K(x) \\\n  k<<<1, 1>>>(x)\n", 2,
     "#define K(x) \\\n  k<<<1, 1>>>(x)  // kgate: ignore[KG301] TODO: give the reason\n"),
    ("k.cu", "int x = 1; /* a\n b */ int y;\n", 2,
     "int x = 1; /* a\n b */ int y;  // kgate: ignore[KG301] TODO: give the reason\n"),
    # CMake: nested brackets and generator expressions.
    ("CMakeLists.txt", "set(X [==[ a ]=] b ]==])\n", 1,
     "set(X [==[ a ]=] b ]==])  # kgate: ignore[KG301] TODO: give the reason\n"),
    ("CMakeLists.txt", "target_compile_options(k PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-arch=sm_120>)\n", 1,
     ("target_compile_options(k PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-arch=sm_120>)  # kgate: ignore[KG301] "
     "TODO: give the reason\n")),
    # Shell: after a here-document whose delimiter is quoted in parts; a case pattern; a parameter expansion.
    ("build.sh", 'cat <<E"O"F\nbody\nEOF\nnvcc -arch=sm_120 k.cu\n', 4,
     'cat <<E"O"F\nbody\nEOF\nnvcc -arch=sm_120 k.cu  # kgate: ignore[KG301] TODO: give the reason\n'),
    ("build.sh", "case $x in\n  a) nvcc -arch=sm_120 ;;\nesac\n", 2,
     "case $x in\n  a) nvcc -arch=sm_120 ;;  # kgate: ignore[KG301] TODO: give the reason\nesac\n"),
    ("build.sh", "nvcc ${ARCH:-sm_120} k.cu\n", 1,
     "nvcc ${ARCH:-sm_120} k.cu  # kgate: ignore[KG301] TODO: give the reason\n"),
    # Makefiles: a recipe, after a define whose `endef` a comment follows, a $(shell ...) call. In make text the
    # pin follows the value with no space: make keeps the spacing before a comment in the variable's value.
    ("Makefile", "all:\n\tnvcc -arch=sm_120 k.cu\n", 2,
     "all:\n\tnvcc -arch=sm_120 k.cu  # kgate: ignore[KG301] TODO: give the reason\n"),
    ("Makefile", "define X\nnvcc\nendef # d\nARCH = sm_120\n", 4,
     "define X\nnvcc\nendef # d\nARCH = sm_120# kgate: ignore[KG301] TODO: give the reason\n"),
    ("Makefile", "ARCH := $(shell echo sm_120)\n", 1,
     "ARCH := $(shell echo sm_120)# kgate: ignore[KG301] TODO: give the reason\n"),
    # TOML: after a literal string that ends in a quote, an array of tables.
    ("pyproject.toml", "a = '''x''''\nb = 1\n", 1, "a = '''x''''  # kgate: ignore[KG301] TODO: give the reason\nb = 1\n"),
    ("pyproject.toml", "[[tool.x]]\nc = 1\n", 1, "[[tool.x]]  # kgate: ignore[KG301] TODO: give the reason\nc = 1\n"),
]


@pytest.mark.parametrize("rel,text,line,expected", PINNED, ids=[f"{i}-{r}" for i, (r, _t, _l, _e) in enumerate(PINNED)])
def test_add_ignore_pins_at_the_line_end_as_the_language_reads_it(rel: str, text: str, line: int,
                                                                   expected: str) -> None:
    after, left = pin(rel, text.encode(), line)
    assert left == [] and after is not None and after.decode() == expected
    assert (line, ("KG301",)) in directive_lines(rel, after) and same_code(rel, text, expected)


def test_add_ignore_keeps_a_bom_and_pins_a_very_long_line() -> None:
    text = "\ufeffx = '" + "a" * 500_000 + "'\n"
    after, left = pin("k.py", text.encode(), 1)
    assert left == [] and after == (text.rstrip("\n") + f"  # kgate: ignore[KG301] {PLACEHOLDER}\n").encode()


# (file, text, line): no comment can go there; the file is left as it was
NOT_PINNED = [
    ("build.sh", "x=$(cat <<EOF\nbody\nEOF\n)\n", 2),
    ("build.sh", "echo ${x:-\nsm_120}\n", 1),
    ("Makefile", "override define FLAGS\n-arch=sm_120\nendef\n", 2),
    ("Makefile", "define A\ndefine B\nendef\n-arch=sm_120\nendef\n", 4),
    ("pyproject.toml", 'a = """x""""\nb = """\nsm_120\n"""\n', 3),
    ("k.cu", "/\\\n* a\nsm_120 */\n", 2),
    ("k.cu", 'const char* s = "a\\\r\nsm_120";\r\n', 1),
    ("k.py", "x = f'''{\ny}\nsm_120'''\n", 2),
    ("setup.cfg", "[tool:pytest]\nenv =\n    TRITON_INTERPRET=1\n", 3),
    ("k.py", "x = \\\n    1\n", 1),
    # A comment that a backslash continues onto the next line (C++, Makefiles): appending would end it there.
    ("k.cu", "int x;  // C:\\\nint y;\n", 1),
    ("Makefile", "A = 120  # C:\\\nB = 1\n", 1),
]


@pytest.mark.parametrize("rel,text,line", NOT_PINNED, ids=[f"{i}-{r}" for i, (r, _t, _l) in enumerate(NOT_PINNED)])
def test_add_ignore_writes_nothing_where_a_comment_would_be_a_value(rel: str, text: str, line: int) -> None:
    after, left = pin(rel, text.encode(), line)
    assert after is None and len(left) == 1


# --------------------------------------------------------------------------- KG002's fix


def drop(text: str, line: int, code: str) -> Fix:
    row = re.split(r"\r\n|\r|\n", text)[line - 1]
    col = min(i for i in (row.find("# kgate"), row.find("// kgate"), row.find("; kgate")) if i >= 0)
    return Fix("remove", Applicability.SAFE, (Edit(line, col, line, col, code, "drop-suppression"),))


# (file, text, line, code, the text after, or None: left as it was)
DROPPED = [
    ("build.sh", "nvcc x  # kgate: ignore[KG301] stale\r\necho\r\n", 1, "KG301", "nvcc x\r\necho\r\n"),
    ("Makefile", "all:\r\n\tnvcc x  # kgate: ignore[KG301] stale\r\n", 2, "KG301", "all:\r\n\tnvcc x\r\n"),
    ("CMakeLists.txt", "# kgate: ignore-file[KG301] stale\r\nset(X 1)\r\n", 1, "KG301", "set(X 1)\r\n"),
    ("pyproject.toml", "a = '''x''''  # kgate: ignore[KG203] stale\n", 1, "KG203", "a = '''x''''\n"),
    ("k.cu", "#include <a//b>  // kgate: ignore[KG302] stale\n", 1, "KG302", "#include <a//b>\n"),
    ("setup.cfg", "[tool:pytest]\n; kgate: ignore-file[KG203] stale\nenv =\n", 2, "KG203", "[tool:pytest]\nenv =\n"),
    ("tox.ini", "[testenv]\n  # kgate: ignore-file[KG203] stale\r\n", 2, "KG203", "[testenv]\n"),
    ("k.py", "x = 1  # kgate: ignore[KG201] stale  # type: int\n", 1, "KG201", "x = 1  # type: int\n"),
    # Text make reads literally, a shell word: not a comment, never removed.
    ("Makefile", "X := $(info # kgate: ignore-file[KG301] r)\n", 1, "KG301", None),
    ("build.sh", "echo ${x:- # kgate: ignore[KG301] r}\n", 1, "KG301", None),
    # A comment edit is made on the text itself: a form feed libcst would not write back stays where it was.
    ("k.py", "import os\n\x0cx = 1\ny = 2  # kgate: ignore[KG201] stale\n", 3, "KG201", "import os\n\x0cx = 1\ny = 2\n"),
]


@pytest.mark.parametrize("rel,text,line,code,expected", DROPPED,
                         ids=[f"{i}-{r}" for i, (r, _t, _l, _c, _e) in enumerate(DROPPED)])
def test_a_stale_suppression_is_removed_as_the_language_reads_it(rel: str, text: str, line: int, code: str,
                                                                 expected: str | None) -> None:
    data, _taken, why = apply_fixes(rel, text.encode(), [drop(text, line, code)])
    assert data == (expected.encode() if expected is not None else None)
    assert bool(why) is (expected is None)


def test_a_file_that_is_not_utf8_is_not_pinned() -> None:
    after, left = pin("k.cu", b"int x; // \xe9t\xe9\nk<<<1, 1>>>();\n", 2)
    assert after is None and left == ["cannot read: not UTF-8"]


def test_a_file_in_another_encoding_is_not_fixed_and_the_run_says_so(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(CONFIG)
    (tmp_path / "k.py").write_bytes(b"# -*- coding: latin-1 -*-\nx = '\xe9'  # kgate: ignore[KG201] stale\n")
    run = kgate("lint", "--fix", cwd=tmp_path)
    assert "k.py: fixes not applied: not UTF-8: kgate edits UTF-8 files only" in run.stderr, run.stderr
    assert (tmp_path / "k.py").read_bytes().endswith(b"stale\n")


# --------------------------------------------------------------------------- KG203's fix


def interpret_fix(tmp_path: Path, files: dict[str, str]) -> tuple[str, dict[str, str]]:
    (tmp_path / "pyproject.toml").write_text(CONFIG)
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode())
    run = kgate("lint", "--fix", "--unsafe-fixes", "--show-fixes", cwd=tmp_path)
    return run.stderr, {name: (tmp_path / name).read_bytes().decode() for name in files}


def test_comments_inside_a_removed_statement_stay(tmp_path: Path) -> None:
    stderr, after = interpret_fix(tmp_path, {"tests/conftest.py": (
        'import os\n\nos.environ["TRITON_INTERPRET"] = (  # the CPU job\n    "1"  # needs the interpreter\n)\n'
        'import sys; os.environ["TRITON_INTERPRET"] = (  # inner\n "1"); x = 1  # two statements\n')})
    assert after["tests/conftest.py"] == ('import os\n\n# the CPU job\n# needs the interpreter\n# inner\n'
                                          'import sys; x = 1  # two statements\n'), stderr


def test_a_setting_in_a_one_line_block_is_removed_and_nothing_is_claimed_that_was_not_done(tmp_path: Path) -> None:
    stderr, after = interpret_fix(tmp_path, {"tests/conftest.py": (
        'import os\nif True: os.environ["TRITON_INTERPRET"] = "1"  # one-line block\n'
        'if True: os.environ["TRITON_INTERPRET"] = "1"; y = 2\n')})
    assert after["tests/conftest.py"] == "import os\nif True: pass  # one-line block\nif True: y = 2\n"
    assert "fixed 2 finding(s) in 1 file, 0 remaining" in stderr, stderr


def test_a_setting_in_a_file_libcst_cannot_write_back_is_left_and_the_run_says_so(tmp_path: Path) -> None:
    """A statement that shares its line needs libcst to remove it, which would not write the form feed back."""
    text = 'import os\n\x0cos.environ["TRITON_INTERPRET"] = "1"; y = 2\n'
    stderr, after = interpret_fix(tmp_path, {"tests/conftest.py": text})
    assert after["tests/conftest.py"] == text
    assert "tests/conftest.py: fixes not applied: libcst cannot write this file back unchanged" in stderr


PYPROJECT_TABLE = CONFIG + "\n[tool.pytest.ini_options]\n"


@pytest.mark.parametrize("body,expected", [
    # Text in a multi-line string or in another key's string is that value's: only the env entry goes.
    ('addopts = """\n  "TRITON_INTERPRET=1",\n"""\nenv = [\n    "TRITON_INTERPRET=1",\n]\n',
     'addopts = """\n  "TRITON_INTERPRET=1",\n"""\nenv = [\n]\n'),
    ("markers = \"-p 'TRITON_INTERPRET=1'\"\nenv = [\"TRITON_INTERPRET=1\"]\n",
     "markers = \"-p 'TRITON_INTERPRET=1'\"\nenv = []\n"),
    # A commented-out entry keeps its comment.
    ('env = [\n    # "TRITON_INTERPRET=1",  was here\n    "TRITON_INTERPRET=1",  # the CPU job\n]\n',
     'env = [\n    # "TRITON_INTERPRET=1",  was here\n]\n'),
    # Two entries on one line: the other one stays.
    ('env = [\n  "TRITON_INTERPRET=1", "B=2",\n]\n', 'env = [\n  "B=2",\n]\n'),
    # CRLF line ends.
    ('env = [\r\n  "A=1",\r\n  "TRITON_INTERPRET=1",\r\n]\r\n', 'env = [\r\n  "A=1",\r\n]\r\n'),
])
def test_the_toml_fix_removes_the_setting_and_nothing_else(tmp_path: Path, body: str, expected: str) -> None:
    stderr, after = interpret_fix(tmp_path, {"pyproject.toml": PYPROJECT_TABLE.replace("\n", "\r\n" if "\r" in body
                                                                                       else "\n") + body})
    assert after["pyproject.toml"].endswith(expected), stderr
    data = toml_parser().loads(after["pyproject.toml"])["tool"]["pytest"]["ini_options"]
    assert not any("TRITON_INTERPRET" in item for item in data["env"])


def test_the_toml_fix_is_not_offered_when_its_edit_would_change_other_data(tmp_path: Path) -> None:
    # The key's line also holds text that looks like an entry: no edit of these lines removes the key alone.
    text = CONFIG + '\n[tool.pytest_env]\nTRITON_INTERPRET = "1"\nB = "TRITON_INTERPRET = 1"\n'
    stderr, after = interpret_fix(tmp_path, {"pyproject.toml": text})
    assert after["pyproject.toml"] == text and "fixed 0 finding(s)" in stderr


@pytest.mark.parametrize("name,text,expected", [
    ("pytest.ini", "[pytest]\nenv =\n    TRITON_INTERPRET=1\n    ; note\n    B=2\n", "[pytest]\nenv =\n    ; note\n    B=2\n"),
    ("setup.cfg", "[tool:pytest]\r\nenv =\r\n  A=1\r\n  TRITON_INTERPRET=1\r\n", "[tool:pytest]\r\nenv =\r\n  A=1\r\n"),
    ("tox.ini", "[pytest]\nenv = TRITON_INTERPRET=1\n", "[pytest]\nenv = \n"),
])
def test_the_ini_fix_removes_the_entry(tmp_path: Path, name: str, text: str, expected: str) -> None:
    _stderr, after = interpret_fix(tmp_path, {name: text})
    assert after[name] == expected
