"""KG301 on an architecture whose word the build puts together from more than the digits: a suffix in a variable or
a format field (`sm_120${SUFFIX}`, `sm_120$(SUF)`, `f"-arch=sm_120{suffix}"`), a quoted string the shell joins to
the word (`-arch=sm_120"a"`), Python's joining of adjacent string literals (`"-arch=sm_120" "a"`) or `+`.

Each was reported as a bare `sm_120`, and the unsafe fix wrote `sm_120a` before the suffix: `"-arch=sm_120a" "a"`
is `-arch=sm_120aa`, which no nvcc accepts, so the fix broke a build that was right. The text does not show such an
architecture bare: it is neither reported nor rewritten. An architecture that ends its word is as before.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import kgate

SOURCE = '__global__ void k(float* x) { asm volatile("setmaxnreg.inc.sync.aligned.u32 240;"); }\n'
# file -> (text, the lines KG301 reports)
BUILDS = {
    "setup.py": ('SUFFIX = "a"\n'
                 'A = ["-arch=sm_120" "a"]\n'
                 'B = [f"-arch=sm_120{SUFFIX}"]\n'
                 'C = ["-gencode=arch=compute_120" + SUFFIX + ",code=sm_120" + SUFFIX]\n'
                 'D = ["-arch=sm_{}{}".format(120, SUFFIX), "-arch=sm_120{}".format(SUFFIX)]\n'
                 'E = ["-arch=sm_120", "-O3"]\n'  # bare: reported
                 'NVCC = A + B + C + D + E\n', {6}),
    "build.sh": ('nvcc -arch=sm_120"a" -c k.cu\n'
                 "nvcc -arch=sm_120'a' -c k.cu\n"
                 'nvcc -arch=sm_120${SUF} -c k.cu\n'
                 'nvcc "-arch=sm_120"a -c k.cu\n'
                 'nvcc -arch=sm_120 -c k.cu\n'  # bare
                 'nvcc "-arch=sm_120" -c k.cu\n', {5, 6}),  # bare
    "Makefile": ('SUF := a\nNV := -arch=sm_120$(SUF)\nNV2 := -arch=sm_120${SUF}\nNV3 := -arch=sm_120\n', {4}),
    "CMakeLists.txt": ('project(p LANGUAGES CUDA)\nset(SUF a)\nset(CMAKE_CUDA_ARCHITECTURES 120${SUF})\n'
                       'set(CMAKE_CUDA_FLAGS "-arch=sm_120@SUF@")\n'
                       'set(CMAKE_CUDA_ARCHITECTURES "120""a")\n'  # two arguments to CMake: 120 is bare
                       'add_library(k k.cu)\n', {5}),
}


@pytest.mark.parametrize("name", sorted(BUILDS))
def test_an_architecture_whose_word_goes_on_is_not_bare(tmp_path: Path, name: str) -> None:
    text, reported = BUILDS[name]
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\n')
    (tmp_path / "k.cu").write_text(SOURCE)
    (tmp_path / name).write_text(text)
    run = kgate("lint", "--format", "json", cwd=tmp_path)
    lines = {f["line"] for f in run.json()["findings"] if f["code"] == "KG301"}
    assert lines == reported, run.stdout
    fixed = kgate("lint", "--fix", "--unsafe-fixes", cwd=tmp_path)
    assert fixed.code == 0, fixed.stdout + fixed.stderr
    after = (tmp_path / name).read_text()
    assert "120aa" not in after and "sm_120a{SUFFIX}" not in after and "sm_120a$" not in after, after
    changed = {n for n, (a, b) in enumerate(zip(text.splitlines(), after.splitlines()), 1) if a != b}
    assert changed == reported, after
