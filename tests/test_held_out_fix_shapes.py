"""Held-out shapes of the files `kgate lint --fix`, `--fix --unsafe-fixes` and `--add-ignore` edit, that the earlier
cases do not have: Python with the finding in a `with` header over lines, a lambda default, under a decorator with a
trailing comment, in a call whose bracket closes lines later, beside `# type: ignore` or a directive already there,
under `if __name__ == "__main__":`, in an `async def`, with CR-only line ends, without a final newline, a file of one
byte; C++/CUDA launches in `extern "C"`, after a namespace's commented brace, after an unbalanced `#if 0`, before a
block comment, in a CRLF header, a `clang-format off` region, a macro's argument over lines, in braceless loops,
`return`ed, beside a comma or a ternary; CMake's first line, `CACHE` settings, bracket comments and arguments,
`list(APPEND)`, generator expressions, properties; `setup.py` flags over lines and in f-strings, the architecture
list in the environment; pytest settings in TOML, INI and `setup.cfg` over lines, with comments, CR line ends and
other sections; and files reached twice (a link, a hard link), named in `.git/` or excluded, or unwritable.

Each file afterwards means what it meant with the change its fix names, or is left as it was and the run says so.
A check inserted after a launch is one the launch's path reaches, and a check the path does not reach (after a
`return`, in another function) covers no launch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import kgate

CONFIG = '[tool.kgate]\ntargets = ["sm_120a"]\n'
PLACEHOLDER = "TODO: give the reason"
FIX = ("lint", "--fix", "--unsafe-fixes")
SAFE = ("lint", "--fix")
PIN = ("lint", "--add-ignore")
SET = 'os.environ["TRITON_INTERPRET"] = "1"'
PINNED = f"  # kgate: ignore[KG203] {PLACEHOLDER}"
TORCH = "#include <c10/cuda/CUDAException.h>\n__global__ void k() {}\n"
CHECK = "C10_CUDA_KERNEL_LAUNCH_CHECK();"
CPIN = f"  // kgate: ignore[KG302] {PLACEHOLDER}"
BLOCK_SCALED = ('__device__ void mma() {\n  asm volatile("mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale'
                '.scale_vec::1X.f32.e4m3.e4m3.f32.ue8m0 {};");\n}\n__global__ void k() {}\n')
HPIN = f"  # kgate: ignore[KG301] {PLACEHOLDER}"
EXT = 'from torch.utils.cpp_extension import CUDAExtension\n'


def project(root: Path, files: dict[str, str | bytes]) -> Path:
    if "pyproject.toml" not in files and "kgate.toml" not in files:
        files = {"pyproject.toml": CONFIG, **files}
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.encode() if isinstance(data, str) else data)
    return root


def py(body: str) -> dict[str, str]:
    return {"tests/test_a.py": body}


def cu(body: str, name: str = "k.cu") -> dict[str, str]:
    return {name: body}


def build(name: str, body: str) -> dict[str, str]:
    return {"mma.cu": BLOCK_SCALED, name: body}


WITH = "import os, contextlib\nwith contextlib.nullcontext(\n    1\n) as c:\n    "
LAMBDA = "import os\nf = lambda e=os.environ.setdefault('TRITON_INTERPRET', '1'): e\n"
OPEN = "import os\nos.environ.update(\n    TRITON_INTERPRET='1',\n    A='2',\n)\n"
DOC = 'import os\ndef f():\n    """\n    os.environ["TRITON_INTERPRET"] = "1"\n    """\n    '
MULTI_ENV = CONFIG + '[tool.pytest.ini_options]\nenv = [\n  "A=1",  # first\n  "TRITON_INTERPRET=1",\n  # trailing\n  "B=2",\n]\n'
LAST_ENV = CONFIG + '[tool.pytest.ini_options]\nenv = [\n  "A=1",\n  "TRITON_INTERPRET=1"\n]\n'
SETUP_LINES = (EXT + 'ext = CUDAExtension(\n    "m", ["mma.cu"],\n    extra_compile_args={\n        "cxx": ["-O3"],\n'
               '        "nvcc": [\n            "-O3",\n            "-arch=sm_120",\n        ],\n    },\n)\n')
SETUP_F = (EXT + 'cc = 120\next = CUDAExtension("m", ["mma.cu"], extra_compile_args={"nvcc": [\n'
           '    f"-gencode=arch=compute_{cc},code=sm_{cc}", f"-gencode=arch=compute_120,code=sm_120"]})\n')

# name -> (files, command, the file to look at, what it holds afterwards (None: as it was), what stderr says)
CASES: dict[str, tuple[dict[str, str | bytes], tuple[str, ...], str, str | bytes | None, str]] = {
    # Python: KG203's statement removed or pinned wherever it stands.
    "py-with-header-over-lines-fix": (py(WITH + SET + "\n"), FIX, "tests/test_a.py", WITH + "pass\n", "fixed 1"),
    "py-with-header-over-lines-pin": (py(WITH + SET + "\n"), PIN, "tests/test_a.py", WITH + SET + PINNED + "\n",
                                      "pinned 1"),
    "py-setting-inside-with-header-fix": (
        py("import os, contextlib\nwith contextlib.ExitStack(\n) as s, s.enter_context(contextlib.nullcontext("
           "os.environ.__setitem__('TRITON_INTERPRET', '1'))):\n    pass\n"), FIX, "tests/test_a.py", None,
        "fixed 0 finding(s) in 0 files, 1 remaining"),
    "py-lambda-default-fix": (py(LAMBDA), FIX, "tests/test_a.py", None, "fixed 0 finding(s) in 0 files, 1 remaining"),
    "py-lambda-default-pin": (py(LAMBDA), PIN, "tests/test_a.py", LAMBDA[:-1] + PINNED + "\n", "pinned 1"),
    "py-decorator-trailing-comment-fix": (
        py("import os, pytest\n@pytest.fixture  # sets up\ndef f():\n    " + SET + "\n"), FIX, "tests/test_a.py",
        "import os, pytest\n@pytest.fixture  # sets up\ndef f():\n    pass\n", "fixed 1"),
    "py-bracket-closed-three-lines-down-fix": (py(OPEN), FIX, "tests/test_a.py", None,
                                               "fixed 0 finding(s) in 0 files, 1 remaining"),
    "py-bracket-closed-three-lines-down-pin": (
        py(OPEN), PIN, "tests/test_a.py", OPEN.replace("TRITON_INTERPRET='1',", "TRITON_INTERPRET='1'," + PINNED),
        "pinned 1"),
    # The removed statement's own comment stays, on a line of its own; a pin goes after another tool's.
    "py-type-ignore-fix": (py("import os\n" + SET + "  # type: ignore\n"), FIX, "tests/test_a.py",
                           "import os\n# type: ignore\n", "fixed 1"),
    "py-type-ignore-pin": (py("import os\n" + SET + "  # type: ignore\n"), PIN, "tests/test_a.py",
                           "import os\n" + SET + "  # type: ignore" + PINNED + "\n", "pinned 1"),
    # A directive that still has the placeholder takes the new code; one naming a stale code is removed, not pinned.
    "py-placeholder-directive-merges-pin": (
        py("import os\n" + SET + f"  # kgate: ignore[KG201] {PLACEHOLDER}\n"), PIN, "tests/test_a.py",
        "import os\n" + SET + f"  # kgate: ignore[KG201, KG203] {PLACEHOLDER}\n", "pinned 1"),
    "py-stale-directive-fix": (py("import os\nx = 1  # kgate: ignore[KG203] old reason\n"), SAFE, "tests/test_a.py",
                               "import os\nx = 1\n", "fixed 1"),
    "py-stale-directive-pin": (py("import os\nx = 1  # kgate: ignore[KG203] old reason\n"), PIN, "tests/test_a.py",
                               None, "pinned 0 finding(s)"),
    "py-docstring-that-reads-as-code-fix": (py(DOC + SET + "\n"), FIX, "tests/test_a.py", DOC.rstrip(" "),
                                            "fixed 1"),
    "py-main-block-fix": (py('import os\nif __name__ == "__main__":\n    ' + SET + "\n"), FIX, "tests/test_a.py",
                          'import os\nif __name__ == "__main__":\n    pass\n', "fixed 1"),
    "py-async-def-fix": (py("import os\nasync def launch():\n    " + SET + "\n    await x\n"), FIX, "tests/test_a.py",
                         "import os\nasync def launch():\n    await x\n", "fixed 1"),
    "py-cr-only-fix": (py("import os\r" + SET + "\rx = 1\r"), FIX, "tests/test_a.py", "import os\rx = 1\r", "fixed 1"),
    "py-cr-only-pin": (py("import os\r" + SET + "\rx = 1\r"), PIN, "tests/test_a.py",
                       "import os\r" + SET + PINNED + "\rx = 1\r", "pinned 1"),
    "py-no-final-newline-fix": (py("import os\n" + SET), FIX, "tests/test_a.py", "import os", "fixed 1"),
    "py-no-final-newline-pin": (py("import os\n" + SET), PIN, "tests/test_a.py", "import os\n" + SET + PINNED,
                                "pinned 1"),
    "py-one-byte-fix": (py("\n"), FIX, "tests/test_a.py", None, "fixed 0 finding(s) in 0 files, 0 remaining"),
    # Python: KG002's removal of a stale code beside other comments, on decorators, with CR or no final newline.
    "py-stale-on-lambda-line": (py("f = lambda x=1: x  # kgate: ignore[KG203] old\n"), SAFE, "tests/test_a.py",
                                "f = lambda x=1: x\n", "fixed 1"),
    "py-stale-after-type-ignore": (py("x = 1  # type: ignore  # kgate: ignore[KG203] old\n"), SAFE,
                                   "tests/test_a.py", "x = 1  # type: ignore\n", "fixed 1"),
    "py-stale-before-type-ignore": (py("x = 1  # kgate: ignore[KG203] old  # type: ignore\n"), SAFE,
                                    "tests/test_a.py", "x = 1  # type: ignore\n", "fixed 1"),
    "py-stale-on-decorator": (py("import functools\n@functools.cache  # kgate: ignore[KG203] old\ndef f():\n    pass\n"),
                              SAFE, "tests/test_a.py", "import functools\n@functools.cache\ndef f():\n    pass\n",
                              "fixed 1"),
    "py-stale-cr-only": (py("x = 1  # kgate: ignore[KG203] old\ry = 2\r"), SAFE, "tests/test_a.py", "x = 1\ry = 2\r",
                         "fixed 1"),
    "py-stale-no-final-newline": (py("x = 1  # kgate: ignore[KG203] old"), SAFE, "tests/test_a.py", "x = 1",
                                  "fixed 1"),
    # C++/CUDA: KG302's check goes on the line after the launch's statement, indented as it.
    "cu-extern-c-block-fix": (cu(TORCH + 'extern "C" {\nvoid run() {\n  k<<<1, 1>>>();\n}\n}\n'), FIX, "k.cu",
                              TORCH + f'extern "C" {{\nvoid run() {{\n  k<<<1, 1>>>();\n  {CHECK}\n}}\n}}\n', "fixed 1"),
    "cu-extern-c-block-pin": (cu(TORCH + 'extern "C" {\nvoid run() {\n  k<<<1, 1>>>();\n}\n}\n'), PIN, "k.cu",
                              TORCH + f'extern "C" {{\nvoid run() {{\n  k<<<1, 1>>>();{CPIN}\n}}\n}}\n', "pinned 1"),
    "cu-extern-c-one-line-fix": (cu(TORCH + 'extern "C" void run() { k<<<1, 1>>>(); }\n'), FIX, "k.cu",
                                 TORCH + f'extern "C" void run() {{ k<<<1, 1>>>(); {CHECK} }}\n', "fixed 1"),
    "cu-namespace-brace-comment-fix": (
        cu(TORCH + "namespace a { // ns\nvoid run() {\n  k<<<1, 1>>>();\n}\n}  // namespace a\n"), FIX, "k.cu",
        TORCH + f"namespace a {{ // ns\nvoid run() {{\n  k<<<1, 1>>>();\n  {CHECK}\n}}\n}}  // namespace a\n",
        "fixed 1"),
    "cu-after-unbalanced-if0-fix": (
        cu(TORCH + "#if 0\nvoid run() { k<<<1,1>>>(\n#endif\nvoid run2() {\n  k<<<1, 1>>>();\n}\n"), FIX, "k.cu",
        TORCH + f"#if 0\nvoid run() {{ k<<<1,1>>>(\n#endif\nvoid run2() {{\n  k<<<1, 1>>>();\n  {CHECK}\n}}\n",
        "fixed 1 finding(s) in 1 file, 0 remaining"),  # the launch under `#if 0` is never compiled: not judged
    "cu-line-ends-in-block-comment-fix": (
        cu(TORCH + "void run() {\n  k<<<1, 1>>>();  /* a // b */\n}\n"), FIX, "k.cu",
        TORCH + f"void run() {{\n  k<<<1, 1>>>();  /* a // b */\n  {CHECK}\n}}\n", "fixed 1"),
    "cu-line-ends-in-block-comment-pin": (
        cu(TORCH + "void run() {\n  k<<<1, 1>>>();  /* launch */\n}\n"), PIN, "k.cu",
        TORCH + f"void run() {{\n  k<<<1, 1>>>();  /* launch */{CPIN}\n}}\n", "pinned 1"),
    "cuh-crlf-fix": (cu((TORCH + "inline void run() {\n  k<<<1, 1>>>();\n}\n").replace("\n", "\r\n"), "k.cuh"), FIX,
                     "k.cuh", (TORCH + f"inline void run() {{\n  k<<<1, 1>>>();\n  {CHECK}\n}}\n").replace("\n", "\r\n"),
                     "fixed 1"),
    "cuh-crlf-pin": (cu((TORCH + "inline void run() {\n  k<<<1, 1>>>();\n}\n").replace("\n", "\r\n"), "k.cuh"), PIN,
                     "k.cuh", (TORCH + f"inline void run() {{\n  k<<<1, 1>>>();{CPIN}\n}}\n").replace("\n", "\r\n"),
                     "pinned 1"),
    "cu-clang-format-off-fix": (
        cu(TORCH + "// clang-format off\nvoid run() {\n  k<<<1,\n      1>>>();\n}\n// clang-format on\n"), FIX, "k.cu",
        TORCH + f"// clang-format off\nvoid run() {{\n  k<<<1,\n      1>>>();\n  {CHECK}\n}}\n// clang-format on\n",
        "fixed 1"),
    "cu-clang-format-off-pin": (
        cu(TORCH + "// clang-format off\nvoid run() {\n  k<<<1,\n      1>>>();\n}\n// clang-format on\n"), PIN, "k.cu",
        TORCH + f"// clang-format off\nvoid run() {{\n  k<<<1,{CPIN}\n      1>>>();\n}}\n// clang-format on\n",
        "pinned 1"),
    "cu-macro-argument-over-lines-fix": (
        cu(TORCH + "#define CALL(x) x\nvoid run() {\n  CALL(\n    k<<<1, 1>>>()\n  );\n}\n"), FIX, "k.cu",
        TORCH + f"#define CALL(x) x\nvoid run() {{\n  CALL(\n    k<<<1, 1>>>()\n  );\n    {CHECK}\n}}\n", "fixed 1"),
    "cu-launch-over-lines-pin": (
        cu(TORCH + "void run(int n) {\n  k<<<\n    n,\n    1>>>(\n  );\n}\n"), PIN, "k.cu",
        TORCH + f"void run(int n) {{\n  k<<<{CPIN}\n    n,\n    1>>>(\n  );\n}}\n", "pinned 1"),
    # A launch that is a braceless loop's or else's whole body, or is returned: no statement can follow it there.
    "cu-braceless-for-fix": (cu(TORCH + "void run(int n) {\n  for (int i = 0; i < n; ++i)\n    k<<<1, 1>>>();\n}\n"),
                             FIX, "k.cu", None, "fixed 0 finding(s) in 0 files, 1 remaining"),
    "cu-braceless-while-fix": (cu(TORCH + "void run(int n) {\n  while (n--) k<<<1, 1>>>();\n}\n"), FIX, "k.cu", None,
                               "fixed 0 finding(s) in 0 files, 1 remaining"),
    "cu-braceless-else-fix": (cu(TORCH + "void run(int n) {\n  if (n) {}\n  else k<<<1, 1>>>();\n}\n"), FIX, "k.cu",
                              None, "fixed 0 finding(s) in 0 files, 1 remaining"),
    "cu-braceless-do-while-fix": (cu(TORCH + "void run(int n) {\n  do k<<<1, 1>>>(); while (--n);\n}\n"), FIX, "k.cu",
                                  None, "fixed 0 finding(s) in 0 files, 1 remaining"),
    "cu-braceless-else-if-fix": (cu(TORCH + "void run(int n) {\n  if (n) k<<<1,1>>>();\n  else if (n>1) k<<<2,1>>>();\n}\n"),
                                 FIX, "k.cu", None, "fixed 0 finding(s) in 0 files, 2 remaining"),
    "cu-returned-launch-fix": (cu(TORCH + "void run(int n) {\n  return k<<<1, 1>>>();\n}\n"), FIX, "k.cu", None,
                               "fixed 0 finding(s) in 0 files, 1 remaining"),
    "cu-returned-launch-pin": (cu(TORCH + "void run(int n) {\n  return k<<<1, 1>>>();\n}\n"), PIN, "k.cu",
                               TORCH + f"void run(int n) {{\n  return k<<<1, 1>>>();{CPIN}\n}}\n", "pinned 1"),
    # Two launches in one statement take one check; a labelled launch and a case's keep their places.
    "cu-comma-launches-fix": (cu(TORCH + "void run() {\n  k<<<1, 1>>>(), k<<<2, 1>>>();\n}\n"), FIX, "k.cu",
                              TORCH + f"void run() {{\n  k<<<1, 1>>>(), k<<<2, 1>>>();\n  {CHECK}\n}}\n",
                              "0 remaining"),
    "cu-ternary-launches-fix": (cu(TORCH + "void run(int n) {\n  n ? k<<<1, 1>>>() : k<<<2, 1>>>();\n}\n"), FIX, "k.cu",
                                TORCH + f"void run(int n) {{\n  n ? k<<<1, 1>>>() : k<<<2, 1>>>();\n  {CHECK}\n}}\n",
                                "0 remaining"),
    "cu-case-on-one-line-fix": (
        cu(TORCH + "void run(int n) {\n  switch (n) { case 0: k<<<1, 1>>>(); break; }\n}\n"), FIX, "k.cu",
        TORCH + f"void run(int n) {{\n  switch (n) {{ case 0: k<<<1, 1>>>(); {CHECK} break; }}\n}}\n", "fixed 1"),
    "cu-label-fix": (cu(TORCH + "void run() {\n again: k<<<1, 1>>>();\n}\n"), FIX, "k.cu",
                     TORCH + f"void run() {{\n again: k<<<1, 1>>>();\n {CHECK}\n}}\n", "fixed 1"),
    # C++: KG002 in `extern "C"`, before text that reads as a block comment; a whole-file directive.
    "cu-stale-in-extern-c": (cu(TORCH + 'extern "C" {\nint x;  // kgate: ignore[KG302] old\n}\n'), SAFE, "k.cu",
                             TORCH + 'extern "C" {\nint x;\n}\n', "fixed 1"),
    "cu-stale-reason-holds-block-comment": (cu(TORCH + "int x;  // kgate: ignore[KG302] old /* not */\n"), SAFE,
                                            "k.cu", TORCH + "int x;\n", "fixed 1"),
    "cu-stale-file-directive": (cu("// kgate: ignore-file[KG302] old\n__global__ void k() {}\n"), SAFE, "k.cu",
                                "__global__ void k() {}\n", "fixed 1"),
    # A block comment is no directive: it neither silences the launch nor is removed as stale.
    "cu-block-comment-is-a-directive": (
        cu(TORCH + "void run() {\n  k<<<1,1>>>();  /* kgate: ignore[KG302] host checks */\n}\n"), SAFE, "k.cu", None,
        "fixed 0 finding(s) in 0 files, 0 remaining"),
    # CMake: the first line, a cache entry, bracket comments and arguments, lists, generator expressions, properties.
    "cmake-after-minimum-required-fix": (
        build("CMakeLists.txt", "cmake_minimum_required(VERSION 3.24)\nset(CMAKE_CUDA_ARCHITECTURES 120)\n"), FIX,
        "CMakeLists.txt", "cmake_minimum_required(VERSION 3.24)\nset(CMAKE_CUDA_ARCHITECTURES 120a)\n", "fixed 1"),
    "cmake-cache-entry-fix": (build("CMakeLists.txt", 'set(CMAKE_CUDA_ARCHITECTURES "120" CACHE STRING "")\n'), FIX,
                              "CMakeLists.txt", 'set(CMAKE_CUDA_ARCHITECTURES "120a" CACHE STRING "")\n', "fixed 1"),
    "cmake-cache-entry-pin": (build("CMakeLists.txt", 'set(CMAKE_CUDA_ARCHITECTURES "120" CACHE STRING "")\n'), PIN,
                              "CMakeLists.txt", 'set(CMAKE_CUDA_ARCHITECTURES "120" CACHE STRING "")' + HPIN + "\n",
                              "pinned 1"),
    "cmake-bracket-comment-before-pin": (
        build("CMakeLists.txt", "#[[ note\n set(CMAKE_CUDA_ARCHITECTURES 120) ]]\nset(CMAKE_CUDA_ARCHITECTURES 120)\n"),
        PIN, "CMakeLists.txt",
        "#[[ note\n set(CMAKE_CUDA_ARCHITECTURES 120) ]]\nset(CMAKE_CUDA_ARCHITECTURES 120)" + HPIN + "\n", "pinned 1"),
    "cmake-bracket-argument-flags-fix": (
        build("CMakeLists.txt", "set(X [=[ -arch=sm_120 ]=])\nset(CMAKE_CUDA_ARCHITECTURES 120)\n"), FIX,
        "CMakeLists.txt", "set(X [=[ -arch=sm_120a ]=])\nset(CMAKE_CUDA_ARCHITECTURES 120a)\n", "fixed 2"),
    "cmake-list-append-fix": (build("CMakeLists.txt", "list(APPEND CMAKE_CUDA_ARCHITECTURES 120)\n"), FIX,
                              "CMakeLists.txt", "list(APPEND CMAKE_CUDA_ARCHITECTURES 120a)\n", "fixed 1"),
    "cmake-list-append-over-lines-pin": (
        build("CMakeLists.txt", "list(APPEND CMAKE_CUDA_ARCHITECTURES 90a 120 # x\n)\n"), PIN, "CMakeLists.txt",
        "list(APPEND CMAKE_CUDA_ARCHITECTURES 90a 120 # x" + HPIN + "\n)\n", "pinned 1"),
    "cmake-string-append-gencode-fix": (
        build("CMakeLists.txt", 'string(APPEND CMAKE_CUDA_FLAGS " -gencode arch=compute_120,code=sm_120")\n'), FIX,
        "CMakeLists.txt", 'string(APPEND CMAKE_CUDA_FLAGS " -gencode arch=compute_120a,code=sm_120a")\n', "fixed 2"),
    "cmake-generator-expression-fix": (
        build("CMakeLists.txt", "target_compile_options(m PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-arch=sm_120>)\n"), FIX,
        "CMakeLists.txt", "target_compile_options(m PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-arch=sm_120a>)\n", "fixed 1"),
    "cmake-target-property-fix": (
        build("CMakeLists.txt", 'set_target_properties(m PROPERTIES CUDA_ARCHITECTURES "120-real;120-virtual")\n'), FIX,
        "CMakeLists.txt", 'set_target_properties(m PROPERTIES CUDA_ARCHITECTURES "120a-real;120a-virtual")\n',
        "fixed 2"),
    "cmake-stale-before-bracket-comment": (
        build("CMakeLists.txt", "set(A 1)  # kgate: ignore[KG301] old\n#[[\nx\n]]\n"), SAFE, "CMakeLists.txt",
        "set(A 1)\n#[[\nx\n]]\n", "fixed 1"),
    "cmake-directive-in-bracket-comment": (
        build("CMakeLists.txt", "#[[ # kgate: ignore[KG301] old ]]\nset(A 1)\n"), SAFE, "CMakeLists.txt", None,
        "fixed 0 finding(s) in 0 files, 0 remaining"),
    # setup.py: flags over lines, f-strings (a placeholder is left), the architecture list set in the environment.
    "setup-flags-over-lines-fix": (build("setup.py", SETUP_LINES), FIX, "setup.py",
                                   SETUP_LINES.replace("sm_120", "sm_120a"), "fixed 1"),
    "setup-flags-over-lines-pin": (build("setup.py", SETUP_LINES), PIN, "setup.py",
                                   SETUP_LINES.replace('"-arch=sm_120",', '"-arch=sm_120",' + HPIN), "pinned 1"),
    "setup-f-string-gencode-fix": (build("setup.py", SETUP_F), FIX, "setup.py",
                                   SETUP_F.replace("compute_120,code=sm_120", "compute_120a,code=sm_120a"), "fixed 2"),
    "setup-arch-list-environ-fix": (
        build("setup.py", 'import os\nos.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0;12.0+PTX")\n'), FIX,
        "setup.py", 'import os\nos.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0;12.0a+PTX")\n', "fixed 1"),
    "setup-comment-names-arch-fix": (
        build("setup.py", EXT + '# -arch=sm_120 was used before\next = CUDAExtension("m", ["mma.cu"], '
              'extra_compile_args={"nvcc": ["-arch=sm_120"]})\n'), FIX, "setup.py",
        EXT + '# -arch=sm_120 was used before\next = CUDAExtension("m", ["mma.cu"], '
        'extra_compile_args={"nvcc": ["-arch=sm_120a"]})\n', "fixed 1"),
    # pytest's settings: multi-line arrays with comments, no trailing comma, a D: prefix, CR-only INI, other sections.
    "toml-env-over-lines-with-comments-fix": (
        {"pyproject.toml": MULTI_ENV}, FIX, "pyproject.toml",
        MULTI_ENV.replace('  "TRITON_INTERPRET=1",\n', ""), "fixed 1"),
    "toml-env-over-lines-with-comments-pin": (
        {"pyproject.toml": MULTI_ENV}, PIN, "pyproject.toml",
        MULTI_ENV.replace('"TRITON_INTERPRET=1",', '"TRITON_INTERPRET=1",' + PINNED), "pinned 1"),
    "toml-env-last-without-comma-fix": ({"pyproject.toml": LAST_ENV}, FIX, "pyproject.toml",
                                        LAST_ENV.replace('\n  "TRITON_INTERPRET=1"', ""), "fixed 1"),
    "toml-env-d-prefix-fix": (
        {"pyproject.toml": CONFIG + '[tool.pytest.ini_options]\nenv = ["D:TRITON_INTERPRET=1", "A=1"]\n'}, FIX,
        "pyproject.toml", CONFIG + '[tool.pytest.ini_options]\nenv = ["A=1"]\n', "fixed 1"),
    "kgate-toml-inline-tables-left": (
        {"kgate.toml": 'targets = ["sm_120a"]\n[options]\nlaunch-guard = { window = 5, check_macros = [\n  "CUDA_CHECK",\n'
                       '  "MY_CHECK",\n] }\n', "pyproject.toml": '[tool.pytest.ini_options]\nenv = [\n "TRITON_INTERPRET=1",\n]\n'},
        FIX, "pyproject.toml", '[tool.pytest.ini_options]\nenv = [\n]\n', "fixed 1"),
    "pytest-ini-cr-only-fix": ({"pytest.ini": "[pytest]\renv =\r    TRITON_INTERPRET=1\r    A=1\r"}, FIX, "pytest.ini",
                               "[pytest]\renv =\r    A=1\r", "fixed 1"),
    "pytest-ini-cr-only-pin": ({"pytest.ini": "[pytest]\renv =\r    TRITON_INTERPRET=1\r    A=1\r"}, PIN, "pytest.ini",
                               None, "pytest.ini:3: KG203 not pinned: this kind of file takes no line comment"),
    "pytest-toml-fix": ({"pytest.toml": '[pytest]\nenv = ["TRITON_INTERPRET=1", "A=1"]\n'}, FIX, "pytest.toml",
                        '[pytest]\nenv = ["A=1"]\n', "fixed 1"),
    "setup-cfg-comment-line-fix": ({"setup.cfg": "[tool:pytest]\nenv =\n    A=1\n    ; old\n    TRITON_INTERPRET=1\n"},
                                   FIX, "setup.cfg", "[tool:pytest]\nenv =\n    A=1\n    ; old\n", "fixed 1"),
    "tox-ini-testenv-and-pytest-fix": (
        {"tox.ini": "[testenv]\nsetenv =\n  TRITON_INTERPRET = 1\n[pytest]\nenv =\n  TRITON_INTERPRET=true\n"}, FIX,
        "tox.ini", "[testenv]\nsetenv =\n[pytest]\nenv =\n", "fixed 2"),
    # A stale directive on the finding's line: the pin gets its own placeholder; the safe fix drops the stale code.
    "py-stale-directive-on-the-finding-line-pin": (
        py("import os\n" + SET + "  # kgate: ignore[KG201] old reason\n"), PIN, "tests/test_a.py",
        "import os\n" + SET + "  # kgate: ignore[KG201] old reason" + PINNED + "\n", "pinned 1"),
    "py-stale-directive-on-the-finding-line-safe-fix": (
        py("import os\n" + SET + "  # kgate: ignore[KG201] old reason\n"), SAFE, "tests/test_a.py",
        "import os\n" + SET + "\n", "fixed 1 finding(s) in 1 file, 1 remaining (1 more fixable with --unsafe-fixes)"),
    # A fixture's monkeypatch with its comment, a walrus in a condition, a statement after a semicolon.
    "py-conftest-monkeypatch-fix": (
        {"tests/conftest.py": 'import pytest\n@pytest.fixture(autouse=True)\ndef cpu(monkeypatch):\n'
                              '    monkeypatch.setenv("TRITON_INTERPRET", "1")  # CPU job\n'}, FIX, "tests/conftest.py",
        'import pytest\n@pytest.fixture(autouse=True)\ndef cpu(monkeypatch):\n    # CPU job\n    pass\n', "fixed 1"),
    "py-walrus-in-a-condition-fix": (
        py('import os\nif (v := os.environ.setdefault("TRITON_INTERPRET", "1")):\n    pass\n'), FIX, "tests/test_a.py",
        None, "fixed 0 finding(s) in 0 files, 1 remaining"),
    "py-after-a-semicolon-with-comment-fix": (py("import os\nx = 1; " + SET + "  # cpu\n"), FIX, "tests/test_a.py",
                                              "import os\nx = 1  # cpu\n", "fixed 1"),
    # `--fix --diff` previews the safe fixes only and writes nothing; a module pytest does not collect is no test.
    "py-fix-with-diff-previews": (py("import os\n" + SET + "\n"), ("lint", "--fix", "--diff"), "tests/test_a.py", None,
                                  "would fix 0 finding(s) in 0 files (1 more fixable with --unsafe-fixes)"),
    "py-not-a-test-module-name": ({"tests/test a.py": "import os\n" + SET + "\n"}, FIX, "tests/test a.py", None,
                                  "fixed 0 finding(s) in 0 files, 0 remaining"),
    "sh-stale-fix": (build("build.sh", "#!/bin/sh\nnvcc -arch=sm_120a mma.cu  # kgate: ignore[KG301] old\n"), SAFE,
                     "build.sh", "#!/bin/sh\nnvcc -arch=sm_120a mma.cu\n", "fixed 1"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_file_means_what_it_meant_with_the_named_change(tmp_path: Path, name: str) -> None:
    files, command, path, expected, said = CASES[name]
    root = project(tmp_path, files)
    before = (root / path).read_bytes()
    run = kgate(*command, cwd=root)
    assert run.code in (0, 1), (name, run.stdout, run.stderr)
    after = (root / path).read_bytes()
    wanted = before if expected is None else expected.encode() if isinstance(expected, str) else expected
    assert after == wanted, (name, after, run.stderr)
    assert said in run.stderr, (name, run.stderr)
    if "--fix" in command and "--diff" not in command:  # what a fix wrote, a second fix leaves
        again = kgate(*command, cwd=root)
        assert (root / path).read_bytes() == after and "fixed 0 finding(s) in 0 files" in again.stderr, (name, again)


# A check the launch's path does not reach covers nothing: the launch is reported (exit 1), where it used to pass.
UNREACHED = {
    "returned-launch": "void run(int n) {\n  return k<<<1, 1>>>();\n  CHECK\n}\n",
    "return-after-launch": "void run(int n) {\n  k<<<1, 1>>>();\n  return;\n  CHECK\n}\n",
    "throw-after-launch": "void run(int n) {\n  k<<<1, 1>>>();\n  throw 1;\n  CHECK\n}\n",
    "returned-in-an-if-block": "void run(int n) {\n  if (n) { return k<<<1, 1>>>(); }\n  CHECK\n}\n",
    "return-after-the-if": "void run(int n) {\n  if (n) {\n    k<<<1, 1>>>();\n  }\n  return;\n  CHECK\n}\n",
    "in-the-next-function": "void run() {\n  k<<<1, 1>>>();\n}\nvoid other() { CHECK }\n",
}
# ... and one the path does reach, past a return that runs on some paths only, or one in another branch or a lambda.
REACHED = {
    "conditional-return": "void run(int n) {\n  k<<<1, 1>>>();\n  if (n) return;\n  CHECK\n}\n",
    "return-in-a-block": "void run(int n) {\n  k<<<1, 1>>>();\n  if (n) { return; }\n  CHECK\n}\n",
    "throw-in-a-lambda": "void run(int n) {\n  k<<<1, 1>>>();\n  auto f = [] { throw 1; };\n  CHECK\n}\n",
    "return-in-the-else": "void run(int n) {\n  if (n) {\n    k<<<1, 1>>>();\n  } else {\n    return;\n  }\n  CHECK\n}\n",
    "continue-in-a-loop": "void run(int n) {\n  for (;;) {\n    k<<<1, 1>>>();\n    continue;\n    CHECK\n  }\n}\n",
    # The value returned is the check: it runs before the function returns.
    "check-returned": "cudaError_t run(int n) {\n  k<<<1, 1>>>();\n  return cudaGetLastError();\n}\n",
    "check-in-the-returned-call": "int run(int n) {\n  k<<<1, 1>>>();\n  return ok(cudaGetLastError(), \"launch\");\n}\n",
    "check-thrown": "void run(int n) {\n  k<<<1, 1>>>();\n  throw error(cudaGetLastError());\n}\n",
}


def test_a_check_counts_where_the_launchs_path_reaches_it(tmp_path: Path) -> None:
    files = {f"{'u' if name in UNREACHED else 'r'}_{name}.cu": TORCH + body.replace("CHECK", CHECK)
             for name, body in {**UNREACHED, **REACHED}.items()}
    root = project(tmp_path, files)
    run = kgate("lint", "--format", "json", "--select", "KG302", cwd=root)
    reported = {finding["path"] for finding in json.loads(run.stdout)["findings"]}
    assert reported == {f"u_{name}.cu" for name in UNREACHED}, run.stdout
    # No fix inserts a check after a returned launch, where it would never run: the file stays as it was.
    before = (root / "u_returned-launch.cu").read_bytes()
    kgate(*FIX, "u_returned-launch.cu", cwd=root)
    assert (root / "u_returned-launch.cu").read_bytes() == before


SETTING = "import os\n" + SET + "\n"


def test_a_file_reached_twice_is_written_once_or_left_and_said(tmp_path: Path) -> None:
    # A link inside the project: one write, the other name said.
    linked = project(tmp_path / "linked", {"tests/test_a.py": SETTING})
    os.symlink("test_a.py", linked / "tests" / "test_b.py")
    run = kgate(*FIX, cwd=linked)
    assert (linked / "tests/test_a.py").read_text() == "import os\n", run.stderr
    assert "tests/test_b.py: fixes not written: another name of a file already written (a link)" in run.stderr
    # A hard link: never written (the other name would keep the old text), and said for each name.
    hard = project(tmp_path / "hard", {"tests/test_a.py": SETTING})
    os.link(hard / "tests/test_a.py", hard / "tests/test_b.py")
    for command in (FIX, PIN):
        run = kgate(*command, cwd=hard)
        assert (hard / "tests/test_a.py").read_text() == SETTING, run.stderr
        assert "tests/test_a.py:" in run.stderr and "other hard link(s)" in run.stderr, run.stderr
    # A link in one folder to a test module in another: one write, the link said.
    other = project(tmp_path / "other", {"src/test_real.py": SETTING})
    (other / "tests").mkdir()
    os.symlink("../src/test_real.py", other / "tests" / "test_l.py")
    run = kgate(*FIX, cwd=other)
    assert (other / "src/test_real.py").read_text() == "import os\n", run.stderr
    assert "tests/test_l.py: fixes not written: another name of a file already written (a link)" in run.stderr
    # Two files with the same finding on the same line: each fixed.
    twins = project(tmp_path / "twins", {"tests/test_a.py": SETTING, "tests/test_b.py": SETTING})
    run = kgate(*FIX, cwd=twins)
    assert "fixed 2 finding(s) in 2 files, 0 remaining" in run.stderr
    assert {(twins / f"tests/test_{n}.py").read_text() for n in "ab"} == {"import os\n"}


def test_links_out_of_the_project_git_and_excluded_files(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "test_o.py").write_text(SETTING)
    root = project(tmp_path / "root", {"pyproject.toml": CONFIG + 'extend-exclude = ["tests/gen"]\n',
                                       ".git/test_g.py": SETTING, "tests/gen/test_x.py": SETTING})
    os.symlink(outside, root / "tests" / "linked")
    os.symlink(outside / "test_o.py", root / "tests" / "test_link.py")
    for command in (FIX, PIN):
        run = kgate(*command, cwd=root)
        assert (outside / "test_o.py").read_text() == SETTING, run.stderr
        assert (root / ".git/test_g.py").read_text() == SETTING and (root / "tests/gen/test_x.py").read_text() == SETTING
        for name in ("tests/linked/test_o.py", "tests/test_link.py"):
            assert f"{name}: {'fixes' if command == FIX else 'pins'} not written: it is a link to" in run.stderr
        named = kgate(*command, "tests/test_link.py", cwd=root)
        assert (outside / "test_o.py").read_text() == SETTING and "outside the project: not written" in named.stderr
    # An excluded file named on the command line is linted, and fixed, as docs/configuration.md says.
    run = kgate(*FIX, "tests/gen/test_x.py", cwd=root)
    assert (root / "tests/gen/test_x.py").read_text() == "import os\n", run.stderr


def test_pins_twice_and_a_preview_after_them_change_nothing(tmp_path: Path) -> None:
    root = project(tmp_path, {"tests/test_a.py": SETTING, "k.cu": TORCH + "void r() {\n  k<<<1,1>>>();\n}\n"})
    first = kgate(*PIN, cwd=root)
    assert "pinned 2 finding(s) in 2 files" in first.stderr
    written = {name: (root / name).read_bytes() for name in ("tests/test_a.py", "k.cu")}
    second = kgate(*PIN, cwd=root)
    assert "pinned 0 finding(s) in 0 files" in second.stderr
    assert {name: (root / name).read_bytes() for name in written} == written
    preview = kgate("lint", "--diff", "--unsafe-fixes", cwd=root)
    assert preview.code == 0 and preview.stdout == "" and "would fix 0 finding(s)" in preview.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="a file size limit of the shell")
def test_a_write_that_cannot_be_made_leaves_the_file_and_says_so(tmp_path: Path) -> None:
    root = project(tmp_path, {"tests/test_a.py": SETTING})
    for command in (FIX, PIN):
        proc = subprocess.run(["sh", "-c", 'ulimit -f 0; exec "$0" -m kgate "$@"', sys.executable, *command],
                              check=False, cwd=root, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 2 and "cannot write tests/test_a.py: File too large" in proc.stderr, proc.stderr
        assert (root / "tests/test_a.py").read_text() == SETTING
        assert sorted(os.listdir(root / "tests")) == ["test_a.py"]
