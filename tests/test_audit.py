"""`kgate audit` on real kernels compiled for sm_120a and sm_90a, and its page in a real browser.

The project is a copy of fixtures/compiled in which the MXFP8 GEMM tile
declares problem shapes, so that the wave and intensity budgets have
numbers. The browser test opens the page in headless Chromium (the
distribution's package; skipped where it is absent), checks that it renders
without a console message (the page's Content-Security-Policy turns any
external reference into one), and keeps a screenshot in the test's
temporary folder.
"""

from __future__ import annotations

import html
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from conftest import Run, copy_compiled, copy_project, copy_repository, kgate

SHAPES = 'shapes=[{"M": 8192, "N": 4096, "K": 4096}, {"M": 4096, "N": 4096, "K": 4096}])'
MXFP8 = "block_scale:mxfp8_tile"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, compiled_cold: tuple[Path, Run]) -> Path:
    # Compiled once for the test session: only what the shapes below change is compiled again.
    root = copy_compiled(compiled_cold, tmp_path_factory.mktemp("audit"))
    source = root / "block_scale.py"
    text = source.read_text()
    marker = 'kind="gemm", num_warps=8)\n@triton.jit\ndef mxfp8_tile'
    assert marker in text
    source.write_text(text.replace(marker, f'kind="gemm", num_warps=8,\n                {SHAPES}\n'
                                           f'@triton.jit\ndef mxfp8_tile'))
    return root


@pytest.fixture(scope="module")
def audited(project: Path) -> Run:
    run = kgate("audit", "-o", "out", cwd=project)
    assert run.code == 0, run.stderr
    return run


@pytest.fixture(scope="module")
def checked(project: Path, audited: Run) -> dict:
    return kgate("check", "--format", "json", cwd=project).json()


def section(markdown: str, title: str) -> str:
    """The text under a kernel's heading (`## <a id=...></a>kernel [variant] @ target`, `title` being
    `kernel @ target`: the fixtures have one variant per kernel), up to the next heading."""
    kernel, target = title.rsplit(" @ ", 1)
    head = re.search(rf"^## (<a id=\"[^\"]+\"></a>)?{re.escape(kernel)} \[[^\n]*\] @ {re.escape(target)}\n", markdown,
                     re.MULTILINE)
    assert head, title
    return markdown[head.end():].split("\n## ", 1)[0]


def budget_tables(text: str) -> list[dict[str, list[str]]]:
    """The tables under a section's `### Budgets`, each as {budget label: cells}, the header under "budget"."""
    block = text.split("### Budgets\n", 1)[1].split("\n###", 1)[0].split("\nHeadroom terms", 1)[0]
    return [{row[1]: row[2:] for row in md_table(part, "")} for part in block.strip().split("\n\n")]


def budgets(text: str) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """(rows that read the same on every card, rows with a cell per card): the shared table comes first."""
    tables = budget_tables(text)
    shared = [t for t in tables if len(t["budget"]) == 1 and " and " in t["budget"][0]]
    own = [t for t in tables if t not in shared]
    return (shared[0] if shared else {}), (own[0] if own else {})


def md_table(text: str, after: str) -> list[list[str]]:
    lines = (text.split(after, 1)[1] if after else text).strip().splitlines()
    rows = []
    for line in lines:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]])
    return [r for r in rows if not set("".join(r)) <= {"-"}]


def test_audit_writes_both_reports_and_names_the_variant_closest_to_a_cliff(project: Path, audited: Run) -> None:
    data = kgate("check", "--format", "json", cwd=project).json()
    variants, findings = len(data["kernels"]), data["findings"]
    assert f"{variants} kernel variant(s), 0 failed to compile, {len(findings)} finding(s)" in audited.stdout
    assert "closest to a cliff: gemm_resources:gemm_spills" in audited.stdout
    assert (project / "out" / "report.html").is_file() and (project / "out" / "report.md").is_file()
    summary = md_table((project / "out" / "report.md").read_text(), "negative is past it.\n")
    assert summary[0][:6] == ["#", "kernel", "variant", "target", "headroom", "limited by"]
    order = [(row[3], row[4], row[5]) for row in summary[1:]]
    assert order[0] == ("sm_120a", "< -100%", "spills")
    assert len(order) == variants  # one row per variant


def test_mxfp8_gemm_budgets_on_both_cards(project: Path, audited: Run, checked: dict) -> None:
    md = (project / "out" / "report.md").read_text()
    text = section(md, f"{MXFP8} @ sm_120a")
    same, rows = budgets(text)
    assert rows["budget"] == ["RTX 5090", "RTX 5060 Ti 16G"]
    # Both cards have the same SM: what is per SM reads the same on both and is shown once, naming both.
    assert same["budget"] == ["RTX 5090 and RTX 5060 Ti 16G"]
    facts = next(k for k in checked["kernels"] if k["kernel"] == MXFP8 and k["target"] == "sm_120a")
    assert same["registers per thread"] == [f"{facts['registers']} of 255"]
    assert same["shared memory per CTA"][0].startswith(f"{facts['smem_bytes']:,} of 101,376 B")
    assert rows["waves at M=8192, N=4096, K=4096"] == ["2,048 CTAs, 13 waves, 92.7% efficient",
                                                       "2,048 CTAs, 57 waves, 99.8% efficient"]
    assert rows["waves at M=4096, N=4096, K=4096"] == ["1,024 CTAs, 7 waves, 86.1% efficient",
                                                       "1,024 CTAs, 29 waves, 98.1% efficient"]
    # fp8 operands, fp32 output, one ue8m0 scale byte per 32 elements of A and B.
    m, n, k = 8192, 4096, 4096
    intensity = 2 * m * n * k / (m * k + k * n + 4 * m * n + (m * k + n * k) / 32)
    cells = rows["intensity at M=8192, N=4096, K=4096"]
    assert cells[0] == f"{intensity:,.0f} FLOP/B vs ridge 155: compute bound"
    assert cells[1] == f"{intensity:,.0f} FLOP/B vs ridge 136 (estimate): compute bound"
    mix = "\n".join("|".join(r) for r in md_table(text, "### Instruction mix\n"))
    assert "kind::mxf8f6f4.block_scale" in mix and "QMMA.SF" in mix and "LDG.E.128" in mix


def test_html_and_markdown_show_the_same_budget_cells(project: Path, audited: Run) -> None:
    md = (project / "out" / "report.md").read_text()
    page = html.unescape((project / "out" / "report.html").read_text())
    cells = set()
    for block in md.split("### Budgets\n")[1:]:
        for rows in budget_tables(block.split("\n## ", 1)[0].join(["### Budgets\n", ""])):
            cells.update(c.replace("\\|", "|") for label, row in rows.items() if label != "budget" for c in row)
    assert len(cells) > 50
    missing = sorted(c for c in cells if f">{c}</td>" not in page)
    assert not missing


class _Refs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.refs: list[tuple[str, str, str]] = []
        self.tags: set[str] = set()
        self.csp = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        for name, value in attrs:
            if name in ("src", "href", "xlink:href", "srcset", "action", "poster", "data"):
                self.refs.append((tag, name, value or ""))
            if tag == "meta" and name == "content" and ("http-equiv", "Content-Security-Policy") in attrs:
                self.csp = value or ""


def test_html_page_is_self_contained(project: Path, audited: Run) -> None:
    page = (project / "out" / "report.html").read_text()
    refs = _Refs()
    refs.feed(page)
    assert refs.refs and all(value.startswith("#") for _tag, _name, value in refs.refs), refs.refs[:5]
    assert not {"link", "img", "iframe", "object", "embed"} & refs.tags
    assert "url(" not in page and "@import" not in page
    assert refs.csp.startswith("default-src 'none'")
    assert page.count("<svg") >= 24 + 1


def test_audit_is_byte_identical_on_a_second_run(project: Path, audited: Run, tmp_path: Path) -> None:
    again = kgate("audit", "-o", str(tmp_path), cwd=project)
    assert again.code == 0, again.stderr
    for name in ("report.html", "report.md"):
        assert (tmp_path / name).read_bytes() == (project / "out" / name).read_bytes(), name


def test_profile_adds_a_card_and_unknown_ones_are_one_line_errors(project: Path, audited: Run,
                                                                   tmp_path: Path) -> None:
    run = kgate("audit", "-o", str(tmp_path), "--profile", "h100", "--kernel", "mxfp8_tile", cwd=project)
    assert run.code == 0, run.stderr
    text = section((tmp_path / "report.md").read_text(), f"{MXFP8} @ sm_90a")
    same, own = budgets(text)
    assert own["budget"] == ["H200", "H100 SXM"] and same["budget"] == ["H200 and H100 SXM"]
    bad = kgate("audit", "-o", str(tmp_path), "--profile", "rtx-9090", cwd=project)
    assert bad.code == 2 and bad.stderr.strip().splitlines() == [
        "kgate: error: --profile rtx-9090: unknown card (known: b200, h100, h200, rtx-5060-ti, rtx-5090)"]
    other = kgate("audit", "-o", str(tmp_path), "--profile", "b200", "--target", "sm_120a", cwd=project)
    assert other.code == 2 and "add --target sm_100a" in other.stderr


def test_the_audit_disassembles_a_cubin_once_and_reads_its_mix_as_cuobjdumps_sass_gives_it(project: Path,
                                                                                            audited: Run,
                                                                                            checked: dict) -> None:
    """The audit reads SASS through nvdisasm's listing (the excerpts need its line table) and runs no cuobjdump
    for kernels whose rules read no SASS: the cache holds the SASS text of exactly the kernels the check
    reads SASS for (and maybe those of compiles an edit made stale). Where both exist, the listing's opcode
    counts are what `parse_sass` reads of cuobjdump's text (`HGMMA.64x64x16.F32.BF16` counted as `HGMMA.64`, as
    the rules have always read it)."""
    from kgate.compile.cache import Cache
    from kgate.diff.listing import cubin_listing
    from kgate.facts.listing import opcode_counts
    from kgate.facts.sass import parse_sass

    cache = Cache(project / ".kgate-cache", ".kgate-cache")
    folders = [p.parent for p in sorted((project / ".kgate-cache").rglob("kernel.cubin"))]
    with_sass = [f for f in folders if (f / "kernel.sass").is_file()]
    without = [k for k in checked["kernels"] if not k["sass"]]
    assert len(folders) - len(with_sass) >= len(without) > 0
    compared = 0
    for folder in with_sass:
        listing = cubin_listing(cache, folder / "kernel.cubin", None)  # the audit's, from the cache
        assert listing is not None
        for name, function in parse_sass((folder / "kernel.sass").read_text()).items():
            assert opcode_counts(listing[name]).opcodes == function.opcodes, name
            compared += 1
    assert compared >= len(with_sass)


def test_audit_and_check_of_a_project_with_nothing_to_gate_fail_alike(tmp_path: Path) -> None:
    """A configuration that names no kernel (only targets) is a gate of nothing: exit 2 and one line, never a pass."""
    (tmp_path / "kgate.toml").write_text('targets = ["sm_120a"]\n')
    (tmp_path / "ops.py").write_text("def add(x, y):\n    return x + y\n")  # a source file: still nothing to gate
    audit = kgate("audit", "-o", str(tmp_path / "out"), cwd=tmp_path)
    check = kgate("check", cwd=tmp_path)
    assert (audit.code, check.code) == (2, 2), audit.stderr + check.stderr
    assert audit.stderr == check.stderr and check.stdout == "" and not (tmp_path / "out").exists()
    assert check.stderr.startswith("kgate: error: nothing to gate: kgate.toml registers no kernel and lists no CUDA "
                                   "source, no @kgate.register decorates one, and there is no kgate-capture.toml: ")
    assert check.stderr.count("\n") == 1
    for named in ("`kgate capture -- python -m pytest`", "[[triton]]", "@kgate.register", "[[cuda]] sources"):
        assert named in check.stderr


def test_audit_of_this_repository_shows_the_bundled_mxfp8_gemm_on_both_cards(
        tmp_path: Path, repository_checked: tuple[Path, Run]) -> None:
    checkout = copy_repository(repository_checked, tmp_path)  # a user's checkout, compiled by the session's check
    run = kgate("audit", "-o", str(tmp_path), "--kernel", "mxfp8_matmul_kernel", "--target", "sm_120a", cwd=checkout)
    assert run.code == 0, run.stderr
    text = section((tmp_path / "report.md").read_text(), "kernels.mxfp8:mxfp8_matmul_kernel @ sm_120a")
    rows = budgets(text)[1]
    assert rows["budget"] == ["RTX 5090", "RTX 5060 Ti 16G"]
    assert rows["waves at M=8192, N=4096, K=4096"] == ["2,048 CTAs, 13 waves, 92.7% efficient",
                                                       "2,048 CTAs, 57 waves, 99.8% efficient"]
    m, n, k = 8192, 4096, 4096  # e4m3 A and B, a ue8m0 scale per 32 elements, bf16 C
    intensity = 2 * m * n * k / (m * k + k * n + 2 * m * n + (m * k + n * k) / 32)
    assert rows["intensity at M=8192, N=4096, K=4096"][0] == f"{intensity:,.0f} FLOP/B vs ridge 155: compute bound"
    mix = "\n".join("|".join(r) for r in md_table(text, "### Instruction mix\n"))
    assert "kind::mxf8f6f4.block_scale" in mix and "QMMA.SF" in mix and "HMMA" not in mix


# --- Variants named, PTX and SASS excerpts, the pull-request summary ---

def test_every_heading_and_chart_label_names_the_variant(project: Path, audited: Run, checked: dict) -> None:
    md = (project / "out" / "report.md").read_text()
    page = html.unescape((project / "out" / "report.html").read_text())
    headings = re.findall(r"^## <a id=\"[^\"]+\"></a>(.*)$", md, re.MULTILINE)
    assert len(headings) == len(checked["kernels"])
    for k in checked["kernels"]:
        readable = k["variant"].rsplit("#", 1)[0]
        assert f"{k['kernel']} [{readable}] @ {k['target']}" in headings
        assert f'<span class="variant">[{readable}]</span> @ {k["target"]}</h2>' in page
    # The headroom chart labels each bar with its kernel and target and, on a line of its own, its variant.
    chart = page.split('aria-label="headroom of every kernel variant"', 1)[1].split("</svg>", 1)[0]
    variants = re.findall(r'<text [^>]*class="variant">([^<]*)</text>', chart)
    assert len(variants) == len(checked["kernels"]) and all(variants)
    assert "BK=128,BM=128,BN=128,warps=8,stages=3,fp32+fp8e4nv+u8"[:47] in "".join(variants)


def test_identical_per_sm_rows_are_shown_once_and_card_rows_per_card(project: Path, audited: Run) -> None:
    text = section((project / "out" / "report.md").read_text(), f"{MXFP8} @ sm_120a")
    same, own = budgets(text)
    assert not (set(same) - {"budget"}) & set(own)  # no row in both tables
    assert all(len(cells) == 1 for cells in same.values())
    assert all(len(set(cells)) == 2 for label, cells in own.items() if label != "budget")  # they differ
    assert {"registers per thread", "CTAs per SM", "shared memory per CTA"} <= set(same)
    assert {"waves at M=8192, N=4096, K=4096", "intensity at M=8192, N=4096, K=4096"} <= set(own)
    # A target with one card keeps one table, a cell per card.
    alone = budget_tables(section((project / "out" / "report.md").read_text(), f"{MXFP8} @ sm_90a"))
    assert len(alone) == 1 and alone[0]["budget"] == ["H200"]


def line_of(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_ptx_and_sass_excerpts_show_the_instructions_that_matter_with_their_source_lines(project: Path,
                                                                                        audited: Run) -> None:
    md = (project / "out" / "report.md").read_text()
    mma = section(md, f"{MXFP8} @ sm_120a").split("### PTX and SASS\n", 1)[1]
    line = line_of(project / "block_scale.py", "acc = tl.dot_scaled(x, sx")
    source = '`acc = tl.dot_scaled(x, sx, "e4m3", y, sy, "e4m3")`'
    for listing in ("PTX", "SASS"):
        assert re.search(rf"^{listing}, block-scaled MMA 1 of [0-9,]+, from `block_scale\.py:{line}` {re.escape(source)}:$",
                         mma, re.MULTILINE), listing
    assert re.search(rf"^> block_scale\.py:{line}  mma\.sync\.aligned\.m16n8k32\.row\.col\.kind::mxf8f6f4\.block_scale",
                     mma, re.MULTILINE)
    assert re.search(rf"^> block_scale\.py:{line}  QMMA\.SF\.", mma, re.MULTILINE)
    # The spilling GEMM's local loads and stores (ptxas's spills: in the SASS).
    spills = section(md, "gemm_resources:gemm_spills @ sm_120a").split("### PTX and SASS\n", 1)[1]
    assert re.search(r"^> gemm_resources\.py:\d+  (LDL|STL)\b", spills, re.MULTILINE)
    # griddepcontrol, where a PDL kernel waits.
    pdl = section(md, "pdl:wait_first @ sm_120a").split("### PTX and SASS\n", 1)[1]
    assert re.search(r"^> pdl\.py:\d+  griddepcontrol\.wait", pdl, re.MULTILINE)
    # Collapsed on the page.
    page = (project / "out" / "report.html").read_text()
    assert page.count('<details class="code">') == len(re.findall(r"^## <a id=", md, re.MULTILINE))
    assert "<details class=\"code\" open" not in page and '<tr class="mark">' in page


def test_summary_is_a_screenful_with_the_verdict(project: Path, audited: Run, checked: dict) -> None:
    from kgate.report.audit_summary import LIMIT

    summary = (project / "out" / "summary.md").read_text()
    assert len(summary) <= LIMIT < 65536 and len(summary.splitlines()) <= 40
    failing = kgate("check", "-q", cwd=project).code == 1
    assert summary.startswith("## kgate audit: fails (" if failing else "## kgate audit: passes")
    variants = len(checked["kernels"])
    assert f"{variants} kernel variant(s) compiled" in summary and f"(8 of {variants})" in summary
    first = md_table(summary, f"(8 of {variants}):\n")
    assert first[1][1] == "`gemm_resources:gemm_spills [BK=64,BM=256,BN=256,warps=8,stages=1,bf16] @ sm_120a`"
    assert "report.html" in summary and (project / "out" / "report.md").stat().st_size > 10 * len(summary)


TILES_CONFIG = """\
targets = ["sm_120a"]
python-path = ["."]

[options.register-ceiling]
threshold = 1  # a finding on every variant, for the summary's finding lines

# Long names that differ late (the warps), and two launches that differ only in what the tag hashes.
[[triton]]
kernel = "tiles:tile"
signature = { x = "*fp32", out = "*fp32", n = "i32" }
constexprs = { BLOCK_SIZE_ROWS = 64, BLOCK_SIZE_COLS = 16, GROUP_SIZE_ROWS = 8 }
variants = [ { num_warps = 8 } ]

[[triton]]
kernel = "tiles:tile"
signature = { x = "*fp32", out = "*fp32", n = "i32" }
constexprs = { BLOCK_SIZE_ROWS = 64, BLOCK_SIZE_COLS = 16, GROUP_SIZE_ROWS = 8 }
divisible = []

# A short name that fits, twice: the finding lines too must show the tag.
[[triton]]
kernel = "tiles:small"
signature = { x = "*fp32", out = "*fp32", n = "i32" }
constexprs = { BLOCK = 1024 }

[[triton]]
kernel = "tiles:small"
signature = { x = "*fp32", out = "*fp32", n = "i32" }
constexprs = { BLOCK = 1024 }
divisible = []
"""
TILES = """\
import triton
import triton.language as tl


@triton.jit
def tile(x, out, n, BLOCK_SIZE_ROWS: tl.constexpr, BLOCK_SIZE_COLS: tl.constexpr, GROUP_SIZE_ROWS: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_SIZE_ROWS * BLOCK_SIZE_COLS + tl.arange(0, BLOCK_SIZE_ROWS * BLOCK_SIZE_COLS)
    tl.store(out + offs, tl.load(x + offs, mask=offs < n), mask=offs < n)


@triton.jit
def small(x, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, tl.load(x + offs, mask=offs < n), mask=offs < n)
"""


def test_summary_tells_apart_variants_that_differ_late_or_only_in_their_tag(tmp_path: Path) -> None:
    from kgate.report.audit_summary import NAME_ROOM

    (tmp_path / "kgate.toml").write_text(TILES_CONFIG)
    (tmp_path / "tiles.py").write_text(TILES)
    assert kgate("audit", "-o", "out", cwd=tmp_path).code == 0
    data = kgate("check", "--format", "json", cwd=tmp_path).json()
    keys = [(k["kernel"], k["variant"].rsplit("#", 1)[0], k["variant"].rsplit("#", 1)[1]) for k in data["kernels"]]
    twins = [(kernel, tag) for kernel, name, tag in keys if [k[:2] for k in keys].count((kernel, name)) > 1]
    # What the test is about: names longer than the summary's room for them and names that fit, each kernel
    # with two variants that read the same but for their tag.
    rooms = {kernel: len(name) > NAME_ROOM // 2 for kernel, name, _tag in keys}
    assert rooms == {"tiles:tile": True, "tiles:small": False} and {k for k, _tag in twins} == set(rooms)
    summary = (tmp_path / "out" / "summary.md").read_text()
    titles = [row[1] for row in md_table(summary, f"({len(keys)} of {len(keys)}):\n")[1:]]
    assert len(titles) == len(set(titles)) == len(keys), titles
    places = [line.split("`")[1] for line in summary.splitlines() if line.startswith("- KG102 ")]
    assert len(places) == len(set(places)) == len(data["findings"]) == len(keys), places
    for kernel, tag in twins:  # told apart by the tag alone: the tag is shown, in the table and the findings
        assert sum(t.startswith(f"`{kernel} [") and t.endswith(f"#{tag}] @ sm_120a`") for t in titles) == 1, titles
        assert sum(p.startswith(f"{kernel} [") and p.endswith(f"#{tag}] @ sm_120a") for p in places) == 1, places


# --- In a real browser ---

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--enable-logging=stderr", "--v=0")


def chromium(page: Path, tmp: Path, *action: str, size: str = "1400,2000") -> subprocess.CompletedProcess:
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        pytest.skip("chromium is not installed (Debian: apt-get install -y chromium); .ci/run installs it")
    profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"
    return subprocess.run([binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size={size}",
                           *action, page.as_uri()], capture_output=True, text=True, timeout=120, check=False)


# Opens every <details>, then writes onto <html> how wide the document is, how wide the window, and which
# elements scroll sideways inside it (a table in an overflow box fits the page but still hides columns).
MEASURE = ("(function(){document.querySelectorAll('details').forEach(function(d){d.open=true;});"
           "var d=document.documentElement,wide=[];"
           "document.querySelectorAll('body *').forEach(function(e){if(e.scrollWidth>e.clientWidth+1&&"
           "getComputedStyle(e).overflowX!=='visible'){wide.push(e.tagName+'.'+e.className);}});"
           "d.setAttribute('data-scroll-width',String(d.scrollWidth));"
           "d.setAttribute('data-inner-width',String(window.innerWidth));"
           "d.setAttribute('data-wide',wide.join(' '));})();")


def measured(page: str) -> str:
    """The page with MEASURE run after its own script, allowed by its hash in the page's own policy."""
    import base64
    import hashlib

    allowed = "sha256-" + base64.b64encode(hashlib.sha256(MEASURE.encode()).digest()).decode()
    assert "script-src &#x27;" in page
    return page.replace("script-src ", f"script-src &#x27;{allowed}&#x27; ", 1).replace(
        "</body>", f"<script>{MEASURE}</script></body>", 1)


def widths(dom: str) -> tuple[int, int, str]:
    root = re.search(r"<html[^>]*>", dom)
    assert root, dom[:300]
    attrs = dict(re.findall(r'(data-[a-z-]+)="([^"]*)"', root.group(0)))
    return int(attrs["data-scroll-width"]), int(attrs["data-inner-width"]), attrs["data-wide"]


def console_messages(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


def test_page_renders_in_chromium_without_console_messages(project: Path, audited: Run,
                                                           tmp_path_factory: pytest.TempPathFactory) -> None:
    tmp = tmp_path_factory.mktemp("chromium")
    page = project / "out" / "report.html"
    dom = chromium(page, tmp, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert console_messages(dom.stderr) == []
    # The script ran to its end (it marks the page), the charts and sections are in the DOM.
    assert 'data-ready="yes"' in dom.stdout.split(">", 2)[1] + ">"
    assert dom.stdout.count("<svg") >= 25 and dom.stdout.count('class="kernel"') == 24
    for text in ("Closest to a cliff", "RTX 5060 Ti 16G", "QMMA.SF.16832.F32.E4M3.E4M3.E8", "92.7% efficient"):
        assert text in dom.stdout, text
    shot = tmp / "report.png"
    run = chromium(page, tmp, f"--screenshot={shot}")
    assert run.returncode == 0 and console_messages(run.stderr) == []
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1400, 2000) and len(data) > 50_000
    print(f"screenshot: {shot}")


def test_page_fits_1280_pixels_with_every_excerpt_open(project: Path, audited: Run,
                                                         tmp_path_factory: pytest.TempPathFactory) -> None:
    tmp = tmp_path_factory.mktemp("chromium-1280")
    page = tmp / "measured.html"
    page.write_text(measured((project / "out" / "report.html").read_text()))
    dom = chromium(page, tmp, "--dump-dom", size="1280,900")
    assert dom.returncode == 0 and console_messages(dom.stderr) == []
    scroll, inner, wide = widths(dom.stdout)
    assert inner == 1280 and scroll <= inner and wide == "", (scroll, inner, wide)
    assert 'data-ready="yes"' in dom.stdout.split(">", 2)[1] + ">"  # the page's own script ran too
    shot = tmp / "report-1280.png"
    assert chromium(project / "out" / "report.html", tmp, f"--screenshot={shot}", size="1280,900").returncode == 0
    print(f"screenshot: {shot}")


def test_the_width_check_catches_a_page_wider_than_the_window(project: Path, audited: Run,
                                                              tmp_path_factory: pytest.TempPathFactory) -> None:
    """The negative control: the table's names kept from wrapping must widen the page or its scroll box."""
    tmp = tmp_path_factory.mktemp("chromium-wide")
    import base64
    import hashlib

    nowrap = "td, td code { white-space: nowrap; overflow-wrap: normal; }"
    allowed = "sha256-" + base64.b64encode(hashlib.sha256(nowrap.encode()).digest()).decode()
    page = (project / "out" / "report.html").read_text().replace("</head>", f"<style>{nowrap}</style></head>", 1)
    (tmp / "wide.html").write_text(measured(page.replace("style-src ", f"style-src &#x27;{allowed}&#x27; ", 1)))
    scroll, inner, wide = widths(chromium(tmp / "wide.html", tmp, "--dump-dom", size="1280,900").stdout)
    assert scroll > inner or wide


def test_the_console_check_catches_an_external_reference(project: Path, audited: Run,
                                                         tmp_path_factory: pytest.TempPathFactory) -> None:
    """The negative control: the same page with one external image must produce a console message."""
    tmp = tmp_path_factory.mktemp("chromium-bad")
    bad = tmp / "bad.html"
    page = (project / "out" / "report.html").read_text()
    bad.write_text(page.replace("<main>", '<main><img src="https://example.invalid/x.png" alt="">', 1))
    run = chromium(bad, tmp, "--dump-dom")
    messages = console_messages(run.stderr)
    assert messages and "example.invalid" in messages[0] and "Content Security Policy" in messages[0]


# --- Against the baseline (last: it adds and removes a baseline file in the shared project) ---

def test_audit_shows_baselined_findings_and_each_kernels_differences(project: Path, audited: Run,
                                                                     tmp_path: Path) -> None:
    baseline = project / "kgate-baseline.toml"
    try:
        pinned = kgate("baseline", "update", "--accept-new", cwd=project)
        assert pinned.code == 0, pinned.stderr
        # Pretend the pin was taken when gemm_at_ceiling used fewer registers: now it is WORSE.
        text = baseline.read_text()
        line = next(x for x in text.splitlines() if x.startswith('"gemm_resources:gemm_at_ceiling|')
                    and "|sm_120a" in x)
        baseline.write_text(text.replace(line, line.replace("registers = 255", "registers = 250")))
        run = kgate("audit", "-o", str(tmp_path), cwd=project)
        assert run.code == 0, run.stderr
        md = (tmp_path / "report.md").read_text()
        assert "Baseline: compared with kgate-baseline.toml." in md
        worse = section(md, "gemm_resources:gemm_at_ceiling @ sm_120a")
        assert "- WORSE registers 250 -> 255 (fails)" in worse
        assert "| KG102 | error | register-ceiling | baselined |" in worse
        quiet = section(md, f"{MXFP8} @ sm_90a")
        assert quiet.split("### Against the baseline\n", 1)[1].strip() == "No differences."
        unpinned = kgate("audit", "-o", str(tmp_path), "--no-baseline", cwd=project)
        assert unpinned.code == 0
        assert "Baseline: not compared (--no-baseline)." in (tmp_path / "report.md").read_text()
    finally:
        baseline.unlink(missing_ok=True)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_audit_after_check_compiles_nothing_again_and_sass_comes_from_the_cached_cubins(tmp_path: Path) -> None:
    """`kgate check` keeps every cubin but disassembles only what its rules read; the audit reads every kernel's
    SASS from those cubins (nvdisasm's listing, a record of the cache): it writes no artifact. `check --sass`
    then disassembles the cached cubins, and gets the SASS a compile gives."""
    project = copy_project("mixed", tmp_path)
    assert kgate("check", "-q", cwd=project).code == 1
    artifacts = sorted((project / ".kgate-cache" / "v1" / "artifacts").iterdir())
    written = {p: p.stat().st_mtime_ns for folder in artifacts for p in folder.iterdir()}
    assert len(artifacts) == 4 and written
    run = kgate("audit", "-o", "out", cwd=project)
    assert run.code == 0, run.stderr
    assert {p: p.stat().st_mtime_ns for folder in artifacts for p in folder.iterdir()} == written
    cached = kgate("check", "--sass", "--format", "json", cwd=project).json()["kernels"]
    assert all((folder / "kernel.sass").is_file() for folder in artifacts)
    fresh = kgate("check", "--sass", "--format", "json", "--no-cache", cwd=project).json()["kernels"]
    assert [k["sass"] for k in cached] == [k["sass"] for k in fresh] and all(k["sass"] for k in cached)


def test_excerpt_lines_follow_code_that_moved_without_a_recompile(compiled_cold: tuple[Path, Run],
                                                                  tmp_path: Path) -> None:
    """Lines added inside the kernel above move `wait_first` down without recompiling it (the cache is keyed on
    its text): its excerpt names the lines where its code is now, with today's text, as its facts do."""
    root = copy_compiled(compiled_cold, tmp_path)
    pdl = root / "pdl.py"
    marker = "    # Bad (a warning naming `x`): the load reads the producer's output while it may still be written.\n"
    text = pdl.read_text()
    assert text.count(marker) == 1
    pdl.write_text(text.replace(marker, marker + "    # one\n    # two\n    # three\n"))
    run = kgate("audit", "--kernel", "wait_first", "--target", "sm_120a", "-o", "out", cwd=root)
    assert run.code == 0, run.stderr
    md = (root / "out" / "report.md").read_text()
    excerpt = section(md, "pdl:wait_first @ sm_120a").split("### PTX and SASS\n", 1)[1]
    lines = pdl.read_text().splitlines()
    start = next(n for n, text in enumerate(lines) if text.startswith("def wait_first"))
    line = next(n for n, text in enumerate(lines, 1) if n > start and "gdc_wait()" in text)
    found = re.search(r"^PTX, griddepcontrol 1 of \d+, from `pdl\.py:(\d+)` `([^`]*)`:$", excerpt, re.MULTILINE)
    assert found and (int(found.group(1)), found.group(2)) == (line, "gdc_wait()"), excerpt[:600]
    assert re.search(rf"^> pdl\.py:{line}  griddepcontrol\.wait", excerpt, re.MULTILINE)
