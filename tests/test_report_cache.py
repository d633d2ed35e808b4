"""Every report format states the same run whatever the cache holds, and the formats agree with one another.

A report is made of what the run's selected rules read (`kgate.core.artifacts.ArtifactPlan`), never of what an
earlier run left in the cache: after a `--sass` run has disassembled every kernel, a run with the first run's
selection writes the first run's bytes in every format, the JSON's `sass` histogram included (docs/reports.md:
a kernel has one where a selected rule reads its SASS, null elsewhere). The formats name the same findings at the
same places. Real compiles: Triton and nvcc, on the PDL rule's fixture folder, whose rule reads the SASS of some
PDL kernels and decides the others from their PTX.
"""

from __future__ import annotations

import json
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import copy_project, kgate

FORMATS = ("json", "sarif", "text", "junit", "github")
Place = tuple[str, str, int]  # code, path, line


def _reports(project: Path, *args: str) -> dict[str, str]:
    """The run's report in every format (the first compiles, the others read the cache)."""
    out = {}
    for fmt in FORMATS:
        run = kgate("check", "--format", fmt, "--exit-zero", "--no-baseline", *args, cwd=project)
        assert run.code == 0, run.stderr
        out[fmt] = run.stdout
    return out


def _json_places(text: str) -> list[Place]:
    return sorted((f["code"], f["path"], f["line"]) for f in json.loads(text)["findings"])


def _sarif_places(text: str) -> list[Place]:
    results = json.loads(text)["runs"][0]["results"]
    return sorted((r["ruleId"], r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
                   r["locations"][0]["physicalLocation"]["region"]["startLine"]) for r in results)


def _junit_places(text: str) -> list[Place]:
    cases = ET.fromstring(text).iter("testcase")
    return sorted((case.attrib["name"].split()[0], case.attrib["file"], int(case.attrib["line"]))
                  for case in cases if case.find("failure") is not None)


def _github_places(text: str) -> list[Place]:
    annotation = r"^::(?:error|warning|notice) file=([^,]+),line=(\d+),[^:]*?title=(KG\d+) "
    found = re.findall(annotation, text, re.MULTILINE)
    return sorted((code, path, int(line)) for path, line, code in found)


def _text_places(text: str) -> list[Place]:
    found = re.findall(r"^([^\s:]+):(\d+): (KG\d+) ", text, re.MULTILINE)
    return sorted((code, path, int(line)) for path, line, code in found)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_every_format_is_the_same_whatever_the_cache_holds_and_the_formats_agree(tmp_path: Path) -> None:
    project = copy_project("rules/KG107", tmp_path)
    first = _reports(project)  # the folder's selection: pdl-missing-wait
    # Every kernel disassembled into the cache by a run that asks for all of it.
    assert kgate("check", "--sass", "--exit-zero", "--no-baseline", "--select", "KG102", cwd=project).code == 0
    # The same rule by name: the same selection, a run of its own (not the replay of the first).
    again = _reports(project, "--select", "pdl-missing-wait")
    for fmt in FORMATS:
        assert again[fmt] == first[fmt], fmt

    data = json.loads(first["json"])
    places = _json_places(first["json"])
    assert places and {code for code, _path, _line in places} == {"KG107"}
    assert _sarif_places(first["sarif"]) == places
    assert _junit_places(first["junit"]) == places
    assert _text_places(first["text"]) == places
    # GitHub shows ten annotations per kind in a step; the summary says how many it left out.
    shown = _github_places(first["github"])
    assert shown and set(shown) <= set(places)
    assert len(shown) == len(places) or "not shown as annotations" in first["github"]

    # The histogram where the rule read the SASS (a PDL kernel that waits and writes nothing before its wait);
    # null where it decided from the PTX (a write before the wait) and where it reads nothing (not PDL).
    with_sass = {k["kernel"] for k in data["kernels"] if k["sass"] is not None}
    assert "pdl_missing_wait:wait_first" in with_sass
    assert not with_sass & {"pdl_missing_wait:store_before_wait", "pdl_missing_wait:not_pdl"}
    # What the --sass run read is its own: every kernel's histogram there.
    every = kgate("check", "--sass", "--format", "json", "--exit-zero", "--no-baseline", cwd=project).json()
    assert all(k["sass"] is not None for k in every["kernels"])
