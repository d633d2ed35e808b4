"""Held-out cases for every kind of file kgate reads directives from and edits, beyond tests/test_comments.py,
tests/test_held_out_directives.py, tests/test_held_out_fix_edits.py and tests/test_held_out_fix_writes.py:

- where each language's comments are: shell substitutions and expansions inside double quotes (with quotes of
  their own), a `#` after an escaped blank (a character of the word), Makefile recipes (continued over several lines, with make's own references in them, after the `;`
  of a rule), CMake escapes and brackets, C++ literals and preprocessor lines, TOML strings and tables, INI comment
  lines, Python strings;
- where `--add-ignore` writes its comment, and where it writes none; a `lint --add-ignore` run on each kind of build
  file KG301 reads (a `.mk` file, a `setup.py` list, `CMakePresets.json`, which takes no comment);
- KG302's check inserted after a launch, compiled with nvcc afterwards: a launch that is the body of an if, else or
  loop written without braces (behind an if-initialiser, an attribute, a label, a comma, a for header's `;`) is left
  for a person, since a statement after it would fall out of that body;
- KG203's removal of the interpreter setting in Python: a statement that does more than the setting is left.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from conftest import kgate
from test_held_out_fix_writes import BLOCK_SCALED

from kgate.core.findings import Finding, Severity
from kgate.core.suppress import parse_directives
from kgate.pipeline.pin import add_ignores
from kgate.support.comments import language

PLACEHOLDER = "TODO: give the reason"


def directives(rel: str, text: str) -> list[tuple[int, tuple[str, ...], bool]]:
    """The directives that silence: (line, codes, file-level); a file directive after code silences nothing."""
    return [(d.line, d.codes, d.file_level) for d in parse_directives(text, language(rel))
            if not getattr(d, "misplaced", False)]


def L(line: int, code: str) -> tuple[int, tuple[str, ...], bool]:  # a line directive
    return (line, (code,), False)


def F(line: int, code: str) -> tuple[int, tuple[str, ...], bool]:  # a file directive
    return (line, (code,), True)


# (file, text, the directives that silence)
READ = [
    # Shell: a double-quoted string's substitutions and expansions hold quotes of their own (bash agrees).
    ("build.sh", 'echo "$(echo " # kgate: ignore[KG301] in a nested string")"\n', []),
    ("build.sh", 'echo "$(printf %s "a" " # kgate: ignore[KG301] x")" done\n', []),
    ("build.sh", 'echo "${x:-" # kgate: ignore[KG301] in a default"}"\n', []),
    ("build.sh", 'echo "`echo " # kgate: ignore[KG301] in backquotes"`"\n', []),
    ("build.sh", "echo \"$(echo ')' \" # kgate: ignore[KG301] after a quoted parenthesis\")\"\n", []),
    ("build.sh", 'echo "$(( 1 )) # kgate: ignore[KG301] in a string after arithmetic"\n', []),
    ("build.sh", 'echo "$(cat <<EOF\n# kgate: ignore-file[KG301] a here-document in a quoted substitution\nEOF\n)"\n',
     []),
    ("build.sh", "echo $(echo ')' # kgate: ignore[KG301] a comment in a substitution\n)\n", [L(1, "KG301")]),
    ("build.sh", "echo $'a\\' # kgate: ignore-file[KG301] in an ANSI-C string'\n", []),
    ("build.sh", 'echo "a\\" # kgate: ignore-file[KG301] after an escaped quote"\n', []),
    ("build.sh", "f() { echo; } # kgate: ignore[KG301] after a function\n", [L(1, "KG301")]),
    ("build.sh", "echo $(( $(echo 1) + 2 )) # kgate: ignore[KG301] after nested arithmetic\n", [L(1, "KG301")]),
    ("build.sh", "cat <<EOF; echo '\nbody # kgate: ignore-file[KG301] a quote open over the line\nEOF\n'\n", []),
    ("build.sh", "a=( # kgate: ignore[KG301] in an array\n 1 )\n", [L(1, "KG301")]),
    # An escaped blank is a character of the word: a `#` after it is too (bash runs `x=a\ # k` as the command `k`).
    ("build.sh", "x=a\\ # kgate: ignore[KG301] after an escaped space\n", []),
    ("build.sh", "nvcc -DX=a\\\t# kgate: ignore[KG301] after an escaped tab\n", []),
    ("build.sh", "echo a\\\\ # kgate: ignore[KG301] after an escaped backslash\n", [L(1, "KG301")]),
    ("build.sh", "echo 'a'\"b\"# kgate: ignore-file[KG301] glued to quotes\n", []),
    ("build.sh", "diff <(echo a) <(echo ')') # kgate: ignore[KG301] after process substitutions\n", [L(1, "KG301")]),
    ("build.sh", "case $x in a#) ;; esac # kgate: ignore[KG301] after a pattern with a hash\n", [L(1, "KG301")]),
    # Makefiles: a recipe is one shell command through its continued lines, read once make expanded it.
    ("Makefile", 'all:\n\tnvcc -arch=sm_120 \\\n  -DX="a # kgate: ignore[KG301] quoted on a continuation" k.cu\n', []),
    ("Makefile", 'all:\n\tnvcc "-DX=a \\\n\t# kgate: ignore-file[KG301] quoted across a continuation" k.cu\n', []),
    ("Makefile", "all:\n\t@echo $(info # kgate: ignore[KG301] a make function in a recipe)\n", []),
    ("Makefile", "all:\n\t@echo $(info \\\n# kgate: ignore[KG301] a make function continued)\n", []),
    ("Makefile", 'all: ; echo " # kgate: ignore[KG301] a string in a recipe after a semicolon"\n', []),
    ("Makefile", "all: ; nvcc k.cu # kgate: ignore[KG301] a comment after a semicolon's recipe\n", [L(1, "KG301")]),
    ("Makefile", "all: dep # kgate: ignore[KG301] a rule's comment before a semicolon ; echo\n", [L(1, "KG301")]),
    ("Makefile", "all:\n\t@echo '$(X)' \\\n\t# kgate: ignore[KG301] a shell comment after a continuation\n",
     [L(3, "KG301")]),
    ("Makefile", "all:\n\techo $$# # kgate: ignore[KG301] after the shell's argument count\n", [L(2, "KG301")]),
    ("Makefile", "X = a\\\\# kgate: ignore[KG301] after an escaped backslash\n", [L(1, "KG301")]),
    ("Makefile", "ifeq ($(X),#)\nA = 1\nendif\n# kgate: ignore[KG301] after a conditional\n", [L(4, "KG301")]),
    ("Makefile", "X := a:b ; c # kgate: ignore[KG301] an assignment, not a rule\n", [L(1, "KG301")]),
    ("Makefile", "all:\n\techo a\\ # kgate: ignore[KG301] after an escaped space in a recipe\n", []),
    # CMake
    ("CMakeLists.txt", 'set(X "a\\" # kgate: ignore-file[KG301] after an escaped quote")\n', []),
    ("CMakeLists.txt", "set(X a\\;b) # kgate: ignore[KG301] after an escaped semicolon\n", [L(1, "KG301")]),
    ("CMakeLists.txt", "set(X [=[a]=]b # kgate: ignore[KG301] after a bracket argument\n", [L(1, "KG301")]),
    ("CMakeLists.txt", 'message("${X}#") # kgate: ignore[KG301] after a quoted reference\n', [L(1, "KG301")]),
    # C, C++, CUDA
    ("k.cu", "#error don't use sm_120 // kgate: ignore-file[KG302] in an error line\n", []),
    ("k.cu", "#if 0\nit's // kgate: ignore-file[KG302] after an apostrophe\n#endif\n", []),
    ("k.cu", 'auto s = u8R"x(a)" // kgate: ignore-file[KG302] in a raw string\n)x";\n', []),
    ("k.cu", 'auto s = LR"(\n// kgate: ignore-file[KG302] in a wide raw string\n)";\n', []),
    ("k.cu", "int a = 0'1; // kgate: ignore[KG302] after an octal separator\n", [L(1, "KG302")]),
    ("k.cu", "char c = '\\''; // kgate: ignore[KG302] after an escaped quote\n", [L(1, "KG302")]),
    ("k.cu", "#define S(x) #x\nS(// kgate: ignore[KG302] in a macro's argument\n);\n", [L(2, "KG302")]),
    ("k.cu", "auto x = 1.0e+5'0; // kgate: ignore[KG302] after an exponent\n", [L(1, "KG302")]),
    ("k.cu", 'auto s = "a" R"(b)"; // kgate: ignore[KG302] after a concatenated raw string\n', [L(1, "KG302")]),
    ("k.cu", "#if __has_include(<a//b>) // kgate: ignore[KG302] after a header name\n#endif\n", [L(1, "KG302")]),
    ("k.cu", "auto c = u8'#'; // kgate: ignore[KG302] after a u8 character\n", [L(1, "KG302")]),
    # TOML
    ("pyproject.toml", 'a = "\\"" # kgate: ignore[KG203] after an escaped quote\n', [L(1, "KG203")]),
    ("pyproject.toml", "a = '\\' # kgate: ignore[KG203] after a backslash in a literal string\n", [L(1, "KG203")]),
    ("pyproject.toml", "a = [\n  1, # kgate: ignore[KG203] inside an array\n]\n", [L(2, "KG203")]),
    ("pyproject.toml", 'a = { b = "#" } # kgate: ignore[KG203] after an inline table\n', [L(1, "KG203")]),
    ("pyproject.toml", '"a#b".c = 1 # kgate: ignore[KG203] after a dotted quoted key\n', [L(1, "KG203")]),
    ("pyproject.toml", 'a = """x \\\n  # kgate: ignore-file[KG203] in a trimmed string"""\n', []),
    # INI and Python
    ("setup.cfg", "[tool:pytest]\nenv = A=1\n  # kgate: ignore-file[KG203] a comment line in a value\n",
     [F(3, "KG203")]),
    ("pytest.ini", "[pytest]\n;kgate: ignore-file[KG203] no space after the marker\n", [F(2, "KG203")]),
    ("k.py", "x = (1,  # kgate: ignore[KG201] inside parentheses\n     2)\n", [L(1, "KG201")]),
    ("k.py", "x = rb'\\' # kgate: ignore[KG201] in a raw string'\n", []),
]


@pytest.mark.parametrize("rel,text,expected", READ, ids=[f"{i}-{r}" for i, (r, _t, _e) in enumerate(READ)])
def test_directives_are_read_in_comments_only(rel: str, text: str, expected: list) -> None:
    assert directives(rel, text) == expected


def pin(rel: str, text: str, line: int, code: str = "KG301") -> tuple[str | None, list[str]]:
    folder = tempfile.mkdtemp()
    path = os.path.join(folder, rel.replace("/", "_"))
    with open(path, "w", encoding="utf-8", newline="") as handle:
        handle.write(text)
    run = add_ignores([Finding(path=rel, line=line, col=1, code=code, name="", severity=Severity.ERROR, message="")],
                      {rel: path})
    shutil.rmtree(folder)
    change = run.changes.get(rel)
    return (change.after.decode() if change else None), [why for _p, _l, _c, why in run.left]


def pinned(text: str, line: int, marker: str) -> str:
    """`text` with a placeholder pin of KG301 after the code of line `line`, behind the comment marker `marker`."""
    rows = text.splitlines(keepends=True)
    body = rows[line - 1].rstrip("\r\n")
    rows[line - 1] = f"{body}  {marker} kgate: ignore[KG301] {PLACEHOLDER}" + rows[line - 1][len(body):]
    return "".join(rows)


# (file, text, line, the comment marker of the pin written after that line's code; None: the file is left as it was)
PINS = [
    ("build.sh", 'nvcc -arch=sm_120 "$(echo " #")" k.cu\n', 1, "#"),
    ("build.sh", 'nvcc -arch=sm_120 "${A:-"#"}" k.cu\n', 1, "#"),
    ("build.sh", "nvcc -arch=sm_120 k.cu <<< '#'\n", 1, "#"),
    ("build.sh", "nvcc -arch=sm_120 k.cu; cat <<EOF\nx\nEOF\n", 1, "#"),
    ("Makefile", 'all:\n\tnvcc -arch=sm_120 "-DX=a \\\n\tb" k.cu\n', 3, "#"),
    ("Makefile", "all:\n\t@echo $(info #) nvcc -arch=sm_120\n", 2, "#"),
    ("Makefile", 'all: ; nvcc -arch=sm_120 "#" k.cu\n', 1, "#"),
    ("CMakeLists.txt", 'set(A "120\n")\n', 1, None),
    ("CMakeLists.txt", "set(A [[\n120]])\n", 2, "#"),
    ("CMakeLists.txt", "set(A 120 #[[ block ]] )\n", 1, "#"),
    ("k.cu", "k<<<1,1>>>(x); /* a\n b */ f();\n", 1, None),
    ("k.cu", "#define L k<<<1,1>>>(x) /* c */\n", 1, "//"),
    ("pyproject.toml", "a = [\n  'sm_120',\n]\n", 2, "#"),
    ("k.py", "x = 1\ry = 2\r", 2, "#"),
]


@pytest.mark.parametrize("rel,text,line,marker", PINS, ids=[f"{i}-{r}" for i, (r, *_x) in enumerate(PINS)])
def test_add_ignore_writes_a_comment_the_language_reads(rel: str, text: str, line: int, marker: str | None) -> None:
    after, left = pin(rel, text, line)
    expected = pinned(text, line, marker) if marker is not None else None
    assert after == expected, (after, left)
    if expected is not None:
        assert (line, ("KG301",), False) in directives(rel, after)
    else:
        assert len(left) == 1


# A build file of each kind KG301 reads beside a source that needs the `a` target: its line, and the file after
# `lint --add-ignore` (None: left as it was, said on stderr, and the finding still reported).
SETUP = 'from setuptools import setup\nsetup(ext_modules=[dict(extra_compile_args={"nvcc": [\n    "-arch=sm_120",\n]})])\n'
PRESETS = '{"configurePresets": [{"name": "d", "cacheVariables": {"CMAKE_CUDA_ARCHITECTURES": "120"}}]}\n'
BUILDS = {
    # make keeps the spacing before a comment in the variable's value: the pin follows the value directly
    "rules.mk": ("NVFLAGS := -arch=sm_120\n", 1, f"NVFLAGS := -arch=sm_120# kgate: ignore[KG301] {PLACEHOLDER}\n"),
    "setup.py": (SETUP, 3, pinned(SETUP, 3, "#")),
    "CMakePresets.json": (PRESETS, 1, None),
}


@pytest.mark.parametrize("name", sorted(BUILDS))
def test_add_ignore_pins_each_kind_of_build_file_or_says_why_not(tmp_path: Path, name: str) -> None:
    text, line, expected = BUILDS[name]
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\nselect = ["KG301"]\n')
    (tmp_path / "csrc").mkdir()
    (tmp_path / "csrc" / "mma.cu").write_text(BLOCK_SCALED)
    (tmp_path / name).write_text(text)
    assert f"{name}:{line}:" in kgate("lint", cwd=tmp_path).stdout
    run = kgate("lint", "--add-ignore", cwd=tmp_path)
    assert (tmp_path / name).read_text() == (expected or text)
    after = kgate("lint", cwd=tmp_path)
    if expected is None:
        assert f"{name}:{line}: KG301 not pinned" in run.stderr, run.stderr
        assert f"{name}:{line}:" in after.stdout and "KG301" in after.stdout, after.stdout
    else:
        assert "KG301" not in after.stdout.replace("ignore[KG301]", ""), after.stdout


# ----------------------------------------------------------------------------------------- KG302's fix

HEADER = '''#include <cuda_runtime.h>
#include <cstdlib>
#include <vector>
#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) abort(); } while (0)
__global__ void k(float* x) { x[0] = 1.f; }
int f();
void g(float*);
void checked(float* x) { k<<<1, 1>>>(x); CUDA_CHECK(cudaGetLastError()); }
'''
# (the statements of a function `h(float* x, std::vector<float*> v)`, whether the fix is made)
LAUNCHES = {
    "if-with-an-initialiser": ("  if (int e = f(); e == 0) k<<<1, 1>>>(x);\n  else g(x);\n", False),
    "else-if-with-an-initialiser": ("  if (f()) g(x);\n  else if (int e = f(); e) k<<<1, 1>>>(x);\n  else g(x);\n",
                                    False),
    "if-with-an-attribute": ("  if (f()) [[likely]] k<<<1, 1>>>(x);\n  else g(x);\n", False),
    "if-with-a-comma": ("  if (f()) (void)0, k<<<1, 1>>>(x);\n  else g(x);\n", False),
    "if-with-a-label": ("  if (f()) again: k<<<1, 1>>>(x);\n  else g(x);\n", False),
    "for-loop": ("  for (int i = 0; i < f(); ++i) k<<<1, 1>>>(x);\n  g(x);\n", False),
    "range-for-with-an-initialiser": ("  for (int n = 0; float* p : v) k<<<1, 1>>>(p);\n  g(nullptr);\n", False),
    "while-with-a-lambda-condition": ("  while (f() > [] { return 1; }()) k<<<1, 1>>>(x);\n  g(x);\n", False),
    "case-of-a-switch-with-an-initialiser": (("  switch (int e = f(); e) {\n    case 0: k<<<1, 1>>>(x); break;\n"
                                              "    default: g(x);\n  }\n"), True),
    "after-a-block-and-a-label": ("  if (f()) { g(x); }\n  done: k<<<1, 1>>>(x);\n", True),
}


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc compiles the fixed file")
@pytest.mark.parametrize("case", sorted(LAUNCHES))
def test_the_launch_check_is_inserted_only_where_it_stays_after_the_launch(tmp_path: Path, case: str) -> None:
    statements, fixed = LAUNCHES[case]
    body = "void h(float* x, std::vector<float*> v) {\n" + statements + "}\n"
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\nselect = ["KG302"]\n')
    (tmp_path / "k.cu").write_text(HEADER + body)
    run = kgate("lint", "--fix", "--unsafe-fixes", cwd=tmp_path)
    after = (tmp_path / "k.cu").read_text()
    assert (after != HEADER + body) == fixed, after
    assert run.code == (0 if fixed else 1), run.stdout + run.stderr
    compiled = subprocess.run(["nvcc", "-std=c++20", "-c", "-o", os.devnull, str(tmp_path / "k.cu")],
                              capture_output=True, text=True, check=False)
    assert compiled.returncode == 0, compiled.stderr


# ----------------------------------------------------------------------------------------- KG203's fix

# (the test module, the module after `--fix --unsafe-fixes`)
SETTINGS = {
    "update-of-two-variables": ('import os\nos.environ.update({"TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""})\n',
                                None),
    "update-by-keywords": ('import os\nos.environ.update(TRITON_INTERPRET="1", OTHER="2")\n', None),
    "chained-assignment": ('import os\nos.environ["TRITON_INTERPRET"] = os.environ["B"] = "1"\n', None),
    "setdefault-whose-value-is-kept": ('import os\nold = os.environ.setdefault("TRITON_INTERPRET", "1")\nprint(old)\n',
                                       None),
    "patch-dict-of-two-variables": (('import os\nfrom unittest import mock\nwith mock.patch.dict(os.environ, '
                                    '{"TRITON_INTERPRET": "1", "B": "2"}):\n    pass\n'), None),
    "two-statements-on-a-line": ('import os\nos.environ["TRITON_INTERPRET"] = "1"; os.environ["B"] = "2"\n',
                                 'import os\nos.environ["B"] = "2"\n'),
    "putenv": ('import os\nos.putenv("TRITON_INTERPRET", "1")\n', "import os\n"),
}


@pytest.mark.parametrize("case", sorted(SETTINGS))
def test_the_interpreter_setting_is_removed_only_where_it_is_the_whole_statement(tmp_path: Path, case: str) -> None:
    text, expected = SETTINGS[case]
    (tmp_path / "pyproject.toml").write_text('[tool.kgate]\ntargets = ["sm_120a"]\n')
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text(text)
    run = kgate("lint", "--fix", "--unsafe-fixes", cwd=tmp_path)
    assert (tmp_path / "tests" / "test_a.py").read_text() == (text if expected is None else expected)
    assert run.code == (1 if expected is None else 0), run.stdout + run.stderr
