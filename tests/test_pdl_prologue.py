"""pdl-missing-wait (KG107) on PDL prologues: what a PDL kernel does before `griddepcontrol.wait`.

A write before the wait races the kernel before and is an error; a load there is a warning that names the kernel
argument it reads, as the source names it (Triton's Python parameter, a CUDA kernel's declared parameter), unless
the project declares that argument safe for the kernel (`safe_arguments`); `strict` makes every access an error.
The kernels are fixtures/rules/KG107's, as the real compilers built them (its facts.json); the argument each
access reads comes from the PTX dataflow (kgate.facts.dataflow), tested here on PTX written to show each step.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import replace
from typing import Any

import pytest
import rules_harness as harness
from report_helpers import parse_command, validate_sarif

from kgate import rules as registry
from kgate.collect.cuda_names import global_parameters
from kgate.compile.triton_backend import passed
from kgate.core.errors import ConfigError
from kgate.core.findings import Finding, Severity
from kgate.core.result import Result
from kgate.core.selection import build_selection
from kgate.evaluate import compiled as evaluate
from kgate.facts.ptx import parse_ptx, writes_global
from kgate.report import github_report, json_report, junit_report, sarif_report, terminal

FOLDER = harness.RULES / "KG107"
ASK = "is it written by the kernel before this one?"
RACE = "can race the kernel before this one"
UNTRACED = "a global load whose address kgate cannot trace to an argument"


def findings(**options: Any) -> dict[str, list[Finding]]:
    """The folder's KG107 findings by kernel (its function name), with its options changed by `options`."""
    config, _selection = harness.project(FOLDER)
    configured = {**config.options.get("pdl-missing-wait", {}), **options}
    config = replace(config, options={**config.options, "pdl-missing-wait": configured})
    out: dict[str, list[Finding]] = {}
    for f in evaluate.compiled(harness.compile_run(harness.read_facts(FOLDER)), build_selection(config)):
        out.setdefault((f.kernel or "").split(":")[-1], []).append(f)
    return out


def one(found: dict[str, list[Finding]], kernel: str) -> Finding:
    """The finding a kernel has on every target: the same severity and message on each."""
    reports = found[kernel]
    assert {(f.severity, f.message) for f in reports} == {(reports[0].severity, reports[0].message)}, reports
    return reports[0]


def test_a_load_before_the_wait_is_a_warning_that_names_the_argument_it_reads() -> None:
    found = findings()
    load = one(found, "load_before_wait")
    assert load.severity is Severity.WARNING and "`x` by " in load.message and ASK in load.message
    prologue = one(found, "prologue_undeclared")
    assert prologue.severity is Severity.WARNING
    assert "`w` by " in prologue.message and "`idx` by " in prologue.message and "`x`" not in prologue.message
    # Declared `w` and `idx` are not reported; the producer's `x`, read before the wait there, is.
    late = one(found, "prologue_declared_but_x")
    assert late.severity is Severity.WARNING and "`x` by " in late.message and "`w`" not in late.message


def test_the_argument_is_named_as_the_source_declares_it_in_cuda() -> None:
    found = findings()
    cuda = one(found, "pdl_prologue_loads")
    assert cuda.severity is Severity.WARNING and "`w_ptr` by `ld.global.nc.f32` at pdl_prologue.cu:" in cuda.message
    assert "`idx` by " in cuda.message and "at pdl_prologue.cu:" in cuda.message
    # A parameter list a macro writes is not the PTX's: no name is guessed for the load of the pair's second.
    macro = one(found, "pdl_parameters_from_a_macro")
    assert "`the kernel's parameter 1` by " in macro.message and "`out`" not in macro.message


def test_a_load_in_a_called_function_is_traced_to_the_kernels_argument() -> None:
    found = findings()
    helper = one(found, "producer_in_a_helper")
    assert helper.severity is Severity.WARNING and "`x` by `ld.global.b32` in `_scale` at " in helper.message
    assert any("in `_scale` loads `x`" in r.message for r in helper.related)
    # The same helper handed declared weights, in Triton and in CUDA, is reported by nothing.
    assert "prologue_in_a_helper" not in found and "pdl_prologue_in_a_helper" not in found


def test_a_write_before_the_wait_is_an_error_whatever_it_loads() -> None:
    found = findings()
    for kernel, what in (("store_before_wait", "`out`"), ("atomic_before_wait", "`counter`"),
                         ("wait_under_branch", "`out`"), ("pdl_store_before_wait", "`out`")):
        error = one(found, kernel)
        assert error.severity is Severity.ERROR and RACE in error.message and what in error.message, error.message
        assert ASK not in error.message


def test_a_pointer_read_from_memory_is_said_to_be_untraced() -> None:
    found = findings()
    for kernel in ("pointer_from_a_table", "pdl_pointer_from_a_table"):
        untraced = one(found, kernel)
        assert untraced.severity is Severity.WARNING and UNTRACED in untraced.message, untraced.message
        assert "`tables`" not in untraced.message  # declared: its own load is not reported


def test_good_twins_and_a_kernel_not_launched_with_pdl_are_reported_by_nothing() -> None:
    found = findings()
    for kernel in ("wait_first", "not_pdl", "prologue_declared", "prologue_in_a_helper", "pdl_prologue_declared",
                   "pdl_prologue_in_a_helper"):
        assert kernel not in found, found.get(kernel)


def test_without_declarations_the_twins_are_warnings_naming_what_they_load() -> None:
    found = findings(safe_arguments={})
    assert "`w` by " in one(found, "prologue_declared").message and "`idx` by " in one(found, "prologue_declared").message
    assert "`w` by " in one(found, "prologue_in_a_helper").message
    assert "`w_ptr` by " in one(found, "pdl_prologue_in_a_helper").message
    assert "`tables` by " in one(found, "pdl_pointer_from_a_table").message


def test_strict_makes_every_access_before_the_wait_an_error_but_keeps_the_declarations() -> None:
    found = findings(strict=True)
    assert found and all(f.severity is Severity.ERROR for reports in found.values() for f in reports)
    assert "prologue_declared" not in found and "pdl_prologue_declared" not in found
    assert "(strict)" in one(found, "load_before_wait").message and ASK not in one(found, "load_before_wait").message


@pytest.mark.parametrize("key", ["pdl_missing_wait:prologue_undeclared", "prologue_undeclared", "prologue_un*",
                                 "pdl_missing_wait:*"])
def test_a_kernel_is_declared_by_its_name_its_function_name_or_a_glob(key: str) -> None:
    found = findings(safe_arguments={key: ["w", "idx"]})
    assert "prologue_undeclared" not in found


@pytest.mark.parametrize(("options", "words"), [
    ({"safe_arguments": {"k": "w"}}, "options.pdl-missing-wait.safe_arguments.k: must be a list"),
    ({"safe_arguments": {"k": [1]}}, "options.pdl-missing-wait.safe_arguments.k: every item must be a string"),
    ({"safe_arguments": ["w"]}, "options.pdl-missing-wait.safe_arguments: must be a table"),
    ({"strict": "yes"}, "options.pdl-missing-wait.strict: must be true or false"),
])
def test_options_of_the_wrong_shape_are_one_line_naming_the_key(options: dict[str, Any], words: str) -> None:
    with pytest.raises(ConfigError, match="^" + words.replace(".", r"\.")):
        registry.load("KG107").resolve_options(options)


def test_every_report_format_gives_a_load_a_warning_and_a_write_an_error() -> None:
    reported = [f for reports in findings().values() for f in reports]
    result = Result("check", reported)
    levels = {(f.kernel, f.target): f.severity.value for f in reported}
    data = json.loads(json_report.render(result))
    assert {(f["kernel"], f["target"]): f["severity"] for f in data["findings"]} == levels
    sarif = sarif_report.to_dict(result)
    validate_sarif(sarif)
    assert sorted(r["level"] for r in sarif["runs"][0]["results"]) == sorted(levels.values())
    commands = [parse_command(line)[0] for line in github_report.render(result).splitlines()
                if line.startswith("::") and not line.startswith("::notice")]
    assert sorted(commands) == sorted(levels.values())
    failures = ET.fromstring(junit_report.render(result).encode()).iter("failure")
    assert sorted(f.get("type") for f in failures) == sorted(f"{level} KG107" for level in levels.values())
    summary = terminal.summary_line(result)
    assert f"{sum(v == 'error' for v in levels.values())} errors" in summary
    assert f"{sum(v == 'warning' for v in levels.values())} warnings" in summary


# --------------------------------------------------------------------------- the dataflow, on PTX written for it

PTX = """\
.version 8.7
.target sm_120a
.address_size 64

.func  (.param .b32 func_retval0) inner(
	.param .b64 inner_param_0
)
{
	.reg .b64 	%rd<3>;
	.reg .f32 	%f<2>;
	ld.param.u64 	%rd1, [inner_param_0];
	ld.global.f32 	%f1, [%rd1+4];
	st.param.f32 	[func_retval0+0], %f1;
	ret;
}

.func  (.param .b32 func_retval0) outer(
	.param .b64 outer_param_0,
	.param .b64 outer_param_1
)
{
	.reg .b64 	%rd<4>;
	.reg .f32 	%f<2>;
	ld.param.u64 	%rd1, [outer_param_0];
	ld.param.u64 	%rd2, [outer_param_1];
	{
	.param .b64 param0;
	st.param.b64 	[param0+0], %rd2;
	.param .b32 retval0;
	call.uni (retval0), inner, (param0);
	ld.param.f32 	%f1, [retval0+0];
	}
	st.param.f32 	[func_retval0+0], %f1;
	ret;
}

.visible .entry k(
	.param .u64 k_param_0,
	.param .u64 k_param_1,
	.param .u64 k_param_2,
	.param .u64 k_param_3,
	.param .u32 k_param_4
)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<4>;
	.reg .f32 	%f<6>;
	.reg .b64 	%rd<20>;
	ld.param.u64 	%rd1, [k_param_0];
	ld.param.u64 	%rd2, [k_param_1];
	ld.param.u64 	%rd3, [k_param_2];
	ld.param.u64 	%rd4, [k_param_3];
	ld.param.u32 	%r1, [k_param_4];
	cvta.to.global.u64 	%rd5, %rd1;
	mov.u32 	%r2, %tid.x;
	mad.wide.s32 	%rd6, %r2, 4, %rd5;
	ld.global.nc.f32 	%f1, [%rd6];
	mul.wide.s32 	%rd7, %r1, 8;
	add.s64 	%rd8, %rd2, %rd7;
	ld.global.u64 	%rd9, [%rd8];
	ld.global.f32 	%f2, [%rd9];
	setp.eq.s32 	%p1, %r2, 0;
	selp.b64 	%rd10, %rd1, %rd3, %p1;
	ld.global.f32 	%f3, [%rd10];
	cp.async.ca.shared.global 	[%r3], [%rd3], 16;
	{
	.param .b64 param0;
	st.param.b64 	[param0+0], %rd5;
	.param .b64 param1;
	st.param.b64 	[param1+0], %rd4;
	.param .b32 retval0;
	call.uni (retval0), outer, (param0, param1);
	ld.param.f32 	%f4, [retval0+0];
	}
	add.s64 	%rd11, %rd4, 16;
	cp.async.bulk.global.shared::cta.bulk_group 	[%rd11], [%r3], 128;
	red.global.add.f32 	[%rd11], %f1;
	griddepcontrol.wait;
	ret;
}
"""


def test_each_access_is_traced_to_the_parameters_its_address_points_into() -> None:
    entry = parse_ptx(PTX).entry("k")
    traced = [(a.opcode, a.via, a.writes, a.arguments) for a in entry.unwaited_accesses]
    assert traced == [
        ("ld.global.nc.f32", (), False, (0,)),  # cvta then mad.wide: the pointer is the addend
        ("ld.global.u64", (), False, (1,)),  # a pointer plus a scaled integer argument: the pointer's
        ("ld.global.f32", (), False, ()),  # through the pointer it loaded: traced to none
        ("ld.global.f32", (), False, (0, 2)),  # selp of two arguments: either
        ("cp.async.ca.shared.global", (), False, (2,)),  # a copy into shared memory reads its second address
        ("ld.global.f32", ("outer", "inner"), False, (3,)),  # two calls down, the second argument of the first
        ("cp.async.bulk.global.shared::cta.bulk_group", (), True, (3,)),  # a copy into global memory writes it
        ("red.global.add.f32", (), True, (3,)),
    ]


@pytest.mark.parametrize(("opcode", "writes"), [
    ("ld.global.v4.b32", False), ("ld.u32", False), ("st.global.b32", True), ("atom.global.add.u32", True),
    ("red.global.add.f32", True), ("cp.async.ca.shared.global", False), ("cp.async.bulk.prefetch.L2.global", False),
    ("cp.async.bulk.global.shared::cta.bulk_group", True), ("cp.reduce.async.bulk.global.shared::cta.add.f32", True),
    ("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes", False),
    ("tex.2d.v4.f32.f32", False), ("sust.b.2d.b32.trap", True), ("wmma.store.d.sync.aligned.row.m16n16k16.f32",
                                                                 True), ("multimem.ld_reduce.global.add.f32", False),
])
def test_what_writes_global_memory(opcode: str, writes: bool) -> None:
    assert writes_global(opcode) is writes


def test_a_cuda_kernels_parameters_are_named_as_its_declaration_writes_them() -> None:
    text = """\
struct Args { const float* w; };
template <typename T, int N>
__global__ void __launch_bounds__(128) k(const T* __restrict__ w_ptr, int, float out[], Args a = {},
                                         const float* const* tables /* pointers */, float*) {}
__global__ void none(void) {}
#define PAIR const float* a, const float* b
__global__ void macro(PAIR, float* out) {}
"""
    assert global_parameters(text) == {3: ("w_ptr", "", "out", "a", "tables", ""), 5: (), 7: ("", "out")}


def test_a_triton_kernels_parameters_are_its_run_time_ones_in_order_up_to_a_descriptor() -> None:
    signature = {"x": "*fp32", "BLOCK": "constexpr", "n": "i32", "scale": "fp32", "desc": "tensordesc<fp16[64, 64]>",
                 "out": "*fp16"}
    assert passed(signature) == ["x", "n", "scale"]
