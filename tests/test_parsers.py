"""Parsers on checked-in output of the real compilers (Triton 3.9, ptxas 13.4, nvcc 13.0, cuobjdump)."""

from __future__ import annotations

import pytest
from conftest import DATA

from kgate.core.errors import ParseError
from kgate.facts.ptx import is_global_access, is_mma, parse_ptx
from kgate.facts.ptxas_log import parse_ptxas_log
from kgate.facts.sass import local_in_loops, parse_sass


def test_block_scaled_mma_is_counted_by_full_opcode() -> None:
    facts = parse_ptx((DATA / "mxfp8_tile.sm_120a.ptx").read_text())
    entry = facts.entry()
    assert facts.target == "sm_120a"
    assert entry.name == "mxfp8_tile"
    opcode = "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e4m3.f32.ue8m0"
    assert entry.mma == {opcode: 64}


def test_load_before_wait_is_an_unwaited_access_with_its_source_line() -> None:
    entry = parse_ptx((DATA / "pdl_load_before_wait.sm_120a.ptx").read_text()).entry()
    assert entry.has_wait
    assert entry.unwaited_accesses
    first = entry.unwaited_accesses[0]
    assert first.opcode.startswith("ld.global")
    assert first.loc is not None and first.loc.file.endswith("pdl.py") and first.loc.line == 17


def test_wait_first_leaves_no_unwaited_access() -> None:
    entry = parse_ptx((DATA / "pdl_wait_first.sm_120a.ptx").read_text()).entry()
    assert entry.has_wait and entry.has_launch_dependents
    assert entry.global_accesses > 0
    assert entry.unwaited_accesses == ()


def test_wait_under_a_branch_does_not_protect_the_join() -> None:
    text = (DATA / "pdl_wait_under_branch.sm_120a.ptx").read_text()
    entry = parse_ptx(text).entry()
    # In text order the wait comes before every load; only the CFG sees the skipped path.
    wait_line = next(i for i, line in enumerate(text.splitlines(), 1) if "griddepcontrol.wait" in line)
    assert all(a.ptx_line > wait_line for a in entry.unwaited_accesses)
    assert entry.unwaited_accesses


CFG_CASES = {
    "straight wait": ("griddepcontrol.wait;\n ld.global.u32 %r1, [%rd1];\n ret;", 0),
    "predicated wait": ("@%p1 griddepcontrol.wait;\n ld.global.u32 %r1, [%rd1];\n ret;", 1),
    "loop back edge": ("$L1:\n ld.global.u32 %r1, [%rd1];\n griddepcontrol.wait;\n @%p1 bra $L1;\n ret;", 1),
    "both arms wait": ("@%p1 bra $A;\n griddepcontrol.wait;\n bra.uni $J;\n$A:\n griddepcontrol.wait;\n"
                       "$J:\n st.global.u32 [%rd1], %r1;\n ret;", 0),
    "one arm waits": ("@%p1 bra $J;\n griddepcontrol.wait;\n$J:\n st.global.u32 [%rd1], %r1;\n ret;", 1),
    "return before access": ("@%p1 bra $W;\n ret;\n$W:\n griddepcontrol.wait;\n ld.global.nc.u32 %r1, [%rd1];\n"
                             " ret;", 0),
    "shared and param are not global": ("ld.param.u64 %rd1, [p];\n ld.shared.u32 %r1, [%r2];\n ret;", 0),
    "generic load may be global": ("ld.u32 %r1, [%rd1];\n griddepcontrol.wait;\n ret;", 1),
    "cp.async reads global": ("cp.async.ca.shared.global [%r1], [%rd1], 16;\n griddepcontrol.wait;\n ret;", 1),
}


@pytest.mark.parametrize("name", sorted(CFG_CASES))
def test_pdl_control_flow(name: str) -> None:
    body, expected = CFG_CASES[name]
    ptx = f".version 8.7\n.target sm_120a\n.address_size 64\n.visible .entry k(\n.param .u64 p\n)\n{{\n{body}\n}}\n"
    assert len(parse_ptx(ptx).entry().unwaited_accesses) == expected


def test_a_call_to_a_function_that_touches_global_memory_counts() -> None:
    ptx = (".version 8.7\n.target sm_120a\n.address_size 64\n"
           ".func helper(.param .b64 p)\n{\n ld.global.u32 %r1, [%rd1];\n ret;\n}\n"
           ".visible .entry k()\n{\n call.uni helper, (%rd1);\n griddepcontrol.wait;\n ret;\n}\n")
    assert len(parse_ptx(ptx).entry("k").unwaited_accesses) == 1


def test_bare_target_is_read_as_written() -> None:
    assert parse_ptx((DATA / "plain.compute_120.ptx").read_text()).target == "sm_120"


def test_text_that_is_not_ptx_is_a_parse_error() -> None:
    with pytest.raises(ParseError):
        parse_ptx("hello world")


def test_opcode_classes() -> None:
    assert is_mma("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32")
    assert is_mma("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16")
    assert not is_mma("wgmma.fence.sync.aligned")
    assert is_global_access("st.global.v4.b32")
    assert is_global_access("atom.global.add.f32")
    assert not is_global_access("ld.shared.v2.b32")
    assert not is_global_access("st.local.u32")


def test_triton_ptxas_log() -> None:
    entries = parse_ptxas_log((DATA / "mxfp8_tile.sm_120a.ptxas.log").read_text())
    assert list(entries) == ["mxfp8_tile"]
    res = entries["mxfp8_tile"]
    assert res.arch == "sm_120a"
    assert res.registers > 0 and res.spill_stores == 0


def test_nvcc_ptxas_log_with_spills_and_two_entries() -> None:
    entries = parse_ptxas_log((DATA / "nvcc_spill.sm_120a.ptxas.log").read_text())
    assert set(entries) == {"_Z12plain_kernelPKfPfi", "_Z12spill_kernelPKfPfi"}
    spill = entries["_Z12spill_kernelPKfPfi"]
    assert (spill.registers, spill.spill_stores, spill.spill_loads, spill.stack_frame) == (64, 1564, 2792, 1384)
    plain = entries["_Z12plain_kernelPKfPfi"]
    assert (plain.registers, plain.spill_stores) == (10, 0)


def test_a_long_run_of_digits_costs_linear_time() -> None:
    """A log line of 200,000 digits (a corrupted or hostile log) parses at once, and the lines around it as ever.
    Every figure is matched from the first digit of a number only: matched from any digit, each of the run's
    digits scanned the rest of the run, minutes for this line (seconds for a 5,000-digit one)."""
    import signal

    def stop(_signum: int, _frame: object) -> None:
        raise TimeoutError("parse_ptxas_log is not linear in the length of a line")

    text = (DATA / "mxfp8_tile.sm_120a.ptxas.log").read_text()
    digits = "9" * 200_000
    hostile = "\n".join([digits, digits + " bytes smem", f"{digits} bytes stack frame, 1", text])
    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(60)
    try:
        entries = parse_ptxas_log(hostile)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert entries == parse_ptxas_log(text)


def test_log_without_register_line_is_an_error() -> None:
    with pytest.raises(ParseError):
        parse_ptxas_log("ptxas info    : Compiling entry function 'k' for 'sm_120a'\n")


def test_sass_counts_block_scaled_mma_and_pdl_wait() -> None:
    mx = parse_sass((DATA / "mxfp8_tile.sm_120a.sass").read_text())["mxfp8_tile"]
    assert any(op.startswith(("QMMA", "OMMA")) for op in mx.mma)
    assert not any(op.startswith("HMMA") for op in mx.mma)
    pdl = parse_sass((DATA / "pdl_wait_first.sm_120a.sass").read_text())["wait_first"]
    assert pdl.count("ACQBULK") == 1
    assert pdl.global_loads


def test_local_memory_counts_only_inside_a_backward_branch() -> None:
    # nvcc's output for fixtures/rules/KG109: the histogram's stack array is zeroed and summed outside the
    # loop (many STL.128 and LDL.128) and read and written once per iteration inside it.
    text = (DATA / "local_memory_in_loop.sm_120a.sass").read_text()
    inside = local_in_loops(text)
    local = parse_sass(text)["histogram_local"]
    assert inside["histogram_local"].in_loops == (1, 1)
    assert local.count("STL") + local.count("LDL") > 2  # the rest is outside the loop
    # The shared-memory twin has loops but no local memory; the idle `BRA` to itself after EXIT is no loop.
    assert inside["histogram_shared"].in_loops == (0, 0)
    idle = local_in_loops("Function : f\n  /*0000*/  STL [R1], RZ ;\n  /*0010*/  BRA 0x10;\n")
    assert idle["f"].in_loops == (0, 0) and idle["f"].total == (0, 1)


def test_readers_of_two_modules_in_turn_each_read_their_own() -> None:
    """A module's readers (the statements, the entry headers, the call graph) blank its comments in turn, and the
    last module blanked is kept for them; the SASS readers likewise share the last listing's functions. Two modules
    read in turn, again and again, each read as itself."""
    from kgate.facts.ptx import entry_headers
    from kgate.facts.ptx_text import code

    first = ('.version 8.7\n.target sm_120a\n// .visible .entry ghost() {\n.visible .entry real(.param .u64 p)\n{\n'
             '\tld.param.u64 %rd1, [p];\n\tld.global.u32 %r1, [%rd1];\n\tret;\n}\n')
    second = first.replace("real(", "other(").replace("\tld.global.u32 %r1, [%rd1];\n", "")
    for _ in range(2):
        assert [(e.name, e.global_accesses) for e in parse_ptx(first).entries] == [("real", 1)]
        assert list(entry_headers(second)) == ["other"]
        assert [(e.name, e.global_accesses) for e in parse_ptx(second).entries] == [("other", 0)]
    blanked = code(first)
    assert code(blanked) == blanked and "ghost" not in blanked and code(first) == blanked
    looped = local_in_loops("Function : f\n  /*0000*/  STL [R1], RZ ;\n  /*0010*/  BRA 0x0;\n")
    straight = "Function : g\n  /*0000*/  STL [R1], RZ ;\n  /*0010*/  EXIT ;\n"
    for _ in range(2):
        assert local_in_loops(straight)["g"].in_loops == (0, 0)
        assert parse_sass(straight).keys() == {"g"}
        assert looped == local_in_loops("Function : f\n  /*0000*/  STL [R1], RZ ;\n  /*0010*/  BRA 0x0;\n")
    assert looped["f"].in_loops == (0, 1)  # (LDL, STL)
