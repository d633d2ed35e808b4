"""Held-out cases for registrations of one launch (kgate.compile.launches): `num_warps` given or left at its
default is one launch; a registration built for one target merges with another on that target only;
constexprs that differ only in type (1, 1.0, True) are different launches."""

from __future__ import annotations

from pathlib import Path

from conftest import kgate

ADD = """\
import triton
import triton.language as tl


@triton.jit
def add(x, y, n, BLOCK: tl.constexpr, SCALE: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + o, tl.load(x + o, mask=o < n) * SCALE, mask=o < n)
"""


def _project(root: Path, targets: str, *tables: str) -> Path:
    (root / "k.py").write_text(ADD)
    body = "".join(f'\n[[triton]]\nkernel = "k:add"\nsignature = {{ x = "*fp32", y = "*fp32", n = "i32" }}\n{t}\n'
                   for t in tables)
    (root / "kgate.toml").write_text(f"targets = {targets}\npython-path = [\".\"]\n{body}")
    return root


def test_num_warps_given_or_defaulted_is_one_launch_with_both_requests(tmp_path: Path) -> None:
    root = _project(tmp_path, '["sm_120a"]', 'constexprs = { BLOCK = 128, SCALE = 2 }\nnum_warps = 4\n'
                    'expect = ["block_scale"]', 'constexprs = { BLOCK = 128, SCALE = 2 }\nkind = "elementwise"')
    run = kgate("check", "--format", "json", cwd=root)
    assert run.code == 1, run.stderr
    kernels = run.json()["kernels"]
    assert [(k["expect"], k["kind"]) for k in kernels] == [(["block_scale"], "elementwise")]


def test_a_registration_for_one_target_merges_there_only(tmp_path: Path) -> None:
    root = _project(tmp_path, '["sm_120a", "sm_90a"]',
                    'constexprs = { BLOCK = 128, SCALE = 2 }\ntargets = ["sm_120a"]\nexpect = ["block_scale"]',
                    "constexprs = { BLOCK = 128, SCALE = 2 }")
    run = kgate("check", "--format", "json", cwd=root)
    by_target = {k["target"]: k["expect"] for k in run.json()["kernels"]}
    assert by_target == {"sm_120a": ["block_scale"], "sm_90a": []}, run.stderr
    assert {f["target"] for f in run.json()["findings"] if f["code"] == "KG101"} == {"sm_120a"}


def test_constexprs_of_another_type_are_other_launches(tmp_path: Path) -> None:
    root = _project(tmp_path, '["sm_120a"]', 'constexprs = { BLOCK = 128, SCALE = 1 }\nexpect = ["block_scale"]',
                    "constexprs = { BLOCK = 128, SCALE = 1.0 }", "constexprs = { BLOCK = 128, SCALE = true }")
    run = kgate("check", "--format", "json", cwd=root)
    kernels = run.json()["kernels"]
    assert len(kernels) == 3, (run.stderr, [k["variant"] for k in kernels])
    assert sorted(k["expect"] for k in kernels) == [[], [], ["block_scale"]]
