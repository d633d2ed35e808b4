"""Held-out cases for the directives read in every kind of file kgate reads them from: where each language's
comments really are (what the compiler, the shell, make or the TOML parser would read there), which marker
starts a directive, a file directive written after code (it silences nothing, as ruff's `# ruff: noqa` after code,
and is reported), and files whose shape once made a reader take quadratic time."""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import kgate

from kgate.core.suppress import parse_directives
from kgate.support.comments import blank, code_only, comments, language


def directives(rel: str, text: str) -> list[tuple[int, tuple[str, ...], bool]]:
    return [(d.line, d.codes, d.file_level) for d in parse_directives(text, language(rel)) if not misplaced(d)]


def misplaced(directive: object) -> bool:
    return bool(getattr(directive, "misplaced", False))


def L(line: int, code: str) -> tuple[int, tuple[str, ...], bool]:  # a line directive
    return (line, (code,), False)


def F(line: int, code: str) -> tuple[int, tuple[str, ...], bool]:  # a file directive
    return (line, (code,), True)


# (file, text, the directives that silence: (line, codes, file-level))
READ = [
    # C, C++, CUDA: a backslash-newline joins lines before comments are read (g++ -E agrees).
    ("k.cu", "/\\\n*\n// kgate: ignore-file[KG302] inside a spliced block comment\n*/\n", []),
    ("k.cu", "/* a *\\\n/ int x;\n// kgate: ignore-file[KG302] after a spliced close\n", [F(3, "KG302")]),
    ("k.cu", 'const char* s = "a\\\r\n// kgate: ignore-file[KG302] a string spliced on a CRLF line";\n', []),
    ("k.cu", "int b = 1 /\\\n/ 2;\n// kgate: ignore-file[KG302] after a spliced line comment\n", [F(3, "KG302")]),
    # A header-name is one token: its `//` starts no comment.
    ("k.cu", "#include <a//b> /* x\n// kgate: ignore-file[KG302] inside a block comment\n*/\n", []),
    ("k.cuh", "  #  include_next <x//y> /* z\n// kgate: ignore-file[KG302] block\n*/\n", []),
    ("k.cu", "#if __has_include(<a//b>) /* c\n// kgate: ignore-file[KG302] block\n*/\n#endif\n", []),
    ("k.cu", "#define H <a//b> /* not a header-name here: the // is a comment\n// kgate: ignore[KG302] r\n",
     [L(2, "KG302")]),
    ("k.cu", "#include <a//b> // kgate: ignore[KG302] after the header\n", [L(1, "KG302")]),
    # Macros, raw strings with custom delimiters, __VA_OPT__, character literals, digit separators.
    ("k.cu", "#define F(...) f(0 __VA_OPT__(,) __VA_ARGS__) // kgate: ignore[KG302] r\n", [L(1, "KG302")]),
    ("k.cu", 'auto s = R"-*-(\n)-*" // kgate: ignore-file[KG302] still the string\n)-*-";\n', []),
    ("k.cu", 'auto s = UR"((x))"; // kgate: ignore[KG302] after a raw string with parentheses\n', [L(1, "KG302")]),
    ("k.cu", "char c[] = {'//'}; // kgate: ignore[KG302] after a multi-character literal\n", [L(1, "KG302")]),
    ("k.cu", "auto n = 0x1'FF'u; // kgate: ignore[KG302] after a hex number with separators\n", [L(1, "KG302")]),
    # g++ reads `'a'`, the number `1'2`, then a `'` that is never closed: the rest of the line is that literal.
    ("k.cu", "auto c = 'a'1'2'; // kgate: ignore[KG302] r\n", []),
    ("k.cu", "/*// kgate: ignore-file[KG302] a block comment's text */ int x;\n", []),
    ("k.cu", "int x; // note // kgate: ignore[KG302] a second marker in one comment\n", [L(1, "KG302")]),
    # Empty files and a file of one CRLF.
    ("k.cu", "", []),
    ("Makefile", "\r\n", []),
    # CMake: brackets of different lengths, generator expressions, escapes.
    ("CMakeLists.txt", "set(X [==[ a ]=] # kgate: ignore-file[KG301] r ]==])\n", []),
    ("CMakeLists.txt", "set(X 1) #[[ block\n# kgate: ignore-file[KG301] r\n]]\n", []),
    ("CMakeLists.txt", "#[=[ a ]] ]==] # kgate: ignore-file[KG301] still the comment\n]=]\n", []),
    ("CMakeLists.txt", 'set(X "$<$<CONFIG:Debug>:#>") # kgate: ignore[KG301] after a quoted genex\n',
     [L(1, "KG301")]),
    ("CMakeLists.txt", "set(X a\\#b) # kgate: ignore[KG301] after an escaped hash\n", [L(1, "KG301")]),
    # Shell: parameter expansions, substitutions, here-documents, case, arithmetic (bash agrees).
    ("build.sh", "echo ${x:-\n# kgate: ignore-file[KG301] in a parameter expansion\n}\n", []),
    ("build.sh", "echo ${x:- # kgate: ignore[KG301] a word, not a comment}\n", []),
    ("build.sh", "echo ${x##*#} # kgate: ignore[KG301] after a pattern\n", [L(1, "KG301")]),
    ("build.sh", "cat <<E\"O\"F\n# kgate: ignore-file[KG301] in the body\nEOF\n# kgate: ignore[KG301] r\n",
     [L(4, "KG301")]),
    ("build.sh", "cat <<\\EOF\n# kgate: ignore-file[KG301] in the body\nEOF\n# kgate: ignore[KG301] r\n",
     [L(4, "KG301")]),
    ("build.sh", "cat <<'E O'\n# kgate: ignore-file[KG301] in the body\nE O\n# kgate: ignore[KG301] r\n",
     [L(4, "KG301")]),
    ("build.sh", "cat <<EOF \nx\nEOF \n# kgate: ignore-file[KG301] still the body\nEOF\n", []),
    ("build.sh", "x=$(cat <<EOF\n# kgate: ignore-file[KG301] a body in a substitution\nEOF\n)\n", []),
    ("build.sh", "(( x = 1 << 2 ))\n# kgate: ignore[KG301] after an arithmetic shift\n", [L(2, "KG301")]),
    ("build.sh", "echo $((16#ff)) # kgate: ignore[KG301] after a base\n", [L(1, "KG301")]),
    ("build.sh", "echo $(echo a)#b # kgate: ignore[KG301] r\n", [L(1, "KG301")]),
    ("build.sh", 'echo $(echo a)#" # kgate: ignore[KG301] in a string"\n', []),
    ("build.sh", "echo $((1))#x # kgate: ignore-file[KG301] a word after arithmetic, then a comment\n", []),
    ("build.sh", 'x=`echo a # c`; echo " # kgate: ignore[KG301] a string after backquotes"\n', []),
    ("build.sh", "case $x in\n  a#b) echo ;; # kgate: ignore[KG301] after a case pattern\nesac\n",
     [L(2, "KG301")]),
    ("build.sh", "cat <<-EOF\r\n\tbody\r\n\tEOF\r\n# kgate: ignore[KG301] after a CRLF here-document\r\n",
     [L(4, "KG301")]),
    # Makefiles: recipes, define blocks, references and function calls (make agrees).
    ("Makefile", "X := $(info # kgate: ignore-file[KG301] read literally by make)\n", []),
    ("Makefile", "X := $(shell echo a \\\n  # kgate: ignore-file[KG301] continued call)\n", []),
    ("Makefile", "override define X\n# kgate: ignore-file[KG301] in a define\nendef\n", []),
    ("Makefile", "define A\ndefine B\nendef\n# kgate: ignore-file[KG301] still in A\nendef\n", []),
    ("Makefile", "define X\nx\nendef # done\n# kgate: ignore[KG301] after the define\n", [L(4, "KG301")]),
    ("Makefile", "define X\n\tendef\n# kgate: ignore-file[KG301] a tab: text of the define\nendef\n", []),
    ("Makefile", "X = $$# # kgate: ignore[KG301] after an escaped dollar\n", [L(1, "KG301")]),
    ("Makefile", "all:\n\t@echo ${x:- # kgate: ignore[KG301] a recipe's word}\n", []),
    # TOML: multi-line strings whose closing quotes come with more quotes, arrays of tables.
    ("pyproject.toml", "a = '''x''''  # kgate: ignore[KG203] after a literal ending in a quote\n", [L(1, "KG203")]),
    ("pyproject.toml", 'a = """x"""""  # kgate: ignore[KG203] after two more quotes\n', [L(1, "KG203")]),
    ("pyproject.toml", 'a = """x\\\n  # kgate: ignore-file[KG203] a line-ending backslash\n"""\n', []),
    ("pyproject.toml", '[[tool.kgate.triton]]  # kgate: ignore[KG203] after a table array\n', [L(1, "KG203")]),
    ("pyproject.toml", "'k#ey' = 1 # kgate: ignore[KG203] after a literal key\n", [L(1, "KG203")]),
    # INI: continuation lines; a comment line inside a value is still a comment.
    ("setup.cfg", "[tool:pytest]\nenv =\n    A=1\n    # kgate: ignore[KG203] a comment line in a value\n",
     [L(4, "KG203")]),
    ("tox.ini", "[testenv]\nsetenv = A=1 ; kgate: ignore[KG203] inline text is the value\n", []),
    # Python: f-strings, type comments, tabs, encodings, a form feed, markers of other languages.
    ("k.py", "x = f\"{'#'}\"  # kgate: ignore[KG201] after an f-string holding a hash\n", [L(1, "KG201")]),
    ("k.py", "x = f\"{y:{'#'}>{w}}\"  # kgate: ignore[KG201] nested format spec\n", [L(1, "KG201")]),
    ("k.py", "x = []  # type: list[int]  # kgate: ignore[KG201] after a type comment\n", [L(1, "KG201")]),
    ("k.py", "if x:\n\ty = 1\t# kgate: ignore[KG201] tabs\n", [L(2, "KG201")]),
    ("k.py", "# -*- coding: latin-1 -*-\nx = 'é'  # kgate: ignore[KG201] a declared encoding\n", [L(2, "KG201")]),
    ("k.py", "\x0cx = 1  # kgate: ignore[KG201] after a form feed\n", [L(1, "KG201")]),
    ("k.py", "@triton.autotune(\n    configs=[],  # kgate: ignore[KG201] an inner line of a decorator\n)\n",
     [L(2, "KG201")]),
    ("k.py", "x = 1  # note // kgate: ignore[KG201] another language's marker is prose\n", []),
    ("k.py", "x = 1  # note ; kgate: ignore[KG201] an INI marker is prose too\n", []),
    ("k.cu", "int x; // note # kgate: ignore[KG302] a hash in a C++ comment is prose\n", []),
    ("CMakeLists.txt", "set(X 1) # see // kgate: ignore[KG301] prose\n", []),
]


@pytest.mark.parametrize("rel,text,expected", READ, ids=[f"{i}-{r}" for i, (r, _t, _e) in enumerate(READ)])
def test_held_out_directives_in_each_language(rel: str, text: str, expected: list) -> None:
    assert directives(rel, text) == expected


@pytest.mark.skipif(sys.version_info < (3, 12), reason="PEP 701 f-strings need Python 3.12")
@pytest.mark.parametrize("text,expected", [
    ('x = f"{f"# kgate: ignore-file[KG201] nested quotes"}"\n', []),
    ('x = f"""{f"""\n# kgate: ignore-file[KG201] nested triple quotes\n"""}"""\n', []),
    ('x = f"{y  # kgate: ignore[KG201] a comment in a replacement field\n}"\n', [L(1, "KG201")]),
])
def test_pep_701_f_strings(text: str, expected: list) -> None:
    assert directives("k.py", text) == expected


# --------------------------------------------------------------------------- a file directive after code

AFTER_CODE = [
    ("k.py", 'os.environ["TRITON_INTERPRET"] = "1"  # kgate: ignore-file[KG203] r\n', 1),
    ("k.cu", "add<<<1, 32>>>(x); // kgate: ignore-file[KG302] r\n", 1),
    ("k.cu", "int x; /* a */ // kgate: ignore-file[KG302] r\n", 1),
    ("CMakeLists.txt", "set(X 1) # kgate: ignore-file[KG301] r\n", 1),
    ("build.sh", "nvcc -arch=sm_120 k.cu # kgate: ignore-file[KG301] r\n", 1),
    ("Makefile", "all:\n\tnvcc k.cu # kgate: ignore-file[KG301] r\n", 2),
    ("pyproject.toml", "a = 1 # kgate: ignore-file[KG203] r\n", 1),
]
OWN_LINE = [
    ("k.py", "x = (\n    # kgate: ignore-file[KG203] r\n    1)\n", 2),
    ("k.cu", "/* a */ /* b */ // kgate: ignore-file[KG302] r\n", 1),
    ("k.cu", "int x; // a \\\n// kgate: ignore-file[KG302] r\n", 2),
    ("k.cu", "\t// kgate: ignore-file[KG302] r\n", 1),
    ("CMakeLists.txt", "#[[ a ]] # kgate: ignore-file[KG301] r\n", 1),
    ("Makefile", "all:\n\t# kgate: ignore-file[KG301] r\n", 2),
    ("tox.ini", "[testenv]\n  ; kgate: ignore-file[KG203] r\n", 2),
]


@pytest.mark.parametrize("rel,text,line", AFTER_CODE, ids=[f"{i}-{r}" for i, (r, _t, _l) in enumerate(AFTER_CODE)])
def test_a_file_directive_after_code_is_misplaced(rel: str, text: str, line: int) -> None:
    (found,) = parse_directives(text, language(rel))
    assert found.line == line and found.file_level and misplaced(found)
    assert found.problem.startswith("`kgate: ignore-file` after code silences nothing")


@pytest.mark.parametrize("rel,text,line", OWN_LINE, ids=[f"{i}-{r}" for i, (r, _t, _l) in enumerate(OWN_LINE)])
def test_a_file_directive_on_a_line_without_code_is_not(rel: str, text: str, line: int) -> None:
    (found,) = parse_directives(text, language(rel))
    assert found.line == line and found.file_level and not misplaced(found) and not found.problem


CONFIG = '[tool.kgate]\ntargets = ["sm_120a"]\n'


def test_a_misplaced_file_directive_silences_nothing_and_is_reported(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "pyproject.toml").write_text(CONFIG)
    (tmp_path / "tests" / "conftest.py").write_text(
        'import os\n\nos.environ["TRITON_INTERPRET"] = "1"  # kgate: ignore-file[KG203] the CPU job\n'
        'os.environ["TRITON_INTERPRET"] = "1"\n')
    (tmp_path / "k.cu").write_text("__global__ void k() {}\nvoid f() {\n  k<<<1, 1>>>(); "
                                   "// kgate: ignore-file[KG302] checked by the caller\n}\n")
    run = kgate("lint", "--format", "json", cwd=tmp_path)
    found = sorted((f["path"], f["line"], f["code"]) for f in run.json()["findings"])
    # Both KG203 findings and the launch stay; each misplaced directive is KG003, and none is judged unused.
    assert found == [("k.cu", 3, "KG003"), ("k.cu", 3, "KG302"), ("tests/conftest.py", 3, "KG003"),
                     ("tests/conftest.py", 3, "KG203"), ("tests/conftest.py", 4, "KG203")], run.stdout
    messages = [f["message"] for f in run.json()["findings"] if f["code"] == "KG003"]
    assert all("a file directive stands on a line of its own" in m for m in messages)
    # Moved to a line of its own, it silences the file.
    conftest = tmp_path / "tests" / "conftest.py"
    conftest.write_text('import os\n\n# kgate: ignore-file[KG203] the CPU job\nos.environ["TRITON_INTERPRET"] = "1"\n')
    assert sorted(f["code"] for f in kgate("lint", "--format", "json", cwd=tmp_path).json()["findings"]) == [
        "KG003", "KG302"]


# --------------------------------------------------------------------------- reading takes linear time


def within(seconds: float, work: Callable[[], Any]) -> float:
    """Run `work`, failing it after `seconds` (the readers' loops are Python: the alarm interrupts them)."""
    def expired(_signum: int, _frame: object) -> None:
        raise TimeoutError(f"still reading after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    start = time.monotonic()
    try:
        work()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return time.monotonic() - start


N = 200_000


@pytest.mark.parametrize("name,work", [
    ("a number of 200,000 digit separators", lambda: blank("x = " + "1'" * N + "1;\n")),
    ("200,000 comments kept out of the code", lambda: code_only("int x; // c\n" * N, "cpp")),
    ("200,000 joined shell words", lambda: comments("a\\\n#b\n" * N, "shell")),
    ("a make line of 200,000 escaped hashes", lambda: comments("X = " + "\\#" * N + "\n", "make")),
    # Each Python comment's line start was searched for a lone carriage return from the text's start: 55 s here.
    ("400,000 Python comments that name kgate", lambda: parse_directives("#kgate:\n" * 2 * N, "python")),
    ("a line of 2,000,000 characters", lambda: parse_directives("x = '" + "a" * 10 * N + "'  # kgate: "
                                                                 "ignore[KG201] r\n", "python")),
])
def test_large_inputs_are_read_in_linear_time(name: str, work: Callable[[], Any]) -> None:
    within(30, work)  # each takes a second or a few here; the quadratic readers took a minute or more
