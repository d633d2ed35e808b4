"""Held-out cases: source files whose paths hold characters the compilers escape in their line tables.

nvcc and LLVM write a file name's non-ASCII bytes as octal escapes in PTX (`.file 1 "/src/k\\303\\251.cu"`), and
nvdisasm does the same in a listing's `//## File "..."` lines; read as written, the name is no file of the project:
a project under a folder named `josé` had "no kernel" to gate, a PDL kernel's access before the wait lost its
source line, and the audit's listings named a file `k/303/251.cu`."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import kgate

from kgate.facts.ptx_text import unquoted as string_value

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")

PDL = """__global__ void pdl_bad(float* out, const float* in) {
  out[threadIdx.x] = 1.0f;
  asm volatile("griddepcontrol.wait;" ::: "memory");
  out[threadIdx.x] += in[threadIdx.x];
}
"""


def test_a_string_of_a_line_table_reads_as_the_file_name_it_escapes() -> None:
    assert string_value(r"/src/k\303\251 dir/a.cu") == "/src/ké dir/a.cu"
    assert string_value(r"C:\\src\\a.cu") == "C:\\src\\a.cu"
    assert string_value(r"say \"hi\".cu") == 'say "hi".cu'
    assert string_value(r"bad\377.cu") == "bad\udcff.cu"  # not UTF-8: kept as the file system gives it
    assert string_value("plain/a.cu") == "plain/a.cu"


def test_a_project_under_a_folder_named_in_unicode_has_its_kernels(tmp_path: Path) -> None:
    project = tmp_path / "josé"
    project.mkdir()
    (project / "k.cu").write_text("__global__ void scale(float* x, float a) { x[threadIdx.x] *= a; }\n",
                                  encoding="utf-8")
    (project / "kgate.toml").write_text('targets = ["sm_120a"]\n\n[[cuda]]\nsources = ["k.cu"]\n', encoding="utf-8")
    run = kgate("check", "--show-kernels", "--format", "json", cwd=project)
    assert run.code == 0, run.stdout + run.stderr
    assert [(k["kernel"], k["path"]) for k in run.json()["kernels"]] == [("scale", "k.cu")]


def test_an_access_before_the_wait_keeps_its_line_in_a_file_named_in_unicode(tmp_path: Path) -> None:
    (tmp_path / "ké dir").mkdir()
    (tmp_path / "ké dir" / "pdl.cu").write_text(PDL, encoding="utf-8")
    (tmp_path / "kgate.toml").write_text(
        'targets = ["sm_120a"]\nselect = ["KG107"]\n\n[[cuda]]\nsources = ["ké dir/pdl.cu"]\npdl = ["pdl_*"]\n',
        encoding="utf-8")
    run = kgate("check", "--format", "json", cwd=tmp_path)
    assert run.code == 1, run.stdout + run.stderr
    (finding,) = run.json()["findings"]
    assert finding["code"] == "KG107" and finding["path"] == "ké dir/pdl.cu"
    assert [(r["path"], r["line"]) for r in finding["related"] if r["path"]] == [("ké dir/pdl.cu", 2)], finding


def test_the_audit_names_the_source_file_of_its_listings(tmp_path: Path) -> None:
    (tmp_path / "ké dir").mkdir()
    (tmp_path / "ké dir" / "pdl.cu").write_text(PDL, encoding="utf-8")
    (tmp_path / "kgate.toml").write_text(
        'targets = ["sm_120a"]\nselect = ["KG107"]\n\n[[cuda]]\nsources = ["ké dir/pdl.cu"]\npdl = ["pdl_*"]\n',
        encoding="utf-8")
    run = kgate("audit", "--sass", cwd=tmp_path)
    assert run.code in (0, 1), run.stdout + run.stderr
    text = (tmp_path / "kgate-audit" / "report.md").read_text(encoding="utf-8")
    assert "from `ké dir/pdl.cu:3`" in text and "/303/251" not in text and "\\303" not in text, text
