"""The CUDA source and build rules (KG301-KG303) on planted bad cases and good twins.

fixtures/cuda_rules/ states each expected finding on its line (`// expect: KG302`,
`# expect: KG301`). Each rule runs through its own `check` over every fixture
file its `files` globs and `prefilter` select, as the lint engine runs it.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import FIXTURES, expectations

from kgate import rules as registry
from kgate.collect.cpp_text import blank
from kgate.core.rule import Report, SourceContext

FOLDER = FIXTURES / "cuda_rules"
CODES = ("KG301", "KG302", "KG303")
SUFFIXES = (".cu", ".txt", ".py", ".sh")


@dataclass
class Source:
    """What a source rule reads of a file: its project-relative name and its text."""

    rel: str
    data: bytes

    @property
    def name(self) -> str:
        return self.rel.rsplit("/", 1)[-1]

    @property
    def text(self) -> str:
        return self.data.decode("utf-8")


def run_rule(code: str, folder: Path = FOLDER, options: dict | None = None) -> list[tuple[str, Report]]:
    rule = registry.load(code)
    ctx = SourceContext(options=rule.resolve_options(options or {}))
    out = []
    for path in sorted(folder.iterdir()):
        if not any(fnmatch.fnmatchcase(path.name, glob) for glob in rule.files):
            continue
        data = path.read_bytes()
        if rule.prefilter and not any(marker in data for marker in rule.prefilter):
            continue
        out.extend((path.name, report) for report in rule.check(Source(path.name, data), ctx))
    return out


def test_each_rule_reports_exactly_its_inline_expectations() -> None:
    expected = {(path, line, code) for path, line, code, _target in expectations(FOLDER, SUFFIXES)}
    found = {(path, report.line, code) for code in CODES for path, report in run_rule(code)}
    assert found == expected
    assert {code for _p, _l, code in expected} == set(CODES)


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
    on_line = [r.discriminator for path, r in run_rule("KG301") if (path, r.line) == ("CMakeLists.txt", 10)]
    assert on_line == ["compute_120", "sm_120"]


def test_family_target_is_allowed_by_default_and_reported_on_request() -> None:
    assert not any("120f" in r.message for _p, r in run_rule("KG301"))
    warned = [(p, r) for p, r in run_rule("KG301", options={"family": "warn"}) if "120f" in r.message]
    assert [(p, r.line, r.discriminator, r.severity.value) for p, r in warned] == [
        ("CMakeLists.txt", 16, "compute_120f", "warning"), ("CMakeLists.txt", 16, "sm_120f", "warning")]
    assert "__CUDA_ARCH_FEAT_SM120_ALL" in warned[0][1].message


def test_launch_guard_counts_macro_launches_in_one_note() -> None:
    notes = [r for _p, r in run_rule("KG302") if r.severity is not None]
    assert [(n.line, n.severity.value) for n in notes] == [(5, "note")]
    assert notes[0].message.startswith("1 kernel launch(es) inside #define macros")


def test_launch_guard_window_and_macros_are_options() -> None:
    wide = {(p, r.line) for p, r in run_rule("KG302", options={"window": 6})}
    assert ("launches.cu", 24) not in wide  # the late check is within 6 lines
    strict = {(p, r.line) for p, r in run_rule("KG302", options={"check_macros": []})}
    assert ("launches.cu", 19) in strict  # C10_CUDA_KERNEL_LAUNCH_CHECK no longer counts


def test_launch_guard_identity_is_the_function_and_kernel_not_the_line() -> None:
    scopes = sorted((r.scope, r.discriminator) for _p, r in run_rule("KG302") if r.severity is None)
    assert scopes == [("check_comes_too_late", "scale"), ("launch_ex", "scale"), ("unchecked", "scale")]


def test_kernel_file_size_counts_code_lines_only(tmp_path: Path) -> None:
    reports = run_rule("KG303")
    assert [(p, r.value) for p, r in reports] == [("big_kernel.cu", 601)]
    small = (FOLDER / "small_kernel.cu").read_text()
    assert len(small.splitlines()) > 1000  # long on disk, short in code
    assert run_rule("KG303", options={"max_lines": 599})[-1][1].value == 600


def test_blanking_keeps_lines_and_hides_comments_and_strings() -> None:
    text = 'a<<<1,1>>>(x); // b<<<1,1>>>(y);\n"c<<<1,1>>>(z)"; /* d\n<<< */ R"(e<<<)"\n'
    code = blank(text).code
    assert code.count("\n") == text.count("\n") and len(code) == len(text)
    assert code.count("<<<") == 1
