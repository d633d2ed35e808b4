"""Held-out cases for `kgate lint --fix`, `--fix --unsafe-fixes` and `--add-ignore` run as a user runs them, on
every kind of file a fix edits: C++/CUDA sources and headers (a launch in a macro, in `#if 0`, before a block
comment or a continued `//` comment, in preprocessor arms, mixed line endings), CMake (bracket comments),
`CMakePresets.json`, `setup.py`, shell scripts, Python tests (another encoding, mixed line endings, `# noqa`,
`# type: ignore`), `pyproject.toml` (multi-line strings, inline tables, no kgate table), ignored and excluded files.
Each run leaves every file meaning what it meant, with the change its fix names, or leaves it and says why."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import kgate

CONFIG = '[tool.kgate]\ntargets = ["sm_120a"]\n'
PLACEHOLDER = "TODO: give the reason"
BLOCK_SCALED = ('__device__ void mma() {\n  asm volatile("mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale'
                '.scale_vec::1X.f32.e4m3.e4m3.f32.ue8m0 {};");\n}\n__global__ void k() {}\n')
TORCH = "#include <c10/cuda/CUDAException.h>\n__global__ void k() {}\n"
CHECK = "C10_CUDA_KERNEL_LAUNCH_CHECK();"
FIX = ("lint", "--fix", "--unsafe-fixes")
PIN = ("lint", "--add-ignore")


def project(root: Path, files: dict[str, str | bytes]) -> Path:
    if "pyproject.toml" not in files and "kgate.toml" not in files:
        files = {"pyproject.toml": CONFIG, **files}
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.encode() if isinstance(data, str) else data)
    return root


# (files, command, the file the run edits, what it holds afterwards (None: as it was), what stderr says)
CASES = [
    # C++: a launch inside a macro's continued body is checked where the macro is used; a plain launch gets its check.
    ({"k.cu": TORCH + "#define LAUNCH() \\\n  k<<<1, 1>>>()\nvoid run() {\n  LAUNCH();\n  " + CHECK + "\n}\n"
      "void r2() {\n  k<<<1,1>>>();\n}\n"}, FIX, "k.cu",
     TORCH + "#define LAUNCH() \\\n  k<<<1, 1>>>()\nvoid run() {\n  LAUNCH();\n  " + CHECK + "\n}\n"
     "void r2() {\n  k<<<1,1>>>();\n  " + CHECK + "\n}\n", "fixed 1 finding(s) in 1 file, 0 remaining"),
    # A launch under `#if 0` is never compiled: it is not judged, and nothing is inserted into the dead block (the
    # preprocessor is read no further than a constant `#if 0` / `#if 1`); a check after `#endif` is live.
    ({"k.cu": TORCH + "void run() {\n#if 0\n  k<<<1, 1>>>();\n#endif\n}\n"}, FIX, "k.cu", None,
     "fixed 0 finding(s) in 0 files, 0 remaining"),
    ({"k.cu": TORCH + "void run() {\n#if 0\n  k<<<1, 1>>>();\n#endif\n  " + CHECK + "\n}\n"}, FIX, "k.cu", None,
     "fixed 0 finding(s) in 0 files, 0 remaining"),
    # The launch's line ends inside a block comment: the check goes after the `;`, not into the comment (where it
    # was inserted once per round, and the launch stayed unchecked).
    ({"k.cu": TORCH + "void run() {\n  k<<<1, 1>>>(); /* a\n  b */ int y = 0;\n}\n"}, FIX, "k.cu",
     TORCH + "void run() {\n  k<<<1, 1>>>(); " + CHECK + " /* a\n  b */ int y = 0;\n}\n",
     "fixed 1 finding(s) in 1 file, 0 remaining"),
    # ... and a `//` comment continued by a backslash: a line of its own would be the comment's, and the comment's
    # next line would become code.
    ({"k.cu": TORCH + "void run() {\n  k<<<1, 1>>>();  // note \\\n  more\n}\n"}, FIX, "k.cu",
     TORCH + "void run() {\n  k<<<1, 1>>>(); " + CHECK + "  // note \\\n  more\n}\n",
     "fixed 1 finding(s) in 1 file, 0 remaining"),
    # A pin there would be read as the comment's text: not pinned, and said.
    ({"k.cu": TORCH + "void run() {\n  k<<<1, 1>>>(); /* a\n  b */ int y = 0;\n}\n"}, PIN, "k.cu", None,
     "k.cu:4: KG302 not pinned: the line ends inside a string or a comment"),
    # The `;` on the line after a block comment; a raw string opened after the launch; the file's last line.
    ({"k.cu": TORCH + "void run() {\n  k<<<1, 1>>>() /* x */\n  ;\n}\n"}, FIX, "k.cu",
     TORCH + "void run() {\n  k<<<1, 1>>>() /* x */\n  ;\n  " + CHECK + "\n}\n", "fixed 1 finding(s)"),
    ({"k.cu": TORCH + 'void run() {\n  k<<<1, 1>>>(); const char* s = R"(\nx)";\n}\n'}, FIX, "k.cu",
     TORCH + 'void run() {\n  k<<<1, 1>>>(); ' + CHECK + ' const char* s = R"(\nx)";\n}\n', "fixed 1 finding(s)"),
    ({"k.cu": TORCH + "void run() { k<<<1, 1>>>(); }"}, FIX, "k.cu",
     TORCH + "void run() { k<<<1, 1>>>(); " + CHECK + " }", "fixed 1 finding(s)"),
    # Line endings: CRLF without a final newline; an LF line in a file that has CRLF lines keeps its LF.
    ({"k.cu": (TORCH + "void run() {\n  k<<<1, 1>>>();\n}").replace("\n", "\r\n")}, FIX, "k.cu",
     (TORCH + "void run() {\n  k<<<1, 1>>>();\n  " + CHECK + "\n}").replace("\n", "\r\n"), "fixed 1 finding(s)"),
    ({"k.cu": TORCH.replace("\n", "\r\n") + "void run() {\n  k<<<1, 1>>>();\n}\n"}, FIX, "k.cu",
     TORCH.replace("\n", "\r\n") + "void run() {\n  k<<<1, 1>>>();\n  " + CHECK + "\n}\n", "fixed 1 finding(s)"),
    # Each arm of `#ifdef`/`#else` gets its own check; a header indented with a tab keeps the tab.
    ({"k.cu": TORCH + "void run() {\n#ifdef A\n  k<<<1, 1>>>();\n#else\n  k<<<2, 1>>>();\n#endif\n}\n"}, FIX, "k.cu",
     TORCH + "void run() {\n#ifdef A\n  k<<<1, 1>>>();\n  " + CHECK + "\n#else\n  k<<<2, 1>>>();\n  " + CHECK +
     "\n#endif\n}\n", "fixed 2 finding(s) in 1 file, 0 remaining"),
    ({"k.cuh": TORCH + "inline void run() {\n\tk<<<1, 1>>>();\n}\n"}, FIX, "k.cuh",
     TORCH + "inline void run() {\n\tk<<<1, 1>>>();\n\t" + CHECK + "\n}\n", "fixed 1 finding(s)"),
    # Pins after another tool's directive, and a `*/` in `#if 0` after the pinned line.
    ({"k.cu": TORCH + "void run() {\n  k<<<1, 1>>>();  // NOLINT\n}\n"}, PIN, "k.cu",
     TORCH + f"void run() {{\n  k<<<1, 1>>>();  // NOLINT  // kgate: ignore[KG302] {PLACEHOLDER}\n}}\n",
     "pinned 1 finding(s) in 1 file"),
    ({"k.cu": TORCH + "void run() {\n  k<<<1, 1>>>();  // NOLINT(bugprone-*)\n}\n"}, PIN, "k.cu",
     TORCH + f"void run() {{\n  k<<<1, 1>>>();  // NOLINT(bugprone-*)  // kgate: ignore[KG302] {PLACEHOLDER}\n}}\n",
     "pinned 1 finding(s) in 1 file"),
    ({"k.cu": TORCH + "void run() {\n  k<<<1, 1>>>();\n#if 0\n*/\n#endif\n}\n"}, PIN, "k.cu",
     TORCH + f"void run() {{\n  k<<<1, 1>>>();  // kgate: ignore[KG302] {PLACEHOLDER}\n#if 0\n*/\n#endif\n}}\n",
     "pinned 1 finding(s) in 1 file"),
    # CMake: a bracket comment that holds the same setting is left; a line that ends in one is not pinned.
    ({"mma.cu": BLOCK_SCALED, "CMakeLists.txt": "#[[ set(CMAKE_CUDA_ARCHITECTURES 120)\n]]\n"
      "set(CMAKE_CUDA_ARCHITECTURES 120)\n"}, FIX, "CMakeLists.txt",
     "#[[ set(CMAKE_CUDA_ARCHITECTURES 120)\n]]\nset(CMAKE_CUDA_ARCHITECTURES 120a)\n", "fixed 1 finding(s)"),
    ({"mma.cu": BLOCK_SCALED, "CMakeLists.txt": "set(CMAKE_CUDA_ARCHITECTURES 120) #[[ multi\nline ]]\n"}, PIN,
     "CMakeLists.txt", None, "CMakeLists.txt:1: KG301 not pinned: the line ends inside a string or a comment"),
    # CMake with mixed line endings: the LF line is pinned with LF, and fixed in place.
    ({"mma.cu": BLOCK_SCALED, "CMakeLists.txt": "project(x)\r\nset(CMAKE_CUDA_ARCHITECTURES 120)\nset(Y 1)\r\n"}, PIN,
     "CMakeLists.txt", (f"project(x)\r\nset(CMAKE_CUDA_ARCHITECTURES 120)  # kgate: ignore[KG301] {PLACEHOLDER}\n"
     "set(Y 1)\r\n"), "pinned 1 finding(s)"),
    ({"mma.cu": BLOCK_SCALED, "CMakeLists.txt": "project(x)\r\nset(CMAKE_CUDA_ARCHITECTURES 120)\nset(Y 1)\r\n"}, FIX,
     "CMakeLists.txt", "project(x)\r\nset(CMAKE_CUDA_ARCHITECTURES 120a)\nset(Y 1)\r\n", "fixed 1 finding(s)"),
    # CMakePresets.json: fixed as JSON; pinning takes no comment there, and says so.
    ({"mma.cu": BLOCK_SCALED, "CMakePresets.json": '{"version": 3, "configurePresets": [{"name": "a", '
      '"cacheVariables": {"CMAKE_CUDA_ARCHITECTURES": "120"}}]}\n'}, FIX, "CMakePresets.json",
     '{"version": 3, "configurePresets": [{"name": "a", "cacheVariables": {"CMAKE_CUDA_ARCHITECTURES": "120a"}}]}\n',
     "fixed 1 finding(s)"),
    ({"mma.cu": BLOCK_SCALED, "CMakePresets.json": '{"version": 3, "configurePresets": [{"name": "a", '
      '"cacheVariables": {"CMAKE_CUDA_ARCHITECTURES": "120"}}]}\n'}, PIN, "CMakePresets.json", None,
     "CMakePresets.json:1: KG301 not pinned: this kind of file takes no line comment kgate reads here"),
    # setup.py: both halves of a -gencode; a pin after a non-ASCII comment in a file with no final newline.
    ({"mma.cu": BLOCK_SCALED, "setup.py": 'from torch.utils.cpp_extension import CUDAExtension\next = CUDAExtension('
      '"m", ["mma.cu"], extra_compile_args={"nvcc": ["-gencode=arch=compute_120,code=sm_120"]})\n'}, FIX, "setup.py",
     ('from torch.utils.cpp_extension import CUDAExtension\next = CUDAExtension("m", ["mma.cu"], extra_compile_args='
     '{"nvcc": ["-gencode=arch=compute_120a,code=sm_120a"]})\n'), "fixed 2 finding(s) in 1 file, 0 remaining"),
    ({"mma.cu": BLOCK_SCALED, "setup.py": '# -*- coding: utf-8 -*-\nfrom torch.utils.cpp_extension import '
      'CUDAExtension\next = CUDAExtension("m", ["mma.cu"], extra_compile_args={"nvcc": [\n    "-arch=sm_120",  # é\n]})'},
     PIN, "setup.py", ('# -*- coding: utf-8 -*-\nfrom torch.utils.cpp_extension import CUDAExtension\next = '
     'CUDAExtension("m", ["mma.cu"], extra_compile_args={"nvcc": [\n    "-arch=sm_120",  # é  # kgate: ignore[KG301] '
     f'{PLACEHOLDER}\n]}})'), "pinned 1 finding(s)"),
    # Shell: a flag inside a command substitution is fixed and pinned as the shell reads the line.
    ({"mma.cu": BLOCK_SCALED, "build.sh": "#!/bin/sh\nOUT=$(nvcc -arch=sm_120 mma.cu -o x)\n"}, FIX, "build.sh",
     "#!/bin/sh\nOUT=$(nvcc -arch=sm_120a mma.cu -o x)\n", "fixed 1 finding(s)"),
    ({"mma.cu": BLOCK_SCALED, "build.sh": "#!/bin/sh\nOUT=$(nvcc -arch=sm_120 mma.cu -o x)\n"}, PIN, "build.sh",
     f"#!/bin/sh\nOUT=$(nvcc -arch=sm_120 mma.cu -o x)  # kgate: ignore[KG301] {PLACEHOLDER}\n", "pinned 1 finding(s)"),
    # Python in another encoding is neither fixed nor pinned, and the run says so.
    ({"tests/conftest.py": b'# -*- coding: latin-1 -*-\nimport os\nos.environ["TRITON_INTERPRET"] = "1"  # \xe9t\xe9\n'},
     FIX, "tests/conftest.py", None, "tests/conftest.py: fixes not applied: not UTF-8"),
    ({"tests/conftest.py": b'# -*- coding: latin-1 -*-\nimport os\nos.environ["TRITON_INTERPRET"] = "1"  # \xe9t\xe9\n'},
     PIN, "tests/conftest.py", None, "tests/conftest.py:3: KG203 not pinned: cannot read: not UTF-8"),
    # Python with mixed line endings: the removed statement takes its own LF, the pin keeps it.
    ({"tests/conftest.py": 'import os\r\nos.environ["TRITON_INTERPRET"] = "1"\nx = 1\r\n'}, FIX, "tests/conftest.py",
     "import os\r\nx = 1\r\n", "fixed 1 finding(s)"),
    ({"tests/conftest.py": 'import os\r\nos.environ["TRITON_INTERPRET"] = "1"\nx = 1\r\n'}, PIN, "tests/conftest.py",
     f'import os\r\nos.environ["TRITON_INTERPRET"] = "1"  # kgate: ignore[KG203] {PLACEHOLDER}\nx = 1\r\n',
     "pinned 1 finding(s)"),
    # Other tools' directives: a pin goes after `# type: ignore[...]`; a removed statement's noqa comment stays.
    ({"tests/conftest.py": 'import os\nos.environ["TRITON_INTERPRET"] = "1"  # type: ignore[index]\n'}, PIN,
     "tests/conftest.py", (f'import os\nos.environ["TRITON_INTERPRET"] = "1"  # type: ignore[index]  # kgate: '
     f'ignore[KG203] {PLACEHOLDER}\n'), "pinned 1 finding(s)"),
    ({"tests/conftest.py": 'import os\nos.environ["TRITON_INTERPRET"] = "1"  # noqa: E501\n'}, FIX, "tests/conftest.py",
     "import os\n# noqa: E501\n", "fixed 1 finding(s)"),
    # pyproject.toml: a multi-line string before the setting stays; an env in an inline table is not offered a fix
    # (the finding remains); a pyproject with no kgate table (kgate.toml configures) is fixed and pinned.
    ({"pyproject.toml": CONFIG + '[tool.pytest.ini_options]\naddopts = """\n-p no:cacheprovider\n"""\n'
      'env = ["TRITON_INTERPRET=1", "A=2"]\n'}, FIX, "pyproject.toml",
     CONFIG + '[tool.pytest.ini_options]\naddopts = """\n-p no:cacheprovider\n"""\nenv = ["A=2"]\n', "fixed 1 finding(s)"),
    ({"pyproject.toml": CONFIG + '[tool.pytest]\nini_options = { env = ["TRITON_INTERPRET=1"], addopts = "-q" }\n'},
     FIX, "pyproject.toml", None, "fixed 0 finding(s) in 0 files, 1 remaining"),
    ({"kgate.toml": 'targets = ["sm_120a"]\n', "pyproject.toml": '[project]\nname = "x"\n[tool.pytest.ini_options]\n'
      'env = [\n  "TRITON_INTERPRET=1",\n]\n'}, FIX, "pyproject.toml",
     '[project]\nname = "x"\n[tool.pytest.ini_options]\nenv = [\n]\n', "fixed 1 finding(s)"),
    ({"kgate.toml": 'targets = ["sm_120a"]\n', "pyproject.toml": '[project]\nname = "x"\n[tool.pytest.ini_options]\n'
      'env = [\n  "TRITON_INTERPRET=1",\n]\n'}, PIN, "pyproject.toml",
     ('[project]\nname = "x"\n[tool.pytest.ini_options]\nenv = [\n  "TRITON_INTERPRET=1",  # kgate: ignore[KG203] '
     f'{PLACEHOLDER}\n]\n'), "pinned 1 finding(s)"),
    # A launch in a macro's body, used with no check after it: no fix is offered (a line of its own would end the
    # macro); a launch in a lambda, a case label, a macro's argument gets its check after its statement.
    ({"k.cu": TORCH + "#define RUN(x) \\\n  k<<<1, 1>>>(); \\\n  other(x)\nvoid other(int);\nvoid run() {\n  RUN(1);\n}\n"},
     FIX, "k.cu", None, "fixed 0 finding(s) in 0 files, 1 remaining"),
    ({"k.cu": TORCH + "#define RUN(x) do { \\\n  k<<<1, 1>>>(); \\\n} while (0)\nvoid run() {\n  RUN(1);\n}\n"}, FIX,
     "k.cu", None, "fixed 0 finding(s) in 0 files, 1 remaining"),
    ({"k.cu": TORCH + "void run() {\n  auto f = [&] { k<<<1, 1>>>(); };\n  f();\n}\n"}, FIX, "k.cu",
     TORCH + "void run() {\n  auto f = [&] { k<<<1, 1>>>(); " + CHECK + " };\n  f();\n}\n", "fixed 1 finding(s)"),
    ({"k.cu": TORCH + "void run(int c) {\n  switch (c) {\n    case 1: k<<<1, 1>>>(); break;\n  }\n}\n"}, FIX, "k.cu",
     TORCH + "void run(int c) {\n  switch (c) {\n    case 1: k<<<1, 1>>>(); " + CHECK + " break;\n  }\n}\n",
     "fixed 1 finding(s)"),
    ({"k.cu": TORCH + "#define WRAP(e) e\nvoid run() {\n  WRAP(k<<<1, 1>>>());\n}\n"}, FIX, "k.cu",
     TORCH + "#define WRAP(e) e\nvoid run() {\n  WRAP(k<<<1, 1>>>());\n  " + CHECK + "\n}\n", "fixed 1 finding(s)"),
    # INI: pytest-env's list loses the one entry, and so does the setenv of tox's [testenv], which every
    # environment of tox inherits (a named [testenv:interp] is a job of its own: see KG203's fixture).
    ({"setup.cfg": "[tool:pytest]\nenv =\n  TRITON_INTERPRET=1\n  X=2\n"}, FIX, "setup.cfg",
     "[tool:pytest]\nenv =\n  X=2\n", "fixed 1 finding(s)"),
    ({"tox.ini": "[testenv]\nsetenv =\n    TRITON_INTERPRET = 1\ncommands = pytest\n"}, FIX, "tox.ini",
     "[testenv]\nsetenv =\ncommands = pytest\n", "fixed 1 finding(s)"),
    # CMake: an architecture in a generator expression and in a quoted list.
    ({"mma.cu": BLOCK_SCALED, "CMakeLists.txt": 'set_property(TARGET t PROPERTY CUDA_ARCHITECTURES '
      '"$<$<CONFIG:Release>:120>")\nadd_library(t mma.cu)\n'}, FIX, "CMakeLists.txt",
     'set_property(TARGET t PROPERTY CUDA_ARCHITECTURES "$<$<CONFIG:Release>:120a>")\nadd_library(t mma.cu)\n',
     "fixed 1 finding(s)"),
    ({"mma.cu": BLOCK_SCALED, "CMakeLists.txt": 'set(CMAKE_CUDA_ARCHITECTURES "120;90")\n'}, FIX, "CMakeLists.txt",
     'set(CMAKE_CUDA_ARCHITECTURES "120a;90")\n', "fixed 1 finding(s)"),
    # Shell: flags a here-document writes for nvcc's @file.
    ({"mma.cu": BLOCK_SCALED, "build.sh": "#!/bin/sh\ncat > flags.txt <<EOF\n-arch=sm_120\nEOF\nnvcc @flags.txt mma.cu\n"},
     FIX, "build.sh", "#!/bin/sh\ncat > flags.txt <<EOF\n-arch=sm_120a\nEOF\nnvcc @flags.txt mma.cu\n",
     "fixed 1 finding(s)"),
    # Python: a statement continued by a backslash is not pinned; one in a one-line `with`, between `;`, in an
    # `except` block is removed and nothing else.
    ({"tests/conftest.py": 'import os\nos.environ["TRITON_INTERPRET"] = \\\n    "1"\n'}, PIN, "tests/conftest.py", None,
     "tests/conftest.py:2: KG203 not pinned: the line continues on the next"),
    ({"tests/conftest.py": 'import os\nwith open("x") as f: os.environ["TRITON_INTERPRET"] = "1"\n'}, FIX,
     "tests/conftest.py", 'import os\nwith open("x") as f: pass\n', "fixed 1 finding(s)"),
    ({"tests/conftest.py": 'import os; os.environ["TRITON_INTERPRET"] = "1"; x = 1\n'}, FIX, "tests/conftest.py",
     "import os; x = 1\n", "fixed 1 finding(s)"),
    ({"tests/conftest.py": 'import os\ntry:\n    import torch\nexcept ImportError:\n    os.environ["TRITON_INTERPRET"] = "1"\n'},
     FIX, "tests/conftest.py", "import os\ntry:\n    import torch\nexcept ImportError:\n    pass\n", "fixed 1 finding(s)"),
]


@pytest.mark.parametrize("files,command,rel,after,said", CASES, ids=[f"{i}-{c[2]}" for i, c in enumerate(CASES)])
def test_a_fix_or_pin_leaves_the_file_meaning_what_it_meant(tmp_path: Path, files: dict[str, str | bytes],
                                                            command: tuple[str, ...], rel: str, after: str | None,
                                                            said: str) -> None:
    root = project(tmp_path, files)
    before = (root / rel).read_bytes()
    run = kgate(*command, cwd=root)
    assert said in run.stderr, run.stderr
    assert (root / rel).read_bytes() == (before if after is None else after.encode()), run.stderr
    if command == FIX:  # one --fix leaves nothing a second would change
        again = kgate(*command, cwd=root)
        assert "fixed 0 finding(s) in 0 files" in again.stderr, again.stderr


def test_add_ignore_twice_after_another_tools_directive_pins_once(tmp_path: Path) -> None:
    root = project(tmp_path, {"k.cu": TORCH + "void run() {\n  k<<<1, 1>>>();  // NOLINT\n}\n"})
    kgate(*PIN, cwd=root)
    second = kgate(*PIN, cwd=root)
    assert "pinned 0 finding(s) in 0 files" in second.stderr
    assert (root / "k.cu").read_text().count("kgate: ignore[KG302]") == 1


@pytest.mark.parametrize("named", [False, True])
def test_a_fix_of_an_ignored_file_is_made_only_when_the_file_is_named(tmp_path: Path, named: bool) -> None:
    root = project(tmp_path, {"mma.cu": BLOCK_SCALED, "gen/mma.cu": BLOCK_SCALED, ".gitignore": "gen/\n",
                              "gen/CMakeLists.txt": "set(CMAKE_CUDA_ARCHITECTURES 120)\n"})
    (root / ".git").mkdir()
    run = kgate(*FIX, *(["gen/CMakeLists.txt"] if named else []), cwd=root)
    assert run.code == 0, run.stderr
    want = "120a" if named else "120"
    assert (root / "gen" / "CMakeLists.txt").read_text() == f"set(CMAKE_CUDA_ARCHITECTURES {want})\n"


def test_force_exclude_leaves_an_excluded_file_named_on_the_command_line(tmp_path: Path) -> None:
    root = project(tmp_path, {"pyproject.toml": CONFIG + 'extend-exclude = ["third_party"]\n',
                              "third_party/mma.cu": BLOCK_SCALED,
                              "third_party/CMakeLists.txt": "set(CMAKE_CUDA_ARCHITECTURES 120)\n"})
    run = kgate(*FIX, "--force-exclude", "third_party/CMakeLists.txt", cwd=root)
    assert run.code == 0 and "fixed 0 finding(s) in 0 files" in run.stderr, run.stderr
    assert (root / "third_party" / "CMakeLists.txt").read_text() == "set(CMAKE_CUDA_ARCHITECTURES 120)\n"


# A stale suppression alone on the last line, with no newline after it: removed in every language, as in Python
# (it was refused outside Python: the file's final newline read as code).
LAST_LINE = [
    ("CMakeLists.txt", "project(x)\n# kgate: ignore-file[KG301] stale", "project(x)\n"),
    ("CMakeLists.txt", "project(x)\r\n# kgate: ignore-file[KG301] stale", "project(x)\r\n"),
    ("k.cu", "int x;\n// kgate: ignore-file[KG302] stale", "int x;\n"),
    ("build.sh", "#!/bin/sh\necho hi\n# kgate: ignore-file[KG301] stale", "#!/bin/sh\necho hi\n"),
    ("Makefile", "all:\n\techo hi\n# kgate: ignore-file[KG301] stale", "all:\n\techo hi\n"),
    ("pyproject.toml", CONFIG + "# kgate: ignore-file[KG203] stale", CONFIG),
    ("k.py", "x = 1\n# kgate: ignore-file[KG201] stale", "x = 1"),
]


@pytest.mark.parametrize("rel,text,after", LAST_LINE, ids=[f"{i}-{r}" for i, (r, _t, _a) in enumerate(LAST_LINE)])
def test_a_stale_suppression_on_a_last_line_without_a_newline_is_removed(tmp_path: Path, rel: str, text: str,
                                                                         after: str) -> None:
    root = project(tmp_path, {rel: text})
    run = kgate("lint", "--fix", cwd=root)
    assert "fixed 1 finding(s) in 1 file, 0 remaining" in run.stderr, run.stderr
    assert (root / rel).read_bytes() == after.encode()


UNCHECKED = TORCH + "void run() {\n  k<<<1, 1>>>();\n}\nint y;  // kgate: ignore[KG302] stale\n"
CHECKED = TORCH + "void run() {\n  k<<<1, 1>>>();\n  " + CHECK + "\n}\n"
PER_FILE = CONFIG + '[tool.kgate.per-file-ignores]\n"k.cu" = ["KG302"]\n'
# (configuration, command, what k.cu holds afterwards): fixes follow the findings the run reports, no others.
SELECTED = [
    (PER_FILE, FIX, UNCHECKED),  # ignored for the file: not fixed, and its suppression is not judged
    (PER_FILE, PIN, UNCHECKED),
    (CONFIG, (*FIX, "--select", "KG302"), CHECKED + "int y;  // kgate: ignore[KG302] stale\n"),
    (CONFIG, (*FIX, "--ignore", "KG002"), CHECKED + "int y;  // kgate: ignore[KG302] stale\n"),
    (CONFIG + '[tool.kgate.severity]\nKG302 = "note"\n', FIX, CHECKED + "int y;\n"),  # a note is fixed too
    (CONFIG, ("lint", "--diff", "--unsafe-fixes"), UNCHECKED),  # shown, not written
]


@pytest.mark.parametrize("config,command,after", SELECTED, ids=[str(i) for i in range(len(SELECTED))])
def test_fixes_follow_the_selection_and_the_configuration(tmp_path: Path, config: str, command: tuple[str, ...],
                                                          after: str) -> None:
    root = project(tmp_path, {"pyproject.toml": config, "k.cu": UNCHECKED})
    run = kgate(*command, cwd=root)
    assert "Traceback" not in run.stderr and (root / "k.cu").read_text() == after, run.stdout + run.stderr
