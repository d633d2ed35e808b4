"""Held-out cases for the comment forms a directive is written in: every comment of a language holds directives (C++
`///`, `//!`, `///<`, `/* */`, `/** */` with its ` * ` lines, CMake `#[[ ]]` bracket comments, `##` and `#:` line
comments, free spaces around the colon), and text meant as a directive that is not read as one (`KGATE: ignore`,
`kgate ignore`, `kgate: ignore_file`) is reported instead of silently silencing nothing. The same text in a string is
still no directive, and KG002's fix removes a stale directive of a block comment without touching the code."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import kgate

from kgate.core.suppress import parse_directives, without_code
from kgate.support.comments import language, same_code


def read(rel: str, text: str) -> list[tuple[int, tuple[str, ...], bool]]:
    return [(d.line, d.codes, d.file_level) for d in parse_directives(text, language(rel)) if d.codes]


def unread(rel: str, text: str) -> list[int]:
    return [d.line for d in parse_directives(text, language(rel)) if "not read as a directive" in d.problem]


def L(line: int, code: str) -> tuple[int, tuple[str, ...], bool]:
    return (line, (code,), False)


def F(line: int, code: str) -> tuple[int, tuple[str, ...], bool]:
    return (line, (code,), True)


FORMS = [
    # C, C++, CUDA doc-comment line forms
    ("k.cu", "k<<<1, 1>>>(x); /// kgate: ignore[KG302] checked by the caller\n", [L(1, "KG302")]),
    ("k.cu", "k<<<1, 1>>>(x); //! kgate: ignore[KG302] checked by the caller\n", [L(1, "KG302")]),
    ("k.cu", "k<<<1, 1>>>(x); ///< kgate: ignore[KG302] checked by the caller\n", [L(1, "KG302")]),
    ("k.cuh", "//! kgate: ignore-file[KG302] the caller checks\n", [F(1, "KG302")]),
    # C block comments: on the line, Doxygen's forms, the ` * ` lines of a longer one
    ("k.cu", "k<<<1, 1>>>(x); /* kgate: ignore[KG302] checked by the caller */\n", [L(1, "KG302")]),
    ("k.cu", "k<<<1, 1>>>(x); /*kgate:ignore[KG302] checked*/\n", [L(1, "KG302")]),
    ("k.cu", "/** kgate: ignore-file[KG302] the caller checks */\nint x;\n", [F(1, "KG302")]),
    ("k.cu", "/*! kgate: ignore-file[KG302] the caller checks */\n", [F(1, "KG302")]),
    ("k.cu", "/*\n * Launch helpers.\n * kgate: ignore-file[KG302] the caller checks\n */\n", [F(3, "KG302")]),
    ("k.cu", "/**\n   kgate: ignore-file[KG302] the caller checks\n*/\n", [F(2, "KG302")]),
    ("k.cu", "int a;\r\n/* kgate: ignore-file[KG302] crlf */\r\n", [F(2, "KG302")]),
    # CMake bracket comments of any length, and `##` line comments
    ("CMakeLists.txt", "#[[ kgate: ignore-file[KG301] old cards too ]]\nset(X 1)\n", [F(1, "KG301")]),
    ("CMakeLists.txt", "#[==[\nkgate: ignore-file[KG301] old cards too\n]==]\n", [F(2, "KG301")]),
    ("x.cmake", "## kgate: ignore-file[KG301] old cards too\n", [F(1, "KG301")]),
    # Python spacing and doc-comment forms
    ("k.py", "x = 1  #kgate:ignore[KG203] reviewed\n", [L(1, "KG203")]),
    ("k.py", "x = 1  # kgate : ignore[KG203] reviewed\n", [L(1, "KG203")]),
    ("k.py", "x = 1  ##  kgate:ignore [KG203] reviewed\n", [L(1, "KG203")]),
    ("k.py", "x = 1  #: kgate: ignore[KG203] reviewed\n", [L(1, "KG203")]),
    ("k.py", "#\tkgate:\tignore-file[KG203]\treviewed\n", [F(1, "KG203")]),
    ("build.sh", "nvcc -arch=sm_100 k.cu  ## kgate: ignore[KG301] reviewed\n", [L(1, "KG301")]),
    ("setup.cfg", ";; kgate: ignore-file[KG301] reviewed\n", [F(1, "KG301")]),
    # Good twins: the same text in a string, a raw string, a quoted or bracket argument is still no directive
    ("k.cu", 'const char* s = "/* kgate: ignore-file[KG302] r */";\n', []),
    ("k.cu", 'const char* s = "/// kgate: ignore-file[KG302] r";\n', []),
    ("k.cu", 'auto s = R"(\n/** kgate: ignore-file[KG302] r */\n)";\n', []),
    ("CMakeLists.txt", 'set(X "#[[ kgate: ignore-file[KG301] r ]]")\n', []),
    ("CMakeLists.txt", "set(X [[\n#[[ kgate: ignore-file[KG301] r ]]\n]])\n", []),
    ("k.py", 's = "#kgate:ignore-file[KG203] r"\n', []),
    ("k.py", 's = """\n## kgate: ignore-file[KG203] r\n"""\n', []),
    # prose inside a block comment, and a line comment's text commented out by a block comment
    ("k.cu", "/* write kgate: ignore[KG302] after the launch */\n", []),
    ("k.cu", "/* a block\n// kgate: ignore-file[KG302] commented out\n*/\n", []),
]


@pytest.mark.parametrize("rel, text, expected", FORMS, ids=[f"{i}-{r}" for i, (r, _t, _e) in enumerate(FORMS)])
def test_every_comment_form_holds_directives(rel: str, text: str, expected: list) -> None:
    assert read(rel, text) == expected
    assert unread(rel, text) == []


NEAR = [
    ("k.py", "x = 1  # KGATE: ignore[KG203] reviewed\n", 1),
    ("k.py", "x = 1  # kgate: IGNORE[KG203] reviewed\n", 1),
    ("k.py", "x = 1  # kgate ignore[KG203] reviewed\n", 1),
    ("k.py", "# kgate: ignore_file[KG203] reviewed\n", 1),
    ("k.py", "# kgate: ignore-files[KG203] reviewed\n", 1),
    ("k.cu", "int x;\nk<<<1, 1>>>(x); // Kgate: ignore[KG302] checked\n", 2),
    ("k.cu", "/*\n * kgate ignore-file[KG302] checked\n */\n", 2),
    ("CMakeLists.txt", "#[[ kgate: ignorefile[KG301] r ]]\n", 1),
]


@pytest.mark.parametrize("rel, text, line", NEAR, ids=[f"{i}-{r}" for i, (r, _t, _l) in enumerate(NEAR)])
def test_text_meant_as_a_directive_is_reported_as_not_read(rel: str, text: str, line: int) -> None:
    assert read(rel, text) == []
    assert unread(rel, text) == [line]


@pytest.mark.parametrize("rel, text", [
    ("k.py", 's = "# KGATE: ignore[KG203] reviewed"\n'),  # a string
    ("k.py", "# kgate ignores the interpreter here\n"),  # prose about kgate
    ("k.py", "# see `# kgate ignore[...]` in the docs\n"),  # quoted, not at the comment's start
    ("k.cu", "/* We let kgate ignore this launch. */\n"),
])
def test_prose_and_strings_are_not_reported(rel: str, text: str) -> None:
    assert unread(rel, text) == [] and read(rel, text) == []


LAUNCH = "__global__ void k(float* x) { x[0] = 1.f; }\nvoid a(float* x) {\n  k<<<1, 1>>>(x);{}\n}}\n"


def _lint(root: Path, name: str, text: str, *args: str) -> tuple[int, list[tuple[int, str, str]]]:
    (root / "kgate.toml").write_text('targets = ["sm_120a"]\n')
    (root / name).write_text(text)
    run = kgate("lint", "--no-cache", "--format", "json", *args, cwd=root)
    assert run.code in (0, 1) and "Traceback" not in run.stderr, run.stderr
    return run.code, sorted((f["line"], f["code"], f["message"]) for f in run.json()["findings"])


@pytest.mark.parametrize("tail", [
    " /// kgate: ignore[KG302] checked by the caller",
    " //! kgate: ignore[KG302] checked by the caller",
    " /* kgate: ignore[KG302] checked by the caller */",
    " /** kgate: ignore[KG302] checked by the caller */",
])
def test_a_block_or_doc_comment_directive_silences_the_launch(tmp_path: Path, tail: str) -> None:
    code, found = _lint(tmp_path, "k.cu", LAUNCH.replace("{}", tail, 1).replace("}}", "}"))
    assert (code, found) == (0, [])


def test_the_same_text_in_a_string_silences_nothing(tmp_path: Path) -> None:
    text = LAUNCH.replace("{}", ' const char* s = "/* kgate: ignore[KG302] no */";', 1).replace("}}", "}")
    code, found = _lint(tmp_path, "k.cu", text)
    assert code == 1 and [(line, c) for line, c, _m in found] == [(3, "KG302")]


def test_a_cmake_bracket_comment_silences_the_file(tmp_path: Path) -> None:
    (tmp_path / "k.cu").write_text("__global__ void k(float* o) {\n#if defined(__CUDA_ARCH_FEAT_SM120_ALL)\n"
                                   "  o[0] = 1.f;\n#endif\n}\n")
    build = "add_library(k STATIC k.cu)\nset(CMAKE_CUDA_ARCHITECTURES 120)\n"
    code, found = _lint(tmp_path, "CMakeLists.txt", build)
    assert code == 1 and [c for _l, c, _m in found] == ["KG301"]  # the bad case is reported without the comment
    code, found = _lint(tmp_path, "CMakeLists.txt", "#[[ kgate: ignore-file[KG301] the old cards build too ]]\n"
                        + build)
    assert (code, found) == (0, [])


def test_a_mistyped_directive_is_an_error_that_says_why(tmp_path: Path) -> None:
    code, found = _lint(tmp_path, "k.cu", LAUNCH.replace("{}", " // KGATE: ignore[KG302] checked", 1)
                        .replace("}}", "}"))
    assert code == 1
    assert [(line, c) for line, c, _m in found] == [(3, "KG003"), (3, "KG302")]
    assert "`KGATE: ignore` is not read as a directive" in found[0][2]


@pytest.mark.parametrize("line, col, after", [
    ("int x; /* kgate: ignore[KG302] r */", 11, "int x;"),  # the comment goes with the directive, and the line's end
    ("int x; /* kgate: ignore[KG302, KG303] r */", 11, "int x; /* kgate: ignore[KG303] r */"),
    (" * kgate: ignore-file[KG302] r", 4, None),  # a line of a longer comment: the line goes
    ("int x; /* kgate: ignore[KG302] r */ int y;", 11, "int x; /* kgate: ignore[KG302] r */ int y;"),  # left alone
    ("#[==[ kgate: ignore-file[KG301] r ]==]", 7, None),
])
def test_the_unused_fix_removes_a_block_directive(line: str, col: int, after: str | None) -> None:
    code = "KG301" if "KG301" in line else "KG302"
    edit = without_code(line, col - 1, code)
    if after is None:
        assert edit == (0, len(line), "")
        return
    new = line if edit is None else line[:edit[0]] + edit[2] + line[edit[1]:]
    assert new.rstrip() == after


def test_lint_fix_removes_a_stale_block_directive_and_keeps_the_code(tmp_path: Path) -> None:
    text = ("__global__ void k(float* x) { x[0] = 1.f; }  /* kgate: ignore[KG302] stale */\n"
            "/*\n * Helpers.\n * kgate: ignore-file[KG302] stale too\n */\nint y;\n")
    code, found = _lint(tmp_path, "k.cu", text)
    assert sorted((line, c) for line, c, _m in found) == [(1, "KG002"), (4, "KG002")]
    code, found = _lint(tmp_path, "k.cu", text, "--fix")
    after = (tmp_path / "k.cu").read_text()
    assert (code, found) == (0, [])
    assert after == "__global__ void k(float* x) { x[0] = 1.f; }\n/*\n * Helpers.\n */\nint y;\n"
    assert same_code("k.cu", text, after)
