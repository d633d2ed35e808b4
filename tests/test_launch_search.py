"""The launch search below KG302 (kgate.collect.launch_search, cuda_checks, cuda_callers, cuda_project, cpp_flow),
on its own: which launches no check covers, what the project's own checks are, and where control goes.

tests/test_rules.py runs the rule on fixtures/rules/KG302/; these pin the modules' answers as data.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kgate.collect.cpp_flow import Flow, line_starts
from kgate.collect.cpp_statements import head
from kgate.collect.cpp_text import blank
from kgate.collect.cuda_checks import launch_checks
from kgate.collect.cuda_project import Project
from kgate.collect.launch_search import Search, search


def project_of(tmp_path: Path, files: dict[str, str]) -> Project:
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return Project(str(tmp_path))


def searched(tmp_path: Path, files: dict[str, str], rel: str, check_macros: tuple[str, ...] = ()) -> Search:
    project = project_of(tmp_path, files)
    code = blank(files[rel]).code
    return search(code, rel, check_macros, 3, lambda: project)


def unchecked_lines(found: Search, text: str) -> list[tuple[int, str]]:
    starts = line_starts(text)
    return [(max(n for n in range(len(starts)) if starts[n] <= u.offset), u.kind) for u in found.unchecked]


CHECKS = """\
#include <cuda_runtime.h>
inline void fail_on(cudaError_t e) { if (e != cudaSuccess) abort(); }
inline void check_launch(const char* what = nullptr) { fail_on(cudaGetLastError()); }
inline void through() { check_launch(); }
inline void device_check(cudaError_t e) { fail_on(e); }
inline void device_check() { device_check(cudaPeekAtLastError()); }
#define LAUNCH_OK() fail_on(cudaGetLastError())
#define LAST_OK fail_on(cudaGetLastError())
struct Gemm { void run() { fail_on(cudaGetLastError()); } };
__device__ void device_side() { cudaGetLastError(); }
inline void synced(cudaStream_t s) { fail_on(cudaStreamSynchronize(s)); }
"""


def test_the_projects_checks_are_its_macros_and_host_functions_that_read_the_last_error(tmp_path: Path) -> None:
    found = project_of(tmp_path, {"include/checks.h": CHECKS}).last_error_checks(())
    assert found == {"check_launch": frozenset({0, 1}), "through": frozenset({0}), "device_check": frozenset({0}),
                     "LAUNCH_OK": frozenset({0}), "LAST_OK": None}
    # `fail_on` checks the error it is given, `synced` waits; a member and a device function are left out.


def test_a_configured_macro_called_without_arguments_reads_the_last_error(tmp_path: Path) -> None:
    text = "inline void after() { EXTERNAL_CHECK(); }\ninline void wraps(int* p) { EXTERNAL_CHECK(cudaFree(p)); }\n"
    assert project_of(tmp_path, {"a.h": text}).last_error_checks(("EXTERNAL_CHECK",)) == {"after": frozenset({0})}


def test_a_call_counts_as_a_check_with_a_number_of_arguments_only_a_reading_definition_takes() -> None:
    checks = launch_checks((), {"device_check": frozenset({0}), "check_launch": frozenset({0, 1})})
    code = ("device_check(); device_check(cudaMemcpy(a, b, n, k)); check_launch(\"x\"); gemm.check_launch(); "
            "op->device_check(); my_check_launch();")
    assert [m.group() for m in checks.finditer(code)] == ["device_check(", "check_launch("]


def test_search_reports_a_launch_whose_only_check_is_a_function_that_does_not_read_the_last_error(
        tmp_path: Path) -> None:
    launcher = ('#include "checks.h"\n__global__ void k(float* x);\n'
                "void a(float* x) {\n  k<<<1, 1>>>(x);\n  check_launch(\"a\");\n}\n"
                "void b(float* x, cudaStream_t s) {\n  k<<<1, 1>>>(x);\n  synced(s);\n}\n"
                "void c(float* x) {\n  k<<<1, 1>>>(x);\n  LAST_OK;\n}\n")
    found = searched(tmp_path, {"checks.h": CHECKS, "launch.cu": launcher}, "launch.cu")
    assert unchecked_lines(found, launcher) == [(8, "launch")]
    assert found.read_beyond


def test_a_launcher_called_only_from_a_macro_is_followed_to_the_macros_uses(tmp_path: Path) -> None:
    text = ("__global__ void k(float* x);\n"
            "static void launch(float* x) { k<<<1, 1>>>(x); }\n"
            "#define PICK(n, x) \\\n  case n: launch(x);\n"
            "void dispatch(int n, float* x) {\n"
            "  switch (n) {\n    PICK(1, x) break;\n    PICK(2, x) break;\n  }\n"
            "  cudaGetLastError();\n}\n"
            "void again(float* x) {\n  PICK_NONE(x);\n}\n")
    assert searched(tmp_path, {"d.cu": text}, "d.cu").unchecked == ()
    unused = text.replace("void dispatch", "void dispatch_unused").replace("PICK(1, x) break;", "break;") \
        .replace("PICK(2, x) break;", "break;")
    # A macro used nowhere outside a #define: the launch cannot be followed, and is reported where it is.
    found = searched(tmp_path, {"d.cu": unused}, "d.cu")
    assert unchecked_lines(found, unused) == [(2, "launch")]


def test_a_brace_in_a_default_argument_does_not_hide_a_functions_head() -> None:
    code = blank("inline void check(Where where = {}, int n = int{1}) {\n  cudaGetLastError();\n}\n").code
    flow = Flow(code, line_starts(code), 3)
    assert head(code, flow.opens[-1]) == ("function", 12, "check")


def test_a_launch_in_a_header_macro_is_judged_at_its_uses_in_other_files(tmp_path: Path) -> None:
    header = ("__global__ void k(float* x);\n"
              "#define LAUNCH_K(x, stream) \\\n  k<<<1, 32, 0, stream>>>(x)\n")
    user = ('#include "launch.cuh"\n'
            "void checked(float* x, cudaStream_t s) {\n  LAUNCH_K(x, s);\n  cudaGetLastError();\n}\n"
            "void unchecked(float* x, cudaStream_t s) {\n  LAUNCH_K(x, s);\n}\n")
    found = searched(tmp_path, {"launch.cuh": header, "ops.cu": user}, "launch.cuh")
    assert [(u.kind, u.checked, [(s.path, s.line, s.callee) for s in u.sites]) for u in found.unchecked] == [
        ("everywhere", 1, [("ops.cu", 7, "LAUNCH_K")])]
    assert found.in_macros == ()
    # Used nowhere: not judged, counted.
    alone = searched(tmp_path / "alone", {"launch.cuh": header}, "launch.cuh")
    assert alone.unchecked == () and alone.in_macros == (3,)


@pytest.mark.parametrize(("caller", "checked"), [
    # A program of its own: a checked synchronizing call later in the calling function reports the failure.
    ("int main() {\n  float* x;\n  run(x);\n  int n = 0;\n  n += 1;\n  n += 2;\n  CHECK(cudaDeviceSynchronize());\n}\n",
     True),
    ("int main() {\n  float* x;\n  float h;\n  for (int i = 0; i < 4; ++i) {\n    run(x);\n  }\n  int n = 0;\n"
     "  n += 1;\n  CHECK(cudaMemcpy(&h, x, 4, cudaMemcpyDeviceToHost));\n}\n", True),
    # Its error dropped, or a `return` before it: no report of the failure.
    ("int main() {\n  float* x;\n  run(x);\n  int n = 0;\n  n += 1;\n  n += 2;\n  cudaDeviceSynchronize();\n}\n",
     False),
    ("int main() {\n  float* x;\n  run(x);\n  int n = 0;\n  n += 1;\n  if (n) return 1;\n"
     "  CHECK(cudaDeviceSynchronize());\n}\n", False),
    # A library's file (no `main`): the callers decide what a failed launch does.
    ("void reset(float* x) {\n  run(x);\n  int n = 0;\n  n += 1;\n  n += 2;\n  CHECK(cudaDeviceSynchronize());\n}\n",
     False),
])
def test_a_helpers_call_in_another_file_that_is_a_program_is_checked_by_a_later_checked_sync(
        tmp_path: Path, caller: str, checked: bool) -> None:
    library = ("__global__ void k(float* x);\n"
               "void run(float* x) { k<<<1, 1>>>(x); }\n"
               "#define RUN_K(x) k<<<1, 1>>>(x)\n")
    check = "#define CHECK(call) do { if ((call) != cudaSuccess) abort(); } while (0)\n"  # checks what it wraps
    files = {"launch.cu": library, "bench.cu": check + caller,
             "macro.cu": check + caller.replace("run(x)", "RUN_K(x)")}  # the macro's use is where it launches
    found = searched(tmp_path, files, "launch.cu")
    assert [u.kind for u in found.unchecked] == ([] if checked else ["everywhere", "everywhere"])


def test_each_file_is_blanked_once_between_its_own_lint_and_the_projects_reading(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """launch.cu's launch is checked by a function check.cu defines, so the project's reading blanks both files (they
    read the last error), and each is linted itself, which blanks it: each text is blanked once in the run, whichever
    reads it first."""
    from rules_harness import linted

    from kgate.support.comments import cpp

    (tmp_path / "kgate.toml").write_text('select = ["KG302"]\n')
    (tmp_path / "check.cu").write_text(CHECKS + "__global__ void k() {}\nvoid run() {\n  k<<<1, 1>>>();\n"
                                       "  check_launch();\n}\n")
    (tmp_path / "launch.cu").write_text("__global__ void g() {}\nvoid go() {\n  g<<<1, 1>>>();\n  through();\n}\n"
                                        "void peek() { (void)cudaPeekAtLastError(); }\n")
    made = cpp.Blanked.__init__
    counts: dict[str, int] = {}

    def counted(self: cpp.Blanked, code: str, *args: object) -> None:
        counts[code] = counts.get(code, 0) + 1
        made(self, code, *args)

    monkeypatch.setattr(cpp.Blanked, "__init__", counted)
    monkeypatch.chdir(tmp_path)
    findings, _suppressed = linted(tmp_path)
    assert not [f for f in findings if f.code == "KG302"]
    assert len(counts) == 2 and max(counts.values()) == 1, sorted(counts.values())


def test_a_search_tried_where_its_words_stand_finds_what_the_pattern_finds_everywhere() -> None:
    """The checks are tried only where a match can begin (one of their words): the matches, their order and what
    each covers are those of the pattern tried at every position, in a window too (a word inside another match is
    passed over as `finditer` passes it over)."""
    from kgate.collect.cuda_checks import checks_of, last_error_reads

    code = ("cudaGetLastError(); xcudaGetLastError(); LastCudaError_x (); run_check(a, b);run_check();"
            " LAST_ERROR(); check(check()); MY_CHECK( ) ; getLastCudaError(cudaGetLastError());")
    for checks in (launch_checks(("MY_CHECK",), {"run_check": frozenset({0, 2}), "check": frozenset({1})}),
                   last_error_reads(("MY_CHECK",), {"check": None}), checks_of((), {"run_check": frozenset({2})})):
        assert checks.starts
        for pos, end in ((0, len(code)), (3, 60), (25, len(code) - 5), (41, 42)):
            assert [m.span() for m in checks._matches(code, pos, end)] == \
                [m.span() for m in checks.pattern.finditer(code, pos, end)], (checks.pattern.pattern, pos, end)
