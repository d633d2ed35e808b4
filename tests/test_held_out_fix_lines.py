"""Held-out cases for `kgate lint --fix --unsafe-fixes` and `--add-ignore` on lines the earlier cases do not have,
in every kind of file a fix edits: Python test modules with a byte-order mark, tabs, form feeds, a continued line
before, a decorator over lines, `match`, `# fmt: off`, `# %%` cells, trailing semicolons, a file of one line; C++
and CUDA with `#pragma once`, a raw string of a custom delimiter, `??/`, digraphs, a `//` comment continued by a
backslash, a launch on the second line of a `#define`, not UTF-8; CMake `if()` arms, generator expressions,
`string(CONCAT)`, a semicolon list, `set_property`; shell `case`, nested `$( )`, a quoted here-document, `&&`
chains, `TORCH_CUDA_ARCH_LIST`; `setup.py`; `pyproject.toml` with a dotted key, CRLF, a comment on the setting's
line; two fixes on one line; a pin, a fix and a pin again; a read-only file; a file over the size kgate parses.

Each file afterwards means what it meant with the change its fix names, or is left as it was and the run says so.
One project holds every file of the table, fixed once and pinned once."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import Run, kgate

CONFIG = '[tool.kgate]\ntargets = ["sm_120a"]\n'
FIX = ("lint", "--fix", "--unsafe-fixes")
PIN = ("lint", "--add-ignore")
BLOCK_SCALED = ('__device__ void mma() {\n  asm volatile("mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale'
                '.scale_vec::1X.f32.e4m3.e4m3.f32.ue8m0 {};");\n}\n__global__ void k() {}\n')
SET = 'os.environ["TRITON_INTERPRET"] = "1"'
UNUSED = "  # kgate: ignore[KG203] kept for the CPU job"
TORCH = "#include <c10/cuda/CUDAException.h>\n__global__ void k() {}\n"
UNUSED_CPP = "  // kgate: ignore[KG302] checked by the caller"

# tests/test_<name>.py: a KG203 setting to remove or pin, or a KG002 suppression to remove.
PYTHON = {
    "bom": "\ufeffimport os\n" + SET + "\n",
    "tabs": "import os\nif True:\n\t" + SET + "\n\tx = 1\n",
    "formfeed-line": "import os\n\x0c\n" + SET + "\n",
    "formfeed-after-code": "import os\nx = 1 \x0c\n" + SET + "\n",
    "continued-line-before": "import os\nx = 1 + \\\n  2\n" + SET + "\n",
    "decorator-over-lines": "import os\nimport functools\n@functools.lru_cache(\n    maxsize=1)\ndef f():\n    " + SET + "\n",
    "match-case": "import os\nmatch 1:\n    case 1:\n        " + SET + "\n",
    "only-line": "import os; os.environ['TRITON_INTERPRET'] = '1'",
    "trailing-semicolon": "import os\n" + SET + ";\n",
    "semicolons-around": "import os\n" + SET + "; x = 1;\n",
    "fmt-off": "import os\n# fmt: off\n" + SET + "\n# fmt: on\n",
    "cells": "# %%\nimport os\n# %%\n" + SET + "\n# %% [markdown]\n",
    "multi-line-f-string-before": 'import os\ny = 1\nx = f"""{\ny\n}"""\n' + SET + '\n',
    "unused-bom": "\ufeffx = 1" + UNUSED + "\n",
    "unused-tab": "if True:\n\tx = 1" + UNUSED + "\n",
    "unused-after-semicolon": "x = 1;" + UNUSED + "\n",
    "unused-only-line": "#" + UNUSED[3:],
    "unused-form-feed": "\x0cx = 1" + UNUSED + "\n",
    "unused-f-string": 'x = f"{1}"' + UNUSED + "\n",
    "unused-fmt-off": "# fmt: off\nx = [1,\n  2]" + UNUSED + "\n# fmt: on\n",
    "two-fixes-one-line": "import os\n" + SET + "  # kgate: ignore[KG201] old\n",
    "unused-and-used-codes": "import os\n" + SET + "  # kgate: ignore[KG201, KG203] old\n",
}
# cpp/<name>: a KG302 launch to check or pin, or a KG002 suppression to remove.
CPP = {
    "pragma-once.cuh": "#pragma once\n" + TORCH + "inline void run() {\n  k<<<1, 1>>>();\n}\n",
    "raw-delimiter.cu": TORCH + 'void run() {\n  const char* s = R"xy(\n)" k<<<1,1>>>(); )xy";\n  k<<<1, 1>>>();\n}\n',
    "raw-delimiter-after.cu": TORCH + 'void run() {\n  k<<<1, 1>>>(); const char* s = R"xy(a)"\n)xy";\n}\n',
    "trigraph.cu": TORCH + 'void run() {\n  // note ??/\n  k<<<1, 1>>>();\n}\n',
    "digraph.cu": TORCH + 'void run() <%\n  k<<<1, 1>>>();\n%>\n',
    "continued-comment.cu": TORCH + 'void run() {\n  // a note \\\n  k<<<1, 1>>>();\n  k<<<2, 1>>>();\n}\n',
    "define-second-line.cu": TORCH + '#define L() \\\n  k<<<1, 1>>>()\nvoid run() {\n  L();\n}\n',
    "define-statement.cu": TORCH + '#define L() do { \\\n  k<<<1, 1>>>(); \\\n } while (0)\nvoid run() {\n  L();\n}\n',
    "include-of-a-header.cu": '#include "with-check.cuh"\nvoid run() {\n  k<<<1, 1>>>();\n}\n',
    "not-utf8.cu": (TORCH + "// caf\xe9\nvoid run() {\n  k<<<1, 1>>>();\n}\n").encode("latin-1"),
    "two-launches-one-line.cu": TORCH + "void run() { k<<<1, 1>>>(); k<<<2, 1>>>(); }\n",
    "quote-character.cu": TORCH + "void run() {\n  char c = '\"'; k<<<1, 1>>>();\n}\n",
    "unused-in-raw-delimiter.cu": TORCH + 'const char* s = R"xy(\n)";' + UNUSED_CPP + '\n)xy";\nint y;' + UNUSED_CPP + '\n',
    "unused-continued.cu": TORCH + "int y;" + UNUSED_CPP + " \\\nint z;\n",
    "unused-in-define.cu": TORCH + "#define A 1 \\\n  + 2" + UNUSED_CPP + "\nint y;\n",
    "unused-after-trigraph.cu": TORCH + "int y; // x ??/\n// kgate: ignore[KG302] checked by the caller\nint z;\n",
}
# b/<name>/<build file>, beside a block-scaled mma.cu: a KG301 bare target to make `a` or pin.
BUILD = {
    "cmake-if-else/CMakeLists.txt": ("project(x)\nif(WIN32)\n  set(CMAKE_CUDA_ARCHITECTURES 120)\nelse()\n"
                                     "  set(CMAKE_CUDA_ARCHITECTURES 120-real)\nendif()\n"),
    "cmake-generator-expression/CMakeLists.txt": (
        "project(x)\ntarget_compile_options(t PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-arch=sm_120>)\n"),
    "cmake-string-concat/CMakeLists.txt": 'project(x)\nstring(CONCAT F "-gencode=arch=compute_120," "code=sm_120")\n',
    "cmake-semicolon-list/CMakeLists.txt": 'project(x)\nset(CMAKE_CUDA_ARCHITECTURES "90a;120;100a")\n',
    "cmake-set-property/CMakeLists.txt": "project(x)\nset_property(TARGET t PROPERTY CUDA_ARCHITECTURES 120)\n",
    "cmake-bracket-comment-after/CMakeLists.txt": "project(x)\nset(CMAKE_CUDA_ARCHITECTURES 120) #[[ a\nb ]]\n",
    "cmake-quoted-over-lines/CMakeLists.txt": 'project(x)\nset(F "-arch=sm_120 \n -O3")\n',
    "shell-case/build.sh": "#!/bin/sh\ncase $1 in\n  a) nvcc -arch=sm_120 k.cu ;;\n  *) exit 1 ;;\nesac\n",
    "shell-echo-of-a-substitution/build.sh": '#!/bin/sh\nX=$(echo $(nvcc -arch=sm_120 k.cu))\n',
    "shell-quoted-heredoc/build.sh": "#!/bin/sh\ncat <<'EOF' > f.sh\nnvcc -arch=sm_120 k.cu\nEOF\nnvcc -arch=sm_120 k.cu\n",
    "shell-and-chain/build.sh": "#!/bin/sh\nmkdir -p b && cd b && nvcc -arch=sm_120 ../k.cu && echo ok\n",
    "shell-torch-arch-list/build.sh": '#!/bin/sh\nTORCH_CUDA_ARCH_LIST="9.0;12.0" pip install .\n',
    "setup-other-sources/setup.py": (
        'from setuptools import setup\nfrom torch.utils.cpp_extension import CUDAExtension\nsetup(ext_modules=['
        'CUDAExtension("x", ["k.cu"], extra_compile_args={"nvcc": ["-gencode=arch=compute_120,code=sm_120"]})])\n'),
    "setup-three-on-a-line/setup.py": (
        'from setuptools import setup\nF = ["-arch=sm_120", "-gencode=arch=compute_120,code=sm_120"]  # two\nsetup()\n'),
}

AFTER = {  # path -> (after `--fix --unsafe-fixes`, after `--add-ignore`); None: left as it was
    'tests/test_bom.py': (
        '\ufeffimport os\n',
        '\ufeffimport os\nos.environ["TRITON_INTERPRET"] = "1"  # kgate: ignore[KG203] TODO: give the reason\n'),
    'tests/test_tabs.py': (
        'import os\nif True:\n\tx = 1\n',
        ('import os\nif True:\n'
         '\tos.environ["TRITON_INTERPRET"] = "1"  # kgate: ignore[KG203] TODO: give the reason\n\tx = 1\n')),
    'tests/test_formfeed_line.py': (
        'import os\n\x0c\n',
        'import os\n\x0c\nos.environ["TRITON_INTERPRET"] = "1"  # kgate: ignore[KG203] TODO: give the reason\n'),
    'tests/test_formfeed_after_code.py': (
        'import os\nx = 1 \x0c\n',
        ('import os\nx = 1 \x0c\n'
         'os.environ["TRITON_INTERPRET"] = "1"  # kgate: ignore[KG203] TODO: give the reason\n')),
    'tests/test_continued_line_before.py': (
        'import os\nx = 1 + \\\n  2\n',
        ('import os\nx = 1 + \\\n  2\n'
         'os.environ["TRITON_INTERPRET"] = "1"  # kgate: ignore[KG203] TODO: give the reason\n')),
    'tests/test_decorator_over_lines.py': (
        'import os\nimport functools\n@functools.lru_cache(\n    maxsize=1)\ndef f():\n    pass\n',
        ('import os\nimport functools\n@functools.lru_cache(\n    maxsize=1)\ndef f():\n'
         '    os.environ["TRITON_INTERPRET"] = "1"  # kgate: ignore[KG203] TODO: give the reason\n')),
    'tests/test_match_case.py': (
        'import os\nmatch 1:\n    case 1:\n        pass\n',
        ('import os\nmatch 1:\n    case 1:\n'
         '        os.environ["TRITON_INTERPRET"] = "1"  # kgate: ignore[KG203] TODO: give the reason\n')),
    'tests/test_only_line.py': (
        'import os',
        "import os; os.environ['TRITON_INTERPRET'] = '1'  # kgate: ignore[KG203] TODO: give the reason"),
    'tests/test_trailing_semicolon.py': (
        'import os\n',
        'import os\nos.environ["TRITON_INTERPRET"] = "1";  # kgate: ignore[KG203] TODO: give the reason\n'),
    'tests/test_semicolons_around.py': (
        'import os\nx = 1\n',
        'import os\nos.environ["TRITON_INTERPRET"] = "1"; x = 1;  # kgate: ignore[KG203] TODO: give the reason\n'),
    'tests/test_fmt_off.py': (
        'import os\n# fmt: off\n# fmt: on\n',
        ('import os\n# fmt: off\n'
         'os.environ["TRITON_INTERPRET"] = "1"  # kgate: ignore[KG203] TODO: give the reason\n# fmt: on\n')),
    'tests/test_cells.py': (
        '# %%\nimport os\n# %%\n# %% [markdown]\n',
        ('# %%\nimport os\n# %%\n'
         'os.environ["TRITON_INTERPRET"] = "1"  # kgate: ignore[KG203] TODO: give the reason\n# %% [markdown]\n')),
    'tests/test_multi_line_f_string_before.py': (
        'import os\ny = 1\nx = f"""{\ny\n}"""\n',
        ('import os\ny = 1\nx = f"""{\ny\n}"""\n'
         'os.environ["TRITON_INTERPRET"] = "1"  # kgate: ignore[KG203] TODO: give the reason\n')),
    'tests/test_unused_bom.py': (
        '\ufeffx = 1\n',
        None),
    'tests/test_unused_tab.py': (
        'if True:\n\tx = 1\n',
        None),
    'tests/test_unused_after_semicolon.py': (
        'x = 1;  \n',
        None),
    'tests/test_unused_only_line.py': (
        '',
        None),
    'tests/test_unused_form_feed.py': (
        '\x0cx = 1\n',
        None),
    'tests/test_unused_f_string.py': (
        'x = f"{1}"\n',
        None),
    'tests/test_unused_fmt_off.py': (
        '# fmt: off\nx = [1,\n  2]\n# fmt: on\n',
        None),
    'tests/test_two_fixes_one_line.py': (
        'import os\n',
        ('import os\n'
         'os.environ["TRITON_INTERPRET"] = "1"  # kgate: ignore[KG201] old  # kgate: ignore[KG203] T'
         'ODO: give the reason\n')),
    'tests/test_unused_and_used_codes.py': (
        'import os\nos.environ["TRITON_INTERPRET"] = "1"  # kgate: ignore[KG203] old\n',
        None),
    'cpp/pragma-once.cuh': (
        ('#pragma once\n#include <c10/cuda/CUDAException.h>\n__global__ void k() {}\ninline void run() {\n'
         '  k<<<1, 1>>>();\n  C10_CUDA_KERNEL_LAUNCH_CHECK();\n}\n'),
        ('#pragma once\n#include <c10/cuda/CUDAException.h>\n__global__ void k() {}\ninline void run() {\n'
         '  k<<<1, 1>>>();  // kgate: ignore[KG302] TODO: give the reason\n}\n')),
    'cpp/raw-delimiter.cu': (
        ('#include <c10/cuda/CUDAException.h>\n__global__ void k() {}\nvoid run() {\n  const char* s = R"xy(\n'
         ')" k<<<1,1>>>(); )xy";\n  k<<<1, 1>>>();\n  C10_CUDA_KERNEL_LAUNCH_CHECK();\n}\n'),
        ('#include <c10/cuda/CUDAException.h>\n__global__ void k() {}\nvoid run() {\n  const char* s = R"xy(\n'
         ')" k<<<1,1>>>(); )xy";\n  k<<<1, 1>>>();  // kgate: ignore[KG302] TODO: give the reason\n}\n')),
    'cpp/raw-delimiter-after.cu': (
        ('#include <c10/cuda/CUDAException.h>\n__global__ void k() {}\nvoid run() {\n'
         '  k<<<1, 1>>>(); C10_CUDA_KERNEL_LAUNCH_CHECK(); const char* s = R"xy(a)"\n)xy";\n}\n'),
        None),
    'cpp/trigraph.cu': (
        ('#include <c10/cuda/CUDAException.h>\n__global__ void k() {}\nvoid run() {\n  // note ??/\n'
         '  k<<<1, 1>>>();\n  C10_CUDA_KERNEL_LAUNCH_CHECK();\n}\n'),
        ('#include <c10/cuda/CUDAException.h>\n__global__ void k() {}\nvoid run() {\n  // note ??/\n'
         '  k<<<1, 1>>>();  // kgate: ignore[KG302] TODO: give the reason\n}\n')),
    'cpp/digraph.cu': (
        ('#include <c10/cuda/CUDAException.h>\n__global__ void k() {}\nvoid run() <%\n  k<<<1, 1>>>();\n'
         '  C10_CUDA_KERNEL_LAUNCH_CHECK();\n%>\n'),
        ('#include <c10/cuda/CUDAException.h>\n__global__ void k() {}\nvoid run() <%\n'
         '  k<<<1, 1>>>();  // kgate: ignore[KG302] TODO: give the reason\n%>\n')),
    'cpp/continued-comment.cu': (
        ('#include <c10/cuda/CUDAException.h>\n__global__ void k() {}\nvoid run() {\n  // a note \\\n'
         '  k<<<1, 1>>>();\n  k<<<2, 1>>>();\n  C10_CUDA_KERNEL_LAUNCH_CHECK();\n}\n'),
        ('#include <c10/cuda/CUDAException.h>\n__global__ void k() {}\nvoid run() {\n  // a note \\\n'
         '  k<<<1, 1>>>();\n  k<<<2, 1>>>();  // kgate: ignore[KG302] TODO: give the reason\n}\n')),
    'cpp/define-second-line.cu': (
        None,
        ('#include <c10/cuda/CUDAException.h>\n__global__ void k() {}\n#define L() \\\n'
         '  k<<<1, 1>>>()  // kgate: ignore[KG302] TODO: give the reason\nvoid run() {\n  L();\n}\n')),
    'cpp/define-statement.cu': (
        None,
        None),
    'cpp/include-of-a-header.cu': (
        None,
        ('#include "with-check.cuh"\nvoid run() {\n'
         '  k<<<1, 1>>>();  // kgate: ignore[KG302] TODO: give the reason\n}\n')),
    'cpp/not-utf8.cu': (
        None,
        None),
    'cpp/two-launches-one-line.cu': (
        ('#include <c10/cuda/CUDAException.h>\n__global__ void k() {}\n'
         'void run() { k<<<1, 1>>>(); C10_CUDA_KERNEL_LAUNCH_CHECK(); k<<<2, 1>>>(); C10_CUDA_KERNEL'
         '_LAUNCH_CHECK(); }\n'),
        ('#include <c10/cuda/CUDAException.h>\n__global__ void k() {}\n'
         'void run() { k<<<1, 1>>>(); k<<<2, 1>>>(); }  // kgate: ignore[KG302] TODO: give the reason\n')),
    'cpp/quote-character.cu': (
        ('#include <c10/cuda/CUDAException.h>\n__global__ void k() {}\nvoid run() {\n'
         '  char c = \'"\'; k<<<1, 1>>>();\n  C10_CUDA_KERNEL_LAUNCH_CHECK();\n}\n'),
        ('#include <c10/cuda/CUDAException.h>\n__global__ void k() {}\nvoid run() {\n'
         '  char c = \'"\'; k<<<1, 1>>>();  // kgate: ignore[KG302] TODO: give the reason\n}\n')),
    'cpp/unused-in-raw-delimiter.cu': (
        ('#include <c10/cuda/CUDAException.h>\n__global__ void k() {}\nconst char* s = R"xy(\n'
         ')";  // kgate: ignore[KG302] checked by the caller\n)xy";\nint y;\n'),
        None),
    'cpp/unused-continued.cu': (
        None,
        None),
    'cpp/unused-in-define.cu': (
        '#include <c10/cuda/CUDAException.h>\n__global__ void k() {}\n#define A 1 \\\n  + 2\nint y;\n',
        None),
    'cpp/unused-after-trigraph.cu': (
        '#include <c10/cuda/CUDAException.h>\n__global__ void k() {}\nint y; // x ??/\nint z;\n',
        None),
    'b/cmake-if-else/CMakeLists.txt': (
        ('project(x)\nif(WIN32)\n  set(CMAKE_CUDA_ARCHITECTURES 120a)\nelse()\n'
         '  set(CMAKE_CUDA_ARCHITECTURES 120a-real)\nendif()\n'),
        ('project(x)\nif(WIN32)\n'
         '  set(CMAKE_CUDA_ARCHITECTURES 120)  # kgate: ignore[KG301] TODO: give the reason\nelse()\n'
         '  set(CMAKE_CUDA_ARCHITECTURES 120-real)  # kgate: ignore[KG301] TODO: give the reason\nendif()\n')),
    'b/cmake-generator-expression/CMakeLists.txt': (
        'project(x)\ntarget_compile_options(t PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-arch=sm_120a>)\n',
        ('project(x)\n'
         'target_compile_options(t PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-arch=sm_120>)  # kgate: ignor'
         'e[KG301] TODO: give the reason\n')),
    'b/cmake-string-concat/CMakeLists.txt': (
        'project(x)\nstring(CONCAT F "-gencode=arch=compute_120a," "code=sm_120a")\n',
        ('project(x)\n'
         'string(CONCAT F "-gencode=arch=compute_120," "code=sm_120")  # kgate: ignore[KG301] TODO: '
         'give the reason\n')),
    'b/cmake-semicolon-list/CMakeLists.txt': (
        'project(x)\nset(CMAKE_CUDA_ARCHITECTURES "90a;120a;100a")\n',
        'project(x)\nset(CMAKE_CUDA_ARCHITECTURES "90a;120;100a")  # kgate: ignore[KG301] TODO: give the reason\n'),
    'b/cmake-set-property/CMakeLists.txt': (
        'project(x)\nset_property(TARGET t PROPERTY CUDA_ARCHITECTURES 120a)\n',
        ('project(x)\n'
         'set_property(TARGET t PROPERTY CUDA_ARCHITECTURES 120)  # kgate: ignore[KG301] TODO: give '
         'the reason\n')),
    'b/cmake-bracket-comment-after/CMakeLists.txt': (
        'project(x)\nset(CMAKE_CUDA_ARCHITECTURES 120a) #[[ a\nb ]]\n',
        None),
    'b/cmake-quoted-over-lines/CMakeLists.txt': (
        'project(x)\nset(F "-arch=sm_120a \n -O3")\n',
        None),
    'b/shell-case/build.sh': (
        '#!/bin/sh\ncase $1 in\n  a) nvcc -arch=sm_120a k.cu ;;\n  *) exit 1 ;;\nesac\n',
        ('#!/bin/sh\ncase $1 in\n  a) nvcc -arch=sm_120 k.cu ;;  # kgate: ignore[KG301] TODO: give the reason\n'
         '  *) exit 1 ;;\nesac\n')),
    'b/shell-echo-of-a-substitution/build.sh': (
        '#!/bin/sh\nX=$(echo $(nvcc -arch=sm_120a k.cu))\n',
        '#!/bin/sh\nX=$(echo $(nvcc -arch=sm_120 k.cu))  # kgate: ignore[KG301] TODO: give the reason\n'),
    'b/shell-quoted-heredoc/build.sh': (
        "#!/bin/sh\ncat <<'EOF' > f.sh\nnvcc -arch=sm_120a k.cu\nEOF\nnvcc -arch=sm_120a k.cu\n",
        ("#!/bin/sh\ncat <<'EOF' > f.sh\nnvcc -arch=sm_120 k.cu\nEOF\n"
         'nvcc -arch=sm_120 k.cu  # kgate: ignore[KG301] TODO: give the reason\n')),
    'b/shell-and-chain/build.sh': (
        '#!/bin/sh\nmkdir -p b && cd b && nvcc -arch=sm_120a ../k.cu && echo ok\n',
        ('#!/bin/sh\n'
         'mkdir -p b && cd b && nvcc -arch=sm_120 ../k.cu && echo ok  # kgate: ignore[KG301] TODO: g'
         'ive the reason\n')),
    'b/shell-torch-arch-list/build.sh': (
        '#!/bin/sh\nTORCH_CUDA_ARCH_LIST="9.0;12.0a" pip install .\n',
        '#!/bin/sh\nTORCH_CUDA_ARCH_LIST="9.0;12.0" pip install .  # kgate: ignore[KG301] TODO: give the reason\n'),
    'b/setup-other-sources/setup.py': (
        None,
        None),
    'b/setup-three-on-a-line/setup.py': (
        ('from setuptools import setup\nF = ["-arch=sm_120a", "-gencode=arch=compute_120a,code=sm_120a"]  # two\n'
         'setup()\n'),
        ('from setuptools import setup\n'
         'F = ["-arch=sm_120", "-gencode=arch=compute_120,code=sm_120"]  # two  # kgate: ignore[KG30'
         '1] TODO: give the reason\nsetup()\n')),
}

# What each run says of the files it leaves, or of the lines it does not pin.
SAID = {
    FIX: [("kgate: cpp/unused-continued.cu: fixes not applied: a suppression's removal would change more than a "
           "comment: left as it was")],
    PIN: ["kgate: cpp/define-statement.cu:4: KG302 not pinned: the line continues on the next",
          "kgate: cpp/raw-delimiter-after.cu:4: KG302 not pinned: the line ends inside a string or a comment",
          "kgate: b/cmake-bracket-comment-after/CMakeLists.txt:2: KG301 not pinned: the line ends inside",
          "kgate: b/cmake-quoted-over-lines/CMakeLists.txt:2: KG301 not pinned: the line ends inside",
          "kgate: b/shell-quoted-heredoc/build.sh:3: KG301 not pinned: the line ends inside"],
}


def files() -> dict[str, str | bytes]:
    out: dict[str, str | bytes] = {"pyproject.toml": CONFIG, "cpp/with-check.cuh": "#pragma once\n" + TORCH}
    out.update({f"tests/test_{name.replace('-', '_')}.py": text for name, text in PYTHON.items()})
    out.update({f"cpp/{name}": text for name, text in CPP.items()})
    for name, text in BUILD.items():
        out[f"b/{name}"] = text
        out[f"b/{name.split('/')[0]}/mma.cu"] = BLOCK_SCALED
    return out


def write(root: Path, files: dict[str, str | bytes]) -> Path:
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.encode() if isinstance(data, str) else data)
    return root


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, ...], tuple[Path, Run]]:
    """The table's project fixed once and pinned once (each on a copy of its own)."""
    out = {}
    for command in (FIX, PIN):
        root = write(tmp_path_factory.mktemp("fix_lines"), files())
        out[command] = (root, kgate(*command, cwd=root))
    return out


def test_the_table_has_a_file_for_each_case() -> None:
    assert set(AFTER) == {rel for rel in files() if not rel.endswith(("mma.cu", "with-check.cuh", "pyproject.toml"))}


@pytest.mark.parametrize("command", [FIX, PIN], ids=["fix", "pin"])
@pytest.mark.parametrize("rel", sorted(AFTER))
def test_each_file_means_what_it_meant_after_a_fix_and_a_pin(runs: dict, rel: str, command: tuple[str, ...]) -> None:
    root, run = runs[command]
    before = files()[rel]
    after = AFTER[rel][0 if command == FIX else 1]
    expected = (before.encode() if isinstance(before, str) else before) if after is None else after.encode()
    assert (root / rel).read_bytes() == expected, run.stderr


@pytest.mark.parametrize("command", [FIX, PIN], ids=["fix", "pin"])
def test_a_file_left_as_it_was_is_said_once(runs: dict, command: tuple[str, ...]) -> None:
    _root, run = runs[command]
    for line in SAID[command]:
        assert run.stderr.count(line) == 1, run.stderr


def test_a_pin_counts_every_finding_its_comment_pins(runs: dict) -> None:
    """Three findings on one line of setup.py, two on a CMake line and two launches on one C++ line are pinned by one
    comment each: the count is of the findings, as `--fix` counts them."""
    fixed = runs[FIX][1].stderr
    pinned = runs[PIN][1].stderr
    assert "kgate lint: fixed 53 finding(s) in 46 files, 5 remaining" in fixed, fixed
    assert "kgate lint: pinned 39 finding(s) in 34 files" in pinned, pinned


def test_one_line_of_three_findings_pinned_counts_three(tmp_path: Path) -> None:
    root = write(tmp_path, {"pyproject.toml": CONFIG, "mma.cu": BLOCK_SCALED,
                            "setup.py": BUILD["setup-three-on-a-line/setup.py"]})
    run = kgate(*PIN, cwd=root)
    assert "pinned 3 finding(s) in 1 file " in run.stderr, run.stderr
