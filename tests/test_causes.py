"""One cause, one finding: register-ceiling (KG102), spill (KG103) and local-memory-in-loop (KG109) of one kernel
variant are reported as one finding, the root cause, with the others as its related places (kgate.evaluate.causes).

The kernels are the rule folders' (fixtures/rules/KG102, KG103, KG109) as their recorded facts give them: a GEMM
tile at the register cap that spills inside its main loop, a tile that spills far below the ceiling, and a stack
array that does not spill. What the rules report apart comes from kgate's own evaluation (`evaluate.compiled`),
what a run reports from the check pipeline's assembly, so each test compares the two on the same facts.
"""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest
import rules_harness as harness
from report_helpers import parse_command, validate_sarif

from kgate.core.findings import Finding, Severity
from kgate.core.result import Result
from kgate.core.selection import build_selection
from kgate.evaluate import causes
from kgate.evaluate import compiled as evaluate
from kgate.ratchet.baseline import Baseline
from kgate.ratchet.compare import RunState, Scope, compare
from kgate.ratchet.update import repin
from kgate.report import github_report, json_report, junit_report, sarif_report, terminal

CHAIN = ("KG102", "KG103", "KG109")
Row = tuple[str, str, str]


def apart(folder: Path, codes: tuple[str, ...] = ()) -> list[Finding]:
    """What the rules report on the folder's facts, each on its own (no folding): those the folder selects, or
    `codes`."""
    config, _selection = harness.project(folder)
    config = replace(config, select=codes or config.select, extend_select=())
    return evaluate.compiled(harness.compile_run(harness.read_facts(folder)), build_selection(config))


def by_row(findings: list[Finding]) -> dict[Row, list[Finding]]:
    out: dict[Row, list[Finding]] = {}
    for f in findings:
        out.setdefault((f.kernel or "", f.variant or "", f.target or ""), []).append(f)
    return out


def folded_rows(folder: Path) -> list[tuple[list[Finding], Finding]]:
    """(what the rules report apart, the one finding the run reports) for each variant with two or more."""
    raw, run = by_row(apart(folder)), by_row(harness.checked(folder))
    return [(parts, run[row][0]) for row, parts in raw.items() if len(parts) > 1]


def test_a_tile_at_the_cap_is_one_finding_the_register_ceiling_carrying_its_spill_and_local_memory() -> None:
    rows = folded_rows(harness.RULES / "KG102")
    assert rows, "the folder's tile at the cap no longer spills in a loop: record its facts again"
    for parts, one in rows:
        ceiling = next(p for p in parts if p.code == "KG102")
        assert [f.code for f in by_row(harness.checked(harness.RULES / "KG102"))[
            (one.kernel or "", one.variant or "", one.target or "")]] == ["KG102"]
        assert one.folded == tuple(p.code for p in parts if p.code != "KG102")
        # The root's identity and baseline key, its own message first, the worst severity of the parts.
        assert (one.identity, one.baseline_key) == (ceiling.identity, ceiling.baseline_key)
        assert one.message.startswith(ceiling.message)
        assert one.severity is min((p.severity for p in parts), key=lambda s: s.rank)
        told = [r.message for r in one.related]
        for part in parts:
            if part.code != "KG102":
                assert f"{part.code} {part.severity.value} {part.name}: {part.message}" in told
                assert part.code in one.message


def test_a_spill_below_the_ceiling_is_the_root_of_its_local_memory() -> None:
    rows = folded_rows(harness.RULES / "KG103")
    assert rows
    for parts, one in rows:
        assert {p.code for p in parts} == {"KG103", "KG109"}
        assert one.code == "KG103" and one.folded == ("KG109",)


def test_local_memory_of_a_variant_that_does_not_spill_keeps_its_own_finding() -> None:
    """A stack array indexed at run time is not a spill: nothing causes its KG109, whatever else is selected."""
    raw = apart(harness.RULES / "KG109", CHAIN)
    assert {f.code for f in raw} == {"KG109"}
    assert causes.folded(raw) == raw and all(not f.folded for f in raw)


def test_a_part_suppressed_on_its_own_is_no_part_and_a_suppressed_root_leaves_the_next_cause_the_root(
        tmp_path: Path) -> None:
    folder = tmp_path / "KG102"
    shutil.copytree(harness.RULES / "KG102", folder)
    rows = folded_rows(folder)
    kernel = rows[0][1].kernel or ""
    source = folder / "register_ceiling.py"
    text = source.read_text()
    head = f"def {kernel.split(':')[1]}("
    start = text.index(head)
    end = text.index("\n", start)
    line = text[start:end].split("  # expect:")[0]
    source.write_text(text[:start] + line + "  # kgate: ignore[KG102] the tile is pinned on purpose" + text[end:])
    found = by_row(harness.checked(folder))
    for parts, one in rows:
        row = (one.kernel or "", one.variant or "", one.target or "")
        left = [f for f in found.get(row, ()) if f.code != "KG002"]
        assert [(f.code, f.folded) for f in left] == [("KG103", tuple(p.code for p in parts if p.code == "KG109"))]
    assert not [f for f in harness.checked(folder) if f.code == "KG002"]  # the directive is used


def test_every_report_format_shows_the_folded_finding_once() -> None:
    folder = harness.RULES / "KG102"
    findings = harness.checked(folder)
    kernels = harness.compile_run(harness.read_facts(folder)).facts
    one = next(f for f in findings if f.folded)
    result = Result("check", findings, kernels)
    counts = {s: sum(f.severity is s for f in findings) for s in Severity}
    assert f"{counts[Severity.ERROR]} error" in terminal.summary_line(result)
    text = terminal.render(result, table=False).splitlines()
    at = next(i for i, line in enumerate(text) if one.message in line)
    assert text[at + 1:at + 1 + len(one.related)] == [f"    {r.place}: {r.message}" for r in one.related]
    assert sum(one.kernel in line and one.target in line for line in text if not line.startswith("    ")) == 1
    data = json.loads(json_report.render(result))
    assert [f["folded"] for f in data["findings"] if f["folded"]] == [list(one.folded)]
    assert data["summary"]["findings"] == len(findings)
    sarif = sarif_report.to_dict(result)
    validate_sarif(sarif)
    results = sarif["runs"][0]["results"]
    assert len(results) == len(findings)
    carried = [r for r in results if r["properties"].get("folded")]
    assert [(r["ruleId"], r["properties"]["folded"], len(r["relatedLocations"])) for r in carried] == [
        (one.code, list(one.folded), len(one.related))]
    suites = ET.fromstring(junit_report.render(result).encode())
    assert sum(1 for _ in suites.iter("failure")) == len(findings)
    annotations = [parse_command(line) for line in github_report.render(result).splitlines()
                   if line.startswith("::") and not line.startswith("::notice")]
    assert len(annotations) == len(findings)
    assert sum(one.related[0].message in message for _c, _p, message in annotations) == 1


def state(findings: list[Finding], folder: Path) -> RunState:
    kernels = harness.compile_run(harness.read_facts(folder)).facts
    scope = Scope(compiled=True, targets=frozenset({k.target for k in kernels}), codes=frozenset(CHAIN),
                  compiled_codes=frozenset(CHAIN))
    return RunState(kernels, findings, {"triton": "3.9.0"}, scope, fail_on=Severity.WARNING)


def test_a_baseline_of_the_parts_apart_still_passes_and_update_leaves_the_root_pinned_once() -> None:
    folder = harness.RULES / "KG102"
    before = repin(Baseline(), state(apart(folder), folder), accept_new=True).baseline
    now = state(harness.checked(folder), folder)
    one = next(f for f in now.findings if f.folded)
    result = compare(before, now)
    assert not result.failures and one in result.baselined
    gone = [d for d in result.differences if d.kind == "GONE"]
    assert sorted(d.subject for d in gone) == sorted(one.folded_keys)
    assert all(not d.fails and one.baseline_key in d.detail for d in gone)
    update = repin(before, now, accept_new=False)
    assert set(one.folded_keys).isdisjoint(update.baseline.findings) and one.baseline_key in update.baseline.findings
    assert sorted(line.split()[1].rstrip(":") for line in update.changes if "reported inside" in line) == sorted(
        one.folded_keys)
    assert not update.refused
    assert compare(update.baseline, now).differences == []


def test_a_pin_of_a_part_alone_accepts_the_finding_it_is_folded_into_and_update_moves_it() -> None:
    """The root was below fail-on when the baseline was written (a register ceiling made a note): only its spill
    was pinned. Folded, the finding takes the spill's severity and keeps the root's key."""
    folder = harness.RULES / "KG102"
    raw = [f if f.code != "KG102" else replace(f, severity=Severity.NOTE) for f in apart(folder)]
    before = repin(Baseline(), state(raw, folder), accept_new=True).baseline
    now = state(causes.folded(raw), folder)
    one = next(f for f in now.findings if f.folded)
    assert one.severity is not Severity.NOTE and one.baseline_key not in before.findings
    result = compare(before, now)
    assert not result.failures and one in result.baselined
    update = repin(before, now, accept_new=False)
    assert one.baseline_key in update.baseline.findings and not update.refused
    assert compare(update.baseline, now).failures == []


def test_a_figure_a_folded_part_measures_is_said_on_the_finding_that_carries_it() -> None:
    folder = harness.RULES / "KG102"
    now = state(harness.checked(folder), folder)
    one = next(f for f in now.findings if f.folded)
    key = f"{one.kernel}|{one.variant}|{one.target}"
    pinned = repin(Baseline(), now, accept_new=True).baseline
    pinned.kernels[key] = {**pinned.kernels[key], "spill_bytes": 0}
    pinned.findings.clear()  # the finding is reported (new), so what it is about is said on it
    result = compare(pinned, now)
    # register-ceiling measures registers; the spill folded into it measures spill bytes.
    assert f"spill_bytes 0 -> {now.kernel_metrics()[key]['spill_bytes']}" in [
        d.detail for d in result.standing.get(one, ())]
    assert all("spill_bytes" not in d.detail for d in result.unattached)


@pytest.mark.parametrize("code", ["KG102", "KG103", "KG109"])
def test_every_cause_a_rule_declares_is_a_compiled_rule_before_it_in_the_chain(code: str) -> None:
    from kgate import rules as registry

    for cause in registry.load(code).caused_by:
        assert registry.load(cause).layer == "compiled" and CHAIN.index(cause) < CHAIN.index(code)
