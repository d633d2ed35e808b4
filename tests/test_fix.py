"""`kgate lint --fix`, `--diff`, `--show-fixes`, `--unsafe-fixes` and `--add-ignore` on small projects shaped like
real ones: each fix round-trips (comments kept, the result parses, a second run changes nothing, the finding is
gone), unsafe fixes wait for --unsafe-fixes, --diff writes nothing, a result that would not parse is never
written, and the placeholder reason --add-ignore writes is reported by KG003 until someone writes the reason."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import after_each_lint, kgate

from kgate.core.fix import Applicability, Edit, Fix
from kgate.pipeline.fix import apply_fixes, toml_parser

CONFIG = '[tool.kgate]\ntargets = ["sm_120a"]\n'


def project(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "proj"
    for name, text in {"pyproject.toml": CONFIG, **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".kgate-cache" not in p.parts}


def codes(root: Path, *args: str) -> list[tuple[str, int, str]]:
    run = kgate("lint", "--format", "json", *args, cwd=root)
    assert run.code in (0, 1), run.stderr
    return [(f["path"], f["line"], f["code"]) for f in run.json()["findings"]]


def fix_twice(root: Path, *args: str) -> tuple[str, dict[str, bytes]]:
    """--fix, then --fix again: the second run must change no byte and fix nothing."""
    first = kgate("lint", "--fix", *args, cwd=root)
    after = snapshot(root)
    second = kgate("lint", "--fix", *args, cwd=root)
    assert snapshot(root) == after, "a second --fix changed the files"
    assert "fixed 0 finding(s) in 0 files" in second.stderr
    return first.stderr, after


# --------------------------------------------------------------------------- KG002 (safe)

CONFTEST_SUPPRESSED = '''\
"""Fixtures shared by the kernel tests."""
import os  # kgate: ignore[KG201] the autotuner is not used here  # noqa: F401

import pytest


@pytest.fixture
def device():
    # The device every test runs on.
    return "cuda"  # kgate: ignore[KG203, KG204] both stale: nothing reports either here


# kgate: ignore-file[KG204] no device prints left
'''


def test_unused_suppressions_are_removed_and_other_comments_kept(tmp_path: Path) -> None:
    root = project(tmp_path, {"tests/conftest.py": CONFTEST_SUPPRESSED})
    assert [c for _p, _l, c in codes(root)] == ["KG002"] * 4
    stderr, after = fix_twice(root)
    assert "fixed 4 finding(s) in 1 file, 0 remaining" in stderr
    text = after["tests/conftest.py"].decode()
    assert text == '''\
"""Fixtures shared by the kernel tests."""
import os  # noqa: F401

import pytest


@pytest.fixture
def device():
    # The device every test runs on.
    return "cuda"


'''
    ast.parse(text)
    assert codes(root) == []


def test_unused_suppression_in_cuda_is_removed_by_a_text_edit(tmp_path: Path) -> None:
    source = ("#include <cuda_runtime.h>\n"
              "// kgate: ignore-file[KG303] generated, and long\n"
              "// Scales a row in place.\n"
              "__global__ void scale(float* x) { x[threadIdx.x] *= 2.f; }  // kgate: ignore[KG302] launched elsewhere\n")
    # kernel-file-size is opt-in: selected here, its file-level directive is judged (and unused).
    root = project(tmp_path, {"csrc/scale.cu": source, "pyproject.toml": CONFIG + 'extend-select = ["KG303"]\n'})
    assert codes(root) == [("csrc/scale.cu", 2, "KG002"), ("csrc/scale.cu", 4, "KG002")]
    stderr, after = fix_twice(root)
    assert after["csrc/scale.cu"].decode() == source.replace("  // kgate: ignore[KG302] launched elsewhere", "") \
        .replace("// kgate: ignore-file[KG303] generated, and long\n", "")
    assert "1 remaining" not in stderr and codes(root) == []


# --------------------------------------------------------------------------- KG203 (unsafe)

CONFTEST_INTERPRET = '''\
import os

import pytest

# Kernels run on the CPU so the suite passes on any machine.
os.environ["TRITON_INTERPRET"] = "1"  # see CONTRIBUTING


@pytest.fixture(autouse=True)
def interpret(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")


def helper():
    with_env = dict(os.environ, TRITON_INTERPRET="1")  # a child's env: not reported
    return with_env
'''

PYPROJECT_INTERPRET = CONFIG + '''
[tool.pytest.ini_options]
# Tests import the package from the source tree.
pythonpath = ["src"]
env = [
    "CUDA_LAUNCH_BLOCKING=1",
    "TRITON_INTERPRET=1",  # the interpreter, for CI without GPUs
]
'''

PYTEST_INI = """\
[pytest]
env =
    D:TRITON_INTERPRET=1
    HF_HUB_OFFLINE=1
"""


def test_interpret_fix_needs_unsafe_fixes(tmp_path: Path) -> None:
    root = project(tmp_path, {"tests/conftest.py": CONFTEST_INTERPRET})
    before = snapshot(root)
    run = kgate("lint", "--fix", cwd=root)
    assert run.code == 1 and snapshot(root) == before
    assert "fixed 0 finding(s) in 0 files, 2 remaining (2 more fixable with --unsafe-fixes)" in run.stderr


def test_interpret_setting_removed_from_conftest_pyproject_and_ini(tmp_path: Path) -> None:
    root = project(tmp_path, {"tests/conftest.py": CONFTEST_INTERPRET, "pyproject.toml": PYPROJECT_INTERPRET,
                              "pytest.ini": PYTEST_INI})
    assert sorted(c for _p, _l, c in codes(root)) == ["KG203"] * 4
    stderr, after = fix_twice(root, "--unsafe-fixes")
    assert "fixed 4 finding(s) in 3 files, 0 remaining" in stderr
    conftest = after["tests/conftest.py"].decode()
    # The removed statement's own comment stays, on a line of its own.
    assert conftest == CONFTEST_INTERPRET.replace('os.environ["TRITON_INTERPRET"] = "1"  # see CONTRIBUTING\n',
                                                  "# see CONTRIBUTING\n") \
        .replace('    monkeypatch.setenv("TRITON_INTERPRET", "1")\n', "    pass\n")
    ast.parse(conftest)
    pyproject = after["pyproject.toml"].decode()
    assert pyproject == PYPROJECT_INTERPRET.replace('    "TRITON_INTERPRET=1",  # the interpreter, for CI without GPUs\n',
                                                    "")
    assert toml_parser().loads(pyproject)["tool"]["pytest"]["ini_options"]["env"] == ["CUDA_LAUNCH_BLOCKING=1"]
    assert after["pytest.ini"].decode() == PYTEST_INI.replace("    D:TRITON_INTERPRET=1\n", "")
    assert codes(root) == []


def test_diff_prints_the_changes_and_writes_nothing(tmp_path: Path) -> None:
    root = project(tmp_path, {"tests/conftest.py": CONFTEST_INTERPRET, "pyproject.toml": PYPROJECT_INTERPRET})
    before = snapshot(root)
    run = kgate("lint", "--diff", "--unsafe-fixes", cwd=root)
    assert run.code == 1 and snapshot(root) == before
    assert "--- a/pyproject.toml\n+++ b/pyproject.toml\n" in run.stdout
    assert '-    "TRITON_INTERPRET=1",  # the interpreter, for CI without GPUs\n' in run.stdout
    assert '-    monkeypatch.setenv("TRITON_INTERPRET", "1")\n+    pass\n' in run.stdout
    assert "would fix 3 finding(s) in 2 files" in run.stderr
    # The diff is the change --fix makes: applied with `patch`, it gives the same files.
    patched = tmp_path / "patched"
    subprocess.run(["cp", "-r", str(root), str(patched)], check=True)
    subprocess.run(["patch", "-s", "-p1"], input=run.stdout, text=True, cwd=patched, check=True)
    kgate("lint", "--fix", "--unsafe-fixes", cwd=root)
    assert snapshot(patched) == snapshot(root)
    # Nothing left to change: exit 0 and an empty diff.
    clean = kgate("lint", "--diff", "--unsafe-fixes", cwd=root)
    assert (clean.code, clean.stdout) == (0, "")


def test_fixes_from_a_folder_inside_touch_its_files_and_name_them_from_there(tmp_path: Path) -> None:
    root = project(tmp_path, {"tests/conftest.py": CONFTEST_SUPPRESSED, "pkg/ops.py": CONFTEST_SUPPRESSED})
    tests = root / "tests"
    diff = kgate("lint", "--diff", cwd=tests)
    assert diff.code == 1 and diff.stdout.startswith("--- a/conftest.py\n+++ b/conftest.py\n"), diff.stdout
    assert "pkg/ops.py" not in diff.stdout and "would fix 4 finding(s) in 1 file" in diff.stderr
    patched = tmp_path / "patched"
    shutil.copytree(tests, patched)
    subprocess.run(["patch", "-s", "-p1"], input=diff.stdout, text=True, cwd=patched, check=True)
    fixed = kgate("lint", "--fix", "--show-fixes", cwd=tests)
    assert "fixed: conftest.py:2: KG002 " in fixed.stderr and "fixed 4 finding(s) in 1 file, 0 remaining" in fixed.stderr
    assert (patched / "conftest.py").read_bytes() == (tests / "conftest.py").read_bytes()
    # The folder's own files only: the same comments elsewhere in the project are left for a lint there.
    assert (root / "pkg/ops.py").read_text() == CONFTEST_SUPPRESSED
    left = codes(root)
    assert left and {(p, c) for p, _l, c in left} == {("pkg/ops.py", "KG002")}


def test_the_report_after_fix_judges_the_files_as_written_not_as_cached(tmp_path: Path) -> None:
    """The lint after the writes reads the fixed files, though the run took their states before it wrote them and
    the cache holds results it trusts by those states (files older than the cache's two seconds of doubt)."""
    root = project(tmp_path, {"tests/conftest.py": CONFTEST_SUPPRESSED})
    old = time.time() - 60
    for path in root.rglob("*"):
        os.utime(path, (old, old))
    assert [c for _p, _l, c in codes(root)] == ["KG002"] * 4  # fills the cache
    fixed = kgate("lint", "--fix", cwd=root)
    assert "fixed 4 finding(s) in 1 file, 0 remaining" in fixed.stderr, fixed.stderr
    assert fixed.code == 0 and "KG002" not in fixed.stdout, fixed.stdout


# --------------------------------------------------------------------------- KG301 (unsafe)

BLOCK_SCALED = ("// Block-scaled FP8 MMA: sm_120a only.\n__device__ void mma() {\n"
                '  asm volatile("mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X'
                '.f32.e4m3.e4m3.f32.ue8m0 {};");\n}\n')
CMAKE = """\
cmake_minimum_required(VERSION 3.26)
project(kernels LANGUAGES CXX CUDA)
# Blackwell consumer cards.
set(CMAKE_CUDA_ARCHITECTURES 120)
add_library(kernels STATIC csrc/mma.cu)
"""
SETUP = """\
import os

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

os.environ["TORCH_CUDA_ARCH_LIST"] = "12.0"  # consumer Blackwell
NVCC = ["-O3", "-gencode", "arch=compute_120,code=sm_120"]  # one cubin

setup(ext_modules=[CUDAExtension("k", ["csrc/mma.cu"], extra_compile_args={"nvcc": NVCC}),
                   CUDAExtension("k_env", ["csrc/mma.cu"])],  # takes TORCH_CUDA_ARCH_LIST
      cmdclass={"build_ext": BuildExtension})
"""


def test_arch_target_fix_writes_the_a_target_and_says_what_it_costs(tmp_path: Path) -> None:
    root = project(tmp_path, {"csrc/mma.cu": BLOCK_SCALED, "CMakeLists.txt": CMAKE, "setup.py": SETUP})
    assert sorted(c for _p, _l, c in codes(root)) == ["KG301"] * 4
    shown = kgate("lint", "--fix", "--unsafe-fixes", "--show-fixes", cwd=root)
    assert "fixed: setup.py:7: KG301 `sm_120` -> `sm_120a`: sm_120a is arch-specific: it runs on sm_120 only and " \
           "carries no forward-compatible PTX for later GPUs" in shown.stderr
    assert "fixed 4 finding(s) in 2 files, 0 remaining" in shown.stderr
    after = snapshot(root)
    assert after["CMakeLists.txt"].decode() == CMAKE.replace("ARCHITECTURES 120", "ARCHITECTURES 120a")
    setup = after["setup.py"].decode()
    assert setup == SETUP.replace('"12.0"', '"12.0a"').replace("compute_120,code=sm_120", "compute_120a,code=sm_120a")
    ast.parse(setup)
    assert codes(root) == []
    fix_twice(root, "--unsafe-fixes")


# --------------------------------------------------------------------------- KG302 (unsafe)

LAUNCHER = """\
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>

#define CUDA_CHECK(call)                                                   \\
  do {                                                                     \\
    cudaError_t err_ = (call);                                             \\
    if (err_ != cudaSuccess) { std::printf("%s\\n", cudaGetErrorString(err_)); std::abort(); } \\
  } while (0)

__global__ void rmsnorm(float* x, int n) { x[threadIdx.x] *= 1.f; }

void launch(float* x, int rows, int n, cudaStream_t stream) {
  // One block per row.
  rmsnorm<<<rows, 256, 0, stream>>>(x, n);
}

void launch_twice(float* x, int n) {
  rmsnorm<<<1, 256>>>(x, n); rmsnorm<<<1, 256>>>(x + n, n);
}

void launch_braceless(float* x, int n, bool big) {
  if (big)
    rmsnorm<<<2, 256>>>(x, n);
  else
    rmsnorm<<<1, 256>>>(x, n);
}
"""

TORCH_LAUNCHER = """\
#include <c10/cuda/CUDAException.h>
#include <cuda_runtime.h>

__global__ void silu(float* x) { x[threadIdx.x] *= 0.5f; }

void run(float* x, cudaStream_t stream) {
  silu<<<1, 128, 0, stream>>>(x);
}
"""

RETURNING_MACRO = """\
#include <cuda_runtime.h>
#include "utils.cuh"  // PROJECT_CHECK

#define CALL(func)                 \\
  {                                \\
    cudaError_t e = (func);        \\
    if (e != cudaSuccess) return e; \\
  }

__global__ void add(float* x) { x[threadIdx.x] += 1.f; }

cudaError_t returns_an_error(float* x) {
  CALL(cudaMemset(x, 0, 4));
  add<<<1, 32>>>(x);
  return cudaSuccess;
}

void returns_nothing(float* x) {
  add<<<1, 32>>>(x);
}

void calls_the_project_macro(float* x) {
  add<<<1, 32>>>(x);
  x += 1;
  x += 1;
  x += 1;
  PROJECT_CHECK(cudaDeviceSynchronize());
}
"""

NO_MACRO = """\
#include <cuda_runtime.h>

__global__ void add(float* x) { x[threadIdx.x] += 1.f; }

void run(float* x) {
  add<<<1, 32>>>(x);
}
"""


def compiles(path: Path) -> None:
    """The fixed file still compiles with the real nvcc (C++ has no parser here: the compiler is the judge)."""
    run = subprocess.run(["nvcc", "-std=c++17", "-c", str(path), "-o", str(path.with_suffix(".o"))],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_launch_guard_fix_inserts_the_macro_the_file_can_use(tmp_path: Path) -> None:
    root = project(tmp_path, {"csrc/launcher.cu": LAUNCHER, "csrc/torch_launcher.cu": TORCH_LAUNCHER,
                              "csrc/plain.cu": NO_MACRO})
    found = codes(root)
    assert [c for _p, _l, c in found] == ["KG302"] * 7
    stderr, after = fix_twice(root, "--unsafe-fixes")
    assert "fixed 4 finding(s) in 2 files, 3 remaining" in stderr
    assert after["csrc/launcher.cu"].decode() == LAUNCHER.replace(
        "  rmsnorm<<<rows, 256, 0, stream>>>(x, n);\n",
        "  rmsnorm<<<rows, 256, 0, stream>>>(x, n);\n  CUDA_CHECK(cudaGetLastError());\n").replace(
        "  rmsnorm<<<1, 256>>>(x, n); rmsnorm<<<1, 256>>>(x + n, n);\n",
        "  rmsnorm<<<1, 256>>>(x, n); CUDA_CHECK(cudaGetLastError()); rmsnorm<<<1, 256>>>(x + n, n);\n"
        "  CUDA_CHECK(cudaGetLastError());\n")
    assert after["csrc/torch_launcher.cu"].decode() == TORCH_LAUNCHER.replace(
        "(x);\n}", "(x);\n  C10_CUDA_KERNEL_LAUNCH_CHECK();\n}")
    # No macro this file can use, and launches that are the whole body of an if/else: left for a person.
    assert after["csrc/plain.cu"].decode() == NO_MACRO
    compiles(root / "csrc/launcher.cu")
    assert sorted(codes(root)) == [("csrc/launcher.cu", 26, "KG302"), ("csrc/launcher.cu", 28, "KG302"),
                                   ("csrc/plain.cu", 6, "KG302")]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_launch_guard_fix_puts_a_returning_macro_only_where_the_function_calls_it(tmp_path: Path) -> None:
    # CALL returns a cudaError_t: in a void function it would not compile. PROJECT_CHECK comes from a header
    # kgate cannot read: it is trusted only in a function that calls it (there, it is followed too late).
    root = project(tmp_path, {"csrc/ops.cu": RETURNING_MACRO, "csrc/utils.cuh": "#define PROJECT_CHECK(x) (void)(x)\n",
                              "pyproject.toml": CONFIG + '[tool.kgate.options.launch-guard]\n'
                                                         'check_macros = ["CALL", "PROJECT_CHECK"]\n'})
    assert [line for _p, line, _c in codes(root)] == [14, 19, 23]
    fix_twice(root, "--unsafe-fixes")
    text = (root / "csrc/ops.cu").read_text()
    assert "  add<<<1, 32>>>(x);\n  CALL(cudaGetLastError());\n  return cudaSuccess;" in text
    assert "void returns_nothing(float* x) {\n  add<<<1, 32>>>(x);\n}" in text
    assert "void calls_the_project_macro(float* x) {\n  add<<<1, 32>>>(x);\n  PROJECT_CHECK(cudaGetLastError());\n" \
        in text
    assert [line for _p, line, _c in codes(root)] == [20]
    compiles(root / "csrc/ops.cu")


# --------------------------------------------------------------------------- the fixer


def test_a_fix_whose_result_would_not_parse_is_not_written() -> None:
    python = b'ARCH = "sm_120"  # kept\n'
    breaking = Fix("planted", Applicability.SAFE, (Edit(1, 8, 1, 14, 'sm_120a" +'),))
    assert apply_fixes("setup.py", python, [breaking])[0] is None
    assert "would not parse" in apply_fixes("setup.py", python, [breaking])[2]
    fine = Fix("planted", Applicability.SAFE, (Edit(1, 8, 1, 14, "sm_120a"),))
    assert apply_fixes("setup.py", python, [fine])[0] == b'ARCH = "sm_120a"  # kept\n'
    toml = b'[tool.pytest.ini_options]\nenv = ["TRITON_INTERPRET=1"]\n'
    assert apply_fixes("pyproject.toml", toml, [Fix("planted", Applicability.SAFE, (Edit(2, 6, 2, 7, ""),))])[0] is None
    # Overlapping fixes: the first is taken, the second waits for the next round.
    first = Fix("a", Applicability.SAFE, (Edit(1, 8, 1, 14, "sm_100a"),))
    second = Fix("b", Applicability.SAFE, (Edit(1, 10, 1, 14, "90a"),))
    data, taken, _why = apply_fixes("setup.py", python, [second, first])
    assert data == b'ARCH = "sm_100a"  # kept\n' and taken == [first]


# --------------------------------------------------------------------------- --add-ignore


def test_add_ignore_pins_findings_and_kg003_reports_the_placeholder(tmp_path: Path) -> None:
    root = project(tmp_path, {"tests/conftest.py": CONFTEST_INTERPRET, "csrc/plain.cu": NO_MACRO,
                              "pyproject.toml": PYPROJECT_INTERPRET})
    before = codes(root)
    assert sorted(c for _p, _l, c in before) == ["KG203", "KG203", "KG203", "KG302"]
    run = kgate("lint", "--add-ignore", cwd=root)
    assert run.code == 0 and "pinned 4 finding(s) in 3 files" in run.stderr
    after = snapshot(root)
    assert 'os.environ["TRITON_INTERPRET"] = "1"  # see CONTRIBUTING  # kgate: ignore[KG203] TODO: give the reason' \
        in after["tests/conftest.py"].decode()
    assert "  add<<<1, 32>>>(x);  // kgate: ignore[KG302] TODO: give the reason\n" in after["csrc/plain.cu"].decode()
    ast.parse(after["tests/conftest.py"])
    assert toml_parser().loads(after["pyproject.toml"].decode()) == toml_parser().loads(PYPROJECT_INTERPRET)
    # Every pin silences its finding, and KG003 reports it until the reason is written.
    pinned = codes(root)
    assert sorted(pinned) == sorted((p, line, "KG003") for p, line, _c in before)
    report = kgate("lint", "--format", "json", cwd=root).json()
    assert all("placeholder reason" in f["message"] for f in report["findings"])
    # Pinning again adds nothing; writing the reason ends the KG003 finding.
    again = kgate("lint", "--add-ignore", cwd=root)
    assert "pinned 0 finding(s) in 0 files" in again.stderr and snapshot(root) == after
    plain = root / "csrc/plain.cu"
    plain.write_text(plain.read_text().replace("TODO: give the reason", "launched once at start-up"))
    assert ("csrc/plain.cu", 6, "KG003") not in codes(root)


def test_add_ignore_pins_an_unchanged_file_without_linting_it_again(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The pins are made from the bytes the lint's result was made from: read once more, and linted again only where
    they changed (tests/test_held_out_fix_writes.py: a file changed meanwhile is pinned as it is now)."""
    root = project(tmp_path, {"pyproject.toml": CONFIG + "jobs = 1\n", "tests/conftest.py": CONFTEST_INTERPRET})
    found = codes(root, "--no-cache")
    assert [c for _p, _l, c in found] == ["KG203", "KG203"]
    linted: list[str] = []
    after_each_lint(monkeypatch, lambda _path, rel: linted.append(rel))
    run = kgate("lint", "--no-cache", "--add-ignore", cwd=root)
    assert "pinned 2 finding(s) in 1 file" in run.stderr, run.stderr
    assert linted.count("tests/conftest.py") == 1
    assert codes(root, "--no-cache") == [(p, line, "KG003") for p, line, _c in found]


def test_the_report_after_fix_takes_the_fixed_files_lint_from_the_fix(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The fix lints each file it changes from the new bytes (for a further round); the lint after the writes finds
    that result in the cache instead of reading and linting the file once more. A file whose findings come from
    rules that attach no fixes (its stale suppressions' fixes are made from the directives) is not linted again to
    be fixed either; one with a finding whose fix only a fresh lint carries (KG203) is."""
    root = project(tmp_path, {"pyproject.toml": CONFIG + "jobs = 1\n", "tests/conftest.py": CONFTEST_SUPPRESSED,
                              "tests/test_ops.py": "import os\n", "tests/test_interpret.py": CONFTEST_INTERPRET})
    linted: list[str] = []
    after_each_lint(monkeypatch, lambda _path, rel: linted.append(rel))
    fixed = kgate("lint", "--fix", "--unsafe-fixes", cwd=root)
    assert "fixed 6 finding(s) in 2 files, 0 remaining" in fixed.stderr and fixed.code == 0, fixed.stderr
    # The first lint, then (for KG203's fixes) the fix's own read; the lint after the writes reads the cache.
    assert [linted.count(f"tests/{name}.py") for name in ("conftest", "test_ops", "test_interpret")] == [1, 1, 2], \
        linted
    assert codes(root, "--no-cache") == []


def test_add_ignore_and_fix_together_are_a_usage_error(tmp_path: Path) -> None:
    root = project(tmp_path, {})
    run = kgate("lint", "--add-ignore", "--fix", cwd=root)
    assert run.code == 2 and run.stderr.strip().splitlines() == [
        "kgate: error: --add-ignore cannot be combined with --fix or --diff"]


def test_every_rule_with_a_fix_documents_it_and_the_fixes_page_lists_it() -> None:
    from kgate import rules as registry

    page = (Path(__file__).resolve().parent.parent / "docs" / "fixes.md").read_text()
    documented = {code for code in registry.codes() if "\n## Fix\n" in registry.load(code).doc}
    assert documented == {"KG002", "KG203", "KG301", "KG302"}
    assert {code for code in registry.codes() if registry.load(code).fixes} == documented
    assert {code for code in registry.codes() if f"[{code}](rules/{code}.md)" in page} == documented


# --------------------------------------------------------------------------- start-up cost


def test_plain_lint_does_not_import_the_fixer_or_libcst(tmp_path: Path) -> None:
    root = project(tmp_path, {"tests/conftest.py": CONFTEST_SUPPRESSED})
    probe = ("import sys\nfrom kgate.cli import main\n"
             "code = main(sys.argv[1:])\n"
             "print(sorted(m for m in sys.modules if m == 'libcst' or m == 'kgate.pipeline.fix'), file=sys.stderr)\n"
             "sys.exit(code)\n")
    plain = subprocess.run([sys.executable, "-c", probe, "lint"], cwd=root, capture_output=True, text=True)
    assert plain.returncode == 0 and "KG002" in plain.stdout and plain.stderr.strip().splitlines()[-1] == "[]"
    # A comment edit is made on the text: no libcst; nor is a statement that shares its line with others; a statement
    # in a block on its header's line is removed through libcst.
    fixing = subprocess.run([sys.executable, "-c", probe, "lint", "--diff"], cwd=root, capture_output=True, text=True)
    assert fixing.stderr.strip().splitlines()[-1] == "['kgate.pipeline.fix']"
    # Without libcst (the `fix` extra), a fixing run stops with one line; a plain lint does not mind.
    blocked = "import sys\nsys.modules['libcst'] = None\n" + probe
    missing = subprocess.run([sys.executable, "-c", blocked, "lint", "--fix"], cwd=root, capture_output=True, text=True)
    assert missing.returncode == 2 and missing.stderr.splitlines()[0] == (
        "kgate: error: --fix, --diff, --show-fixes and --add-ignore need libcst: pip install 'libcst>=1.1' "
        "(kgate's extra fix: kernel-gate[fix])")
    assert subprocess.run([sys.executable, "-c", blocked, "lint"], cwd=root, capture_output=True).returncode == 0
    (root / "tests" / "conftest.py").write_text('import os\nos.environ["TRITON_INTERPRET"] = "1"; x = 1\n')
    fixing = subprocess.run([sys.executable, "-c", probe, "lint", "--diff", "--unsafe-fixes"], cwd=root,
                            capture_output=True, text=True)
    assert "+x = 1" in fixing.stdout and fixing.stderr.strip().splitlines()[-1] == "['kgate.pipeline.fix']"
    (root / "tests" / "conftest.py").write_text('import os\nif True: os.environ["TRITON_INTERPRET"] = "1"\n')
    fixing = subprocess.run([sys.executable, "-c", probe, "lint", "--diff", "--unsafe-fixes"], cwd=root,
                            capture_output=True, text=True)
    assert "+if True: pass" in fixing.stdout
    assert fixing.stderr.strip().splitlines()[-1] == "['kgate.pipeline.fix', 'libcst']"


def test_json_report_after_fix_has_no_fix_field(tmp_path: Path) -> None:
    root = project(tmp_path, {"tests/conftest.py": CONFTEST_INTERPRET})
    run = kgate("lint", "--fix", "--format", "json", cwd=root)
    findings = json.loads(run.stdout)["findings"]
    assert len(findings) == 2 and all("fix" not in f for f in findings)


def test_each_file_is_fixed_under_the_configuration_that_governs_it(tmp_path: Path) -> None:
    """A nested project that ignores KG203 in its tests keeps its setting; the outer project's file is fixed."""
    setting = 'import os\n\nos.environ["TRITON_INTERPRET"] = "1"\n'
    root = project(tmp_path, {"tests/conftest.py": setting,
                              "sub/pyproject.toml": CONFIG + '[tool.kgate.per-file-ignores]\n"tests/*" = ["KG203"]\n',
                              "sub/tests/conftest.py": setting})
    assert codes(root) == [("tests/conftest.py", 3, "KG203")]
    run = kgate("lint", "--fix", "--unsafe-fixes", cwd=root)
    assert "fixed 1 finding(s) in 1 file" in run.stderr, run.stderr
    assert "TRITON_INTERPRET" not in (root / "tests/conftest.py").read_text()
    assert (root / "sub/tests/conftest.py").read_text() == setting
    # --show-files names what the lint reads, the nested project's files included.
    shown = kgate("lint", "--show-files", cwd=root).stdout.split()
    assert "sub/tests/conftest.py" in shown and "tests/conftest.py" in shown
