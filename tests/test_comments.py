"""Suppression comments are read in comments only, and an edit meant for comments changes comments only, in
every language kgate reads directives from or edits (kgate.support.comments): a directive's text inside a
C++ raw string, a CMake quoted or bracket argument, a shell here-document or a Python string is text, not a
directive; KG002's fix never deletes it; `--add-ignore` never writes into such a place and never folds a new
code into a directive that has a reason; `--fix` never writes outside the project, nor a read-only, hard-linked
or changed file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import kgate

from kgate.core.findings import Finding, Severity
from kgate.core.fix import Applicability, Edit, Fix
from kgate.core.suppress import parse_directives, with_code
from kgate.pipeline.fix import apply_fixes
from kgate.pipeline.pin import add_ignores
from kgate.support.comments import code_only, comments, language, same_code


def directives(rel: str, text: str) -> list[tuple[int, tuple[str, ...], bool]]:
    return [(d.line, d.codes, d.file_level) for d in parse_directives(text, language(rel))]


# --------------------------------------------------------------------------- reading directives

# (file, text, the directives read: (line, codes, file-level))
READ = [
    # Inside strings: none.
    ("k.cu", 'auto s = R"(\n// kgate: ignore-file[KG302] in a raw string\n)";\n', []),
    ("k.cu", 'auto s = R"x(\n)"\n// kgate: ignore-file[KG302] still the string\n)x";\n', []),
    ("k.cu", 'auto s = u8R"(// kgate: ignore-file[KG302] x)";\n', []),
    ("k.cu", 'const char* s = "// kgate: ignore-file[KG302] in a string";\n', []),
    ("k.cu", 'const char* s = "a\\\n// kgate: ignore-file[KG302] continued string";\n', []),
    ("k.cu", "char c = '\"'; // kgate: ignore[KG302] after a char literal\n", [(1, ("KG302",), False)]),
    ("k.cu", "/* a block\n// kgate: ignore-file[KG302] inside a block comment\n*/\n", []),
    ("k.cu", "/* kgate: ignore-file[KG302] a block comment holds directives too */\n", [(1, ("KG302",), True)]),
    ("k.cu", "/* one */ int x; /* two\n*/ int y; // kgate: ignore[KG302] after a block\n", [(2, ("KG302",), False)]),
    ("k.cu", "// note \\\n// kgate: ignore[KG302] continued comment\nint x;\n", [(2, ("KG302",), False)]),
    ("k.cu", "int x;\r\n// kgate: ignore-file[KG302] crlf\r\n", [(2, ("KG302",), True)]),
    ("k.cu", "\tint x;\t// kgate: ignore[KG302] tabs", [(1, ("KG302",), False)]),
    ("CMakeLists.txt", 'set(X "a\n# kgate: ignore-file[KG301] in a quoted argument\n")\n', []),
    ("CMakeLists.txt", "set(X [=[\n# kgate: ignore-file[KG301] in a bracket argument\n]=])\n", []),
    ("CMakeLists.txt", "#[==[\n# kgate: ignore-file[KG301] in a bracket comment\n]==]\n", []),
    ("CMakeLists.txt", "set(X \\\"a) # kgate: ignore[KG301] after an escaped quote\n", [(1, ("KG301",), False)]),
    ("CMakeLists.txt", "target_compile_options(k PRIVATE $<$<CONFIG:Debug>:-G>) # kgate: ignore[KG301] gen\n",
     [(1, ("KG301",), False)]),
    ("CMakeLists.txt", "set(X a[[b) # kgate: ignore[KG301] not a bracket argument\n", [(1, ("KG301",), False)]),
    ("build.sh", "cat <<EOF\n# kgate: ignore-file[KG301] in a here-document\nEOF\n", []),
    ("build.sh", "cat <<-'EOF'\n\t# kgate: ignore-file[KG301] in a here-document\n\tEOF\n# kgate: ignore[KG301] x\n",
     [(4, ("KG301",), False)]),
    ("build.sh", "echo $'a\\' # kgate: ignore-file[KG301] still quoted'\n", []),
    ("build.sh", "echo 'a # kgate: ignore-file[KG301] quoted'\n", []),
    ("build.sh", 'echo "a\n# kgate: ignore-file[KG301] quoted"\n', []),
    ("build.sh", "echo a\\# kgate: ignore-file[KG301] escaped\n", []),
    ("build.sh", "echo ${#x} # kgate: ignore[KG301] after a length\n", [(1, ("KG301",), False)]),
    ("Makefile", "define X\n# kgate: ignore-file[KG301] in a define\nendef\n", []),
    ("Makefile", "X = a\\# kgate: ignore-file[KG301] escaped\n", []),
    ("Makefile", "all:\n\techo '# kgate: ignore-file[KG301] quoted in a recipe'\n", []),
    ("pyproject.toml", 'x = """\n# kgate: ignore-file[KG203] in a multi-line string\n"""\n', []),
    ("pyproject.toml", "x = '''\n# kgate: ignore-file[KG203] in a literal string\n'''\n", []),
    ("pyproject.toml", 'x = "a # kgate: ignore-file[KG203] in a string"\n', []),
    ("pyproject.toml", 'x = "a\\"" # kgate: ignore[KG203] after an escape\n', [(1, ("KG203",), False)]),
    ("k.py", 'x = f"{y!r:#>4} # kgate: ignore-file[KG201] in an f-string"\n', []),
    ("k.py", 'x = """\n# kgate: ignore-file[KG201] in a string\n"""\n', []),
    ("k.py", "x = 1  # kgate: ignore[KG201] reviewed  # kgate: ignore[KG203] TODO: give the reason\n",
     [(1, ("KG201",), False), (1, ("KG203",), False)]),
    ("k.py", "\ufeffx = 1  # kgate: ignore[KG201] bom\n".lstrip("\ufeff"), [(1, ("KG201",), False)]),
    ("k.py", "x = (1 +\n  2)  # kgate: ignore[KG201] a broken file still reads\n)\n", [(2, ("KG201",), False)]),
    ("k.py", "x = '''\n# kgate: ignore-file[KG201] unterminated string in a broken file\n", []),
    ("setup.cfg", "[tool:pytest]\nenv = A # kgate: ignore[KG203] inline text is the value\n", []),
    ("setup.cfg", "[tool:pytest]\n; kgate: ignore-file[KG203] a comment line\n", [(2, ("KG203",), True)]),
    ("CMakePresets.json", '{"x": "# kgate: ignore-file[KG301] json has no comments"}\n', []),
]


@pytest.mark.parametrize("rel,text,expected", READ, ids=[f"{i}-{r}" for i, (r, _t, _e) in enumerate(READ)])
def test_directives_are_read_in_comments_only(rel: str, text: str, expected: list) -> None:
    assert directives(rel, text) == expected


def test_code_only_ignores_comments_and_keeps_strings() -> None:
    assert code_only("int x; // a\n// b\nint y;\n", "cpp") == code_only("int x;\nint y;\n", "cpp")
    assert code_only('auto s = R"(\n// b\n)";\n', "cpp") != code_only('auto s = R"(\n)";\n', "cpp")
    assert code_only("a/**/b\n", "cpp") != code_only("ab\n", "cpp")
    assert [c.block for c in comments("#[[x]] # y\n", "cmake")] == [True, False]


# --------------------------------------------------------------------------- KG002's fix


def drop(line: int, col: int, code: str) -> Fix:
    return Fix("remove the unused suppression", Applicability.SAFE, (Edit(line, col, line, col, code,
                                                                          "drop-suppression"),))


@pytest.mark.parametrize("rel,text,line,col", [
    ("k.cu", 'auto s = R"(\n// kgate: ignore-file[KG302] in a raw string\n)";\n', 2, 0),
    ("CMakeLists.txt", "set(X [=[\n# kgate: ignore-file[KG301] in a bracket argument\n]=])\n", 2, 0),
    ("CMakeLists.txt", 'set(X "a\n# kgate: ignore-file[KG301] in a quoted argument\n")\n', 2, 0),
    ("build.sh", "cat <<EOF\n# kgate: ignore-file[KG301] in a here-document\nEOF\n", 2, 0),
    ("pyproject.toml", 'x = """\n# kgate: ignore-file[KG203] in a string\n"""\n', 2, 0),
])
def test_a_suppression_removal_inside_a_string_is_not_applied(rel: str, text: str, line: int, col: int) -> None:
    code = "KG203" if rel.endswith(".toml") else "KG302" if rel.endswith(".cu") else "KG301"
    data, taken, why = apply_fixes(rel, text.encode(), [drop(line, col, code)])
    assert data is None and taken == [] and "more than a comment" in why


def test_a_suppression_removal_in_a_comment_is_applied() -> None:
    text = "int x;\r\n// kgate: ignore-file[KG302] stale\r\nint y;"
    data, taken, _why = apply_fixes("k.cu", text.encode(), [drop(2, 0, "KG302")])
    assert data == b"int x;\r\nint y;" and len(taken) == 1


def test_lint_fix_leaves_a_raw_string_and_a_bracket_argument_alone(tmp_path: Path) -> None:
    raw = 'const char* kSrc = R"(\n// kgate: ignore-file[KG302] part of the string\n)";\n'
    cmake = ("cmake_minimum_required(VERSION 3.24)\nproject(p LANGUAGES CUDA)\n"
             "set(FLAGS [=[\n# kgate: ignore-file[KG301] part of the flags\n]=])\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "pyproject.toml").write_text('[tool.kgate]\ntargets = ["sm_120a"]\n')
    (tmp_path / "src/k.cu").write_text(raw)
    (tmp_path / "CMakeLists.txt").write_text(cmake)
    run = kgate("lint", "--fix", cwd=tmp_path)
    assert (tmp_path / "src/k.cu").read_text() == raw and (tmp_path / "CMakeLists.txt").read_text() == cmake, \
        run.stderr


# --------------------------------------------------------------------------- --add-ignore


def finding(path: str, line: int, code: str) -> Finding:
    return Finding(path=path, line=line, col=1, code=code, name="", severity=Severity.ERROR, message="")


def test_a_new_pin_gets_its_own_placeholder_next_to_a_reasoned_directive() -> None:
    line = "x = 1  # kgate: ignore[KG204] reviewed: prints once"
    assert with_code(line, "KG203", "#") == line + "  # kgate: ignore[KG203] TODO: give the reason"
    pending = "x = 1  # kgate: ignore[KG204] TODO: give the reason"
    assert with_code(pending, "KG203", "#") == "x = 1  # kgate: ignore[KG204, KG203] TODO: give the reason"
    assert with_code(line + "  # kgate: ignore[KG203] TODO: give the reason", "KG203", "#") is None


def test_add_ignore_next_to_a_reasoned_directive_leaves_the_new_pin_failing(tmp_path: Path) -> None:
    root = tmp_path
    (root / "tests").mkdir()
    (root / "pyproject.toml").write_text('[tool.kgate]\ntargets = ["sm_120a"]\n')
    (root / "tests/conftest.py").write_text(
        'import os\n\nos.environ["TRITON_INTERPRET"] = "1"  # kgate: ignore[KG204] reviewed: no print here\n')
    run = kgate("lint", "--add-ignore", cwd=root)
    assert "pinned 1 finding(s) in 1 file" in run.stderr
    assert "# kgate: ignore[KG204] reviewed: no print here  # kgate: ignore[KG203] TODO: give the reason" in \
        (root / "tests/conftest.py").read_text()
    after = kgate("lint", "--format", "json", cwd=root).json()["findings"]
    assert sorted(f["code"] for f in after) == ["KG002", "KG003"]


# (file, text, line): a comment at that line's end would be part of a value
INTO_VALUES = [
    ("CMakeLists.txt", "set(FLAGS [=[\n-O3\n]=])\n", 2),
    ("CMakeLists.txt", 'set(FLAGS "-O3\n-arch=sm_120"\n)\n', 1),
    ("build.sh", "cat > flags.txt <<EOF\n-arch=sm_120\nEOF\n", 2),
    ("build.sh", "cat > flags.txt <<-EOF\n\t-arch=sm_120\n\tEOF\n", 2),
    ("build.sh", "nvcc $'-arch=sm_120\n' k.cu\n", 1),
    ("k.cu", 'auto s = R"(\n-arch=sm_120\n)";\n', 2),
    ("k.cu", "/* a\nb */ int x;\n", 1),
    ("pyproject.toml", 'x = """\nsm_120\n"""\n', 2),
    ("Makefile", "define FLAGS\n-arch=sm_120\nendef\n", 2),
]


@pytest.mark.parametrize("rel,text,line", INTO_VALUES, ids=[f"{i}-{r}" for i, (r, _t, _l) in enumerate(INTO_VALUES)])
def test_add_ignore_writes_no_comment_into_a_value(rel: str, text: str, line: int) -> None:
    run = add_ignores([finding(rel, line, "KG301")], _where(rel, text))
    assert run.changes == {} and run.pinned == 0 and len(run.left) == 1


def _where(rel: str, text: str) -> dict[str, str]:
    import tempfile

    folder = tempfile.mkdtemp()
    path = os.path.join(folder, rel.replace("/", "_"))
    with open(path, "w", newline="") as handle:
        handle.write(text)
    return {rel: path}


@pytest.mark.parametrize("rel,text,line,expected", [
    ("k.cu", "int x;\r\nint y;", 2, "int x;\r\nint y;  // kgate: ignore[KG302] TODO: give the reason"),
    ("CMakeLists.txt", "set(A [=[x]=]) \n", 1, "set(A [=[x]=])  # kgate: ignore[KG301] TODO: give the reason\n"),
    ("build.sh", "cat <<EOF\nx\nEOF\nnvcc -arch=sm_120\n", 4,
     "cat <<EOF\nx\nEOF\nnvcc -arch=sm_120  # kgate: ignore[KG301] TODO: give the reason\n"),
])
def test_add_ignore_pins_code_lines(rel: str, text: str, line: int, expected: str) -> None:
    where = _where(rel, text)
    run = add_ignores([finding(rel, line, "KG301" if not rel.endswith(".cu") else "KG302")], where)
    assert run.pinned == 1 and run.changes[rel].after.decode() == expected
    assert same_code(rel, text, expected)


# --------------------------------------------------------------------------- writing


PYPROJECT = '[tool.kgate]\ntargets = ["sm_120a"]\n'
STALE = "int x;  // kgate: ignore[KG302] stale\n"


def fixable(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text(PYPROJECT)


def test_fix_does_not_write_through_a_link_out_of_the_project(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "k.cu").write_text(STALE)
    (outside / "dir").mkdir()
    (outside / "dir/j.cu").write_text(STALE)
    root = tmp_path / "proj"
    fixable(root)
    (root / "k.cu").symlink_to(outside / "k.cu")
    (root / "dir").symlink_to(outside / "dir")
    run = kgate("lint", "--fix", cwd=root)
    assert (outside / "k.cu").read_text() == STALE and (outside / "dir/j.cu").read_text() == STALE
    assert run.stderr.count("outside the project: not written") == 2, run.stderr


def test_fix_writes_a_file_with_two_names_once_and_no_hard_linked_or_read_only_file(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    fixable(root)
    (root / "a.cu").write_text(STALE)
    (root / "b.cu").symlink_to(root / "a.cu")
    (root / "ro.cu").write_text(STALE)
    (root / "ro.cu").chmod(0o444)
    (root / "hard.cu").write_text(STALE)
    os.link(root / "hard.cu", tmp_path / "elsewhere.cu")
    run = kgate("lint", "--fix", cwd=root, timeout=120)  # two names of one file: one lock, not a wait for ever
    assert (root / "a.cu").read_text() == "int x;\n" and (root / "b.cu").is_symlink()
    assert "written once" in run.stderr
    assert (root / "ro.cu").read_text() == STALE and "read-only: not written" in run.stderr
    assert (tmp_path / "elsewhere.cu").read_text() == STALE and "hard link" in run.stderr


# Found by attacking the readers: an arithmetic shift is no here-document; a Makefile comment or value
# continued with a backslash goes on through the next line.
ATTACK = [
    ("build.sh", "x=$(( 1 << 2 ))\n# kgate: ignore[KG301] r\n", [(2, ("KG301",), False)]),
    ("Makefile", "# a \\\n# kgate: ignore[KG301] r\nX = 1\n", [(2, ("KG301",), False)]),
    ("Makefile", "X = a \\\n  b # kgate: ignore[KG301] r\n", [(2, ("KG301",), False)]),
    ("build.sh", ("cat <<A <<B\na\n# kgate: ignore-file[KG301] in A\nA\n# kgate: ignore-file[KG301] in B\nB\n"
                  "# kgate: ignore[KG301] r\n"), [(7, ("KG301",), False)]),
    ("k.cu", "/* /* */ // kgate: ignore[KG302] x */\n", [(1, ("KG302",), False)]),
    ("k.cu", 'auto s = R"d(a)"b)d"; // kgate: ignore[KG302] r\n', [(1, ("KG302",), False)]),
    ("CMakeLists.txt", "#[==[ ]=] # kgate: ignore-file[KG301] x\n]==]\n", []),
    ("pyproject.toml", 'a = """x\\""" # kgate: ignore-file[KG203] in\n"""\n', []),
    ("k.py", "\tx = (1 +  # kgate: ignore[KG201] r\n\t2)\n", [(1, ("KG201",), False)]),
]


@pytest.mark.parametrize("rel,text,expected", ATTACK, ids=[f"{i}-{r}" for i, (r, _t, _e) in enumerate(ATTACK)])
def test_directives_in_the_corners_of_each_language(rel: str, text: str, expected: list) -> None:
    assert directives(rel, text) == expected


def test_removing_a_directive_that_a_continued_comment_reaches_is_refused() -> None:
    # `// a \` continues onto the directive's line; with that line gone it would swallow `int x;`.
    text = "// a \\\n// kgate: ignore-file[KG302] x\nint x;\n"
    assert apply_fixes("k.cu", text.encode(), [drop(2, 0, "KG302")])[0] is None


def test_a_file_changed_between_read_and_write_is_left_alone(tmp_path: Path) -> None:
    from kgate.pipeline.writes import Change, write

    path = tmp_path / "k.cu"
    path.write_text("int y;\n")
    skipped = write({"k.cu": Change(str(path), b"int x;\n", b"int z;\n")}, root=tmp_path)
    assert path.read_text() == "int y;\n" and skipped == [("k.cu", "it changed since kgate read it: not written")]
