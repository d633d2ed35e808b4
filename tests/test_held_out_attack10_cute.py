"""The CuTe DSL fallback (its PTX assembled again by Triton's ptxas, for a DSL that writes no ptxas report) stands in
for the DSL's report only where every entry the report gives has the registers the DSL's cubin records: an entry the
cubin does not record is no entry of that cubin, and refuses the report as a differing count does."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgate.compile import cute_backend
from kgate.compile.elf import register_counts
from kgate.compile.preflight import triton_ptxas
from kgate.compile.worker_imports import KernelError
from kgate.support import tools

ENTRY = """
.visible .entry {name}(
	.param .u64 {name}_param_0
)
{{
	.reg .b64 	%rd<3>;
	.reg .f32 	%f<2>;
	ld.param.u64 	%rd1, [{name}_param_0];
	cvta.to.global.u64 	%rd2, %rd1;
	mov.f32 	%f1, 0f3F800000;
	st.global.f32 	[%rd2], %f1;
	ret;
}}
"""
HEAD = ".version 8.7\n.target sm_120a\n.address_size 64\n"


def _ptxas() -> Path:
    found = next((p for p in map(tools.bundled_tool, triton_ptxas("sm_120a")) if p is not None), None)
    if found is None:
        pytest.skip("no ptxas for sm_120a in the Triton wheel")
    return found


def _cubin(tmp_path: Path, ptx: str) -> bytes:
    source = tmp_path / "one.ptx"
    source.write_text(ptx)
    tools.run([str(_ptxas()), "--gpu-name=sm_120a", str(source), "-o", str(tmp_path / "one.cubin")], timeout=120)
    return (tmp_path / "one.cubin").read_bytes()


@pytest.fixture(autouse=True)
def _version(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cute_backend, "dsl_version", lambda: "4.7.0")  # the DSL's release is only quoted


def test_the_report_of_the_cubins_own_ptx_stands_in(tmp_path: Path) -> None:
    ptx = HEAD + ENTRY.format(name="first")
    cubin = _cubin(tmp_path, ptx)
    assert set(register_counts(cubin)) == {"first"}
    assert "Compiling entry function 'first'" in cute_backend.ptxas_again(ptx, cubin, "sm_120a", str(tmp_path))


def test_an_entry_the_cubin_does_not_record_refuses_the_report(tmp_path: Path) -> None:
    cubin = _cubin(tmp_path, HEAD + ENTRY.format(name="first"))
    ptx = HEAD + ENTRY.format(name="first") + ENTRY.format(name="second")
    with pytest.raises(KernelError, match="second has None registers in the DSL's cubin"):
        cute_backend.ptxas_again(ptx, cubin, "sm_120a", str(tmp_path))
