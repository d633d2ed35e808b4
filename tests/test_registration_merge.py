"""Two registrations of one launch are one variant that asks for what both ask (kgate.compile.launches): the
verdict never depends on which compile finished last (`-j`), nor on the order of the tables."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import kgate

ADD = """\
import triton
import triton.language as tl


@triton.jit
def add(x, y, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + o, tl.load(x + o, mask=o < n) + 1.0, mask=o < n)
"""
TABLE = """
[[triton]]
kernel = "k:add"
signature = {{ x = "*fp32", y = "*fp32", n = "i32" }}
constexprs = {{ BLOCK = 128 }}
{extra}
"""


def _project(root: Path, *extras: str) -> Path:
    (root / "k.py").write_text(ADD)
    (root / "kgate.toml").write_text('targets = ["sm_120a"]\npython-path = ["."]\n'
                                     + "".join(TABLE.format(extra=extra) for extra in extras))
    return root


@pytest.mark.parametrize("jobs", ["1", "2"])
@pytest.mark.parametrize("first", [True, False], ids=["expect-first", "expect-second"])
def test_one_registrations_expect_is_kept_whatever_the_order_and_jobs(tmp_path: Path, jobs: str, first: bool) -> None:
    extras = ('expect = ["block_scale"]', "") if first else ("", 'expect = ["block_scale"]')
    root = _project(tmp_path, *extras)
    run = kgate("check", "-j", jobs, "--no-cache", "--format", "json", cwd=root)
    assert run.code == 1, run.stderr
    report = run.json()
    assert [f["code"] for f in report["findings"]] == ["KG101"]
    assert [k["expect"] for k in report["kernels"]] == [["block_scale"]]


@pytest.mark.parametrize("first", [True, False], ids=["kind-first", "kind-second"])
def test_the_kind_one_registration_names_is_kept(tmp_path: Path, first: bool) -> None:
    extras = ('kind = "elementwise"', "") if first else ("", 'kind = "elementwise"')
    root = _project(tmp_path, *extras)
    run = kgate("check", "-j", "2", "--format", "json", cwd=root)
    assert run.code == 0, run.stderr
    assert [k["kind"] for k in run.json()["kernels"]] == ["elementwise"]


def test_two_kinds_for_one_launch_are_one_finding(tmp_path: Path) -> None:
    root = _project(tmp_path, 'kind = "gemm"', 'kind = "elementwise"')
    run = kgate("check", "--format", "json", cwd=root)
    assert run.code == 1, run.stderr
    messages = [f["message"] for f in run.json()["findings"]]
    assert any("registered as elementwise and as gemm: one launch has one kind" in m for m in messages), messages


def test_registrations_of_different_launches_stay_apart(tmp_path: Path) -> None:
    root = _project(tmp_path, 'expect = ["block_scale"]', "")
    (root / "kgate.toml").write_text((root / "kgate.toml").read_text().replace("BLOCK = 128 }\n\n", "BLOCK = 256 }\n\n"
                                                                               , 1))
    run = kgate("check", "--format", "json", cwd=root)
    assert run.code == 1, run.stderr
    by_name = {k["variant"].split(",")[0]: k["expect"] for k in run.json()["kernels"]}
    assert by_name == {"BLOCK=128": ["block_scale"], "BLOCK=256": []}
