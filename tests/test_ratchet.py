"""The ratchet: baseline file, two-way comparison, re-pinning.

Unit tests drive the comparison with kernel facts that differ in one number;
end-to-end tests compile a real kernel, edit its source to make it worse or
better, and run the command line against the pinned baseline.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import DATA, copy_project, kgate

from kgate.core.config import Config
from kgate.core.errors import BaselineError
from kgate.core.findings import Finding, Severity
from kgate.core.selection import build_selection
from kgate.evaluate import compiled as evaluate
from kgate.facts.model import CompileFailure, KernelFacts, Resources
from kgate.facts.ptx import parse_ptx
from kgate.facts.run import CompileRun
from kgate.pipeline.check import CheckOptions, assemble
from kgate.ratchet.baseline import HEADER, Baseline, Pin, load, parse, render, save
from kgate.ratchet.compare import RunState, Scope, compare
from kgate.ratchet.update import repin

ENTRY = parse_ptx((DATA / "pdl_wait_first.sm_120a.ptx").read_text()).entry()
SCOPE = Scope(compiled=True, targets=frozenset({"sm_120a"}), codes=frozenset({"KG102", "KG103", "KG303"}),
              compiled_codes=frozenset({"KG102", "KG103"}), source=True)


def facts(kernel: str = "pkg.k:gemm", registers: int = 248, spill: int = 0, target: str = "sm_120a") -> KernelFacts:
    return KernelFacts(kernel=kernel, variant="BM=128,warps=8,stages=3", target=target, language="triton",
                       path="pkg/k.py", line=10, kind="gemm", num_warps=8, num_stages=3, expect=(), pdl=False,
                       ptx_target=target, entry=ENTRY,
                       resources=Resources(registers, spill, spill, spill, 0, 32768))


def ceiling(k: KernelFacts) -> Finding:
    return Finding(path=k.path, line=k.line, col=0, code="KG102", name="register-ceiling", severity=Severity.ERROR,
                   message=f"{k.resources.registers} registers", kernel=k.kernel, variant=k.variant,
                   target=k.target, identity=f"{k.kernel}|{k.variant}|{k.target}")


def state(kernels: list[KernelFacts], findings: list[Finding] | None = None, scope: Scope = SCOPE,
          toolchain: dict[str, str] | None = None) -> RunState:
    if findings is None:
        findings = [ceiling(k) for k in kernels if k.resources.registers >= 240]
    return RunState(kernels, findings, toolchain or {"triton": "3.9.0"}, scope)


def pinned(kernels: list[KernelFacts], **kwargs: object) -> Baseline:
    return repin(Baseline(), state(kernels, **kwargs), accept_new=True).baseline  # type: ignore[arg-type]


def kinds(result: object) -> list[tuple[str, bool]]:
    return [(d.kind, d.fails) for d in result.differences]  # type: ignore[attr-defined]


def test_same_state_passes_and_accepts_the_pinned_findings() -> None:
    base = pinned([facts()])
    result = compare(base, state([facts()]))
    assert result.differences == [] and result.active == [] and len(result.baselined) == 1


def test_worse_metric_fails_with_old_and_new_values() -> None:
    result = compare(pinned([facts(registers=248)]), state([facts(registers=252)]))
    assert kinds(result) == [("WORSE", True)]
    assert "registers 248 -> 252" in str(result.differences[0])


def test_new_finding_fails_and_stays_active() -> None:
    base = pinned([facts(registers=100)])
    now = state([facts(registers=100), facts(kernel="pkg.k:other", registers=250)])
    result = compare(base, now)
    assert ("NEW", True) in kinds(result)
    assert [f.kernel for f in result.active] == ["pkg.k:other"]


def spill(k: KernelFacts) -> Finding:
    return replace(ceiling(k), code="KG103", name="spill", severity=Severity.WARNING,
                   message=f"{k.resources.spill_stores} bytes spill stores")


def occupancy(k: KernelFacts) -> Finding:
    return replace(ceiling(k), code="KG105", name="occupancy", severity=Severity.WARNING, message="2 warps")


def said(result: object) -> dict[str, list[str]]:
    """What each reported finding says of the baseline, by rule code: its differences' kinds and details."""
    return {f.code: [f"{d.kind} {d.detail}" for d in result.standing.get(f, ())]  # type: ignore[attr-defined]
            for f in result.active}  # type: ignore[attr-defined]


def test_a_difference_a_reported_finding_says_is_on_that_finding_and_no_line_of_its_own() -> None:
    # A kernel new to the baseline that spills at the ceiling: its two findings say so; occupancy does not.
    new = facts(kernel="pkg.k:new", registers=250, spill=64)
    result = compare(pinned([facts(registers=100)]),
                     state([facts(registers=100), new], findings=[ceiling(new), spill(new), occupancy(new)]))
    kernel_new = "NEW at-risk kernel not in the baseline (registers 250, spill_bytes 64, stack_bytes 64, smem_bytes 32768)"
    assert said(result) == {"KG102": ["NEW 1 finding(s), 0 pinned", kernel_new], "KG103": [kernel_new], "KG105": []}
    assert result.unattached == []
    # A pinned kernel that spills more: on the spill finding; the registers, which no reported finding measures
    # (the ceiling is pinned and accepted), keep a line of their own.
    before, after = facts(registers=250, spill=16), facts(registers=252, spill=64)
    base = pinned([before], findings=[ceiling(before), spill(before)])
    result = compare(base, state([after], findings=[ceiling(after), spill(after)]))
    assert said(result) == {"KG103": ["WORSE spill_bytes 16 -> 64", "WORSE stack_bytes 16 -> 64"]}
    assert [str(d) for d in result.unattached] == [f"WORSE     {SUBJECT}: registers 250 -> 252"]
    assert len(result.differences) == 3  # `kgate baseline update` still sees every one


SUBJECT = "pkg.k:gemm|BM=128,warps=8,stages=3|sm_120a"


def test_improved_fails_two_way_and_is_accepted_with_tighten() -> None:
    base = pinned([facts(registers=250)])
    now = state([facts(registers=244)])
    assert kinds(compare(base, now)) == [("IMPROVED", True)]
    assert kinds(compare(base, now, mode="tighten")) == [("IMPROVED", False)]


def test_gone_finding_and_kernel_fail_two_way() -> None:
    base = pinned([facts(registers=250)])
    result = compare(base, state([facts(registers=120)]))
    assert ("GONE", True) in kinds(result)  # the register-ceiling finding disappeared
    assert ("IMPROVED", True) in kinds(result)
    vanished = compare(base, state([]))
    assert sorted(kinds(vanished)) == [("GONE", True), ("GONE", True)]
    assert all(not d.fails for d in compare(base, state([]), mode="tighten").differences)


def test_partial_run_says_nothing_about_what_it_did_not_cover() -> None:
    base = pinned([facts(registers=250), facts(kernel="pkg.k:other", registers=250)])
    only_one = replace(SCOPE, kernels=frozenset({"pkg.k:gemm"}))
    result = compare(base, state([facts(registers=250)], scope=only_one))
    assert result.differences == []
    other_target = replace(SCOPE, targets=frozenset({"sm_90a"}))
    assert compare(base, state([], scope=other_target)).differences == []


def test_a_kernel_that_failed_to_compile_is_not_reported_gone() -> None:
    base = pinned([facts(registers=250)])
    failed = replace(SCOPE, failed=frozenset({"pkg.k:gemm"}))
    result = compare(base, state([], findings=[], scope=failed))
    assert [d for d in result.differences if d.subject.startswith("pkg.k:gemm|")] == []


def gated(tmp_path: Path, kernels: list[KernelFacts], failures: list[CompileFailure]) -> RunState:
    """The ratchet's view of a whole `kgate check` whose compile gave these facts and failures."""
    config = Config(root=tmp_path)
    selection = build_selection(config)
    compiled = CompileRun(facts=kernels, failures=failures, toolchain={"triton": "3.9.0"})
    return assemble(config, selection, CheckOptions(), compiled, evaluate.compiled(compiled, selection), None,
                    covered=frozenset(), shard_names=None).state


def cuda(registers: int = 250) -> KernelFacts:
    return replace(facts(kernel="spill_kernel", registers=registers), variant="csrc/spill.cu", language="cuda",
                   path="csrc/spill.cu")


def test_a_compile_failure_never_drops_a_pin_nor_is_pinned(tmp_path: Path) -> None:
    # Pinned while everything compiled: a Triton and a CUDA kernel, each with its KG102 finding.
    base = repin(Baseline(), gated(tmp_path, [facts(), cuda()], []), accept_new=True).baseline
    assert len(base.kernels) == 2 and len(base.findings) == 2
    # Then neither compiles (a compiler timeout, a full cache disk): a CUDA failure is its file's.
    failures = [CompileFailure("pkg.k:gemm", "BM=128,warps=8,stages=3", "sm_120a", "pkg/k.py", 10, "timed out"),
                CompileFailure("csrc/spill.cu", "", "sm_120a", "csrc/spill.cu", 1, "No space left on device")]
    now = gated(tmp_path, [], failures)
    for accept_new in (False, True):
        outcome = repin(base, now, accept_new=accept_new)
        assert outcome.baseline.kernels == base.kernels and outcome.baseline.findings == base.findings
        assert not [line for line in outcome.changes if "removed" in line or "KG001" in line], outcome.changes
        assert len(outcome.failing) == 2 and all("KG001|" in line for line in outcome.failing)
    # The check: the failures fail the run as errors; no pin of theirs is reported gone.
    result = compare(base, now)
    assert sorted(f.code for f in result.active) == ["KG001", "KG001"] and result.differences == []


def test_a_pinned_compile_failure_accepts_nothing_and_update_removes_it(tmp_path: Path) -> None:
    failure = CompileFailure("pkg.k:gemm", "BM=128,warps=8,stages=3", "sm_120a", "pkg/k.py", 10, "internal error")
    now = gated(tmp_path, [], [failure])
    [error] = now.findings
    base = Baseline({"triton": "3.9.0"}, findings={error.baseline_key: Pin(1)})  # an older kgate pinned it
    result = compare(base, now)
    assert result.active == [error] and result.baselined == [] and result.differences == []
    outcome = repin(base, now, accept_new=True)
    assert outcome.baseline.findings == {} and outcome.failing
    assert outcome.changes == [f"removed   {error.baseline_key}: a kernel that does not compile is never pinned"]


def test_toolchain_change_is_one_line_and_follows_the_policy() -> None:
    base = pinned([facts(registers=248)])
    later = state([facts(registers=250)], toolchain={"triton": "3.10.0"})
    fail = compare(base, later, toolchain_policy="fail")
    assert kinds(fail)[0] == ("TOOLCHAIN", True)
    assert "triton 3.9.0 -> 3.10.0" in fail.differences[0].detail
    warn = compare(base, later, toolchain_policy="warn")
    assert kinds(warn) == [("TOOLCHAIN", False), ("WORSE", False)]
    assert kinds(compare(base, later, toolchain_policy="compare")) == [("TOOLCHAIN", False), ("WORSE", True)]


def size_finding(lines: int, count: int = 1) -> list[Finding]:
    return [Finding(path="csrc/big.cu", line=1, col=0, code="KG303", name="kernel-file-size",
                    severity=Severity.ERROR, message=f"{lines} code lines", identity="csrc/big.cu", value=lines)
            for _ in range(count)]


def test_size_pins_have_slack_so_small_growth_needs_no_repin() -> None:
    base = repin(Baseline(), state([], findings=size_finding(812)), accept_new=True, slack=10).baseline
    assert base.findings["KG303|csrc/big.cu|csrc/big.cu"] == Pin(1, 820)
    assert compare(base, state([], findings=size_finding(818)), slack=10).differences == []
    grown = compare(base, state([], findings=size_finding(823)), slack=10)
    assert kinds(grown) == [("WORSE", True)]
    shrunk = compare(base, state([], findings=size_finding(795)), slack=10)
    assert kinds(shrunk) == [("IMPROVED", True)]


def test_repin_records_improvements_but_not_new_debts_without_accept_new() -> None:
    base = pinned([facts(registers=250)])
    better_and_new = state([facts(registers=244), facts(kernel="pkg.k:other", registers=255)])
    outcome = repin(base, better_and_new, accept_new=False)
    assert outcome.baseline.kernels["pkg.k:gemm|BM=128,warps=8,stages=3|sm_120a"]["registers"] == 244
    assert not any(key.startswith("pkg.k:other") for key in outcome.baseline.kernels)
    assert any("pkg.k:other" in line and "--accept-new" in line for line in outcome.refused)
    worse = repin(base, state([facts(registers=255)]), accept_new=False)
    assert worse.baseline.kernels == base.kernels and worse.refused
    accepted = repin(base, better_and_new, accept_new=True)
    assert "pkg.k:other|BM=128,warps=8,stages=3|sm_120a" in accepted.baseline.kernels


def test_repin_of_a_partial_run_keeps_what_it_did_not_cover() -> None:
    base = pinned([facts(registers=250), facts(registers=250, target="sm_90a")])
    sm120_only = state([facts(registers=246)], scope=SCOPE)
    outcome = repin(base, sm120_only, accept_new=False)
    assert outcome.baseline.kernels["pkg.k:gemm|BM=128,warps=8,stages=3|sm_90a"]["registers"] == 250
    assert outcome.baseline.kernels["pkg.k:gemm|BM=128,warps=8,stages=3|sm_120a"]["registers"] == 246


def test_render_is_sorted_stable_and_round_trips() -> None:
    base = pinned([facts(kernel="z.k:last", registers=250), facts(kernel="a.k:first", registers=241)],
                  findings=None)
    base.findings["KG303|csrc/big.cu|csrc/big.cu"] = Pin(1, 820)
    text = render(base)
    assert render(parse(text.encode(), "b.toml")) == text
    kernel_lines = [line for line in text.splitlines() if line.startswith('"') and "registers" in line]
    assert kernel_lines == sorted(kernel_lines) and kernel_lines[0].startswith('"a.k:first')
    assert "|10|" not in text  # no line numbers in keys


BROKEN = {
    "invalid TOML": ('version = 1\n[kernels]\n"a|b|c" = { registers = 1,, }\n', 3),
    "unknown section": ("version = 1\n[kernelz]\n", 2),
    "negative metric": ('version = 1\n[kernels]\n"a|b|sm_120a" = { registers = -1, spill_bytes = 0, '
                        'stack_bytes = 0, smem_bytes = 0 }\n', 3),
    "bad finding key": ('version = 1\n[findings]\n"KG102" = 1\n', 3),
    "zero count": ('version = 1\n[findings]\n"KG102|a.py|x" = 0\n', 3),
    "wrong version": ("version = 7\n", 1),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_hand_broken_baseline_is_an_error_naming_the_line(case: str) -> None:
    text, line = BROKEN[case]
    with pytest.raises(BaselineError) as info:
        parse(text.encode(), "kgate-baseline.toml")
    assert info.value.line == line
    assert str(info.value).startswith(f"kgate-baseline.toml:{line}: ")


def test_non_utf8_baseline_is_an_error() -> None:
    with pytest.raises(BaselineError, match="UTF-8"):
        parse(b'version = 1\n# \xff\xfe\n', "b.toml")


KILL_DURING_WRITE = textwrap.dedent("""
    import os, sys, time
    from kgate.ratchet import baseline as b
    from kgate.compile import cache
    new = b.Baseline(kernels={f"k{i:05d}|v|sm_120a": dict(registers=i, spill_bytes=0, stack_bytes=0, smem_bytes=0)
                              for i in range(20000)})
    real_fsync = os.fsync
    def stall(fd):
        # The whole temporary file is written; announce it and wait to be killed before the rename.
        open(sys.argv[2], "w").close()
        time.sleep(60)
    os.fsync = stall
    b.save(new, __import__("pathlib").Path(sys.argv[1]))
""")


def test_an_update_killed_during_the_write_leaves_the_old_file_whole(tmp_path: Path) -> None:
    target = tmp_path / "kgate-baseline.toml"
    old = pinned([facts(registers=250)])
    save(old, target)
    before = target.read_bytes()
    marker = tmp_path / "written"
    proc = subprocess.Popen([sys.executable, "-c", KILL_DURING_WRITE, str(target), str(marker)])
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)
    assert marker.exists(), "the writer never reached the write"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert target.read_bytes() == before
    assert load(target).kernels == old.kernels
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert leftovers and all(name.startswith(".kgate-baseline.toml.") for name in leftovers)


# --------------------------------------------------------------------------- end to end

HEAVIER = ("    w = v  # the tests load a second row here to raise register pressure\n",
           "    w = tl.load(x + (row + 1) * n_cols + cols, mask=cols < n_cols, other=0.0)\n")


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_project("ratchet", tmp_path_factory.mktemp("ratchet"))


def make_heavier(project: Path) -> None:
    path = project / "rows.py"
    path.write_text(path.read_text().replace(*HEAVIER))


def make_lighter(project: Path) -> None:
    path = project / "rows.py"
    path.write_text(path.read_text().replace(HEAVIER[1], HEAVIER[0]))


def test_end_to_end_pin_regress_refuse_accept_improve(project: Path) -> None:
    baseline = project / "kgate-baseline.toml"
    first = kgate("baseline", "update", cwd=project)
    assert first.code == 1 and "--accept-new" in first.stderr  # new debts are not pinned silently
    pinned_run = kgate("baseline", "update", "--accept-new", cwd=project)
    assert pinned_run.code == 0, pinned_run.stderr
    pinned_bytes = baseline.read_bytes()
    assert b"rows:row_scale" in pinned_bytes and b"rows:copy" not in pinned_bytes

    again = kgate("baseline", "update", "--accept-new", cwd=project)
    assert again.code == 0 and "up to date" in again.stdout
    assert baseline.read_bytes() == pinned_bytes  # re-generation gives identical bytes

    clean = kgate("check", "-q", cwd=project)
    assert clean.code == 0, clean.stdout
    assert "1 baselined" in clean.stdout

    light = _row_scale_registers(baseline)
    make_heavier(project)
    worse = kgate("check", "-q", cwd=project)
    assert worse.code == 1
    heavy = _registers_in(worse.stdout)
    assert heavy > light  # the compiler's own numbers, whatever its version: only the direction is the test's
    step = f"registers {light} -> {heavy}"
    assert any(line.startswith("WORSE") and step in line for line in worse.stdout.splitlines())

    refused = kgate("baseline", "update", cwd=project)
    assert refused.code == 1 and f"{step} (needs --accept-new)" in refused.stderr
    assert baseline.read_bytes() == pinned_bytes

    assert kgate("baseline", "update", "--accept-new", cwd=project).code == 0
    make_lighter(project)
    improved = kgate("check", "-q", cwd=project)
    assert improved.code == 1
    back = f"registers {heavy} -> {light}"
    assert any(line.startswith("IMPROVED") and back in line for line in improved.stdout.splitlines())
    config = project / "kgate.toml"
    original = config.read_text()
    config.write_text('ratchet = "tighten"\n' + original)
    try:
        tightened = kgate("check", "-q", cwd=project)
        assert tightened.code == 0 and "(accepted)" in tightened.stdout
    finally:
        config.write_text(original)
    recorded = kgate("baseline", "update", cwd=project)
    assert recorded.code == 0 and back in recorded.stdout
    assert baseline.read_bytes() == pinned_bytes


def _row_scale_registers(baseline: Path) -> int:
    (pinned,) = [v for k, v in load(baseline).kernels.items() if k.startswith("rows:row_scale|")]
    return pinned["registers"]


def _registers_in(stdout: str) -> int:
    import re

    (line,) = [line for line in stdout.splitlines() if line.startswith("WORSE") and ": registers " in line]
    return int(re.search(r"registers \d+ -> (\d+)", line).group(1))  # type: ignore[union-attr]


def test_end_to_end_toolchain_change_and_broken_baseline(project: Path) -> None:
    baseline = project / "kgate-baseline.toml"
    assert kgate("baseline", "update", "--accept-new", cwd=project).code == 0
    original = baseline.read_text()
    try:
        # Pinned with another Triton only: this toolchain has no pins of its own.
        baseline.write_text(original.replace('"triton" = "', '"triton" = "0.'))
        strict = kgate("check", "-q", cwd=project, env={"CI": "true"})
        assert strict.code == 1
        lines = [line for line in strict.stdout.splitlines() if line.startswith("TOOLCHAIN")]
        assert len(lines) == 1 and "triton 0." in lines[0] and "kgate baseline update" in lines[0]
        local = kgate("check", "-q", cwd=project, env={"CI": ""})  # a contributor's machine
        assert local.code == 0, local.stdout
        assert [line for line in local.stdout.splitlines() if line.startswith("TOOLCHAIN")][0].endswith("(accepted)")
        baseline.write_text(original.replace("registers = ", "registers = x", 1))
        broken = kgate("check", "-q", cwd=project)
        assert broken.code == 2
        assert broken.stderr.startswith("kgate: error: ") and "kgate-baseline.toml:" in broken.stderr
        assert "Traceback" not in broken.stderr
    finally:
        baseline.write_text(original)


def test_end_to_end_a_second_toolchain_gets_pins_of_its_own(project: Path) -> None:
    baseline = project / "kgate-baseline.toml"
    assert kgate("baseline", "update", "--accept-new", cwd=project).code == 0
    other = baseline.read_text().replace('"triton" = "', '"triton" = "0.')  # pins of another Triton only
    baseline.write_text(other)
    update = kgate("baseline", "update", cwd=project)
    assert update.code == 0, update.stdout + update.stderr
    assert "new pins for" in update.stdout and "1 other toolchain(s) kept" in update.stdout
    both = load(baseline)
    assert len(both.sections()) == 2
    old_section = next(s for s in both.sections() if s.versions["triton"].startswith("0."))
    assert old_section == next(s for s in parse(other.encode(), "x").sections())  # untouched
    assert kgate("check", "-q", cwd=project, env={"CI": "true"}).code == 0  # this toolchain is pinned now
    again = kgate("baseline", "update", cwd=project)
    assert again.code == 0 and "up to date" in again.stdout


def test_a_version_1_baseline_reads_as_one_toolchains_pins() -> None:
    text = b'''version = 1

[toolchain]
"triton" = "3.9.0"

[kernels]
"pkg.k:gemm|BM=128|sm_120a" = { registers = 248, spill_bytes = 0, stack_bytes = 0, smem_bytes = 32768 }

[findings]
"KG102|pkg/k.py|pkg.k:gemm|BM=128|sm_120a" = 1
"KG201|pkg/k.py|tuned|x" = 1
'''
    old = parse(text, "kgate-baseline.toml")
    assert old.toolchain == {"triton": "3.9.0"} and list(old.kernels) == ["pkg.k:gemm|BM=128|sm_120a"]
    rendered = render(old)
    assert rendered.startswith(HEADER) and "version = 2" in rendered
    # The source finding is shared; the compiled one belongs to the toolchain.
    shared, section = rendered.split("[[toolchain]]")
    assert "KG201" in shared and "KG102" not in shared and "KG102" in section
    assert parse(rendered.encode(), "x") == old


def test_end_to_end_partial_run_does_not_report_others_gone(project: Path) -> None:
    assert kgate("baseline", "update", "--accept-new", cwd=project).code == 0
    only_copy = kgate("check", "-q", "--kernel", "rows:copy", cwd=project)
    assert only_copy.code == 0 and "GONE" not in only_copy.stdout
    partial_update = kgate("baseline", "update", "--kernel", "rows:copy", cwd=project)
    assert partial_update.code == 0 and "up to date" in partial_update.stdout
    assert "rows:row_scale" in (project / "kgate-baseline.toml").read_text()


def test_no_baseline_flag_ignores_the_file(project: Path) -> None:
    assert kgate("baseline", "update", "--accept-new", cwd=project).code == 0
    assert kgate("check", "-q", "--no-baseline", cwd=project).code == 1
    assert os.path.exists(project / "kgate-baseline.toml")


# --------------------------------------------------------------------------- one line per finding

PRINTS = ("    tl.store(out + offs, tl.load(x + offs, mask=offs < n), mask=offs < n)\n",
          '    tl.device_print("offs", offs)\n    tl.store(out + offs, tl.load(x + offs, mask=offs < n), mask=offs < n)\n')
KIND_WORDS = ("TOOLCHAIN", "NEW", "WORSE", "IMPROVED", "GONE")


@pytest.fixture(scope="module")
def regressed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ratchet fixture pinned, then made worse: a device print (a new source finding, an error) and a second
    row loaded in the pinned kernel, which spills at the register cap (its spill is the pinned register ceiling's:
    folded into that finding, which the baseline accepts, it is said by the kernel's worse figures)."""
    project = copy_project("ratchet", tmp_path_factory.mktemp("regressed"))
    assert kgate("baseline", "update", "--accept-new", cwd=project).code == 0
    make_heavier(project)
    path = project / "rows.py"
    assert PRINTS[0] in path.read_text()
    path.write_text(path.read_text().replace(*PRINTS))
    return project


def finding_lines(stdout: str, f: dict) -> list[str]:
    """The terminal lines of a finding of the JSON report."""
    head = f"{f['path']}:{f['line']}" + (f":{f['col']}" if f["col"] else "") + f": {f['code']} {f['severity']} "
    return [line for line in stdout.splitlines() if line.startswith(head) and f["message"] in line]


def standing_words(f: dict) -> str:
    """What the terminal line of a finding says of the baseline, from its JSON record's `ratchet`."""
    kinds = [d["kind"] for d in f["ratchet"]]
    worse = ", ".join(d["detail"] for d in f["ratchet"] if d["kind"] == "WORSE")
    return "; ".join(part for part in ("new" if "NEW" in kinds else "",
                                       f"worse than baseline: {worse}" if worse else "") if part)


def test_a_regression_is_one_line_per_finding_with_the_ratchet_word_on_it(regressed: Path) -> None:
    run = kgate("check", cwd=regressed)
    data = kgate("check", "--format", "json", cwd=regressed).json()
    assert run.code == 1 and data["summary"]["exit_code"] == 1
    found = {f["code"]: f for f in data["findings"]}
    row_scale = next(k for k in data["kernels"] if k["kernel"] == "rows:row_scale")
    # What the test is about: a new error, and figures that got worse (the pins read 0 spills) of a kernel whose
    # findings the baseline accepts: its spill is no finding of its own but part of its pinned register ceiling's.
    assert row_scale["spill_bytes"] > 0, "the heavier kernel is expected to spill"
    assert [d["kind"] for d in found["KG204"]["ratchet"]] == ["NEW"] and found["KG204"]["severity"] == "error"
    assert "KG103" not in found and "KG102" not in found
    subject = f"rows:row_scale|{row_scale['variant']}|sm_120a"
    assert f"WORSE     {subject}: spill_bytes 0 -> {row_scale['spill_bytes']}" in run.stdout.splitlines()
    for f in data["findings"]:
        (line,) = finding_lines(run.stdout, f)  # one line each
        words = standing_words(f)
        assert (f" {f['name']} ({words}): " if words else f" {f['name']}: ") in line, line
    # The lines of their own: exactly the differences no finding says, and none of those a finding says.
    own = [line for line in run.stdout.splitlines() if line.split(" ", 1)[0] in KIND_WORDS]
    assert sorted(own) == sorted(f"{d['kind']:<9} {d['subject']}: {d['detail']}" for d in data["ratchet"]), own
    on_findings = {(d["kind"], d["subject"], d["detail"]) for f in data["findings"] for d in f["ratchet"]}
    assert on_findings and not on_findings & {(d["kind"], d["subject"], d["detail"]) for d in data["ratchet"]}
    assert not [line for line in own if "KG204|" in line]
    # The summary counts each finding once, and the ratchet's failures that are lines of their own.
    errors = sum(f["severity"] == "error" for f in data["findings"])
    warnings = [f for f in data["findings"] if f["severity"] == "warning"]
    by_ratchet = sum(any(d["fails"] for d in f["ratchet"]) for f in warnings)
    summary = run.stdout.splitlines()[-1]
    failing = f" ({by_ratchet} failing the ratchet)" if by_ratchet else ""
    assert f", {errors} error{'s' if errors != 1 else ''}, {len(warnings)} warning{'s' if len(warnings) != 1 else ''}" \
           f"{failing}, " in summary, summary
    assert f"{sum(d['fails'] for d in data['ratchet'])} ratchet failure(s))" in summary, summary


def test_a_regression_in_the_machine_formats_is_one_result_per_finding(regressed: Path) -> None:
    from report_helpers import parse_command, validate_sarif

    data = kgate("check", "--format", "json", cwd=regressed).json()
    findings, own = data["findings"], data["ratchet"]
    said = {f["code"]: standing_words(f) for f in findings}
    # GitHub: an annotation per finding, the ratchet's word in its title; one per difference no finding says.
    commands = [parse_command(line) for line in kgate("check", "--format", "github", cwd=regressed).stdout.splitlines()
                if line.startswith("::")]
    titles = [c[1]["title"] for c in commands[1:]]
    assert len(titles) == len(findings) + len(own), titles
    for f in findings:
        title = f"{f['code']} {f['name']}" + (f" ({said[f['code']]})" if said[f["code"]] else "")
        assert titles.count(title) == 1, (title, titles)
    assert sorted(t for t in titles if t.startswith("kgate baseline ")) == sorted(f"kgate baseline {d['kind']}"
                                                                                for d in own)
    # SARIF: a result per finding, its state against the baseline as `baselineState`; notifications for the rest.
    sarif = json.loads(kgate("check", "--format", "sarif", cwd=regressed).stdout)
    validate_sarif(sarif)
    results = {r["ruleId"]: r for r in sarif["runs"][0]["results"]}
    assert len(results) == len(sarif["runs"][0]["results"]) == len(findings)
    assert results["KG204"]["baselineState"] == "new" and "KG103" not in results  # the spill: in a pinned finding
    assert {code: r["properties"].get("ratchet", "") for code, r in results.items()} == said
    notes = [n for n in sarif["runs"][0]["invocations"][0]["toolExecutionNotifications"]
             if n["message"]["text"].startswith("baseline: ")]
    assert len(notes) == len(own)
    # JUnit: a failing case per finding, the word in its failure; the baseline suite holds only the others.
    root = ET.fromstring(kgate("check", "--format", "junit", cwd=regressed).stdout.encode())
    suite = next(s for s in root.findall("testsuite") if s.get("name") == "kgate-baseline.toml")
    assert int(suite.get("tests")) == len(own)
    failures = {c.get("name").split(":")[0]: c.find("failure").get("message") for s in root.findall("testsuite")
                if s is not suite for c in s.findall("testcase") if c.find("failure") is not None}
    assert {code: failures[f"{code} {f['name']}"] for code, f in ((f["code"], f) for f in findings)} == \
        {f["code"]: f["message"] + (f" ({said[f['code']]})" if said[f["code"]] else "") for f in findings}


def test_a_kernel_new_to_the_baseline_is_said_on_the_findings_that_put_it_at_risk(regressed: Path,
                                                                                  tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(regressed, project, symlinks=True)
    path = project / "kgate-baseline.toml"
    baseline = load(path)
    for table in (baseline.kernels, baseline.findings):
        for key in [key for key in table if "rows:row_scale|" in key]:
            del table[key]
    save(baseline, path)
    run = kgate("check", cwd=project)
    data = kgate("check", "--format", "json", cwd=project).json()
    assert run.code == 1
    assert not [d for d in data["ratchet"] if "rows:row_scale|" in d["subject"]], data["ratchet"]
    assert "rows:row_scale|" not in "".join(line for line in run.stdout.splitlines()
                                            if line.split(" ", 1)[0] in KIND_WORDS)
    on_kernel = {f["code"]: f for f in data["findings"] if f["kernel"] == "rows:row_scale"}
    # The ceiling (an error, new itself) carrying its spill puts the kernel at risk; occupancy measures no pinned
    # figure.
    assert {code: {d["kind"] for d in f["ratchet"]} for code, f in on_kernel.items()} == \
        {"KG102": {"NEW"}, "KG105": set()}
    assert on_kernel["KG102"]["folded"] == ["KG103"]
    (line,) = finding_lines(run.stdout, on_kernel["KG102"])
    assert f" {on_kernel['KG102']['name']} (new): " in line, line


# --------------------------------------------------------------------------- baselines of older variant names


def test_a_baseline_pinned_before_variants_named_their_specialisation_migrates() -> None:
    from kgate.ratchet.migrate import migrate

    now = replace(facts(), variant="BM=128,warps=8,stages=3,bf16#1a2b3c4d")
    old = pinned([facts()])  # the name kgate used to give this variant
    assert list(old.kernels) == ["pkg.k:gemm|BM=128,warps=8,stages=3|sm_120a"]
    migrated, renamed = migrate(old, {now.key})
    assert renamed == 2  # the pinned kernel and its finding
    assert list(migrated.kernels) == ["pkg.k:gemm|BM=128,warps=8,stages=3,bf16#1a2b3c4d|sm_120a"]
    assert compare(migrated, state([now])).differences == []
    # Two variants the old name could stand for: nothing is guessed; the old pins read as gone.
    other = replace(now, variant="BM=128,warps=8,stages=3,fp16#5e6f7a8b")
    unchanged, renamed = migrate(old, {now.key, other.key})
    assert renamed == 0 and unchanged.kernels == old.kernels
    # A longer old name is not a prefix of a shorter variant's: BM=12 does not stand for BM=128.
    assert migrate(pinned([replace(facts(), variant="BM=12")]), {now.key})[1] == 0


def test_one_baseline_update_renames_an_old_baseline_and_check_passes_before_and_after(tmp_path: Path) -> None:
    project = copy_project("ratchet", tmp_path)
    assert kgate("baseline", "update", "--accept-new", cwd=project).code == 0
    path = project / "kgate-baseline.toml"
    pinned_now = load(path)
    assert pinned_now.kernels, "the fixture pins at least one at-risk kernel"
    # Write it back the way an older kgate named variants: without pointee types and tag.
    old = Baseline(pinned_now.toolchain, {_old_name(k): v for k, v in pinned_now.kernels.items()},
                   {_old_name(k): v for k, v in pinned_now.findings.items()})
    save(old, path)
    check = kgate("check", cwd=project)
    assert check.code == 0, check.stdout + check.stderr
    assert "name variants as kgate did before" in check.stdout
    update = kgate("baseline", "update", cwd=project)
    assert update.code == 0, update.stdout + update.stderr
    assert "renamed" in update.stdout
    assert load(path).kernels == pinned_now.kernels and load(path).findings == pinned_now.findings
    after = kgate("check", cwd=project)
    assert after.code == 0 and "name variants as kgate did before" not in after.stdout


def _old_name(key: str) -> str:
    import re

    return re.sub(r"(,[a-z0-9+]+)?#[0-9a-f]{8}(?=\|)", "", key)


def test_baseline_keys_are_the_same_on_another_machine(tmp_path: Path) -> None:
    """Kernels under a python-path entry outside the project and behind a symlinked folder (and CUDA sources
    there) are named by how the project reaches them, never by the absolute place they resolve to: the
    baseline written here holds in a checkout somewhere else."""
    import shutil

    source = textwrap.dedent('''\
        import triton
        import triton.language as tl


        @triton.jit
        def good(x, n, BLOCK: tl.constexpr):
            o = tl.arange(0, BLOCK)
            tl.store(x + o, tl.load(x + o, mask=o < n) * 2.0, mask=o < n)
        ''')
    here = tmp_path / "here"
    (here / "shared").mkdir(parents=True)
    (here / "vendor" / "kern").mkdir(parents=True)
    (here / "shared" / "sk.py").write_text(source)
    (here / "vendor" / "kern" / "lk.py").write_text(source)
    project = here / "project"
    project.mkdir()
    (project / "kern").symlink_to(Path("..") / "vendor" / "kern")
    table = 'signature = { x = "*fp32", n = "i32" }\nconstexprs = { BLOCK = 128 }\n'
    config = ('targets = ["sm_120a"]\npython-path = [".", "../shared"]\n\n[options.register-ceiling]\nthreshold = 1\n'
              f'\n[[triton]]\nkernel = "sk:good"\n{table}\n[[triton]]\nkernel = "kern.lk:good"\n{table}')
    expected = {"../shared/sk.py", "kern/lk.py"}
    if shutil.which("nvcc"):
        (here / "vendor" / "kern" / "twice.cu").write_text("__global__ void twice(float* x) { x[0] *= 2.0f; }\n")
        config += '\n[[cuda]]\nsources = ["kern/*.cu"]\n'
        expected.add("kern/twice.cu")
    (project / "kgate.toml").write_text(config)
    run = kgate("baseline", "update", "--accept-new", cwd=project)
    assert run.code == 0, run.stdout + run.stderr
    pinned = load(project / "kgate-baseline.toml")
    assert {key.split("|")[1] for key in pinned.findings} == expected
    there = tmp_path / "elsewhere" / "checkout"
    shutil.copytree(here, there, symlinks=True)
    run = kgate("check", cwd=there / "project")
    assert run.code == 0, run.stdout + run.stderr


FOREIGN = b'''version = 2

[findings]

[[toolchain]]
versions = { "triton" = "0.0.1" }

[toolchain.kernels]
"x:y|v|sm_120a" = { registers = 250, spill_bytes = 0, stack_bytes = 0, smem_bytes = 0 }

[toolchain.findings]
"KG102|x.py|x:y|v|sm_120a" = 1
'''


def _foreign_table(text: str) -> str:
    """The [[toolchain]] table of Triton 0.0.1, as written."""
    tables = text.split("\n[[toolchain]]\n")
    found = [t for t in tables[1:] if t.startswith('versions = { "triton" = "0.0.1" }')]
    assert len(found) == 1, text
    return found[0]


@pytest.mark.parametrize(("toolchain", "kernels"), [
    ({}, []),  # nothing compiled (a project of CUDA and Python sources that it only lints): no toolchain ran
    ({"cuda.nvcc": "13.0"}, [cuda()]),  # no Triton kernel at all
    ({"triton": "3.9.0", "ptxas-blackwell": "13.0"}, [facts()]),  # a Triton that has no table yet
], ids=["nothing-compiled", "cuda-only", "new-triton"])
def test_an_update_keeps_another_toolchains_pins_byte_for_byte(toolchain: dict[str, str],
                                                              kernels: list[KernelFacts]) -> None:
    old = parse(FOREIGN, "kgate-baseline.toml")
    run = RunState(kernels, [ceiling(k) for k in kernels], toolchain, SCOPE)
    for accept_new in (False, True):
        outcome = repin(old, run, accept_new=accept_new)
        assert _foreign_table(render(outcome.baseline)) == _foreign_table(render(old))
        # Nothing says a pin that is kept was removed.
        assert not [line for line in outcome.changes if line.startswith("removed")], outcome.changes
    gone = [d.subject for d in compare(old, run).differences if d.kind == "GONE"]
    if "triton" in toolchain:
        # Compared with the pins of the closest Triton until its own are made; those leave x:y out, and say so.
        assert gone == ["KG102|x.py|x:y|v|sm_120a", "x:y|v|sm_120a"]
        assert "left out  x:y|v|sm_120a: no longer compiled (still pinned for triton 0.0.1)" in outcome.changes
    else:
        # Another compiler's pins are not this run's to compare: nothing of them is GONE.
        assert gone == []
    if not toolchain:
        assert not repin(old, run, accept_new=True).changed
