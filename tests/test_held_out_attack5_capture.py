"""Capture records a command leaves whose values no capture file should hold: launch counts that together pass
what TOML's 64-bit integers hold, a kernel's name that no module defines a function by (`ops:fill kernel`,
`ops:fill-1`), a signature type with a control character, and an option beyond 64 bits. A capture writes a file
kgate reads back, or refuses the record naming why; never a file its own reader refuses."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import kgate
from test_capture_imports import entries, make_project
from test_held_out_capture_records import ENV, _lines, _spec, _write_files

pytest.importorskip("torch", reason="the captured launchers take torch tensors (pip install torch, or kgate's extra ulp: kernel-gate[ulp])")

MAX_INT64 = 2**63 - 1


def _capture(project: Path, files: dict[str, str], *args: str) -> object:
    run = kgate("capture", "--device", "cpu", *args, "--", *_write_files(project, files), cwd=project, timeout=120)
    assert "Traceback" not in run.stderr, run.stderr
    return run


@pytest.mark.parametrize("processes", [1, 2])
def test_launch_counts_past_64_bits_together_are_held_at_the_largest(tmp_path: Path, processes: int) -> None:
    """Each count fits; their sum does not. The capture file must stay one kgate reads back (its reader refuses a
    count beyond 64 bits): the sum is held at the largest it can hold, in one run and over two."""
    project = make_project(tmp_path)
    counted = {"type": "launches", "id": "id64", "count": MAX_INT64}
    files = {"records-1.jsonl": _lines(ENV, _spec(project, 64), counted, counted)} if processes == 1 else \
        {"records-1.jsonl": _lines(ENV, _spec(project, 64), counted)}
    run = _capture(project, files, "--counts")
    assert run.code == 0, run.stderr
    if processes == 2:  # a second capture adds its count to the file's
        run = _capture(project, {"records-1.jsonl": _lines(ENV, _spec(project, 64), counted)}, "--counts")
        assert run.code == 0, run.stderr
    assert [e.launches for e in entries(project)] == [MAX_INT64]


@pytest.mark.parametrize("kernel", ["ops:fill kernel", "ops:fill-1", "ops:1fill"])
def test_a_kernel_name_no_module_can_define_is_refused(tmp_path: Path, kernel: str) -> None:
    project = make_project(tmp_path)
    run = _capture(project, {"records-1.jsonl": _lines(ENV, _spec(project, 64, kernel=kernel))})
    assert run.code != 0 and f"{kernel}: not recorded: not a kernel's name" in run.stderr, run.stderr
    assert not (project / "kgate-capture.toml").exists()


@pytest.mark.parametrize(("field", "value", "words"), [
    ("signature", {"n": "i32\n", "x": "*fp32"}, "signature.n: must be a Triton type string"),
    ("signature", {"n": " i32", "x": "*fp32"}, "signature.n: must be a Triton type string"),
    ("options", {"num_stages": 2**70, "num_warps": 4}, "options.num_stages: must be a number (an integer within 64"),
    ("options", {"num_stages": 3, "num_warps": 4, "maxnreg": 2**64}, "options.maxnreg: must be a number"),
])
def test_a_specialisation_value_no_capture_file_holds_is_refused(tmp_path: Path, field: str, value: object,
                                                                 words: str) -> None:
    project = make_project(tmp_path)
    run = _capture(project, {"records-1.jsonl": _lines(ENV, _spec(project, 64, **{field: value}))})
    assert run.code != 0 and words in run.stderr, run.stderr
    assert not (project / "kgate-capture.toml").exists()
