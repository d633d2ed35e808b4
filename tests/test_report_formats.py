"""SARIF, GitHub annotations and JUnit on crafted findings: escaping, limits, fingerprints, counts.

The same reporters run on real compiler output in test_report_compiled.py.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import replace

import pytest
from report_helpers import finding, parse_command, validate_sarif

from kgate import rules as registry
from kgate.core.findings import Finding, Related, Severity
from kgate.core.result import Result
from kgate.core.rule import Rule
from kgate.report import escape, github_report, json_report, junit_report, sarif_report, terminal

# A message with everything the annotation syntax uses, and then some.
NASTY = "100% over: a, b\nsecond line\r\nthird :: line, 50%25 <x> & \"q\""
NASTY_PATH = "src/odd,dir:x/100%.py"


def crafted() -> list:
    return [
        finding("KG104", severity=Severity.ERROR, message=NASTY, path=NASTY_PATH, line=7, name="smem-budget"),
        finding("KG103", severity=Severity.WARNING, message="24 bytes spill stores", line=12),
        finding("KG101", severity=Severity.NOTE, message="sm_90a has no block-scaled MMA", target="sm_90a",
                line=12, name="block-scale-missing"),
        finding("KG001", severity=Severity.ERROR, message="cannot import pkg", kernel="pkg.k:broken", variant=None,
                target=None, line=3, name="compile-error"),
        finding("KG104", severity=Severity.ERROR, message="source rule style", kernel=None, variant=None, target=None,
                path="src/a.py", line=5, col=9, end_line=6, end_col=14, name="smem-budget"),
    ]


def result_of(findings: list, command: str = "check") -> Result:
    return Result(command, findings)


# --- SARIF ---

def test_sarif_of_crafted_findings_validates_against_the_official_schema() -> None:
    doc = sarif_report.to_dict(result_of(crafted()))
    validate_sarif(doc)
    results = doc["runs"][0]["results"]
    assert len(results) == 5
    assert {r["level"] for r in results} == {"error", "warning", "note"}
    assert all("suppressions" not in r for r in results)


def test_sarif_leaves_out_suppressed_and_baselined_findings_but_counts_them() -> None:
    result = replace(result_of(crafted()[:2]), baselined=3, suppressed=2)
    doc = sarif_report.to_dict(result)
    validate_sarif(doc)
    assert len(doc["runs"][0]["results"]) == 2
    assert doc["runs"][0]["properties"] == {"baselined": 3, "suppressed": 2}


def test_sarif_levels_regions_and_uris() -> None:
    results = {r["ruleId"] + r["message"]["text"][:6]: r for r in sarif_report.to_dict(result_of(crafted()))
               ["runs"][0]["results"]}
    source = results["KG104source"]
    loc = source["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"] == {"uri": "src/a.py", "uriBaseId": "%SRCROOT%"}
    assert loc["region"] == {"startLine": 5, "startColumn": 9, "endLine": 6, "endColumn": 14}
    compiled = results["KG103" + "24 byt"]
    assert compiled["locations"][0]["physicalLocation"]["region"] == {"startLine": 12}
    assert compiled["level"] == "warning"
    assert compiled["message"]["text"].endswith("[pkg.k:gemm BM=128,warps=8,stages=3 @ sm_120a]")
    odd = results["KG104" + NASTY[:6]]
    assert odd["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "src/odd%2Cdir%3Ax/100%25.py"


def test_sarif_of_a_file_name_that_is_not_utf8() -> None:
    # os.fsdecode(b"x\xff.cu"): the name's undecodable byte is a lone surrogate in the path and the message.
    path = "src/x\udcff.cu"
    text = sarif_report.render(result_of([finding("KG104", path=path, message=f"in {path}", line=3)]))
    text.encode("utf-8")  # writable
    doc = json.loads(text)
    validate_sarif(doc)
    result = doc["runs"][0]["results"][0]
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "src/x%FF.cu"  # the real byte
    assert result["message"]["text"].startswith("in src/x\\xff.cu")  # the byte, shown as an escape


def test_sarif_fingerprint_ignores_the_line_and_numbers_duplicates() -> None:
    base = finding(line=10)
    moved = replace(base, line=250)
    other_target = replace(base, target="sm_90a", identity="pkg.k:gemm|BM=128,warps=8,stages=3|sm_90a")

    def prints(*fs):
        return [r["partialFingerprints"]["primaryLocationLineHash"]
                for r in sarif_report.to_dict(result_of(list(fs)))["runs"][0]["results"]]

    assert prints(base) == prints(moved)
    assert prints(base)[0].endswith(":1")
    assert prints(base) != prints(other_target)
    twice = prints(base, moved)
    assert twice[0].split(":")[0] == twice[1].split(":")[0] and {t.split(":")[1] for t in twice} == {"1", "2"}


def test_sarif_rule_metadata_comes_from_the_docs_and_fits_1024_characters() -> None:
    driver = sarif_report.to_dict(result_of([]))["runs"][0]["tool"]["driver"]
    assert [r["id"] for r in driver["rules"]] == sorted(registry.codes())
    for descriptor in driver["rules"]:
        rule = registry.load(descriptor["id"])
        assert descriptor["shortDescription"]["text"] == rule.summary
        for key in ("shortDescription", "fullDescription", "help"):
            assert 0 < len(descriptor[key]["text"]) <= 1024
        assert descriptor["fullDescription"]["text"].split()[:3] == \
            sarif_report.doc_section(rule.doc, "What it does").split()[:3]


def test_sarif_clips_long_documentation_at_a_word_with_a_pointer() -> None:
    long_doc = "## What it does\n" + "word " * 600 + "\n\n## Why is this bad?\nBecause.\n"
    rule = Rule(code="KG999", name="long", layer="compiled", severity=Severity.ERROR, summary="s" * 2000,
                check=lambda *a: (), doc=long_doc)
    descriptor = sarif_report.rule_descriptor(rule)
    for key in ("shortDescription", "fullDescription", "help"):
        text = descriptor[key]["text"]
        assert len(text) <= 1024 and text.endswith("(kgate explain KG999)")
    assert "wor ..." not in descriptor["fullDescription"]["text"]


def test_sarif_truncates_past_the_result_limit_with_a_notification(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sarif_report, "MAX_RESULTS", 3)
    doc = sarif_report.to_dict(result_of(crafted()))
    validate_sarif(doc)
    run = doc["runs"][0]
    assert len(run["results"]) == 3
    # Notes go first: the three errors are kept.
    assert {r["level"] for r in run["results"]} == {"error"}
    notes = run["invocations"][0]["toolExecutionNotifications"]
    assert any("2 finding(s) left out" in n["message"]["text"] for n in notes)


def test_sarif_is_byte_identical_for_shuffled_input() -> None:
    findings = crafted()
    assert sarif_report.render(result_of(findings)) == sarif_report.render(result_of(list(reversed(findings))))


# --- GitHub annotations ---

def test_github_annotations_escape_messages_and_properties() -> None:
    lines = github_report.render(result_of(crafted())).splitlines()
    commands = [parse_command(line) for line in lines if line.startswith("::")]
    # The summary notice, then one annotation per finding, errors first.
    assert [c for c, _p, _m in commands] == ["notice", "error", "error", "error", "warning", "notice"]
    by_message = {m.split(" [")[0]: (c, p) for c, p, m in commands[1:]}
    command, props = by_message[NASTY]
    assert command == "error"
    assert props["file"] == NASTY_PATH and props["line"] == "7" and props["title"] == "KG104 smem-budget"
    assert "col" not in props and "endLine" not in props
    _c, source = by_message["source rule style"]
    assert (source["line"], source["endLine"], source["col"], source["endColumn"]) == ("5", "6", "9", "14")
    raw = next(line for line in lines if "smem-budget::100" in line)
    assert "%0A" in raw and "%0D" in raw and "%25" in raw and "file=src/odd%2Cdir%3Ax/100%25.py" in raw
    assert lines[-1].startswith("kgate check: FAILED")


def test_github_escape_functions_follow_the_runner_rules() -> None:
    assert escape.workflow_data("a%b\r\nc:d,e") == "a%25b%0D%0Ac:d,e"
    assert escape.workflow_property("a%b\r\nc:d,e") == "a%25b%0D%0Ac%3Ad%2Ce"
    # `%` first: an already escaped sequence must not be unescaped by the reader.
    assert escape.workflow_data("%0A") == "%250A"
    # Other control characters are written out, as on the terminal.
    assert escape.workflow_data("a\x1b[2Jb\tc") == "a\\x1b[2Jb\\tc"


def test_github_summary_says_how_many_annotations_github_will_not_show() -> None:
    many = [finding(severity=Severity.ERROR, line=n, identity=f"e{n}") for n in range(1, 14)]
    many += [finding(severity=Severity.WARNING, line=n, identity=f"w{n}") for n in range(1, 13)]
    lines = github_report.render(result_of(many)).splitlines()
    command, props, message = parse_command(lines[0])
    assert command == "notice" and props == {"title": "kgate summary"}
    assert "13 error(s), 12 warning(s), 0 note(s)" in message
    assert "3 error(s), 2 warning(s) not shown as annotations" in message
    assert len([line for line in lines if line.startswith("::error")]) == 13


def test_github_summary_without_hidden_annotations_says_only_the_totals() -> None:
    message = parse_command(github_report.render(result_of(crafted())).splitlines()[0])[2]
    assert message == "kgate check: 3 error(s), 1 warning(s), 1 note(s)"


# --- JUnit ---

def test_junit_parses_back_with_counts_that_match() -> None:
    root = ET.fromstring(junit_report.render(result_of(crafted())).encode())
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == sorted(s.get("name") for s in suites)
    assert sum(int(s.get("failures")) for s in suites) == int(root.get("failures")) == 5
    for suite in suites:
        cases = suite.findall("testcase")
        assert int(suite.get("tests")) == len(cases)
        assert int(suite.get("failures")) == sum(1 for c in cases if c.find("failure") is not None)
        assert all(c.get("classname") == suite.get("name") for c in cases)
    odd = next(s for s in suites if s.get("name") == NASTY_PATH)
    failure = odd.find("testcase/failure")
    assert failure.get("message") == NASTY
    # XML parsers turn CR LF in text into LF (attribute values keep it: ElementTree escapes them there).
    assert NASTY.replace("\r\n", "\n") in failure.text and failure.get("type") == "error KG104"
    assert odd.find("testcase").get("name").startswith("KG104 smem-budget: pkg.k:gemm")


def test_junit_without_findings_has_one_passing_case() -> None:
    root = ET.fromstring(junit_report.render(result_of([])).encode())
    cases = root.findall("testsuite/testcase")
    assert len(cases) == 1 and cases[0].find("failure") is None
    assert root.get("tests") == "1" and root.get("failures") == "0"


def test_junit_replaces_characters_xml_cannot_carry() -> None:
    text = junit_report.render(result_of([finding(message="bell\x07 nul\x00 ok")]))
    root = ET.fromstring(text.encode("utf-8"))
    assert root.find("testsuite/testcase/failure").get("message") == "bell\ufffd nul\ufffd ok"


# --- JSON ---

def test_json_is_sorted_and_stable_for_shuffled_input() -> None:
    findings = crafted()
    a, b = json_report.render(result_of(findings)), json_report.render(result_of(list(reversed(findings))))
    assert a == b
    data = json.loads(a)
    keys = [(f["path"], f["line"], f["col"], f["code"]) for f in data["findings"]]
    assert keys == sorted(keys)
    assert set(data) == {"version", "command", "findings", "kernels", "ratchet", "summary"}


def test_json_and_sarif_stay_strict_json_with_a_nan_constexpr() -> None:
    """`constexprs = { S = nan }` is a valid registration; JSON has no NaN, so it is written as TOML spells it."""
    from conftest import DATA

    from kgate.facts.model import KernelFacts, Resources
    from kgate.facts.ptx import parse_ptx

    entry = parse_ptx((DATA / "pdl_wait_first.sm_120a.ptx").read_text()).entry()
    facts = KernelFacts(kernel="k:good", variant="S=nan,warps=4,stages=3#00000000", target="sm_120a",
                        language="triton", path="k.py", line=5, kind="other", num_warps=4, num_stages=3, expect=(),
                        pdl=False, ptx_target="sm_120a", entry=entry, resources=Resources(8, 0, 0, 0, 0, 0),
                        constexprs={"S": float("nan"), "HI": float("inf"), "LO": float("-inf"), "B": 128})
    result = replace(result_of([finding()]), kernels=[facts])

    def strict(constant: str) -> None:
        raise ValueError(f"not JSON: {constant}")

    data = json.loads(json_report.render(result), parse_constant=strict)
    assert data["kernels"][0]["constexprs"] == {"B": 128, "HI": "inf", "LO": "-inf", "S": "nan"}
    json.loads(sarif_report.render(result), parse_constant=strict)


# --- Baseline differences (the ratchet) ---

def with_differences() -> Result:
    from kgate.ratchet.compare import Difference

    return replace(result_of([finding()]), ratchet=[
        Difference("WORSE", "pkg.k:gemm|BM=128,warps=8,stages=3|sm_120a", "registers 240 -> 252", True, 240, 252),
        Difference("IMPROVED", "pkg.k:other|BM=64|sm_120a", "spill_bytes 16 -> 0", False, 16, 0),
        Difference("TOOLCHAIN", "baseline", "pinned with triton 3.8.0 -> 3.9.0", True),
    ])


def test_sarif_lists_baseline_differences_as_notifications() -> None:
    doc = sarif_report.to_dict(with_differences())
    validate_sarif(doc)
    notes = doc["runs"][0]["invocations"][0]["toolExecutionNotifications"]
    assert [(n["level"], n["message"]["text"].split(":")[0]) for n in notes] == [
        ("error", "baseline"), ("note", "baseline"), ("error", "baseline")]
    assert "WORSE pkg.k:gemm|BM=128,warps=8,stages=3|sm_120a: registers 240 -> 252 (fails)" in \
        notes[0]["message"]["text"]


def test_github_annotates_baseline_differences_at_the_kernel() -> None:
    result = with_differences()
    from kgate.facts.model import KernelFacts, Resources
    from kgate.facts.ptx import PtxEntry

    entry = PtxEntry("gemm", {}, False, False, 0, ())
    result = replace(result, kernels=[KernelFacts("pkg.k:gemm", "BM=128,warps=8,stages=3", "sm_120a", "triton",
                                                  "pkg/k.py", 42, "gemm", 8, 3, (), False, "sm_120a", entry,
                                                  Resources(240, 0, 0, 0, 0, 0))])
    commands = [parse_command(line) for line in github_report.render(result).splitlines() if line.startswith("::")]
    worse = next(c for c in commands if c[1].get("title") == "kgate baseline WORSE")
    assert worse[0] == "error" and worse[1]["file"] == "pkg/k.py" and worse[1]["line"] == "42"
    assert worse[2] == "pkg.k:gemm|BM=128,warps=8,stages=3|sm_120a: registers 240 -> 252"
    improved = next(c for c in commands if c[1].get("title") == "kgate baseline IMPROVED")
    assert improved[0] == "notice" and "file" not in improved[1]
    assert "3 baseline difference(s), 2 failing" in commands[0][2]


def test_junit_has_a_baseline_suite() -> None:
    root = ET.fromstring(junit_report.render(with_differences()).encode())
    suite = next(s for s in root.findall("testsuite") if s.get("name") == "baseline")
    assert (suite.get("tests"), suite.get("failures")) == ("3", "2")
    assert root.get("tests") == "4" and root.get("failures") == "3"


# --- Related places (a finding that points at more than one place) ---

ACCESS = "`ld.global.b32` touches global memory before griddepcontrol.wait"


def with_related() -> Finding:
    return replace(finding("KG107", severity=Severity.ERROR, name="pdl-missing-wait", message="PDL kernel waits late",
                           line=14),
                   related=(Related("pkg/kernels.py", 17, ACCESS), Related("", 0, ACCESS, ptx_line=59)))


def test_related_places_change_no_identity_fingerprint_or_baseline_key() -> None:
    bare = replace(with_related(), related=())
    assert with_related() == bare and with_related().baseline_key == bare.baseline_key
    assert sarif_report.fingerprint(with_related()) == sarif_report.fingerprint(bare)
    moved = replace(with_related(), related=(Related("pkg/kernels.py", 40, ACCESS),))
    assert moved.baseline_key == bare.baseline_key and sarif_report.fingerprint(moved) == sarif_report.fingerprint(bare)


def test_sarif_related_locations_validate_against_the_official_schema() -> None:
    doc = sarif_report.to_dict(result_of([with_related(), *crafted()]))
    validate_sarif(doc)
    results = doc["runs"][0]["results"]
    pdl = next(r for r in results if r["ruleId"] == "KG107")
    assert pdl["locations"][0]["physicalLocation"]["region"] == {"startLine": 14}
    assert pdl["relatedLocations"] == [
        {"id": 1, "message": {"text": ACCESS}, "physicalLocation": {
            "artifactLocation": {"uri": "pkg/kernels.py", "uriBaseId": "%SRCROOT%"}, "region": {"startLine": 17}}},
        {"id": 2, "message": {"text": f"PTX line 59: {ACCESS}"}, "properties": {"ptxLine": 59},
         "logicalLocations": [{"fullyQualifiedName": "pkg.k:gemm", "kind": "function"}]},
    ]
    assert all("relatedLocations" not in r for r in results if r["ruleId"] != "KG107")


def test_github_annotation_carries_the_related_places_in_its_one_message() -> None:
    lines = github_report.render(result_of([with_related()])).splitlines()
    commands = [parse_command(line) for line in lines if line.startswith("::")]
    assert [c for c, _p, _m in commands] == ["notice", "error"]
    _c, props, message = commands[1]
    assert props["file"] == "pkg/kernels.py" and props["line"] == "14"
    assert message == ("PDL kernel waits late [pkg.k:gemm BM=128,warps=8,stages=3 @ sm_120a]\n"
                       f"pkg/kernels.py:17: {ACCESS}\nPTX line 59: {ACCESS}")


def test_terminal_junit_and_json_show_the_related_places() -> None:
    lines = terminal.render(result_of([with_related()]), table=False).splitlines()
    assert lines[0].startswith("pkg/kernels.py:14: KG107 error pdl-missing-wait: PDL kernel waits late")
    assert lines[1:3] == [f"    pkg/kernels.py:17: {ACCESS}", f"    PTX line 59: {ACCESS}"]
    body = ET.fromstring(junit_report.render(result_of([with_related()])).encode()).find(
        "testsuite/testcase/failure").text
    assert body.splitlines()[-2:] == [f"pkg/kernels.py:17: {ACCESS}", f"PTX line 59: {ACCESS}"]
    data = json.loads(json_report.render(result_of([with_related()])))
    assert data["findings"][0]["related"] == [
        {"path": "pkg/kernels.py", "line": 17, "message": ACCESS, "ptx_line": 0},
        {"path": "", "line": 0, "message": ACCESS, "ptx_line": 59}]
    assert Finding.from_json(data["findings"][0]).related == with_related().related
    assert json.loads(json_report.render(result_of(crafted())))["findings"][0]["related"] == []


def test_a_source_rule_report_keeps_its_related_places_through_the_lint_cache() -> None:
    from kgate.core.rule import Report
    from kgate.core.selection import Selection
    from kgate.evaluate import source

    raw = source.RawFinding(3, 1, None, None, "KG201", "", "m", "|x", None,
                            tuple(tuple(r.as_list()) for r in with_related().related))
    stored = json.loads(json.dumps(source.to_json(source.FileResult((raw,), (), ("KG201",)))))
    back = source.from_json(stored)
    assert back.findings == (raw,)
    found = source.findings({"a.py": back}, Selection(frozenset({"KG201"})))
    assert [f.related for f in found] == [with_related().related]
    assert Report("m", related=with_related().related).related == with_related().related
    with pytest.raises(ValueError):
        Related.from_record(["a.py", "17", "m", 0])
