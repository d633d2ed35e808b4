"""KG302 and the code the preprocessor never compiles.

A launch under `#if 0` (an old version kept in the file, a disabled debug path) was reported as a launch without an
error check, and the fix inserted a check into the dead block; a check under `#if 0` after a live launch counted as
its check, so the launch was not reported. The lines under `#if 0` (or `#if false`), and after the `#else` of an
`#if 1`, are now read as the compiler reads them: not at all. Any other condition keeps both branches.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import kgate

from kgate.collect.cpp_text import without_disabled

SOURCE = '''#include <cuda_runtime.h>
__global__ void add(float* x) { x[0] = 1; }
#if 0
void dead(float* x) { add<<<1, 32>>>(x); }
#endif
void checked_only_in_dead_code(float* x) {
  add<<<1, 32>>>(x);
#if 0
  cudaGetLastError();
#endif
}
#if 1
void kept(float* x) { add<<<1, 32>>>(x); cudaGetLastError(); }
#else
void old(float* x) { add<<<1, 32>>>(x); }
#endif
#if false
void dead_too(float* x) { add<<<1, 32>>>(x); }
#elif defined(SOMETHING)
void maybe(float* x) { add<<<1, 32>>>(x); }
#endif
#ifdef DEBUG
void debug(float* x) { add<<<1, 32>>>(x); }
#endif
'''


def test_only_the_launches_the_compiler_sees_are_judged(tmp_path: Path) -> None:
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\n')
    (tmp_path / "k.cu").write_text(SOURCE)
    run = kgate("lint", "--format", "json", cwd=tmp_path)
    assert run.code == 1, run.stdout + run.stderr
    assert sorted(f["line"] for f in run.json()["findings"] if f["code"] == "KG302") == [7, 20, 23], run.stdout


@pytest.mark.parametrize(("text", "kept"), [
    ("#if 0\na();\n#endif\nb();\n", ["", "b();"]),
    ("#if 0\n#if X\na();\n#endif\n#else\nb();\n#endif\n", ["", "", "", "b();"]),
    ("#if 1\na();\n#elif Y\nb();\n#else\nc();\n#endif\n", ["a();", "", "", ""]),  # the dead #else too
    ("#if (0)\na();\n#endif\n", [""]),
    ("#if X\na();\n#else\nb();\n#endif\n", ["a();", "b();"]),
    ("#endif\na();\n", ["a();"]),  # an #endif without its #if is left as it is
])
def test_disabled_lines_are_blanked_with_offsets_kept(text: str, kept: list[str]) -> None:
    out = without_disabled(text)
    assert len(out) == len(text) and out.count("\n") == text.count("\n")
    assert [line.strip() for line in out.splitlines() if not line.lstrip().startswith("#")] == kept
