"""What a cold check of CUDA sources does after each compile, on real nvcc output.

The SASS a rule reads is taken from one disassembly of the whole cubin (the same instructions `cuobjdump -fun`
gives per function), the facts are read in the compile worker right after its compile, the longest compile starts
first, and PTX is split into functions in one pass (the same functions as the brace-by-brace splitter it replaced).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import FIXTURES

from kgate.facts import ptx
from kgate.facts.numbers import count
from kgate.support.tools import bundled_tool

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None or bundled_tool("cuobjdump") is None,
                                reason="nvcc and cuobjdump are needed")
GENCODE = "--generate-code=arch=compute_120a,code=sm_120a"
# Kernels with stack frames used in loops, PDL waits, block-scaled MMA, templates and an anonymous namespace.
SOURCES = ("spill.cu", "pdl.cu", "block_scale.cu", "templates.cu")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str]]:
    """Each fixture source compiled by nvcc as kgate compiles it: its cubin and its PTX."""
    out = {}
    folder = tmp_path_factory.mktemp("nvcc")
    for name in SOURCES:
        cubin = folder / f"{name}.cubin"
        subprocess.run(["nvcc", "-I.", "-std=c++17", "-O3", "-cubin", "-lineinfo", GENCODE, "--keep", "--keep-dir",
                        str(folder), "-o", str(cubin), name], cwd=FIXTURES / "cuda", check=True, capture_output=True)
        out[name] = (cubin, (folder / f"{Path(name).stem}.ptx").read_text())
    return out


def _old_split_functions(text: str) -> list[tuple[str, str, str, int]]:
    """The splitter as it was: braces matched one character at a time, lines counted from the top each time."""
    out = []
    for match in ptx._FUNC_HEAD.finditer(text):
        kind, name = match.group(1), match.group(2)
        start = text.find("{", match.end())
        semi = text.find(";", match.end())
        if start < 0 or (0 <= semi < start):
            continue
        depth = 0
        end = start
        for end in range(start, len(text)):
            ch = text[end]
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    break
        first_line = text.count("\n", 0, start) + 1
        out.append((kind, name, text[start + 1: end], first_line))
    return out


def _old_first_locs(text: str) -> dict[str, ptx.SourceLoc | None]:
    files = {count(n): name for n, name in ptx._FILE.findall(text)}
    out = {}
    for match in ptx._FUNC_HEAD.finditer(text):
        start = text.find("{", match.end())
        semi = text.find(";", match.end())
        if match.group(1) != "entry" or start < 0 or 0 <= semi < start:
            continue
        first = None
        for line in text[start:].split("\n", 400)[:400]:
            loc = ptx._LOC.match(line)
            if loc:
                file_no, src_line, col = (count(g) for g in loc.groups())
                if src_line:
                    first = ptx.SourceLoc(files.get(file_no, str(file_no)), src_line, col)
                    break
        out[match.group(2)] = first
    return out


EDGES = [
    ".visible .entry a()\n{\n ret;\n}\n.func b;\n.func (.param .b32 r) c(.param .b32 x)\n{\n{\n ret;\n}\n}\n",
    ".entry open()\n{\n ld.global.u32 %r1, [%rd1];\n{\n",  # a body never closed: to the end of the text
    "}\n}\n.entry after_stray()\n{\n ret;\n}\n.extern .func ext(.param .b32 x);\n",
    ".entry first_loc()\n{\n" + ".reg .b32 %r<2>;\n" * 398 + ".loc 1 7 3\n ret;\n}\n.entry far()\n{\n"
    + ".reg .b32 %r<2>;\n" * 400 + ".loc 1 9 1\n ret;\n}\n",
]


@pytest.mark.parametrize("name", SOURCES)
def test_the_one_pass_splitter_equals_the_old_one_on_real_ptx(built: dict, name: str) -> None:
    text = built[name][1]
    assert ptx._split_functions(text) == _old_split_functions(text)
    assert {n: h.first_loc for n, h in ptx.entry_headers(text).items()} == _old_first_locs(text)


@pytest.mark.parametrize("text", EDGES)
def test_the_one_pass_splitter_equals_the_old_one_on_odd_text(text: str) -> None:
    assert ptx._split_functions(text) == _old_split_functions(text)
    assert {n: h.first_loc for n, h in ptx.entry_headers(text).items()} == _old_first_locs(text)


