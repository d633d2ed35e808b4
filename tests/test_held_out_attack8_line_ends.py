"""A source file's line ends and byte-order mark change no verdict: the same C++, CUDA and build files written
on Windows (`\\r\\n` ends) or by an editor that starts them with a UTF-8 byte-order mark are read as the compiler
reads them.

A backslash before a `\\r\\n` continues a `#define` as one before `\\n` does, and a BOM before the first line hides
none of its directives: the `#include` that makes a file a torch extension source or brings a header's
arch-specific code into a build, a `#define` of a check macro.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES, kgate

from kgate.collect.cuda_sources import cuda_sources
from kgate.core.config import load_config

_TEXT_SUFFIXES = {".cu", ".cuh", ".h", ".hpp", ".cpp", ".cc", ".py", ".sh", ".txt", ".cmake", ".in"}
_FORMS = {
    "crlf": lambda data: data.replace(b"\n", b"\r\n"),
    "bom": lambda data: b"\xef\xbb\xbf" + data,
    "bom+crlf": lambda data: b"\xef\xbb\xbf" + data.replace(b"\n", b"\r\n"),
}


def _findings(project: Path) -> set[tuple]:
    run = kgate("lint", "--no-cache", "--format", "json", "--exit-zero", cwd=project)
    assert run.code == 0, run.stdout + run.stderr
    report = json.loads(run.stdout)
    return {(f["path"], f["line"], f["code"], f["message"]) for f in report["findings"]}


def _rewritten(project: Path, form: str) -> int:
    """Every source and build file of `project` in `form`; how many were rewritten."""
    count = 0
    for path in sorted(project.rglob("*")):
        if path.is_file() and not path.is_symlink() and (path.suffix in _TEXT_SUFFIXES or path.name == "Makefile") \
                and path.name != "kgate.toml":
            data = path.read_bytes()
            if b"\r" not in data and not data.startswith(b"\xef\xbb\xbf"):
                path.write_bytes(_FORMS[form](data))
                count += 1
    return count


@pytest.mark.parametrize("form", sorted(_FORMS))
@pytest.mark.parametrize("code", ["KG301", "KG302", "KG303"])
def test_a_cuda_rule_verdict_does_not_depend_on_line_ends_or_a_byte_order_mark(tmp_path: Path, code: str,
                                                                               form: str) -> None:
    plain = tmp_path / "plain"
    shutil.copytree(FIXTURES / "rules" / code, plain, symlinks=True)
    expected = _findings(plain)
    assert expected
    written = tmp_path / form
    shutil.copytree(FIXTURES / "rules" / code, written, symlinks=True)
    assert _rewritten(written, form)
    assert _findings(written) == expected


def test_a_check_macro_continued_over_windows_line_ends_or_after_a_byte_order_mark_checks_its_launch(tmp_path: Path) -> None:
    source = (
        "#define CHECK_LAUNCH() \\\n"
        "  do { \\\n"
        "    cudaError_t e = cudaGetLastError(); \\\n"
        "    if (e != cudaSuccess) return e; \\\n"
        "  } while (0)\n"
        "__global__ void fill(float* x) { x[threadIdx.x] = 1.f; }\n"
        "#define LAUNCH_FILL(x) \\\n"
        "  fill<<<1, 32>>>(x)\n"
        "cudaError_t run(float* x) {\n"
        "  LAUNCH_FILL(x);\n"
        "  CHECK_LAUNCH();\n"
        "  return cudaSuccess;\n"
        "}\n"
        "cudaError_t run_unchecked(float* x) {\n"
        "  LAUNCH_FILL(x);\n"
        "  return cudaSuccess;\n"
        "}\n")
    for name, text in (("lf", source), ("crlf", source.replace("\n", "\r\n")), ("bom", "\ufeff" + source)):
        project = tmp_path / name
        project.mkdir()
        (project / "kgate.toml").write_text('targets = ["sm_120a"]\n')
        (project / "launch.cu").write_bytes(text.encode())
        found = _findings(project)
        # One unchecked use of the launching macro: the one in run_unchecked (line 15), never the checked one.
        assert {(path, line, code) for path, line, code, _ in found} == {("launch.cu", 15, "KG302")}, (name, found)


def test_a_byte_order_mark_hides_no_torch_include_from_the_extension_build(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="torch's extension flags come from the torch installed here")
    text = "#include <torch/extension.h>\n__global__ void k(float* x) { x[threadIdx.x] = 0.f; }\n"
    (tmp_path / "plain.cu").write_text(text)
    (tmp_path / "marked.cu").write_bytes(b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode())
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\n[[cuda]]\nsources = ["*.cu"]\n')
    sources = {Path(s.rel).stem: s for s in cuda_sources(load_config(tmp_path / "kgate.toml"))}
    plain, marked = sources["plain"], sources["marked"]
    assert any("torch/include" in flag for flag in plain.flags)
    assert [f.replace("marked", "plain") for f in marked.flags] == list(plain.flags)


@pytest.mark.parametrize("suffix", [".cu", ".cuh", ".cpp", ".h", ".hpp", ".hh", ".hxx", ".inl"])
def test_a_launch_in_any_cpp_source_or_header_kind_is_checked(tmp_path: Path, suffix: str) -> None:
    """Every C++ and CUDA file kind the project's other files are read in (a template's launcher in an `.inl`, a
    `.hh` or `.hxx` header) is a file whose launches KG302 reads: the unchecked one is reported, its checked twin is
    not."""
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\n')
    (tmp_path / f"launch{suffix}").write_text(
        "__global__ void fill(float* x) { x[threadIdx.x] = 1.f; }\n"
        "inline void run(float* x) {\n"
        "  fill<<<1, 32>>>(x);\n"
        "}\n"
        "inline cudaError_t run_checked(float* x) {\n"
        "  fill<<<1, 32>>>(x);\n"
        "  return cudaGetLastError();\n"
        "}\n")
    assert {(path, line, code) for path, line, code, _ in _findings(tmp_path)} == {(f"launch{suffix}", 3, "KG302")}
