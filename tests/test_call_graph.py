"""What a kernel calls is part of it: fixtures/callgraph/ holds Triton and CUDA kernels whose loads, waits,
spills and MMA sit in the device functions they call (`@triton.jit(noinline=True)`, `__noinline__`), each
line stating its findings inline. One cold `kgate check` compiles them all with the real compilers.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import Run, copy_project, expectations, kgate

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_project("callgraph", tmp_path_factory.mktemp("callgraph"))


@pytest.fixture(scope="module")
def cold(project: Path) -> Run:
    return kgate("check", "--format", "json", cwd=project)


def _messages(run: Run, code: str) -> dict[str, str]:
    return {f["kernel"]: f["message"] for f in run.json()["findings"] if f["code"] == code}


def _kernels(run: Run) -> dict[str, dict]:
    return {k["kernel"]: k for k in run.json()["kernels"]}


def test_findings_are_exactly_the_inline_expectations(project: Path, cold: Run) -> None:
    assert cold.code == 1, cold.stderr
    found = {(f["path"], f["line"], f["code"], f["target"]) for f in cold.json()["findings"]}
    assert found == expectations(project, (".py", ".cu"))


def _line(project: Path, name: str, text: str) -> int:
    return next(n for n, line in enumerate((project / name).read_text().splitlines(), 1) if text in line)


def test_an_access_two_calls_down_is_reported_at_the_kernels_call(project: Path, cold: Run) -> None:
    messages = _messages(cold, "KG107")
    cuda = messages["pdl_atomic_two_calls_down"]
    call = _line(project, "calls.cu", "  add_outer(out, v);")
    assert f"`atom.global.add.f32` in `add_inner` (called through `add_outer`) at calls.cu:{call}" in cuda, cuda
    triton = messages["kernels:load_two_calls_down"]
    call = _line(project, "kernels.py", "v = _outer(x, pid)")
    assert f"in `_inner` (called through `_outer`) at kernels.py:{call}" in triton, triton


def test_a_wait_in_the_function_called_first_is_the_kernels_wait(cold: Run) -> None:
    messages = _messages(cold, "KG107")
    assert "pdl_wait_in_callee" not in messages and "kernels:wait_in_a_callee" not in messages
    kernels = _kernels(cold)
    assert kernels["pdl_wait_in_callee"]["pdl"] and kernels["kernels:wait_in_a_callee"]["pdl"]


def _folded(run: Run, code: str, kernel: str) -> str:
    """The message of the `code` finding that the finding on `kernel` carries as one of the same cause."""
    (finding,) = [f for f in run.json()["findings"] if f["kernel"] == kernel and code in f["folded"]]
    return next(r["message"] for r in finding["related"] if r["message"].startswith(f"{code} "))


def test_the_spills_of_a_called_function_are_the_kernels(cold: Run) -> None:
    message = _messages(cold, "KG103")["spills_in_callee"]
    assert "in `spilling_helper`, which the kernel calls" in message, message
    assert not message.startswith("0 bytes")
    # Its local memory inside the loop is that spill: told inside the spill's finding.
    assert "spills_in_callee" not in _messages(cold, "KG109") and _folded(cold, "KG109", "spills_in_callee")


def test_block_scaled_mma_in_a_called_function_counts(cold: Run) -> None:
    messages = _messages(cold, "KG101")
    assert "mma_block_scale_in_callee" not in messages
    assert "mma_bf16_in_callee" in messages and "no MMA instruction" not in messages["mma_bf16_in_callee"]


@pytest.mark.parametrize("kernel", ["autotuned_scaled_helper", "heuristics_scaled_helper", "wrapped_scaled_helper",
                                    "plain_scaled_helper", "plain_imported_helper", "autotuned_imported_helper"])
def test_the_expectation_follows_the_helpers_a_kernel_calls(cold: Run, kernel: str) -> None:
    name = f"kernels:{kernel}"
    assert _kernels(cold)[name]["expect"] == ["block_scale"]
    assert name in _messages(cold, "KG101")


def test_a_comment_or_a_string_naming_dot_scaled_expects_nothing(cold: Run) -> None:
    assert _kernels(cold)["kernels:autotuned_copy"]["expect"] == []


def test_a_call_through_a_function_pointer_is_said_to_be_one(cold: Run) -> None:
    pdl = _messages(cold, "KG107")["pdl_pointer_call_first"]
    assert "a call of a function pointer, whose code is not in the PTX" in pdl, pdl
    assert "pdl_pointer_call_after_wait" not in _messages(cold, "KG107")
    mma = _messages(cold, "KG101")["mma_bf16_through_pointer"]
    assert "it calls a function pointer, whose code is not in the PTX" in mma, mma


def test_block_scaled_mma_in_a_triton_noinline_function_counts(cold: Run) -> None:
    kernel = _kernels(cold)["kernels:scaled_tile_in_a_noinline_function"]
    assert kernel["expect"] == ["block_scale"]
    assert any("block_scale" in op for op in kernel["instructions"])
    assert "kernels:scaled_tile_in_a_noinline_function" not in _messages(cold, "KG101")


def test_local_memory_in_a_called_functions_loop_names_the_spills_without_calling_them_the_frames(cold: Run) -> None:
    # The kernel's stack frame is its own; the spill stores are mostly the helper's, and can be more bytes.
    message = _folded(cold, "KG109", "spills_in_callee")
    assert "bytes of it" not in message and "bytes spill stores" in message, message
