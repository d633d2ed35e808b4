"""Held-out cases for `kgate diff` and `kgate check` of a project whose folder's name is not ASCII (`проект`,
`café`): nvcc writes a file's name in the PTX (`.file 1 "..."`) and nvdisasm in its line info (`//## File "..."`)
with C escapes, each byte outside printable ASCII in octal. Read as they stand, the names were no file of the
project: its CUDA kernels were taken for a header's, and the run said the sources "define no kernel" (exit 2), on
both sides of a diff. Every quoted file name of the compilers' text is read back to the name the file has."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import kgate
from test_diff_sides import _diff, _git, _repo

from kgate.facts.listing import parse_listing
from kgate.facts.ptx import entry_headers
from kgate.facts.ptx_text import unquoted

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
CFG = 'targets = ["sm_120a"]\n\n[[cuda]]\nsources = ["abc/*.cu"]\n'
K1 = "__global__ void scale(float* x) { x[threadIdx.x] *= 2.0f; }\n"
K2 = "__global__ void scale(float* x) { x[threadIdx.x] *= 3.0f; }\n"


@pytest.mark.parametrize("quoted, name", [
    ("/tmp/\\320\\277\\321\\200\\320\\276/abc/k.cu", "/tmp/про/abc/k.cu"),
    ("/tmp/caf\\303\\251/k.cu", "/tmp/café/k.cu"),
    ("/tmp/b\\\\s/k.cu", "/tmp/b\\s/k.cu"),
    ("/tmp/tab\\tx/k.cu", "/tmp/tab\tx/k.cu"),
    ("/tmp/plain/k.cu", "/tmp/plain/k.cu"),
])
def test_a_quoted_file_name_is_read_back(quoted: str, name: str) -> None:
    assert unquoted(quoted) == name


def test_the_ptx_and_the_listing_name_the_file_as_it_is() -> None:
    ptx = ('.version 9.0\n.target sm_120a\n.address_size 64\n\n.visible .entry _Z5scalePf(\n\t.param .u64 p\n)\n{\n'
           '\t.loc\t1 1 0\n\tret;\n}\n\t.file\t1 "/tmp/\\320\\277\\321\\200\\320\\276/abc/k.cu"\n')
    header = entry_headers(ptx)["_Z5scalePf"]
    assert header.first_loc is not None and header.first_loc.file == "/tmp/про/abc/k.cu"
    listing = ('//--------------------- .text._Z5scalePf --------------------------\n'
               '\t//## File "/tmp/\\320\\277\\321\\200\\320\\276/abc/k.cu", line 1\n'
               '        /*0000*/                   LDC R1, c[0x0][0x37c] ;       /* 0x0000df00ff017b82 */\n')
    assert [(i.file, i.line) for i in parse_listing(listing)["_Z5scalePf"]] == [("/tmp/про/abc/k.cu", 1)]


@needs_nvcc
@pytest.mark.parametrize("folder", ["проект", "café"])
def test_a_project_in_a_folder_named_outside_ascii_is_gated(tmp_path: Path, folder: str) -> None:
    root = tmp_path / folder
    (root / "abc").mkdir(parents=True)
    (root / "kgate.toml").write_text(CFG)
    (root / "abc" / "k.cu").write_text(K1)
    run = kgate("check", "-j", "1", "--no-cache", cwd=root)
    assert run.code == 0 and "1 kernel variant(s)" in run.stdout, run.stdout + run.stderr


@needs_nvcc
def test_diff_of_a_project_in_a_folder_named_outside_ascii(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "проект", {"abc/k.cu": K1}, CFG)
    same = _diff(repo, "HEAD", "--require-identical", "-j", "1")
    assert same.code == 0 and "1 identical, 0 changed" in same.stdout, same.stdout + same.stderr
    (repo / "abc" / "k.cu").write_text(K2)
    changed = _diff(repo, "HEAD", "--require-identical", "-j", "1")
    assert changed.code == 1 and "0 identical, 1 changed" in changed.stdout, changed.stdout + changed.stderr
    _git(repo, "commit", "-qam", "x3")


@needs_nvcc
def test_diff_of_a_project_whose_kgate_toml_links_to_a_shared_one(tmp_path: Path) -> None:
    """`kgate.toml -> conf/kgate.toml`, committed: the base's configuration was read as `conf/`'s, whose `*.cu`
    matched no file, and every diff failed. Each side's link configures the folder it stands in."""
    repo = _repo(tmp_path / "repo", {"k.cu": K1, "conf/kgate.toml": CFG.replace("abc/*.cu", "*.cu")}, "")
    (repo / "kgate.toml").unlink()
    (repo / "kgate.toml").symlink_to("conf/kgate.toml")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "a shared configuration")
    run = _diff(repo, "HEAD", "--require-identical", "-j", "1")
    assert run.code == 0 and "1 identical, 0 changed" in run.stdout, run.stdout + run.stderr
