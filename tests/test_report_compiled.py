"""SARIF, GitHub annotations, JUnit and JSON from real `kgate check` runs.

A copy of fixtures/compiled (planted bad cases next to good twins, compiled
for sm_120a and sm_90a on this CPU-only machine) and this repository itself.
"""

from __future__ import annotations

import json
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import REPO, Run, copy_compiled, copy_repository, kgate
from report_helpers import parse_command, validate_sarif


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, compiled_cold: tuple[Path, Run]) -> Path:
    """A copy of the project whose cache already holds every variant (compiled once for the test session)."""
    return copy_compiled(compiled_cold, tmp_path_factory.mktemp("reports"))


@pytest.fixture(scope="module")
def as_json(project: Path) -> dict:
    run = kgate("check", "--format", "json", cwd=project)
    assert run.code == 1, run.stderr
    return run.json()


def check(project: Path, fmt: str, *extra: str) -> Run:
    run = kgate("check", "--format", fmt, *extra, cwd=project)
    assert run.code == 1, run.stderr
    return run


def test_sarif_of_the_fixture_project_validates_and_lists_every_finding(project: Path, as_json: dict) -> None:
    doc = json.loads(check(project, "sarif").stdout)
    validate_sarif(doc)
    results = doc["runs"][0]["results"]
    assert len(results) == len(as_json["findings"]) >= 12
    got = sorted((r["ruleId"], r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
                  r["locations"][0]["physicalLocation"]["region"]["startLine"], r["properties"]["target"])
                 for r in results)
    want = sorted((f["code"], f["path"], f["line"], f["target"]) for f in as_json["findings"])
    assert got == want
    levels = {("error", "error"), ("warning", "warning"), ("note", "note")}
    assert all((r["level"], r["properties"]["severity"]) in levels for r in results)
    # Each finding's related places, as many in SARIF as in JSON (the PDL findings have them).
    related = sorted((r["ruleId"], r["properties"].get("kernel", ""), r["properties"]["target"],
                      [place["message"]["text"] for place in r.get("relatedLocations", [])]) for r in results)
    assert related == sorted((f["code"], f["kernel"] or "", f["target"],
                              [place["message"] if place["path"] else f"PTX line {place['ptx_line']}: "
                               f"{place['message']}" for place in f["related"]]) for f in as_json["findings"])
    # The PDL findings, and the findings that carry others of the same cause (a spill at the register ceiling).
    carrying = sum(bool(f["related"]) for f in as_json["findings"] if f["code"] == "KG107" or f["folded"])
    assert sum(bool(r.get("relatedLocations")) for r in results) == carrying >= 4


def test_sarif_fingerprints_survive_moving_the_kernels(project: Path) -> None:
    before = json.loads(check(project, "sarif").stdout)["runs"][0]["results"]
    source = project / "block_scale.py"
    original = source.read_text()
    try:
        source.write_text("# moved down by three lines\n\n\n" + original)
        after = json.loads(check(project, "sarif").stdout)["runs"][0]["results"]
    finally:
        source.write_text(original)

    def by_print(results: list) -> dict:
        return {r["partialFingerprints"]["primaryLocationLineHash"]:
                r["locations"][0]["physicalLocation"]["region"]["startLine"] for r in results}

    old, new = by_print(before), by_print(after)
    assert set(old) == set(new)
    moved = [p for p in old if old[p] != new[p]]
    assert moved and all(new[p] == old[p] + 3 for p in moved)


def test_moving_kernels_recompiles_nothing_and_moves_every_line(project: Path, as_json: dict) -> None:
    """The facts cache ignores where a kernel sits; the lines it reports must still be today's."""
    source = project / "pdl.py"
    original = source.read_text()
    try:
        source.write_text("# two lines\n\n" + original)
        terminal = kgate("check", "-v", cwd=project)
        moved = kgate("check", "--format", "json", cwd=project).json()
    finally:
        source.write_text(original)
    assert f"0 compiled, {len(as_json['kernels'])} from cache" in terminal.stdout
    before = {(f["kernel"], f["target"]): f for f in as_json["findings"] if f["path"] == "pdl.py"}
    after = {(f["kernel"], f["target"]): f for f in moved["findings"] if f["path"] == "pdl.py"}
    assert before.keys() == after.keys() and before
    for key, old in before.items():
        assert after[key]["line"] == old["line"] + 2
        # The PDL rule names the source line of the first unwaited load: it moved too.
        old_at = re.search(r"at pdl\.py:(\d+)", old["message"]).group(1)
        assert f"at pdl.py:{int(old_at) + 2}" in after[key]["message"]


def test_sarif_written_with_dash_o_reports_on_stderr(project: Path, tmp_path: Path) -> None:
    out = tmp_path / "kgate.sarif"
    run = check(project, "sarif", "-o", str(out))
    assert run.stdout == ""
    assert run.stderr.strip().startswith("kgate check: FAILED")
    validate_sarif(json.loads(out.read_text()))


def test_sarif_of_this_repository_validates(tmp_path: Path, repository_checked: tuple[Path, Run]) -> None:
    run = kgate("check", "--format", "sarif", cwd=copy_repository(repository_checked, tmp_path))
    assert run.code in (0, 1), run.stderr
    doc = json.loads(run.stdout)
    validate_sarif(doc)
    assert doc["runs"][0]["tool"]["driver"]["name"] == "kgate"


def test_github_annotations_of_real_findings(project: Path, tmp_path: Path) -> None:
    # The project's warnings made errors, so that the cap of 10 annotations per kind is exercised.
    shutil.copytree(project, tmp_path / "compiled", symlinks=True)
    project = tmp_path / "compiled"
    with (project / "kgate.toml").open("a") as config:
        config.write('\n[severity]\nKG105 = "error"\nKG107 = "error"\n')
    as_json = check(project, "json").json()
    lines = check(project, "github").stdout.splitlines()
    commands = [parse_command(line) for line in lines if line.startswith("::")]
    summary, annotations = commands[0], commands[1:]
    counts = {level: sum(f["severity"] == level for f in as_json["findings"]) for level in ("error", "warning", "note")}
    assert counts["error"] > 10  # so that the cap of 10 annotations per kind is exercised
    assert summary[0] == "notice" and (f"{counts['error']} error(s), {counts['warning']} warning(s), "
                                       f"{counts['note']} note(s)") in summary[2]
    assert f"{counts['error'] - 10} error(s) not shown as annotations" in summary[2]
    assert len(annotations) == len(as_json["findings"])
    kinds = {"error": "error", "warning": "warning", "note": "notice"}
    want = sorted((kinds[f["severity"]], f["path"], str(f["line"]), f"{f['code']} {f['name']}",
                   f"{f['message']} [{f['kernel']} {f['variant']} @ {f['target']}]"
                   + "".join(f"\n{_place(r)}: {r['message']}" for r in f["related"])) for f in as_json["findings"])
    got = sorted((c, p["file"], p["line"], p["title"], m) for c, p, m in annotations)
    assert got == want
    # The variant names are full of commas: they must arrive intact in the message.
    assert any("BK=128,BM=128,BN=128" in m for _c, _p, m in annotations)
    assert lines[-1].startswith(f"kgate check: FAILED: {len(as_json['kernels'])} kernel variant(s)")


def _place(related: dict) -> str:
    return f"{related['path']}:{related['line']}" if related["path"] else f"PTX line {related['ptx_line']}"


def test_pdl_findings_point_at_the_access_by_its_source_line_and_its_ptx_line(project: Path, as_json: dict) -> None:
    """A KG107 finding points at the kernel, and at each kind of global access before the wait (a write, the
    loads of one argument) twice: the source line the PTX's debug info gives it and its line in the PTX, as the
    compiler wrote it to the cache."""
    pdl = [f for f in as_json["findings"] if f["code"] == "KG107"]
    assert sorted((f["kernel"], f["target"]) for f in pdl) == sorted(
        (k, t) for k in ("pdl:load_before_wait", "pdl:wait_under_branch") for t in ("sm_120a", "sm_90a"))
    source = (project / "pdl.py").read_text().splitlines()
    ptx: dict[tuple[str, str], list[list[str]]] = {}
    for path in (project / ".kgate-cache" / "v1" / "artifacts").glob("*/kernel.ptx"):
        text = path.read_text()
        entry = re.search(r"\.entry\s+(\w+)", text).group(1)
        target = re.search(r"^\s*\.target\s+(\w+)", text, re.MULTILINE).group(1)
        ptx.setdefault((entry, target), []).append(text.splitlines())
    for f in pdl:
        assert f["related"] and len(f["related"]) % 2 == 0
        for at_source, at_ptx in zip(f["related"][::2], f["related"][1::2]):
            # The line of the kernel's `tl.load` or `tl.store`, in the kernel's own body, the one the message names.
            assert at_source["path"] == "pdl.py" and at_source["ptx_line"] == 0
            assert at_source["message"] == at_ptx["message"]
            opcode = re.search(r"`([\w.:]+)`", at_ptx["message"]).group(1)
            assert at_ptx["path"] == "" and at_ptx["line"] == 0 and opcode.startswith(("ld.global", "st.global"))
            call = "tl.load(" if opcode.startswith("ld.") else "tl.store("
            assert call in source[at_source["line"] - 1]
            assert f["line"] < at_source["line"] < f["line"] + 8
            assert f"pdl.py:{at_source['line']}" in f["message"]
            texts = ptx[(f["kernel"].split(":")[1], f["target"])]
            assert texts and all(opcode in lines[at_ptx["ptx_line"] - 1].split() for lines in texts)
    # A load alone is a warning that names the argument; a store before the wait is an error.
    severity = {f["kernel"]: f["severity"] for f in pdl}
    assert severity == {"pdl:load_before_wait": "warning", "pdl:wait_under_branch": "error"}
    assert all("`x` by `ld.global." in f["message"] for f in pdl)
    # The same places in the terminal output, under each finding.
    terminal = kgate("check", cwd=project).stdout.splitlines()
    for f in pdl:
        head = next(n for n, line in enumerate(terminal) if line.startswith(f"pdl.py:{f['line']}: KG107")
                    and f"@ {f['target']}]" in line and f["kernel"] in line)
        assert terminal[head + 1:head + 1 + len(f["related"])] == [f"    {_place(r)}: {r['message']}"
                                                                   for r in f["related"]]


def test_junit_counts_match_the_findings_and_clean_variants(project: Path, as_json: dict) -> None:
    root = ET.fromstring(check(project, "junit").stdout.encode())
    flagged = {(f["kernel"], f["variant"], f["target"]) for f in as_json["findings"]}
    clean = [k for k in as_json["kernels"] if (k["kernel"], k["variant"], k["target"]) not in flagged]
    assert int(root.get("failures")) == len(as_json["findings"])
    assert int(root.get("tests")) == len(as_json["findings"]) + len(clean)
    cases = root.findall("testsuite/testcase")
    failing = [c for c in cases if c.find("failure") is not None]
    assert sorted(c.get("name").split(":")[0] for c in failing) == \
        sorted(f"{f['code']} {f['name']}" for f in as_json["findings"])
    passing = sorted(c.get("name") for c in cases if c.find("failure") is None)
    assert passing == sorted(f"{k['kernel']} {k['variant']} @ {k['target']}" for k in clean)
    assert {s.get("name") for s in root.findall("testsuite")} == {f["path"] for f in as_json["findings"]} | \
        {k["path"] for k in as_json["kernels"]}


def test_exit_zero_on_a_failing_check_says_the_exit_was_forced(project: Path) -> None:
    for fmt in ("terminal", "github"):
        run = kgate("check", "--format", fmt, "--exit-zero", cwd=project)
        assert run.code == 0, run.stderr
        (summary,) = [line for line in run.stdout.splitlines() if line.startswith("kgate check: ")]
        assert summary.startswith("kgate check: failed (exit forced to 0 by --exit-zero): "), summary
        assert "FAILED" not in run.stdout, fmt
    forced = kgate("check", "--format", "json", "--exit-zero", cwd=project)
    assert forced.code == 0 and (forced.json()["summary"]["exit_code"], forced.json()["summary"]["exit_forced"]) == (1, True)


def test_every_machine_format_is_byte_identical_on_a_second_run(project: Path) -> None:
    for fmt in ("json", "sarif", "github", "junit"):
        assert check(project, fmt).stdout == check(project, fmt).stdout, fmt


def test_the_docs_document_every_json_field(as_json: dict) -> None:
    page = (REPO / "docs" / "reports.md").read_text()
    section = page.split("\n## JSON output\n", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    fields = set(as_json) | set(as_json["findings"][0]) | set(as_json["kernels"][0]) | set(as_json["summary"])
    missing = sorted(f for f in fields if f"`{f}`" not in section)
    assert not missing, f"the JSON section of docs/reports.md does not mention {missing}"
