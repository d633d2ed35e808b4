"""Held-out cases for the comment readers, the directives read in them and KG002's fix: a directive right
after code (`launch();// kgate: ...`), a shell `#` that a backslash-newline joins to the word before it, and
corners of each language (preprocessor lines, headers, BOMs, CRLF, TOML keys, CMake quoted arguments)."""

from __future__ import annotations

import pytest

from kgate.core.fix import Applicability, Edit, Fix
from kgate.core.suppress import parse_directives, without_code
from kgate.pipeline.fix import apply_fixes
from kgate.support.comments import language, same_code


def directives(rel: str, text: str) -> list[tuple[int, tuple[str, ...], bool]]:
    return [(d.line, d.codes, d.file_level) for d in parse_directives(text, language(rel))]


READ = [
    # A comment's own marker starts a directive whatever code comes before it.
    ("k.cu", "add<<<1, 32>>>(x);// kgate: ignore[KG302] checked by the caller\n", [(1, ("KG302",), False)]),
    ("k.cuh", "int x;/* a */// kgate: ignore[KG302] after a block comment\n", [(1, ("KG302",), False)]),
    ("k.py", "x = 1# kgate: ignore[KG201] no space before the marker\n", [(1, ("KG201",), False)]),
    ("k.hpp", "f();\t// kgate: ignore[KG302] a tab\n", [(1, ("KG302",), False)]),
    # Quoted in prose inside a comment: no directive.
    ("k.cu", "a(); // write `// kgate: ignore[KG302] why` to pin it\n", []),
    ("k.py", "x = 1  # see '# kgate: ignore[KG201] why'\n", []),
    # C preprocessor: a comment inside `#if 0` is still a comment; `//` in an include path is read as C++ reads it.
    ("k.cu", "#if 0\n// kgate: ignore-file[KG302] in a disabled block\n#endif\n", [(2, ("KG302",), True)]),
    ("k.cu", '#include "a.h" // kgate: ignore[KG302] after an include\n', [(1, ("KG302",), False)]),
    ("k.cu", "#define K(x) k<<<1, 1>>>(x) // kgate: ignore[KG302] in a macro\n", [(1, ("KG302",), False)]),
    ("k.cu", "#define K(x) \\\n  k<<<1, 1>>>(x) // kgate: ignore[KG302] on the macro's last line\n",
     [(2, ("KG302",), False)]),
    ("k.cu", "char q = '\\''; // kgate: ignore[KG302] after an escaped quote\n", [(1, ("KG302",), False)]),
    ("k.cu", "int n = 1'000'000; // kgate: ignore[KG302] after digit separators\n", [(1, ("KG302",), False)]),
    ("k.cu", 'auto s = LR"(x)"; // kgate: ignore[KG302] after a wide raw string\n', [(1, ("KG302",), False)]),
    ("k.cu", "int a;\r\nint b;\n// kgate: ignore[KG302] mixed line ends\r\n", [(3, ("KG302",), False)]),
    ("k.py", '"""\n# kgate: ignore-file[KG201] in a docstring\n"""\nx = 1\n', []),
    ("k.py", 'x = "a \\\n# kgate: ignore-file[KG201] a string continued by a backslash"\n', []),
    ("k.py", "x = 1  # kgate: ignore[KG201] reviewed  # noqa: E501\n", [(1, ("KG201",), False)]),
    # Python ends a line at a lone `\r` too: the directive's line is the syntax tree's.
    ("k.py", 'x = """a\rb"""\ny = 1  # kgate: ignore[KG201] after a string holding a carriage return\n',
     [(3, ("KG201",), False)]),
    ("k.py", "x = 1\ry = 1  # kgate: ignore[KG201] old Mac line ends\r", [(2, ("KG201",), False)]),
    # Shell: a backslash-newline joins the lines, so `a\<newline>#b` is the word `a#b`.
    ("build.sh", "echo a\\\n# kgate: ignore-file[KG301] joined to the word before\n", []),
    ("build.sh", "echo a \\\n# kgate: ignore[KG301] after a space\n", [(2, ("KG301",), False)]),
    ("build.sh", "echo a\\\\\n# kgate: ignore[KG301] an escaped backslash ends the line\n", [(2, ("KG301",), False)]),
    # TOML: `#` in a quoted key or a string of an inline table is no comment.
    ("pyproject.toml", 'a = { "k#y" = 1 } # kgate: ignore[KG203] after an inline table\n', [(1, ("KG203",), False)]),
    ("pyproject.toml", 'a = { k = "# kgate: ignore-file[KG203] in a string" }\n', []),
    # CMake: `#[[` inside a quoted argument opens no bracket comment.
    ("CMakeLists.txt", 'set(X "#[[ ") # kgate: ignore[KG301] after a quoted argument\n', [(1, ("KG301",), False)]),
    ("x.cmake", 'message("# kgate: ignore-file[KG301] quoted")\n', []),
    # INI: only whole-line comments.
    ("tox.ini", "[testenv]\n# kgate: ignore-file[KG203] a comment line\n", [(2, ("KG203",), True)]),
]


@pytest.mark.parametrize("rel,text,expected", READ, ids=[f"{i}-{r}" for i, (r, _t, _e) in enumerate(READ)])
def test_held_out_directives(rel: str, text: str, expected: list) -> None:
    assert directives(rel, text) == expected


def drop(line: int, col: int, code: str) -> Fix:
    return Fix("remove the unused suppression", Applicability.SAFE, (Edit(line, col, line, col, code,
                                                                          "drop-suppression"),))


def test_a_directive_right_after_code_is_removed_by_the_fix() -> None:
    line = "add<<<1, 32>>>(x);// kgate: ignore[KG302] stale"
    assert without_code(line, line.index("//"), "KG302") == (line.index("//"), len(line), "")
    data, taken, _why = apply_fixes("k.cu", (line + "\n").encode(), [drop(1, line.index("//"), "KG302")])
    assert data == b"add<<<1, 32>>>(x);\n" and len(taken) == 1


def test_removing_a_joined_shell_word_is_refused() -> None:
    text = "echo a\\\n# kgate: ignore-file[KG301] x\n"
    assert apply_fixes("build.sh", text.encode(), [drop(2, 0, "KG301")])[0] is None


@pytest.mark.parametrize("rel,before,after,same", [
    ("build.sh", "echo a\\\n#b\n", "echo a\\\n\n", False),
    ("k.cuh", "int x;// c\n", "int x;\n", True),
    ("k.py", "x = 1\r\ny = 2  # c\n", "x = 1\r\ny = 2\n", True),
    ("pyproject.toml", 'a = { "k#y" = 1 }  # c\n', 'a = { "k#y" = 1 }\n', True),
])
def test_what_counts_as_a_comment_only_edit(rel: str, before: str, after: str, same: bool) -> None:
    assert same_code(rel, before, after) is same


def test_a_directive_after_lone_carriage_returns_suppresses_its_line(tmp_path) -> None:
    from conftest import kgate

    (tmp_path / "tests").mkdir()
    (tmp_path / "pyproject.toml").write_text('[tool.kgate]\ntargets = ["sm_120a"]\n')
    (tmp_path / "tests" / "conftest.py").write_bytes(
        b'import os\r"""a\rb"""\ros.environ["TRITON_INTERPRET"] = "1"  # kgate: ignore[KG203] reviewed: one process\r')
    run = kgate("lint", "--format", "json", cwd=tmp_path)
    assert run.code == 0 and run.json()["findings"] == [], run.stdout
