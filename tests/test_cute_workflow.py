"""A CuTe DSL project through the whole workflow a Triton or CUDA project has: the ratchet (`kgate baseline`), the
reports (SARIF), the audit and `kgate diff` between revisions, each compiling with the real DSL."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import FIXTURES, kgate

pytest.importorskip("cutlass.cute", reason="the CuTe DSL is not installed (pip install 'kernel-gate[cute]', or "
                                           "nvidia-cutlass-dsl)")

CONFIG = '''targets = ["sm_120a"]
python-path = ["."]

[[cute]]
kernel = "memory:staged_two"
args = { x = { dtype = "cutlass.Float32", shape = [1048576] }, out = { dtype = "cutlass.Float32", shape = [1048576] } }

[[cute]]
kernel = "memory:staged_four"
args = { x = { dtype = "cutlass.Float32", shape = [1048576] }, out = { dtype = "cutlass.Float32", shape = [1048576] } }
'''


def _git(repo: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com"}
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)


def test_a_cute_project_is_ratcheted_reported_audited_and_diffed(tmp_path: Path) -> None:
    shutil.copy(FIXTURES / "cute" / "rules" / "memory.py", tmp_path / "memory.py")
    (tmp_path / "kgate.toml").write_text(CONFIG)
    (tmp_path / ".gitignore").write_text(".kgate-cache/\nout/\n")

    sarif = kgate("check", "--format", "sarif", cwd=tmp_path)
    assert sarif.code == 1, sarif.stderr
    results = json.loads(sarif.stdout)["runs"][0]["results"]
    assert [(r["ruleId"], r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]) for r in results] == [
        ("KG104", "memory.py")]  # four 32 KB buffers are over sm_120a's 99 KB; two are not

    pinned = kgate("baseline", "update", "--accept-new", cwd=tmp_path)
    assert pinned.code == 0 and (tmp_path / "kgate-baseline.toml").is_file(), pinned.stderr
    checked = kgate("check", "--format", "json", cwd=tmp_path)
    assert checked.code == 0 and checked.json()["summary"]["baselined"] == 1, checked.stdout

    audit = kgate("audit", "-o", "out", cwd=tmp_path)
    assert audit.code == 0, audit.stderr
    report = (tmp_path / "out" / "report.md").read_text()
    assert "memory:staged_four" in report and "memory:staged_two" in report

    _git(tmp_path, "init", "-q", "-b", "main")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-q", "-m", "kernels")
    source = tmp_path / "memory.py"
    source.write_text(source.read_text().replace("total", "acc"))  # a rename: the same SASS
    _git(tmp_path, "commit", "-q", "-am", "rename")
    same = kgate("diff", "HEAD~1", "--require-identical", cwd=tmp_path)
    assert same.code == 0 and "2 identical, 0 changed" in same.stdout, same.stdout + same.stderr
    source.write_text(source.read_text().replace("_staged_kernel(x, out, 2)", "_staged_kernel(x, out, 3)"))
    changed = kgate("diff", "HEAD", "--require-identical", cwd=tmp_path)
    assert changed.code == 1 and "changed  memory:staged_two" in changed.stdout, changed.stdout + changed.stderr
    assert "smem 65536 -> 98304" in changed.stdout  # what the allocator asks for: two 32 KB buffers, then three
