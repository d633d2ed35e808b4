"""The CUDA source and build rules (KG301-KG303) beyond their planted cases: messages, options, identities.

tests/test_rules.py compares each folder fixtures/rules/KG30x/ with its inline expectations; these pin what
the findings say and how the rules' options move them. Every run goes through the lint engine, as
`kgate lint` runs the rules.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from rules_harness import RULES, linted

from kgate import rules as registry
from kgate.collect.cpp_text import blank
from kgate.core.findings import Finding, Severity

CODES = ("KG301", "KG302", "KG303")


def run_rule(code: str, options: dict[str, Any] | None = None) -> list[tuple[str, Finding]]:
    """(file name, finding) of one rule on its folder, with `options` configured for it."""
    name = registry.load(code).name
    findings, _suppressed = linted(RULES / code, {name: options} if options else None)
    return [(f.path, f) for f in findings]


def discriminator(finding: Finding) -> str:
    return finding.identity.split("|", 1)[1]


def scope(finding: Finding) -> str:
    return finding.identity.split("|", 1)[0]


@pytest.mark.parametrize("code", CODES)
def test_every_rule_is_registered_and_documented(code: str) -> None:
    rule = registry.load(code)
    assert rule.layer == "cuda" and rule.files and rule.prefilter
    for section in ("## What it does", "## Why is this bad?", "## Example", "## Use instead", "## Options"):
        assert section in rule.doc, (code, section)


def test_arch_target_says_what_is_lost_and_how_to_spell_the_fix() -> None:
    reports = {(path, r.line): r for path, r in run_rule("KG301")}
    cmake = reports[("CMakeLists.txt", 8)]
    assert "`120`" in cmake.message and "block-scaled MMA" in cmake.message and "120a" in cmake.message
    assert "wgmma" in reports[("CMakeLists.txt", 9)].message
    assert "tcgen05" in reports[("build.sh", 3)].message
    torch = reports[("setup.py", 6)]
    assert "`12.0`" in torch.message and "12.0a" in torch.message


def test_arch_target_flags_both_bare_names_of_a_gencode_pair() -> None:
    on_line = sorted(discriminator(r) for path, r in run_rule("KG301") if (path, r.line) == ("CMakeLists.txt", 10))
    assert on_line == ["compute_120", "sm_120"]


def test_family_target_is_allowed_by_default_and_reported_on_request() -> None:
    assert not any("120f" in r.message for _p, r in run_rule("KG301"))
    warned = [(p, r) for p, r in run_rule("KG301", options={"family": "warn"}) if "120f" in r.message]
    assert [(p, r.line, discriminator(r), r.severity.value) for p, r in warned] == [
        ("CMakeLists.txt", 16, "compute_120f", "warning"), ("CMakeLists.txt", 16, "sm_120f", "warning"),
        ("cutlass3/setup.py", 8, "compute_120f", "warning")]
    # The real target of a family gencode is the family build too: warned with it, never reported as bare.
    assert ("cutlass3/setup.py", 8, "sm_120", "warning") in [
        (p, r.line, discriminator(r), r.severity.value) for p, r in run_rule("KG301", options={"family": "warn"})]
    assert "__CUDA_ARCH_FEAT_SM120_ALL" in warned[0][1].message


def test_arch_target_names_the_arch_specific_code_that_makes_a_bare_target_wrong() -> None:
    reports = {(path, r.line, discriminator(r)): r for path, r in run_rule("KG301")}
    assert "`hopper_gemm.cuh` uses `wgmma`" in reports[("CMakeLists.txt", 9, "90-real")].message
    nested = reports[("portable/hopper/setup.py", 6, "sm_90")]
    assert "`gemm.cu` uses `SM90_64x128x16_F32BF16BF16_SS`" in nested.message and nested.severity is Severity.ERROR


def test_a_portable_bare_target_is_quiet_by_default_and_a_note_on_request() -> None:
    assert not [r for path, r in run_rule("KG301") if path == "portable/setup.py"]
    notes = [(r.line, discriminator(r), r.severity) for path, r in run_rule("KG301", options={"portable": "note"})
             if path == "portable/setup.py"]
    assert notes == [(6, "compute_90", Severity.NOTE), (6, "sm_90", Severity.NOTE),
                     (6, "compute_120", Severity.NOTE), (6, "sm_120", Severity.NOTE), (7, "100", Severity.NOTE)]
    # The CuTe DSL attribute is no build flag, with either setting.
    assert not [p for p, _r in run_rule("KG301", options={"portable": "note"}) if p == "portable/dsl_kernel.py"]


def test_a_bare_target_verdict_follows_the_sources_it_read_not_the_cache(tmp_path: Path) -> None:
    """The verdict on a build file reads its sources: editing only a source must change it on a warm run."""
    from kgate.core.config import load_config
    from kgate.core.selection import build_selection
    from kgate.pipeline.lint import run_lint

    shutil.copytree(RULES / "KG301" / "portable", tmp_path / "portable", ignore=shutil.ignore_patterns("hopper"))
    (tmp_path / "kgate.toml").write_text('select = ["KG301"]\n')
    config = load_config(tmp_path / "kgate.toml")
    selection = build_selection(config)
    assert run_lint(config, selection).findings == []
    kernel = tmp_path / "portable" / "plain.cu"
    kernel.write_text(kernel.read_text() + 'asm volatile("setmaxnreg.inc.sync.aligned.u32 240;");\n')
    warm = run_lint(config, selection)
    assert sorted((f.path, f.line, discriminator(f)) for f in warm.findings) == [
        ("portable/setup.py", 6, "compute_120"), ("portable/setup.py", 6, "compute_90"),
        ("portable/setup.py", 6, "sm_120"), ("portable/setup.py", 6, "sm_90"), ("portable/setup.py", 7, "100")]


@pytest.mark.parametrize(("family", "spelling"), [
    ("90", b"wgmma.mma_async.sync.aligned"), ("90", b"setmaxnreg.inc"), ("90", b"#if __CUDA_ARCH_FEAT_SM90_ALL"),
    ("90", b"CUTLASS_ARCH_MMA_SM90A_ENABLED"), ("90", b"cute::SM90_64x128x16_F32BF16BF16_RS<"),
    ("100", b"tcgen05.mma.cta_group::1"), ("100", b"UTCMMA"), ("100", b"__CUDA_ARCH_FEAT_SM100_ALL"),
    ("100", b"CUTLASS_ARCH_MMA_SM100A_ENABLED"), ("100", b"SM100_MMA_F16BF16_SS"), ("100", b"SM100_TMEM_LOAD_32dp32b1x"),
    ("120", b"mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X"),
    ("120", b"kind::mxf4nvf4"), ("120", b"__CUDA_ARCH_FEAT_SM120_ALL"), ("120", b"CUTLASS_ARCH_MMA_SM120A_ENABLED"),
    ("120", b"cute::SM120_16x8x64_TN_VS<float_e2m1_t"), ("120", b"using ArchTag = cutlass::arch::Sm120;"),
    ("100", b"typename ArchTag = cutlass::arch::Sm100>"), ("90", b"cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp"),
])
def test_arch_specific_spellings_match_and_pass_the_byte_prefilter(family: str, spelling: bytes) -> None:
    import re

    from kgate.hardware.arch_features import ARCH_SPECIFIC_CODE, ARCH_SPECIFIC_NEEDLES

    assert re.search(ARCH_SPECIFIC_CODE[family], spelling)
    assert any(needle in spelling for needle in ARCH_SPECIFIC_NEEDLES[family])


@pytest.mark.parametrize("portable", [b"cute::SM90_TMA_LOAD", b"cp.async.bulk.tensor.2d", b"int block_scale = 4;",
                                      b"mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32", b"GMMA::Major::K",
                                      b"cute::SM120_16x8x32_TN<float_e4m3_t", b"cutlass::arch::Sm80"])
def test_code_the_bare_targets_assemble_is_no_arch_specific_code(portable: bytes) -> None:
    import re

    from kgate.hardware.arch_features import ARCH_SPECIFIC_CODE

    assert not any(re.search(pattern, portable) for pattern in ARCH_SPECIFIC_CODE.values())


def test_a_launch_in_a_macro_no_use_of_which_checks_is_one_finding_naming_each_use() -> None:
    reports = {(p, r.line): r for p, r in run_rule("KG302")}
    zero = reports[("launches_in_macros.cu", 30)]
    assert [(r.path, r.line) for r in zero.related] == [("launches_in_macros.cu", 32),
                                                        ("launches_in_macros.cu", 33)]
    assert "none of its 2 call(s) through `LAUNCH_ZERO`" in zero.message and zero.fix is None
    assert reports[("launches_in_macros.cu", 26)].message.startswith("`LAUNCH_FILL` launches `fill`")


def test_launch_guard_counts_macro_launches_in_one_note_when_asked() -> None:
    assert not [r for _p, r in run_rule("KG302") if r.severity is Severity.NOTE]
    notes = [(p, r) for p, r in run_rule("KG302", options={"macros": "note"}) if r.severity is Severity.NOTE]
    assert [(p, n.line, n.severity.value) for p, n in notes] == [("launches_in_macros.cu", 56, "note")]
    assert notes[0][1].message.startswith("1 kernel launch(es) inside #define macros not checked (no use")


def test_launch_guard_window_and_macros_are_options() -> None:
    wide = {(p, r.line) for p, r in run_rule("KG302", options={"window": 6})}
    assert ("launches.cu", 24) not in wide  # the late check is within 6 lines
    configured = {(p, r.line) for p, r in run_rule("KG302", options={"check_macros": ["EXTERNAL_LAUNCH_CHECK"]})}
    assert ("launches_wrapped_checks.cu", 24) not in configured  # a macro defined outside the project
    # torch's launch checks are known by name whatever the option says: their definitions are not the project's.
    strict = {(p, r.line) for p, r in run_rule("KG302", options={"check_macros": []})}
    assert ("launches.cu", 19) not in strict and ("project/checked_by_functions.cu", 38) not in strict


def test_launch_guard_identity_is_the_function_and_kernel_not_the_line() -> None:
    scopes = sorted((scope(r), discriminator(r)) for p, r in run_rule("KG302")
                    if r.severity is Severity.ERROR and p == "launches.cu")
    assert scopes == [("check_comes_after_a_return", "scale"), ("launch_ex", "scale"), ("unchecked", "scale")]


def test_an_unchecked_call_is_identified_by_its_function_and_the_lambda_or_helper_it_calls() -> None:
    calls = sorted((scope(r), discriminator(r), r.message.split(" and ")[0]) for p, r in run_rule("KG302")
                   if p == "launches_through_calls.cu" and "this call of it" in r.message)
    assert calls == [("chain_unchecked", "fill_both", "`fill_both` launches `fill`"),
                     ("helper_called_without_a_check", "zero_async", "`zero_async` launches `fill`"),
                     ("lambda_with_an_unchecked_call", "launch", "`launch` launches `fill`")]


def test_a_launch_no_call_checks_is_one_finding_naming_every_call_also_in_other_files() -> None:
    reports = {(p, r.line): r for p, r in run_rule("KG302") if r.severity is Severity.ERROR}
    switch = reports[("launches_through_calls.cu", 233)]
    assert [(r.path, r.line) for r in switch.related] == [("launches_through_calls.cu", 237),
                                                          ("launches_through_calls.cu", 238)]
    assert "none of its 2 call(s) through `launch`" in switch.message
    exported = reports[("project/scale_launch.cu", 10)]
    assert [(r.path, r.line) for r in exported.related] == [("project/pipeline.cu", 20)]
    # The calls are related places of the launch's finding, not findings of their own.
    assert not {key for key in reports if key in {("launches_through_calls.cu", 237), ("project/pipeline.cu", 20)}}


def test_kernel_file_size_counts_code_lines_only() -> None:
    reports = run_rule("KG303")
    assert [(p, r.value) for p, r in reports] == [("big_kernel.cu", 601)]
    small = (RULES / "KG303" / "small_kernel.cu").read_text()
    assert len(small.splitlines()) > 1000  # long on disk, short in code
    tighter = dict(run_rule("KG303", options={"max_lines": 599}))
    assert tighter["small_kernel.cu"].value == 600


@pytest.mark.parametrize(("configured", "runs"), [
    ("", False), ('select = ["KG3"]', True), ('select = ["ALL"]', True), ('extend-select = ["kernel-file-size"]', True),
    ('select = ["KG302"]\nextend-select = ["KG303"]', True), ('select = ["KG30"]\nignore = ["KG303"]', False)])
def test_kernel_file_size_runs_only_when_a_configuration_names_it(tmp_path: Path, configured: str,
                                                                  runs: bool) -> None:
    from kgate.core.config import load_config
    from kgate.core.selection import build_selection
    from kgate.pipeline.lint import run_lint

    shutil.copy(RULES / "KG303" / "big_kernel.cu", tmp_path / "big_kernel.cu")
    (tmp_path / "kgate.toml").write_text(configured + "\n")
    config = load_config(tmp_path / "kgate.toml")
    selection = build_selection(config)
    assert selection.active("KG303") is runs
    assert selection.active("KG302")  # the other rules run as before
    found = run_lint(config, selection, None, use_cache=False).findings
    assert ("KG303" in {f.code for f in found}) is runs


def test_blanking_keeps_lines_and_hides_comments_and_strings() -> None:
    text = 'a<<<1,1>>>(x); // b<<<1,1>>>(y);\n"c<<<1,1>>>(z)"; /* d\n<<< */ R"(e<<<)"\n'
    code = blank(text).code
    assert code.count("\n") == text.count("\n") and len(code) == len(text)
    assert code.count("<<<") == 1


def test_arch_target_finds_by_substring_every_line_its_pattern_matches() -> None:
    """KG301 picks its candidate lines by plain substring search before its regular expression: that must keep
    every line the expression matches, whatever line breaks the file uses, and number them as `splitlines`."""
    import random

    from rules.cuda import arch_target

    pieces = ["-gencode", "--generate-code", "-arch", "--gpu-architecture", "-code", "--gpu-code", "arch=",
              "code=", "self.arch=", "CUDA_ARCHITECTURES", "CUDA_ARCH", "TORCH_CUDA_ARCH_LIST", "NVCC", "nvcc",
              "cuda_cflags", "sm_120", "x", " ", "=", ".", "-", "ar", "ch", "co", "de", "NV", "CC", "#"]
    breaks = ["\n", "\r\n", "\r", "\x0c", "\x1d", "\u2028", "\x85"]
    rng = random.Random(7)
    for _ in range(300):
        text = "".join(rng.choice(pieces) if rng.random() < 0.8 else rng.choice(breaks)
                       for _ in range(rng.randrange(0, 60)))
        expected = [(n, line) for n, line in enumerate(text.splitlines(), 1) if arch_target._CONTEXT.search(line)]
        found = arch_target.flag_lines(text)
        assert set(expected) <= set(found), text
        assert all(line == text.splitlines()[n - 1] for n, line in found), text
