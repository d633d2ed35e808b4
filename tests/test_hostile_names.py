"""Every output escapes the project's text for where it is shown: each reporter on a hostile file name,
kernel name and message, and `kgate check` end to end on a CUDA source whose name is one.

A project can name a file anything: a newline followed by a GitHub workflow command (which the runner
acts on in any step's log), an escape sequence that clears the screen, Unicode's right-to-left
override, an HTML tag. kgate's terminal lines, annotations, SARIF, JSON, JUnit and audit pages carry
such names without letting them act (kgate.report.escape).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import unquote

import pytest
from conftest import kgate
from report_helpers import finding, parse_command, validate_sarif
from test_audit_model import audit, facts

from kgate.core.findings import Severity
from kgate.core.result import Result
from kgate.facts.model import CompileFailure
from kgate.ratchet.compare import Difference
from kgate.report import (
    audit_html,
    audit_md,
    audit_summary,
    escape,
    github_report,
    json_report,
    junit_report,
    sarif_report,
    terminal,
)

INJECTED = "::warning file=a.cu::all kernels passed"
PATH = f"src/x\n{INJECTED}\x1b[2J<img src=x onerror=alert(1)>|##[error]boom\u202e.cu"
KERNEL = "pkg.k:<script>alert(1)</script>|\x1b]0;owned\x07"
VARIANT = "BM=128|`x`\r\n::error::variant"
MESSAGE = "spilled\r\n::error file=b.py::fake & <b>bold</b> 100% [link](javascript:alert(1)) ##[warning]x"
# Characters that must never reach a terminal or a log from the project's text (newlines kgate writes itself).
RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def hostile_result() -> Result:
    bad = finding("KG103", path=PATH, kernel=KERNEL, variant=VARIANT, message=MESSAGE, severity=Severity.ERROR)
    source = finding("KG201", path=PATH, kernel=None, variant=None, target=None, message=MESSAGE, line=3, col=5,
                     name="runtime-autotune")
    return Result("check", [bad, source], [facts(KERNEL, variant=VARIANT)],
                  ratchet=[Difference("WORSE", f"{KERNEL}|{VARIANT}|sm_120a", "registers 240 -> 252", True, 240, 252)],
                  notices=[f"shard 1/2 of {PATH}"])


def assert_no_workflow_command(text: str) -> None:
    """What GitHub's runner would act on: a line starting with `::` after white space, or `##[` anywhere."""
    for line in text.splitlines():
        assert not line.lstrip().startswith("::"), line
        assert "##[" not in line, line


def test_terminal_report_shows_control_characters_and_runs_no_workflow_command() -> None:
    text = terminal.render(hostile_result())
    assert not RAW_CONTROL.search(text), repr(text)
    assert_no_workflow_command(text)
    # The names are still there to read, with their control characters written out.
    assert "src/x\\n::warning file=a.cu::all kernels passed\\x1b[2J<img" in text
    assert "\\u202e.cu:10: KG103 error spill: spilled\\r\\n::error file=b.py" in text
    assert "##\\x5bwarning]x" in text
    table = text.split("\n\n")[0].splitlines()
    assert len(table) == 3 and "pkg.k:<script>alert(1)</script>|\\x1b]0;owned\\x07" in table[2]


def test_terminal_escape_defuses_both_workflow_command_forms() -> None:
    assert escape.terminal("::error::x") == "\\x3a:error::x"
    assert escape.terminal("  \t::error::x") == "  \\t::error::x"  # the tab is written out: no longer white space
    assert escape.terminal("   ::error::x") == "   \\x3a:error::x"
    assert escape.terminal("a ##[error]b") == "a ##\\x5berror]b"
    assert escape.terminal("pkg.k:gemm, a::b") == "pkg.k:gemm, a::b"  # text that is no command stays as it is
    assert escape.terminal("::x", line_start=False) == "::x"  # after kgate's own words on the line
    # A file whose name starts a line with `::` (a finding's line starts with its path).
    line = terminal.finding_line(finding(path="::error file=x::y.py", message="::not a command either"))
    assert line.startswith("\\x3a:error file=x::y.py:10: KG103 warning spill: ::not a command either [")


def test_github_annotations_carry_hostile_names_as_data() -> None:
    lines = github_report.render(hostile_result()).splitlines()
    assert not RAW_CONTROL.search("\n".join(lines))
    commands = [parse_command(line) for line in lines if line.startswith("::")]
    assert [kind for kind, _p, _m in commands] == ["notice", "error", "warning", "error"]
    _kind, props, message = commands[1]
    # The runner reads back the name and the message, CR and LF included; other controls are written out.
    assert props["file"] == escape.visible(PATH, keep="\r\n")
    assert message.startswith(MESSAGE + " [pkg.k:<script>alert(1)</script>|\\x1b]0;owned\\x07 BM=128|`x`\r\n")
    assert_no_workflow_command(lines[-1])


def test_sarif_and_json_keep_the_exact_text_and_write_no_raw_control_character() -> None:
    result = hostile_result()
    for text in (sarif_report.render(result), json_report.render(result)):
        assert not RAW_CONTROL.search(text)
        assert "\\u202e" in text and "\\u001b" in text
    sarif = json.loads(sarif_report.render(result))["runs"][0]["results"]
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in sarif}
    assert {unquote(uri) for uri in uris} == {PATH} and not any(set(uri) & set("\n\x1b<>|") for uri in uris)
    assert sorted(str(r["properties"].get("kernel")) for r in sarif) == ["None", KERNEL]
    findings = json.loads(json_report.render(result))["findings"]
    assert {f["path"] for f in findings} == {PATH} and {f["message"] for f in findings} == {MESSAGE}


def test_junit_parses_and_carries_no_character_xml_forbids() -> None:
    text = junit_report.render(hostile_result())
    root = ET.fromstring(text.encode())
    assert root.get("failures") == "3"
    assert "\x1b" not in text and "<img" not in text and "<script>" not in text


def hostile_audit() -> tuple[str, str]:
    k = facts(KERNEL, variant=VARIANT)
    f = finding(message=MESSAGE, path=PATH, kernel=KERNEL, variant=VARIANT, severity=Severity.ERROR)
    fail = CompileFailure(f"pkg.k:<i>broken</i>{INJECTED}", VARIANT, "sm_120a", PATH, 3, MESSAGE)
    model = audit(k, findings=(f,), failures=(fail,))
    return audit_html.render(model), audit_md.render(model)


def test_audit_html_escapes_every_hostile_text() -> None:
    page, _md = hostile_audit()
    assert "<img" not in page and "<script>alert" not in page and "<b>" not in page and "<i>" not in page
    assert "\x1b" not in page and "\u202e" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page


def test_audit_markdown_renders_without_html_links_or_broken_tables() -> None:
    cmarkgfm = pytest.importorskip("cmarkgfm", reason="cmarkgfm (GitHub's Markdown renderer) is in the test extra")
    from cmarkgfm.cmark import Options

    _page, md = hostile_audit()
    assert not RAW_CONTROL.search(md)
    # Rendered as GitHub renders it, with raw HTML let through: none of the project's tags survive as tags.
    rendered = cmarkgfm.github_flavored_markdown_to_html(md, options=Options.CMARK_OPT_UNSAFE)
    for tag in ("<img", "<script", "<b>", "<i>", 'href="javascript'):
        assert tag not in rendered, tag
    assert "&lt;img src=x onerror=alert(1)&gt;" in rendered
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in rendered
    # Every table row still has its header's number of cells (a pipe in a name did not add one).
    for table in re.findall(r"<table>.*?</table>", rendered, re.DOTALL):
        head = len(re.findall("<th[ >]", table.split("</thead>")[0]))
        for row in re.findall(r"<tbody>.*?</tbody>", table, re.DOTALL)[0].split("</tr>")[:-1]:
            assert len(re.findall("<td", row)) == head, row
    heading = next(line for line in rendered.splitlines() if line.startswith("<h2") and "@ sm_120a" in line)
    # The heading names the variant too (its readable part: this one has no tag), escaped like the kernel.
    assert ("pkg.k:&lt;script&gt;alert(1)&lt;/script&gt;|\\x1b]0;owned\\x07 [BM=128|`x`\\r\\n::error::variant] "
            "@ sm_120a</h2>") in heading


def test_audit_summary_renders_without_html_links_or_workflow_commands() -> None:
    cmarkgfm = pytest.importorskip("cmarkgfm", reason="cmarkgfm (GitHub's Markdown renderer) is in the test extra")
    from cmarkgfm.cmark import Options

    k = facts(KERNEL, variant=VARIANT)
    f = finding(message=MESSAGE, path=PATH, kernel=KERNEL, variant=VARIANT, severity=Severity.ERROR)
    text = audit_summary.render(audit(k, findings=(f,)))
    assert not RAW_CONTROL.search(text)
    assert_no_workflow_command(text)
    rendered = cmarkgfm.github_flavored_markdown_to_html(text, options=Options.CMARK_OPT_UNSAFE)
    for tag in ("<img", "<script", "<b>", "<i>", 'href="javascript'):
        assert tag not in rendered, tag
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in rendered and "&lt;b&gt;bold&lt;/b&gt;" in rendered


def test_markdown_code_spans_hold_backticks_and_pipes() -> None:
    cmarkgfm = pytest.importorskip("cmarkgfm", reason="cmarkgfm (GitHub's Markdown renderer) is in the test extra")
    for value in ("a|b", "a\\|b", "`x`", "a``b", " s ", "<img src=x>"):
        row = f"| h |\n|---|\n| {escape.markdown_code(value, table=True)} |\n"
        rendered = cmarkgfm.github_flavored_markdown_to_html(row)
        assert rendered.count("<td") == 1, (value, rendered)
        code = re.search(r"<code>(.*)</code>", rendered, re.DOTALL)
        assert code and "<img" not in code.group(1), (value, rendered)
        shown = code.group(1).replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
        assert shown == value or value == "a\\|b", (value, shown)  # a backslash before a pipe shows doubled
        paragraph = cmarkgfm.github_flavored_markdown_to_html(escape.markdown_code(value, table=False))
        assert re.search(r"<code>(.*)</code>", paragraph, re.DOTALL).group(1).replace("&lt;", "<").replace(
            "&gt;", ">") == value, (value, paragraph)


def test_markdown_list_items_open_no_block_of_their_own() -> None:
    cmarkgfm = pytest.importorskip("cmarkgfm", reason="cmarkgfm (GitHub's Markdown renderer) is in the test extra")
    for value in ("# heading", "> quote", "- item", "1. item", "+ x"):
        rendered = cmarkgfm.github_flavored_markdown_to_html(f"- {escape.markdown(value, line_start=True)}\n")
        assert rendered == f"<ul>\n<li>{value.replace('>', '&gt;')}</li>\n</ul>\n", (value, rendered)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_check_of_a_cuda_source_with_a_hostile_name(tmp_path: Path) -> None:
    """The file does not compile, so its name is in the finding, the reproduce command and the kernel."""
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\n\n[[cuda]]\nsources = ["*.cu"]\n')
    name = f"x\n{INJECTED}\x1b[2J.cu"
    (tmp_path / name).write_text("__global__ void bad(float* x) { undefined_name; }\n")
    run = kgate("check", cwd=tmp_path)
    assert run.code == 1, run.stderr
    output = run.stdout + run.stderr
    assert not RAW_CONTROL.search(output), output
    assert_no_workflow_command(output)
    finding_line = next(line for line in run.stdout.splitlines() if "KG001" in line)
    assert finding_line.startswith("x\\n::warning file=a.cu::all kernels passed\\x1b[2J.cu:1: KG001 error")


# A file name that is not UTF-8 (the bytes b"x\xff\x80.cu"), as Python reads it: with lone surrogates.
NOT_UTF8 = "src/x\udcff\udc80.cu"
NOT_UTF8_SHOWN = "src/x\\xff\\x80.cu"


def not_utf8_result() -> Result:
    bad = finding("KG103", path=NOT_UTF8, kernel="pkg.k:gemm", variant=NOT_UTF8, message=f"in {NOT_UTF8}",
                  severity=Severity.ERROR)
    source = finding("KG201", path=NOT_UTF8, kernel=None, variant=None, target=None, message="m", line=3, col=5,
                     name="runtime-autotune")
    return Result("check", [bad, source], [facts("pkg.k:gemm", variant=NOT_UTF8)],
                  ratchet=[Difference("GONE", f"KG201|{NOT_UTF8}|scope", "1 pinned, 0 now", True, 1, 0)])


def test_every_report_writes_a_name_that_is_not_utf8_as_escaped_bytes() -> None:
    """Each medium gets UTF-8 it can hold (no UnicodeEncodeError, no raw byte that is not UTF-8), the bytes shown
    as the terminal shows them; SARIF's URI percent-encodes the bytes themselves."""
    result = not_utf8_result()
    model = audit(facts("pkg.k:gemm", variant=NOT_UTF8),
                  findings=(finding(path=NOT_UTF8, kernel="pkg.k:gemm", variant=NOT_UTF8),))
    outputs = {"terminal": terminal.render(result), "github": github_report.render(result),
               "sarif": sarif_report.render(result), "json": json_report.render(result),
               "junit": junit_report.render(result), "html": audit_html.render(model), "md": audit_md.render(model)}
    for name, text in outputs.items():
        text.encode("utf-8")  # strict: a lone surrogate would raise here
        assert NOT_UTF8_SHOWN in text.replace("\\\\", "\\"), name
    sarif = json.loads(outputs["sarif"])["runs"][0]["results"]
    assert {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in sarif} == {"src/x%FF%80.cu"}
    assert {f["path"] for f in json.loads(outputs["json"])["findings"]} == {NOT_UTF8_SHOWN}
    ET.fromstring(outputs["junit"].encode())
    # The baseline pins the shown form, so that its TOML (UTF-8) holds it and reads back to the same key.
    assert result.findings[1].baseline_key == f"KG201|{NOT_UTF8_SHOWN}|" + result.findings[1].identity


def test_lint_and_the_baseline_of_a_file_whose_name_is_not_utf8(tmp_path: Path) -> None:
    """End to end, with Python's strict encoder on kgate's output: any text written unescaped is a traceback."""
    project = tmp_path / "p"
    project.mkdir()
    (project / "kgate.toml").write_text('python-path = ["."]\n')
    (project / os.fsdecode(b"x\xff.cu")).write_bytes(b"__global__ void k(float* x) { x[0] = 1; }\n"
                                                     b"void launch(float* x) {\n  k<<<1, 1>>>(x);\n}\n")
    strict = {"PYTHONIOENCODING": "utf-8:strict"}
    for fmt in ("terminal", "json", "sarif", "github", "junit"):
        run = kgate("lint", "--format", fmt, cwd=project, env=strict)
        assert run.code == 1 and "Traceback" not in run.stderr, (fmt, run.stderr)
        assert "x\\xff.cu" in run.stdout.replace("\\\\", "\\") or "x%FF.cu" in run.stdout, (fmt, run.stdout)
        if fmt == "sarif":
            validate_sarif(json.loads(run.stdout))
    update = kgate("baseline", "update", "--accept-new", cwd=project, env=strict)
    assert update.code == 0, update.stderr
    assert '"KG302|x\\\\xff.cu|launch|k" = 1' in (project / "kgate-baseline.toml").read_text(encoding="utf-8")
    again = kgate("lint", cwd=project, env=strict)
    assert again.code == 0 and "(1 baselined)" in again.stdout, again.stdout + again.stderr


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_check_audit_and_merge_of_a_cuda_source_whose_name_is_not_utf8(tmp_path: Path) -> None:
    """Compiled (its name hashed into cache keys), audited (into page anchors), sharded and merged (the shard object
    keeps the name itself, for `kgate merge` to check against the checkout)."""
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\n\n[[cuda]]\nsources = ["*.cu"]\n')
    (tmp_path / os.fsdecode(b"x\xff.cu")).write_text("__global__ void inc(float* x) { x[0] += 1.0f; }\n")
    strict = {"PYTHONIOENCODING": "utf-8:strict"}
    run = kgate("check", "--show-kernels", cwd=tmp_path, env=strict)
    assert run.code == 0 and "Traceback" not in run.stderr, run.stderr
    assert "inc     x\\xff.cu  sm_120a" in run.stdout
    audit_run = kgate("audit", "-o", "audit", cwd=tmp_path, env=strict)
    assert audit_run.code == 0, audit_run.stderr
    assert "<code>x\\xff.cu</code>" in (tmp_path / "audit" / "report.html").read_text(encoding="utf-8")
    shard = kgate("check", "--shard", "1/1", "--format", "json", "-o", "shard.json", cwd=tmp_path, env=strict)
    assert shard.code == 0, shard.stderr
    merged = kgate("merge", "shard.json", "--format", "json", cwd=tmp_path, env=strict)
    assert merged.code == 0, merged.stderr
    assert [k["variant"] for k in merged.json()["kernels"]] == ["x\\xff.cu"]


LAUNCH = "__global__ void k(float* x) { x[0] = 1; }\nvoid launch(float* x) {\n  k<<<1, 1>>>(x);\n}\n"


def test_lint_escapes_c1_controls_suppression_text_and_baseline_keys(tmp_path: Path) -> None:
    """End to end on the terminal and in annotations: names with ESC and with C1 controls (NEL ends a line on some
    terminals and in GitHub's log, CSI starts an escape sequence), a suppression comment naming codes with control
    characters, HTML and a workflow command, and a hand-edited baseline key holding ESC[2J."""
    (tmp_path / "kgate.toml").write_text('python-path = ["."]\n')
    for name in ("e\x1b[31mred.cu", "n\x85el.cu", "c\x9b31mcsi.cu"):
        (tmp_path / name).write_text(LAUNCH)
    (tmp_path / "m.py").write_text("x = 1  # kgate: ignore[KG\x01\x1b[2J, <b>&amp;, ::error::x]\n")
    (tmp_path / "kgate-baseline.toml").write_text('version = 2\n\n[findings]\n"KG302|x\\u001b[2J|launch|k" = 1\n')
    terminal_run = kgate("lint", cwd=tmp_path)
    github_run = kgate("lint", "--format", "github", cwd=tmp_path)
    for run in (terminal_run, github_run):
        assert run.code == 1, run.stderr
        assert not RAW_CONTROL.search(run.stdout + run.stderr), run.stdout + run.stderr
    assert "e\\x1b[31mred.cu:3:3: KG302" in terminal_run.stdout and "n\\x85el.cu:3:3: KG302" in terminal_run.stdout
    assert "c\\x9b31mcsi.cu:3:3" in terminal_run.stdout and "ignore[KG\\x01\\x1b[2J" in terminal_run.stdout
    assert "GONE      KG302|x\\x1b[2J|launch|k: 1 pinned, 0 now" in terminal_run.stdout
    lines = [line for line in github_run.stdout.splitlines() if line.strip() and not line.startswith("kgate ")]
    # The summary; three launches and the suppression (each new against the baseline, said in its title); the
    # stale pin.
    assert len(lines) == 1 + 4 + 1, lines
    assert sum("(new)::" in line for line in lines) == 4, lines
    assert all(line.startswith(("::error ", "::warning ", "::notice ")) for line in lines), lines
    assert_no_workflow_command("\n".join(line.split("::", 2)[2] for line in lines))
