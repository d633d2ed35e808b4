"""A CuTe DSL that writes no ptxas report (nvidia-cutlass-dsl before 4.8): the DSL's PTX assembled again by Triton's
ptxas stands in for it only where every entry's registers equal those the DSL's own cubin records.

The DSL installed here writes its report; these compile a real call with it, then ask the fallback what it would
have given, and compare: the same registers, spills and stack for every entry, and a refusal where the cubin is
another compile's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("cutlass.cute", reason="the CuTe DSL is not installed (pip install 'kernel-gate[cute]', or "
                                           "nvidia-cutlass-dsl)")

from kgate.compile import cute_backend  # noqa: E402
from kgate.compile.elf import register_counts  # noqa: E402
from kgate.compile.worker_imports import KernelError  # noqa: E402
from kgate.facts.ptxas_log import parse_ptxas_log  # noqa: E402
from kgate.support.tools import bundled_tool  # noqa: E402

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "cute" / "capture"


def _compiled(tmp_path: Path, factor: float) -> tuple[str, bytes, str]:
    """(PTX, cubin, the DSL's own ptxas report) of the fixture's `scale` for sm_120a, compiled in this process."""
    import cutlass
    from cutlass import cute

    sys.path.insert(0, str(FIXTURE))
    try:
        from pkg.ops import scale
    finally:
        sys.path.remove(str(FIXTURE))
    dump = tmp_path / f"dump{factor}"
    dump.mkdir()
    remarks = dump / "remarks.yaml"
    n = cute.sym_int(divisibility=128)
    x = cute.runtime.make_fake_tensor(cutlass.Float32, (n,), stride=(1,), assumed_align=16)
    with cute_backend.dsl_arch("sm_120a"):
        compiled = cute.compile(scale, x, x, factor, options=cute_backend.KGATE_OPTIONS.format(
            target="sm_120a", dump=dump, remarks=remarks))
    ptx, cubin = cute_backend._texts(compiled.artifacts)
    return ptx, cubin, cute_backend.ptxas_log(remarks.read_text(encoding="utf-8"))


def test_the_cubins_register_counts_are_what_cuobjdump_reports(tmp_path: Path) -> None:
    _ptx, cubin, _log = _compiled(tmp_path, 2.0)
    (tmp_path / "k.cubin").write_bytes(cubin)
    tool = bundled_tool("cuobjdump")
    if tool is None:
        pytest.skip("no cuobjdump")
    said = subprocess.run([str(tool), "--dump-resource-usage", str(tmp_path / "k.cubin")], capture_output=True,
                          text=True, check=True).stdout
    counts = register_counts(cubin)
    assert counts and all(f"REG:{count} " in said and name in said for name, count in counts.items()), (counts, said)


def test_ptxas_again_gives_the_dsls_own_report_of_every_entry(tmp_path: Path) -> None:
    ptx, cubin, log = _compiled(tmp_path, 2.0)
    assert log, "this DSL writes its report: the comparison needs it"
    again = cute_backend.ptxas_again(ptx, cubin, "sm_120a", str(tmp_path))
    dsl, mine = parse_ptxas_log(log), parse_ptxas_log(again)
    assert set(dsl) == set(mine) and dsl
    for name, entry in dsl.items():
        other = mine[name]
        assert (entry.registers, entry.spill_stores, entry.spill_loads, entry.stack_frame, entry.smem_static) == (
            other.registers, other.spill_stores, other.spill_loads, other.stack_frame, other.smem_static), name


def test_a_report_that_does_not_match_the_cubin_is_refused(tmp_path: Path) -> None:
    ptx, cubin, _log = _compiled(tmp_path, 2.0)
    counts = register_counts(cubin)
    name = next(iter(counts))
    forged = cubin.replace(name.encode(), name[:-1].encode() + b"Z")  # the entry is not the cubin's any more
    with pytest.raises(KernelError, match="cannot stand in for it"):
        cute_backend.ptxas_again(ptx, forged, "sm_120a", str(tmp_path))
    assert os.path.exists(tmp_path / "again.ptx")
