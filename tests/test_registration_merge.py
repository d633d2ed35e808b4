"""Two registrations of one launch are one variant that asks for what both ask (kgate.compile.launches): the
verdict never depends on which compile finished last (`-j`), nor on the order of the tables. The same holds of
launches that are one only once Triton's launcher bound them: a registration and a capture of one
specialisation, two registrations whose example arguments specialise alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import triton
from conftest import kgate

from kgate.collect.captures import CapturedSpec, CaptureFile, render
from kgate.collect.specialization import Specialization

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
# Example arguments that Triton's launcher specialises alike (every pointer 16-byte aligned, every size divisible
# by 16), written out so that the planner sees two launches.
ARGS = 'args = {{ x = "*fp32", y = "*fp32", n = {n} }}'
ALIKE = (ARGS.format(n=4096), ARGS.format(n=8192))
# The launch the table binds, as a capture on a CPU for sm_120a records it.
SPEC = Specialization("k:add", {"n": "i32", "x": "*fp32", "y": "*fp32"}, {"BLOCK": 128}, ("n", "x", "y"),
                      options={"num_stages": 3, "num_warps": 4})
WHERE = "cpu sm_120a"


def _project(root: Path, *extras: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "k.py").write_text(ADD)
    return _configured(root, *extras)


def _configured(root: Path, *extras: str) -> Path:
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


@pytest.mark.parametrize("args", [("", ""), ALIKE], ids=["same-table", "args-specialised-alike"])
def test_two_kinds_for_one_launch_are_one_finding(tmp_path: Path, args: tuple[str, str]) -> None:
    root = _project(tmp_path, f'kind = "gemm"\n{args[0]}', f'kind = "elementwise"\n{args[1]}')
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


@pytest.mark.parametrize("jobs", ["1", "2"])
@pytest.mark.parametrize("first", [True, False], ids=["expect-first", "expect-second"])
def test_registrations_whose_arguments_specialise_alike_are_one_row_asking_what_both_ask(tmp_path: Path, jobs: str,
                                                                                         first: bool) -> None:
    extras = (f'expect = ["block_scale"]\n{ALIKE[0]}', ALIKE[1]) if first else \
        (ALIKE[0], f'expect = ["block_scale"]\n{ALIKE[1]}')
    run = kgate("check", "-j", jobs, "--no-cache", "--format", "json", cwd=_project(tmp_path, *extras))
    assert run.code == 1, run.stderr
    report = run.json()
    assert [f["code"] for f in report["findings"]] == ["KG101"]
    assert [(k["variant"], k["expect"], k["source"]) for k in report["kernels"]] == \
        [(SPEC.variant, ["block_scale"], "registered")]


def _captured(root: Path) -> Path:
    capture = CaptureFile({WHERE: {"capability": "12.0", "triton": triton.__version__}},
                          [CapturedSpec(SPEC, (WHERE,))])
    (root / "kgate-capture.toml").write_text(render(capture))
    return root


def _checked(root: Path, *args: str) -> str:
    run = kgate("check", "--format", "json", *args, cwd=root)
    assert run.code == 0, run.stderr
    return run.stdout


def test_a_launch_registered_and_captured_is_one_row_naming_both_whatever_compiles_first(tmp_path: Path) -> None:
    reports = {f"-j {jobs}": _checked(_captured(_project(tmp_path / f"j{jobs}", "")), "-j", jobs, "--no-cache")
               for jobs in ("1", "2")}
    # The order forced both ways: the launch of one origin is in the cache (its unit comes first), the other's
    # is compiled after it.
    registered_first = _project(tmp_path / "registered-first", "")
    _checked(registered_first)
    reports["registered first"] = _checked(_captured(registered_first))
    captured_first = _captured(_project(tmp_path / "captured-first"))
    _checked(captured_first)
    reports["captured first"] = _checked(_configured(captured_first, ""))
    assert len(set(reports.values())) == 1, reports
    rows = [(k["variant"], k["source"], k["captured"]) for k in json.loads(reports["-j 1"])["kernels"]]
    assert rows == [(SPEC.variant, "registered+captured", [WHERE])]
